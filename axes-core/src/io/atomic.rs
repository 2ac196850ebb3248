//! Files written whole or not at all. The bytes go to a temporary file beside the target
//! (same directory, so the rename cannot cross file systems), which is written, synced to the
//! disk, and renamed over the target; then the directory is synced, so the rename itself
//! survives a power loss. A reader — or the next run after a crash, a kill or a full disk —
//! finds the old file or the new one, never a torn one.
//!
//! The temporary is named `.{target}.{pid}-{unique}.tmp`. A save removes the temporaries that
//! processes which no longer run left beside the same target (where the system tells which
//! processes run: Linux's `/proc`); those of live processes are left alone.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::io_error;
use crate::error::Result;

/// The steps of an atomic write, one method each, so that a test can see their order and
/// make any of them fail.
pub(crate) trait Steps {
    /// Creates the new file `temp` (an error if it exists) and writes `bytes` into it.
    fn write(&mut self, temp: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Waits until the file written last is on the disk.
    fn sync(&mut self, temp: &Path) -> io::Result<()>;
    /// Renames `temp` over `target`.
    fn rename(&mut self, temp: &Path, target: &Path) -> io::Result<()>;
    /// Waits until the directory's entries (the rename) are on the disk.
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()>;
    /// Removes `path`.
    fn remove(&mut self, path: &Path) -> io::Result<()>;
}

/// The steps on the real file system.
#[derive(Default)]
struct Disk {
    /// The file written last, until it is synced.
    open: Option<File>,
}

impl Steps for Disk {
    fn write(&mut self, temp: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut file = File::create_new(temp)?;
        file.write_all(bytes)?;
        self.open = Some(file);
        Ok(())
    }

    fn sync(&mut self, temp: &Path) -> io::Result<()> {
        match self.open.take() {
            Some(file) => file.sync_all(),
            None => File::open(temp)?.sync_all(),
        }
    }

