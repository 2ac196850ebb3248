//! Reuse of host buffers. A training step frees and allocates the same buffers
//! (activations, gradients, the arena-shaped gradient) every step; when glibc's allocator
//! hands a large buffer's pages back to the system in between (trimming the heap's top, or
//! unmapping a buffer it mapped), each step pays for fresh pages (one fault and a zeroing per
//! 4 KiB). Buffers go back here when their last [`Storage`](super::Storage) handle drops, and
//! the constructors of `storage/alloc.rs` take one of the same size and alignment before
//! asking the allocator. The host's meter counts each request as a hit or a
//! miss ([`crate::Device::counters`]).
//!
//! The pool holds at most its limit ([`set_host_limit`]; [`DEFAULT_LIMIT`] unless the
//! environment variable `AXES_POOL_BYTES` says otherwise): a buffer that would take it past
//! the limit is freed instead. [`release_host`] frees every buffer it holds.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::error::Error;
use crate::protocol::{FreeBuffers, HOST_METER};

/// The bytes a device's pool of freed buffers holds at most (the host's, and OpenCL's),
/// unless the environment variable `AXES_POOL_BYTES` or [`crate::memory::set_pool_limit`]
/// says otherwise.
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// The memory of a host buffer that nothing owns any more, given back to the pool.
pub(super) struct RawBlock {
    pub ptr: NonNull<u8>,
    pub layout: Layout,
    /// How many bytes from the start hold elements written by the last owner.
    pub initialised: usize,
}

/// An allocation of the global allocator that no host buffer owns now.
pub(super) struct FreeBlock {
    pub ptr: NonNull<u8>,
    /// How many bytes from the start the buffer's last owner had written.
    pub initialised: usize,
}

// SAFETY: a block is memory nobody else points to (its `HostVec` was taken apart when it
// came here), so moving it between threads moves nothing shared.
unsafe impl Send for FreeBlock {}

/// The blocks held, by (size, alignment).
struct Held {
    free: FreeBuffers<(usize, usize), FreeBlock>,
    /// Whether the limit was read from `AXES_POOL_BYTES` yet (on the first use).
    limit_read: bool,
}

static POOL: Mutex<Held> = Mutex::new(Held {
    free: FreeBuffers::new(DEFAULT_LIMIT, |&(size, _)| size),
    limit_read: false,
});

impl Held {
    /// The blocks, with the limit read from the environment on the first use.
    fn free(&mut self) -> &mut FreeBuffers<(usize, usize), FreeBlock> {
        if !self.limit_read {
            self.limit_read = true;
            self.free.set_limit(limit_from_env(), dealloc);
        }
        &mut self.free
    }

    /// A block of `layout` out of the pool: the last freed one whose bytes were all written,
    /// else the last freed one.
    fn take(&mut self, layout: Layout) -> Option<FreeBlock> {
        let size = layout.size();
        let block = self
            .free()
            .take((size, layout.align()), |b| b.initialised >= size);
        HOST_METER.set_pooled_bytes(self.free.bytes() as u64);
        block
    }

    /// Frees blocks until the pool holds at most `limit` bytes; the bytes freed.
    fn shrink_to(&mut self, limit: usize) -> usize {
        let freed = self.free().shrink_to(limit, dealloc);
        HOST_METER.set_pooled_bytes(self.free.bytes() as u64);
        freed
    }
}

/// Gives a block back to the global allocator.
fn dealloc((size, align): (usize, usize), block: FreeBlock) {
    // SAFETY: the block was allocated by the global allocator with this size and alignment
    // (its key in the pool), and the pool, its only owner, lets go of it.
    unsafe {
        std::alloc::dealloc(
            block.ptr.as_ptr(),
            Layout::from_size_align_unchecked(size, align),
        )
    }
}

/// `AXES_POOL_BYTES` where set (and a number of bytes), else [`DEFAULT_LIMIT`].
pub fn limit_from_env() -> usize {
    std::env::var("AXES_POOL_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_LIMIT)
}

fn pool() -> std::sync::MutexGuard<'static, Held> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the most bytes the host pool holds, freeing buffers until it holds no more.
pub(crate) fn set_host_limit(bytes: usize) {
    let mut held = pool();
    held.free().set_limit(bytes, dealloc);
    HOST_METER.set_pooled_bytes(held.free.bytes() as u64);
}

/// The most bytes the host pool holds.
pub(crate) fn host_limit() -> usize {
    pool().free().limit()
}

/// Frees every buffer the host pool holds; the bytes freed.
pub(crate) fn release_host() -> usize {
    pool().shrink_to(0)
}

/// The error for `bytes` of host memory that the allocator could not give.
pub(crate) fn out_of_memory(bytes: usize) -> Error {
    Error::OutOfMemory {
        device: "cpu".into(),
        requested: bytes as u64,
        available: available_host_bytes(),
    }
}

/// The memory the system could give without swapping (Linux's `MemAvailable`), where known.
fn available_host_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Gives a block straight back to the global allocator.
pub(super) fn free(block: RawBlock) {
    let key = (block.layout.size(), block.layout.align());
    dealloc(
        key,
        FreeBlock {
            ptr: block.ptr,
            initialised: block.initialised,
        },
    );
}

/// A kept block of `layout`, if the pool has one (counted as a hit or a miss).
pub(super) fn take(layout: Layout) -> Option<FreeBlock> {
    let block = pool().take(layout);
    HOST_METER.pool_request(block.is_some());
    block
}

/// Keeps a dropped buffer's memory for a later request of its size and alignment, or frees
/// it when the pool would hold more than its limit.
pub(super) fn give_back(block: RawBlock) {
    let key = (block.layout.size(), block.layout.align());
    let kept = FreeBlock {
        ptr: block.ptr,
        initialised: block.initialised,
    };
    let mut held = pool();
    let free = held.free();
    if free.bytes() + key.0 > free.limit() {
        drop(held);
        return dealloc(key, kept);
    }
    let refused = free.keep(key, kept);
    debug_assert!(refused.is_none(), "checked to fit above");
    HOST_METER.set_pooled_bytes(free.bytes() as u64);
}
