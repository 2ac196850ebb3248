//! Compiled kernels kept on disk between processes, so that a process does not compile again
//! what an earlier one compiled: CUDA cubins (or PTX), OpenCL program binaries.
//!
//! The folder is `AXES_KERNEL_CACHE` where set (`off` turns the cache off), else
//! `$XDG_CACHE_HOME/axes/kernels`, else `~/.cache/axes/kernels`. An entry is found by a hash
//! of its key — everything the compiled bytes depend on: the backend, the device's
//! architecture, the compiler's and driver's versions, the options and the kernel's source —
//! and holds the whole key and a CRC-32 of itself: an entry whose checksum or length is wrong
//! is removed and compiled again, never trusted, and an entry of another key under the same
//! hash is a miss. Entries are written to a temporary beside their place and renamed there,
//! so a reader sees a whole entry or none. The cache is a help, never a failure: an entry
//! that cannot be read or written is compiled and used as if there were no cache.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable naming the folder (`off`: no cache).
pub(crate) const KERNEL_CACHE_VAR: &str = "AXES_KERNEL_CACHE";

/// The first bytes of every entry (the format's version in it).
const MAGIC: &[u8] = b"axes kernel cache 1\n";

/// A folder of compiled kernels, or none (the cache off).
#[derive(Clone, Debug)]
pub(crate) struct DiskCache {
    dir: Option<PathBuf>,
}

impl DiskCache {
    /// The cache `AXES_KERNEL_CACHE` names (see the module docs).
    pub(crate) fn from_env() -> DiskCache {
        let dir = match std::env::var_os(KERNEL_CACHE_VAR) {
            Some(value) if value == "off" => None,
            Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
            _ => std::env::var_os("XDG_CACHE_HOME")
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
                .map(|dir| dir.join("axes").join("kernels")),
        };
        DiskCache { dir }
    }

    /// The cache in `dir`.
    #[cfg(test)]
    pub(crate) fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache {
            dir: Some(dir.into()),
        }
    }

    /// No cache: every lookup misses, nothing is written.
    #[cfg(test)]
    pub(crate) fn off() -> DiskCache {
        DiskCache { dir: None }
    }

    /// The folder, where the cache is on.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Where the entry for `key` lives.
    fn path(&self, key: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{:016x}.bin", fnv1a(key.as_bytes()))))
    }

    /// Whether the cache is on (has a folder).
    pub(crate) fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// The bytes stored for `key`; `None` where there are none, or where the entry is damaged
    /// (it is removed, so that the caller's compilation replaces it).
    pub(crate) fn load(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.path(key)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode(&bytes) {
            Some((stored, payload)) if stored == key.as_bytes() => Some(payload.to_vec()),
            // Another key with the same hash: the entry is whole, just not this one.
            Some(_) => None,
            None => {
                std::fs::remove_file(&path).ok();
                None
            }
        }
    }

    /// Stores `payload` for `key` (best effort: an error leaves the cache as it was).
    pub(crate) fn store(&self, key: &str, payload: &[u8]) {
        let Some(path) = self.path(key) else {
            return;
        };
        let entry = encode(key.as_bytes(), payload);
        let _ = write_whole(&path, &entry);
    }
}

/// `MAGIC`, the key's length and the key, the payload's length and the payload (lengths as
/// little-endian u64), then a CRC-32 of all of it.
fn encode(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(MAGIC.len() + 20 + key.len() + payload.len());
    entry.extend_from_slice(MAGIC);
    entry.extend_from_slice(&(key.len() as u64).to_le_bytes());
    entry.extend_from_slice(key);
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    entry.extend_from_slice(payload);
    let crc = crc32fast::hash(&entry);
    entry.extend_from_slice(&crc.to_le_bytes());
    entry
}

/// The key and the payload of a whole, undamaged entry.
fn decode(entry: &[u8]) -> Option<(&[u8], &[u8])> {
    let (body, crc) = entry.split_at_checked(entry.len().checked_sub(4)?)?;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let (key, rest) = sized(rest)?;
    let (payload, rest) = sized(rest)?;
    rest.is_empty().then_some((key, payload))
}

/// A length-prefixed field at the start of `bytes`, and what follows it.
fn sized(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    rest.split_at_checked(len)
}