    fn rename(&mut self, temp: &Path, target: &Path) -> io::Result<()> {
        std::fs::rename(temp, target)
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        // Directories open for reading (and sync) on Unix; elsewhere the rename is as durable
        // as the system makes it.
        if cfg!(unix) {
            File::open(dir)?.sync_all()
        } else {
            Ok(())
        }
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
}

/// Writes `bytes` to `path` atomically (see the module docs); an I/O error names `path`, and
/// leaves whatever was at `path` as it was.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    remove_dead_temporaries(path);
    write_with(&mut Disk::default(), path, bytes)
}

/// [`write`] through `steps`.
pub(crate) fn write_with(steps: &mut dyn Steps, path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io_error(path, "not a file name"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(temporary_name(&name.to_string_lossy()));
    let written = steps
        .write(&temp, bytes)
        .and_then(|()| steps.sync(&temp))
        .and_then(|()| steps.rename(&temp, path));
    if let Err(e) = written {
        // Best effort: the error that matters is the write's.
        steps.remove(&temp).ok();
        return Err(io_error(path, e));
    }
    steps.sync_dir(&dir).map_err(|e| io_error(path, e))
}

/// `.{target}.{pid}-{unique}.tmp`: unique in this process by a counter, across processes
/// by the id (the time in the name makes a reused id collide only within a nanosecond).
fn temporary_name(target: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{target}.{}-{unique}x{nanos}.tmp", std::process::id())
}

/// The process id in the name of a temporary of `target`, if `entry` is one.
fn temporary_pid(target: &str, entry: &str) -> Option<u32> {
    let rest = entry
        .strip_prefix(&format!(".{target}."))?
        .strip_suffix(".tmp")?;
    rest.split_once('-')?.0.parse().ok()
}

/// Removes the temporaries beside `path` whose processes no longer run (Linux only: where
/// `/proc` does not tell, none is removed). Best effort: a save never fails for it.
fn remove_dead_temporaries(path: &Path) {
    let proc = Path::new("/proc/self");
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    if !cfg!(target_os = "linux") || !proc.exists() {
        return;
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let target = name.to_string_lossy();
    for entry in entries.flatten() {
        let entry_name = entry.file_name();
        let Some(pid) = temporary_pid(&target, &entry_name.to_string_lossy()) else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            std::fs::remove_file(entry.path()).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the steps, failing the one named `fail` with "No space left on device".
    struct Recorder {
        disk: Disk,
        log: Vec<String>,
        fail: Option<&'static str>,
    }

    impl Recorder {
        fn step(&mut self, name: &'static str, path: &Path) -> io::Result<()> {
            let file = path.file_name().map_or(String::new(), |n| {
                let n = n.to_string_lossy();
                if n.ends_with(".tmp") {
                    "temp".into()
                } else {
                    n.into_owned()
                }
            });
            self.log.push(format!("{name} {file}"));
            match self.fail {
                Some(failing) if failing == name => Err(io::Error::from_raw_os_error(28)),
                _ => Ok(()),
            }
        }
    }

    impl Steps for Recorder {
        fn write(&mut self, temp: &Path, bytes: &[u8]) -> io::Result<()> {
            self.step("write", temp)?;
            self.disk.write(temp, bytes)
        }
        fn sync(&mut self, temp: &Path) -> io::Result<()> {
            self.step("sync", temp)?;
            self.disk.sync(temp)
        }
        fn rename(&mut self, temp: &Path, target: &Path) -> io::Result<()> {
            self.step("rename", target)?;
            self.disk.rename(temp, target)
        }
        fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
            self.step("sync_dir", dir)?;
            self.disk.sync_dir(dir)
        }
        fn remove(&mut self, path: &Path) -> io::Result<()> {
            self.step("remove", path)?;
            self.disk.remove(path)
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("axes-atomic-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_temporary_is_written_synced_renamed_then_the_directory_synced() {
        let dir = scratch("order");
        let path = dir.join("model.safetensors");
        let mut steps = Recorder {
            disk: Disk::default(),
            log: Vec::new(),
            fail: None,
        };
        write_with(&mut steps, &path, b"new").unwrap();
        let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            steps.log,
            [
                "write temp".to_string(),
                "sync temp".into(),
                "rename model.safetensors".into(),
                format!("sync_dir {dir_name}"),
            ]
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(entries(&dir), ["model.safetensors"]);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A write that fails (a full disk) is an error naming the target, removes its
    /// temporary, and leaves the previous file whole.
    #[test]
    fn a_failed_write_leaves_the_previous_file() {
        for failing in ["write", "sync", "rename"] {
            let dir = scratch(failing);
            let path = dir.join("model.safetensors");
            write(&path, b"old").unwrap();
            let mut steps = Recorder {
                disk: Disk::default(),
                log: Vec::new(),
                fail: Some(failing),
            };
            let error = write_with(&mut steps, &path, b"new")
                .unwrap_err()
                .to_string();
            assert!(error.contains("model.safetensors"), "{failing}: {error}");
            assert!(error.contains("No space left"), "{failing}: {error}");
            assert_eq!(std::fs::read(&path).unwrap(), b"old", "{failing}");
            assert_eq!(entries(&dir), ["model.safetensors"], "{failing}");
            std::fs::remove_dir_all(&dir).ok();
        }
    }

    #[test]
    fn temporaries_of_dead_processes_are_removed_and_live_ones_kept() {
        let dir = scratch("dead");
        let path = dir.join("m.safetensors");
        // No process has id 4294967295 (ids stop below 2^22 on Linux); this one is alive.
        let dead = dir.join(".m.safetensors.4294967295-0x1.tmp");
        let alive = dir.join(format!(".m.safetensors.{}-7x1.tmp", std::process::id()));
        let other = dir.join(".n.safetensors.4294967295-0x1.tmp");
        for file in [&dead, &alive, &other] {
            std::fs::write(file, b"torn").unwrap();
        }
        write(&path, b"whole").unwrap();
        let left = entries(&dir);
        if cfg!(target_os = "linux") {
            assert!(!left.contains(&".m.safetensors.4294967295-0x1.tmp".to_string()));
        }
        assert!(
            left.iter()
                .any(|n| n.contains(&std::process::id().to_string()))
        );
        assert!(left.contains(&".n.safetensors.4294967295-0x1.tmp".to_string()));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn only_our_temporaries_are_recognised() {
        assert_eq!(temporary_pid("m.st", ".m.st.123-4x5.tmp"), Some(123));
        assert_eq!(temporary_pid("m.st", ".m.st.abc-4x5.tmp"), None);
        assert_eq!(temporary_pid("m.st", ".other.123-4x5.tmp"), None);
        assert_eq!(temporary_pid("m.st", "m.st"), None);
        let name = temporary_name("m.st");
        assert_eq!(temporary_pid("m.st", &name), Some(std::process::id()));
    }
}
