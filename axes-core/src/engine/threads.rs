//! The number of threads evaluations use.

use std::sync::{Arc, RwLock};

use rayon::ThreadPool;

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

/// Makes evaluations use `threads` threads (1: no parallelism). By default they use rayon's
/// global pool (one thread per core, or `RAYON_NUM_THREADS`). Results are bitwise the same
/// for every thread count: work is split at points that depend only on the lengths.
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
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Runs `f` on this thread with a scope whose spawned work runs on the configured pool.
pub(crate) fn in_place_scope<'scope, R>(f: impl FnOnce(&rayon::Scope<'scope>) -> R) -> R {
    let pool = POOL.read().unwrap_or_else(|e| e.into_inner()).clone();
    match pool {
        Some(pool) => pool.in_place_scope(f),
        None => rayon::in_place_scope(f),
    }
}
