//! The number of threads evaluations use, and the pool their parts run on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rayon::ThreadPool;

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

/// How long a pool thread stays awake after the last part it ran, taking the next part as
/// soon as it is handed over. A sleeping thread took 50–90 µs to wake on the measured 2-core
/// host (more than a training step's small jobs take whole), an awake one under 1 µs; the
/// jobs of a training step follow one another far sooner than this.
const LINGER: Duration = Duration::from_millis(2);

/// Whether a pool thread is lingering (at most one does).
static LINGERING: AtomicBool = AtomicBool::new(false);

/// Makes evaluations use `threads` threads (1: no parallelism). By default they use rayon's
/// global pool (one thread per core, or `RAYON_NUM_THREADS`). Results are bitwise the same
/// for every thread count: work is split at points that depend only on the lengths. With two
/// threads or more, one pool thread stays awake (spinning) for 2 ms after parallel work, as
/// OpenMP's threads do, so that the next job's parts start at once.
///
/// ```
/// # extern crate axes_core as axes;
/// axes::set_threads(1).unwrap();
/// assert_eq!(axes::threads(), 1);
/// axes::set_threads(2).unwrap();
/// ```
pub fn set_threads(threads: usize) -> Result<(), rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()?;
    *POOL.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(pool));
    Ok(())
}

/// The number of threads evaluations use.
pub fn threads() -> usize {
    match &*POOL.read().unwrap_or_else(|e| e.into_inner()) {
        Some(pool) => pool.current_num_threads(),
        None => rayon::current_num_threads(),
    }
}

/// Runs `f` inside the configured pool.
pub(crate) fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = POOL.read().unwrap_or_else(|e| e.into_inner()).clone();
    let result = match &pool {
        Some(pool) => pool.install(f),
        None => f(),
    };
    linger(pool.as_deref());
    result
}

/// Runs `f` on this thread with a scope whose spawned work runs on the configured pool.
pub(crate) fn in_place_scope<'scope, R>(f: impl FnOnce(&rayon::Scope<'scope>) -> R) -> R {
    let pool = POOL.read().unwrap_or_else(|e| e.into_inner()).clone();
    let result = match &pool {
        Some(pool) => pool.in_place_scope(f),
        None => rayon::in_place_scope(f),
    };
    linger(pool.as_deref());
    result
}

/// Keeps one thread of `pool` (rayon's global pool where `None`) awake for [`LINGER`] after
/// parallel work, polling for whatever is handed to the pool meanwhile (yielding the core
/// between polls made a hand-off take 4–18 µs instead of under 1); then it sleeps as rayon's
/// threads do.
fn linger(pool: Option<&ThreadPool>) {
    // One thread asked for: no core is kept busy beside it.
    let threads = pool.map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
    if threads < 2 || LINGERING.swap(true, Ordering::AcqRel) {
        return;
    }
    let awake = || {
        let mut last = Instant::now();
        loop {
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => last = Instant::now(),
                Some(rayon::Yield::Idle) if last.elapsed() < LINGER => std::hint::spin_loop(),
                _ => break,
            }
        }
        LINGERING.store(false, Ordering::Release);
    };
    match pool {
        Some(pool) => pool.spawn(awake),
        None => rayon::spawn(awake),
    }
}
