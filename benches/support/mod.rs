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
