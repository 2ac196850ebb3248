//! Shared by the benchmarks: reading criterion's results back to print ratios.

use std::path::Path;

/// Criterion's median for benchmark `id` of `group` in this run, in nanoseconds.
pub(crate) fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = Path::new("target/criterion")
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let rest = &text[text.find("\"median\"")?..];
    let start = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let end = rest[start..].find([',', '}'])?;
    rest[start..start + end].trim().parse().ok()
}

/// What a Python peer script (`args`, run with `$AXES_TORCH_PYTHON` or `python3`) prints,
/// or `None` (saying why) where it cannot run.
#[allow(dead_code)]
pub(crate) fn python_output(args: &[&str]) -> Option<String> {
    let python = std::env::var("AXES_TORCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(python)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        println!(
            "Python peer not run: {}",
            err.lines().last().unwrap_or("python3 failed")
        );
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The number after `"key":` in `json` (one JSON object, as the peer scripts print).
#[allow(dead_code)]
pub(crate) fn json_number(json: &str, key: &str) -> Option<f64> {
    let key = format!("\"{key}\":");
    let rest = &json[json.find(&key)? + key.len()..];
    rest[..rest.find([',', '}'])?].trim().parse().ok()
}

/// The number after `"key":` in what a Python peer script prints (see [`python_output`]).
#[allow(dead_code)]
pub(crate) fn python_peer(args: &[&str], key: &str) -> Option<f64> {
    json_number(&python_output(args)?, key)
}
