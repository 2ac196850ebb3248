//! The training examples stopped and resumed: a run that saved checkpoints (`--checkpoint-every`)
//! against a new process going on from its first checkpoint (`--resume`) give the same
//! weights, the same losses and accuracies, and the same last checkpoint, byte for byte — the
//! digits MLP (AdamW, and SGD with momentum) and a small GPT (AdamW, a schedule, clipping), in
//! host memory and recorded on OpenCL. A resume with other options is an error naming both.
//!
//! The examples' binaries are those `cargo test` builds beside this test's (run
//! `cargo build --examples` first to run this test alone).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The example `name`'s binary, built by `cargo test` beside this test's.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built: `cargo test` builds the examples (`cargo build --examples` before \
         running this test alone)",
        path.display()
    );
    path
}

/// Runs `name` with `args`; its output, after checking that it succeeded.
fn run<S: AsRef<OsStr> + std::fmt::Debug>(name: &str, args: &[S]) -> Output {
    let output = Command::new(example(name)).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{name} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A fresh folder for a case's outputs.
fn folder(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "axes-examples-resume-{}-{case}",
        std::process::id()
    ));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts that each file of `files` is the same bytes in both folders.
fn same_files(files: &[&str], (first, second): (&Path, &Path), case: &str) {
    for file in files {
        let (a, b) = (first.join(file), second.join(file));
        let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert!(a == b, "{case}: {file} differs after resuming");
    }
}

/// Whether OpenCL cases run: a device, or `SKIPPED` where there is none (a failure where
/// `AXES_REQUIRE_OPENCL` is set).
fn opencl() -> bool {
    match axes::device("opencl") {
        Ok(_) => true,
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => {
            println!("SKIPPED on OpenCL (no OpenCL device): {e}");
            false
        }
    }
}

/// A run of an example, straight and resumed.
struct Resume<'a> {
    /// The example.
    example: &'a str,
    /// Its options.
    options: &'a [&'a str],
    /// Its `--checkpoint-every`.
    every: &'a str,
    /// The checkpoint the second run resumes from.
    from: &'a str,
    /// The files both runs must write alike.
    files: &'a [&'a str],
}

impl Resume<'_> {
    /// Runs the example with its options (and `device`'s) into `DIR/straight`, then again
    /// into `DIR/resumed` from the straight run's checkpoint `from`, and compares `files`;
    /// the folder `DIR`.
    fn check(&self, case: &str, device: &[&str]) -> PathBuf {
        let dir = folder(case);
        let (straight, resumed) = (dir.join("straight"), dir.join("resumed"));
        let args = |out: &Path| -> Vec<String> {
            let every = ["--checkpoint-every", self.every];
            let given = self.options.iter().chain(&every).chain(device);
            let mut args: Vec<String> = given.map(|a| a.to_string()).collect();
            args.extend(["--out".into(), out.display().to_string()]);
            args
        };
        run(self.example, &args(&straight));
        let mut again = args(&resumed);
        let checkpoint = straight.join(self.from);
        again.extend(["--resume".into(), checkpoint.display().to_string()]);
        let output = run(self.example, &again);
        assert!(String::from_utf8_lossy(&output.stdout).contains("resumed from"));
        same_files(self.files, (&straight, &resumed), case);
        dir
    }
}

/// The digits MLP (AdamW) for 2 epochs with a checkpoint after each, resumed from the first.
const DIGITS: Resume<'static> = Resume {
    example: "train",
    options: &["--epochs", "2"],
    every: "1",
    from: "checkpoint-1.safetensors",
    files: &[
        "digits-mlp.safetensors",
        "training.csv",
        "checkpoint-2.safetensors",
    ],
};

/// The options of a small GPT's run of 4 steps.
const GPT_OPTIONS: [&str; 10] = [
    "--steps",
    "4",
    "--batch",
    "2",
    "--context",
    "16",
    "--eval-every",
    "2",
    "--sample",
    "0",
];

/// The small GPT with a checkpoint every 2 steps, resumed from the first.
const GPT: Resume<'static> = Resume {
    example: "gpt",
    options: &GPT_OPTIONS,
    every: "2",
    from: "checkpoint-2.safetensors",
    files: &["gpt.safetensors", "curves.csv", "checkpoint-4.safetensors"],
};

#[test]
fn the_digits_example_resumes_exactly() {
    let dir = DIGITS.check("digits-host", &[]);
    std::fs::remove_dir_all(&dir).ok();
    let dir = DIGITS.check("digits-host-sgd", &["--sgd"]);
    std::fs::remove_dir_all(&dir).ok();
    if opencl() {
        for (case, optimizer) in [
            ("digits-opencl", None),
            ("digits-opencl-sgd", Some("--sgd")),
        ] {
            let mut device = vec!["--device", "opencl", "--record"];
            device.extend(optimizer);
            let dir = DIGITS.check(case, &device);
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}

#[test]
fn the_gpt_example_resumes_exactly() {
    // In f16 the checkpoint keeps the loss scale too.
    let dir = GPT.check("gpt-host-f16", &["--precision", "f16"]);
    std::fs::remove_dir_all(&dir).ok();
    let dir = GPT.check("gpt-host", &[]);
    // A run without checkpoints is the same run.
    let plain = dir.join("plain");
    let mut args = GPT_OPTIONS.to_vec();
    args.extend(["--out", plain.to_str().unwrap()]);
    run("gpt", &args);
    same_files(
        &["gpt.safetensors", "curves.csv"],
        (&plain, &dir.join("straight")),
        "gpt-host",
    );
    // Resuming with other options is an error naming both.
    let checkpoint = dir.join("straight/checkpoint-2.safetensors");
    let output = Command::new(example("gpt"))
        .args([
            "--steps",
            "5",
            "--batch",
            "2",
            "--context",
            "16",
            "--sample",
            "0",
            "--out",
        ])
        .arg(dir.join("other"))
        .arg("--resume")
        .arg(&checkpoint)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        message.contains("--steps 4 --batch 2") && message.contains("--steps 5 --batch 2"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).ok();
    if opencl() {
        let dir = GPT.check("gpt-opencl", &["--device", "opencl", "--record"]);
        std::fs::remove_dir_all(&dir).ok();
    }
}