/// Writes `bytes` to a temporary beside `path` and renames it there. Not synced to the disk:
/// an entry lost or torn by a crash fails its checksum and is compiled again.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("entries live in the cache's folder");
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().expect("an entry's name").to_string_lossy();
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}-{unique}.tmp", std::process::id()));
    let written = std::fs::File::create_new(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        std::fs::remove_file(&temp).ok();
    }
    written
}

/// FNV-1a, 64 bits: an entry's file name (the key inside settles a collision).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A backend's use of the cache, as processes one after another see it: `fresh` makes a
/// device object over the cache in a new folder `dir`, `run` has it compile (or load) one
/// kernel and run it, and `built` counts the kernels that object compiled. The first object
/// compiles and keeps one entry, the second loads it, and after a byte of the entry is
/// flipped the third compiles again and the fourth loads the good entry that replaced it.
#[cfg(test)]
pub(crate) fn check_kept_on_disk<D>(
    dir: &Path,
    fresh: impl Fn(DiskCache) -> D,
    run: impl Fn(&D),
    built: impl Fn(&D) -> usize,
) {
    std::fs::remove_dir_all(dir).ok();
    let compiles = || {
        let device = fresh(DiskCache::at(dir));
        run(&device);
        built(&device)
    };
    assert_eq!(compiles(), 1, "an empty cache");
    let kept: Vec<_> = (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "one entry: {kept:?}");
    assert_eq!(compiles(), 0, "loaded from the kept entry");
    let mut bytes = std::fs::read(&kept[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&kept[0], &bytes).unwrap();
    assert_eq!(compiles(), 1, "a damaged entry is not trusted");
    assert_eq!(compiles(), 0, "the damaged entry was replaced");
    std::fs::remove_dir_all(dir).ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder in the system's temporary space.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("axes-kernel-cache-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        dir
    }

    #[test]
    fn stores_and_loads_by_key() {
        let cache = DiskCache::at(scratch("keys"));
        assert_eq!(cache.load("cuda sm_90 source a"), None);
        cache.store("cuda sm_90 source a", b"cubin a");
        cache.store("cuda sm_90 source b", b"");
        assert_eq!(
            cache.load("cuda sm_90 source a").as_deref(),
            Some(&b"cubin a"[..])
        );
        assert_eq!(cache.load("cuda sm_90 source b").as_deref(), Some(&b""[..]));
        assert_eq!(cache.load("cuda sm_80 source a"), None);
        cache.store("cuda sm_90 source a", b"cubin a, again");
        let again = cache.load("cuda sm_90 source a");
        assert_eq!(again.as_deref(), Some(&b"cubin a, again"[..]));
        let names: Vec<_> = std::fs::read_dir(cache.dir().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no temporaries left: {names:?}");
    }

    #[test]
    fn a_damaged_entry_is_removed_and_missed() {
        let cache = DiskCache::at(scratch("damaged"));
        let key = "opencl pocl source";
        cache.store(key, &[7u8; 1000]);
        let path = cache.path(key).unwrap();
        let whole = std::fs::read(&path).unwrap();
        for at in [0, MAGIC.len() + 3, whole.len() / 2, whole.len() - 1] {
            let mut flipped = whole.clone();
            flipped[at] ^= 0x10;
            std::fs::write(&path, &flipped).unwrap();
            assert_eq!(cache.load(key), None, "byte {at} flipped");
            assert!(!path.exists(), "the damaged entry is removed");
        }
        std::fs::write(&path, &whole[..whole.len() - 9]).unwrap();
        assert_eq!(cache.load(key), None, "a truncated entry");
        cache.store(key, &[7u8; 1000]);
        assert_eq!(cache.load(key), Some(vec![7u8; 1000]));
    }

    #[test]
    fn another_key_under_the_same_name_is_a_miss() {
        let cache = DiskCache::at(scratch("collision"));
        cache.store("key one", b"one");
        // Put key one's entry where key two's would be.
        let (one, two) = (
            cache.path("key one").unwrap(),
            cache.path("key two").unwrap(),
        );
        std::fs::rename(&one, &two).unwrap();
        assert_eq!(cache.load("key two"), None);
        assert!(two.exists(), "a whole entry of another key is kept");
    }

    #[test]
    fn off_stores_nothing() {
        let cache = DiskCache::off();
        cache.store("key", b"bytes");
        assert_eq!(cache.load("key"), None);
        assert!(cache.dir().is_none());
    }
}
