//! Shared by the benchmarks: criterion set up alike, and its results read back to print
//! ratios.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::Criterion;

/// Criterion with `samples` samples, warming up for `warm_up_ms` and measuring for
/// `measure_s` — each `(full run, quick run)`, the quick one under `AXES_BENCH_QUICK=1` —
/// and the command line's options on top.
pub(crate) fn criterion(
    samples: usize,
    warm_up_ms: (u64, u64),
    measure_s: (u64, u64),
) -> Criterion {
    let quick = std::env::var_os("AXES_BENCH_QUICK").is_some();
    let pick = |(full, short): (u64, u64)| if quick { short } else { full };
    Criterion::default()
        .sample_size(samples)
        .warm_up_time(Duration::from_millis(pick(warm_up_ms)))
        .measurement_time(Duration::from_secs(pick(measure_s)))
        .configure_from_args()
}

/// Where criterion writes its results: `$CRITERION_HOME`, else `criterion` in
/// `$CARGO_TARGET_DIR` or in the workspace's `target` (a bench of a member crate runs in the
/// member's folder, below the workspace's).
fn criterion_home() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Path::new(&target).join("criterion");
    }
    let here = std::env::current_dir().unwrap_or_default();
    let workspace = (here.ancestors())
        .find(|dir| dir.join("Cargo.lock").exists())
        .unwrap_or(&here);
    workspace.join("target/criterion")
}

/// Criterion's median for benchmark `id` of `group` in this run, in nanoseconds.
pub(crate) fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_home()
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
