//! Saves that survive a crash: a process killed (SIGKILL) at random moments while it saves a
//! checkpoint of 8 MiB in a loop leaves, every time, either no file or a whole one holding one
//! of the states it saved; a save that runs out of room (a file-size limit in a child) is an
//! error naming the file and leaves the previous one whole; and the same tensors saved twice
//! give the same bytes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use axes::io::TensorFile;
use axes::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
struct Row;
#[derive(Axis)]
struct Col;

/// 2^21 f32: 8 MiB.
const ROWS: usize = 2048;
const COLS: usize = 1024;

/// The environment variable that makes [`child_saves_in_a_loop`] run, naming its file.
const SAVE_LOOP: &str = "AXES_SAVE_LOOP";

/// The environment variable that makes [`child_saves_a_model`] run, naming its file.
const SAVE_MODEL: &str = "AXES_SAVE_MODEL";

/// State `k` of the saved checkpoint: every element `k` (1, 2 or 3).
fn state(k: u8) -> TensorFile {
    let values = Tensor::<f32, (Row, Col)>::full((Row.len(ROWS), Col.len(COLS)), f32::from(k));
    let mut file = TensorFile::new();
    file.insert("weight", &values.unwrap());
    file
}

/// Which state the file at `path` holds: `Ok(None)` where there is no file, an error where
/// it is torn (unreadable, or not one of the states).
fn saved_state(path: &Path) -> Result<Option<u8>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let file = TensorFile::read(path).map_err(|e| e.to_string())?;
    let weight: Tensor<f32, (Row, Col)> = file.get("weight").map_err(|e| e.to_string())?;
    let values = weight.to_vec();
    let first = values[0];
    if [1.0, 2.0, 3.0].contains(&first) && values.iter().all(|&v| v == first) {
        Ok(Some(first as u8))
    } else {
        Err(format!("mixed values, first {first}"))
    }
}

/// The child of [`a_kill_during_a_save_leaves_an_old_or_a_new_file`]: saves states 1, 2, 3,
/// 1, … to the file named by `AXES_SAVE_LOOP` until it is killed.
#[test]
#[ignore = "run by a_kill_during_a_save_leaves_an_old_or_a_new_file as its child process"]
fn child_saves_in_a_loop() {
    let path = PathBuf::from(std::env::var_os(SAVE_LOOP).expect("run as a child"));
    let states = [state(1), state(2), state(3)];
    println!("ready"); // the parent kills from now on
    for k in (0..3).cycle() {
        states[k].write(&path).unwrap();
    }
}

