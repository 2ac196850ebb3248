//! Launching a test file's workers under `mpiexec`.

use std::process::Command;

/// Runs `worker` (an ignored test of the calling test file) on `ranks` processes under
/// `mpiexec`; its output.
pub fn launch(worker: &str, ranks: usize) -> String {
    let exe = std::env::current_exe().unwrap();
    let output = Command::new("mpiexec")
        .args(["-n", &ranks.to_string()])
        .arg(exe)
        .args([
            worker,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        // As root, more ranks than cores, and no ptrace in containers (Open MPI).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("mpiexec runs (Open MPI: `apt-get install openmpi-bin libopenmpi-dev`)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{worker} on {ranks} ranks failed:\n{text}"
    );
    text
}