#[test]
fn a_kill_during_a_save_leaves_an_old_or_a_new_file() {
    let dir = std::env::temp_dir().join(format!("axes-atomic-saves-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.safetensors");
    let exe = std::env::current_exe().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (mut torn, mut whole, mut absent) = (Vec::new(), 0, 0);
    for round in 0..200 {
        let mut child = Command::new(&exe)
            .args([
                "child_saves_in_a_loop",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(SAVE_LOOP, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Once its states are made (the test harness prints its own lines first).
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let ready = stdout
            .lines()
            .map_while(|line| line.ok())
            .any(|l| l == "ready");
        assert!(ready, "round {round}: the child stopped before saving");
        std::thread::sleep(Duration::from_micros(rng.random_range(0..100_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        match saved_state(&path) {
            Ok(Some(_)) => whole += 1,
            Ok(None) => absent += 1,
            Err(why) => torn.push(format!("round {round}: {why}")),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    println!(
        "200 kills: {whole} whole files, {absent} absent, {} torn",
        torn.len()
    );
    assert!(torn.is_empty(), "{} torn files: {torn:?}", torn.len());
    assert!(whole > 0, "the child never finished a save");
}

/// The same tensors give the same file, byte for byte (the header's metadata was in hash
/// order, different in every process and every map), so checkpoints compare by content.
#[test]
fn the_same_tensors_give_the_same_bytes() {
    let dir = std::env::temp_dir().join(format!("axes-same-bytes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = TensorFile::new();
    for k in 0..12 {
        let t = Tensor::<f32, (Row, Col)>::full((Row.len(2), Col.len(k + 1)), k as f32).unwrap();
        file.insert(&format!("layer{k}.weight"), &t);
    }
    let (a, b) = (dir.join("a.safetensors"), dir.join("b.safetensors"));
    file.write(&a).unwrap();
    file.write(&b).unwrap();
    let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    std::fs::remove_dir_all(&dir).ok();
    assert!(a == b, "two saves of the same tensors differ");
}

/// The child of [`two_processes_save_the_same_bytes`]: saves a small model's parameters,
/// built from a fixed seed, to the file named by `AXES_SAVE_MODEL`.
#[test]
#[ignore = "run by two_processes_save_the_same_bytes as its child process"]
fn child_saves_a_model() {
    use axes::nn::{Init, Linear, ParamsBuilder};
    #[derive(Axis)]
    struct Hidden;
    let path = PathBuf::from(std::env::var_os(SAVE_MODEL).expect("run as a child"));
    let mut builder = ParamsBuilder::new();
    for layer in 0..6 {
        let name = format!("layer{layer}");
        Linear::<Row, Hidden>::new(&mut builder, &name, Row.len(64), Hidden.len(48), Init::He)
            .unwrap();
    }
    builder.build::<f32>(11).unwrap().save(&path).unwrap();
}

/// Two processes, one on 1 thread and one on 2, save the same parameters as the same bytes
/// (the metadata's order no longer depends on a process's hash keys).
#[test]
fn two_processes_save_the_same_bytes() {
    let dir = std::env::temp_dir().join(format!("axes-two-saves-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let saved: Vec<Vec<u8>> = ["1", "2"]
        .iter()
        .map(|threads| {
            let path = dir.join(format!("threads-{threads}.safetensors"));
            let status = Command::new(&exe)
                .args([
                    "child_saves_a_model",
                    "--exact",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(SAVE_MODEL, &path)
                .env("RAYON_NUM_THREADS", threads)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "the child on {threads} threads failed");
            std::fs::read(&path).unwrap()
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        saved[0] == saved[1],
        "the two processes wrote different files"
    );
}

/// The environment variable that makes [`child_saves_past_its_file_size_limit`] run, naming
/// its file.
const FULL_DISK: &str = "AXES_FULL_DISK";

/// The child of [`a_full_disk_leaves_the_previous_file_whole`]: saves state 2 (8 MiB) to the
/// file named by `AXES_FULL_DISK` under a file-size limit far below that, SIGXFSZ ignored, and
/// prints the error.
#[test]
#[ignore = "run by a_full_disk_leaves_the_previous_file_whole as its child process"]
fn child_saves_past_its_file_size_limit() {
    let path = PathBuf::from(std::env::var_os(FULL_DISK).expect("run as a child"));
    match state(2).write(&path) {
        Ok(()) => println!("saved"),
        Err(e) => println!("error: {e}"),
    }
}

/// A save that runs out of room (a file-size limit, as a full disk would) is an I/O error
/// naming the file, and the checkpoint saved before it is whole, with no temporary left.
#[test]
fn a_full_disk_leaves_the_previous_file_whole() {
    let dir = std::env::temp_dir().join(format!("axes-full-disk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.safetensors");
    state(1).write(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    // 1024 blocks (512 KiB or 1 MiB, by the shell's block size): the write stops early.
    let output = Command::new("sh")
        .args([
            "-c",
            r#"trap '' XFSZ; ulimit -f 1024; exec "$0" child_saves_past_its_file_size_limit --exact --ignored --nocapture --test-threads=1"#,
        ])
        .arg(&exe)
        .env(FULL_DISK, &path)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the child failed: {stdout}");
    let error = (stdout.lines())
        .find_map(|line| Some(line.split_once("error: ")?.1))
        .unwrap_or_else(|| panic!("the save past the limit did not fail: {stdout}"));
    assert!(
        error.contains(&path.display().to_string()) && error.contains("too large"),
        "{error}"
    );
    assert_eq!(saved_state(&path), Ok(Some(1)), "the previous checkpoint");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["checkpoint.safetensors"], "no temporary left");
    std::fs::remove_dir_all(&dir).ok();
}
