//! Reuse of host buffers. A training step frees and allocates the same buffers
//! (activations, gradients, the arena-shaped gradient) every step; when glibc's allocator
//! hands a large buffer's pages back to the system in between (trimming the heap's top, or
//! unmapping a buffer it mapped), each step pays for fresh pages (one fault and a zeroing per
//! 4 KiB). Buffers go back here when their last [`Storage`](super::Storage) handle drops, and
//! [`filled`], [`with_capacity`] and [`for_overwrite`] take one of the same size and
//! alignment before asking the allocator. The host's meter counts each request as a hit or a
//! miss ([`crate::Device::counters`]).
//!
//! The pool holds at most its limit ([`set_host_limit`]; [`DEFAULT_LIMIT`] unless the
//! environment variable `AXES_POOL_BYTES` says otherwise): a buffer that would take it past
//! the limit is freed instead. [`release_host`] frees every buffer it holds.

use std::alloc::Layout;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::Mutex;

use super::host_vec::{HOST_ALIGN, HostVec, RawBlock};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::protocol::{Device, FreeBuffers, HOST_METER, as_bytes, bytes_into};

/// The bytes a device's pool of freed buffers holds at most (the host's, and OpenCL's),
/// unless the environment variable `AXES_POOL_BYTES` or [`crate::memory::set_pool_limit`]
/// says otherwise.
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// An allocation of the global allocator that no [`HostVec`] owns now.
struct Block {
    ptr: NonNull<u8>,
    /// How many bytes from the start the buffer's last owner had written.
    initialised: usize,
}

// SAFETY: a block is memory nobody else points to (its `HostVec` was taken apart when it
// came here), so moving it between threads moves nothing shared.
unsafe impl Send for Block {}

/// The blocks held, by (size, alignment).
struct Held {
    free: FreeBuffers<(usize, usize), Block>,
    /// Whether the limit was read from `AXES_POOL_BYTES` yet (on the first use).
    limit_read: bool,
}

static POOL: Mutex<Held> = Mutex::new(Held {
    free: FreeBuffers::new(DEFAULT_LIMIT, |&(size, _)| size),
    limit_read: false,
});

impl Held {
    /// The blocks, with the limit read from the environment on the first use.
    fn free(&mut self) -> &mut FreeBuffers<(usize, usize), Block> {
        if !self.limit_read {
            self.limit_read = true;
            self.free.set_limit(limit_from_env(), dealloc);
        }
        &mut self.free
    }

    /// A block of `layout` out of the pool: the last freed one whose bytes were all written,
    /// else the last freed one.
    fn take(&mut self, layout: Layout) -> Option<Block> {
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
fn dealloc((size, align): (usize, usize), block: Block) {
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

/// The layout of a buffer of `capacity` elements, if the pool keeps buffers of that size.
fn kept_layout<T: Copy>(capacity: usize) -> Option<Layout> {
    let layout = HostVec::<T>::layout_for(capacity)?;
    (layout.size() > 0).then_some(layout)
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

/// An empty `Vec` with room for exactly `len` elements (for elements handed to the user),
/// or the error.
pub(crate) fn try_vec<T>(len: usize) -> Result<Vec<T>> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| out_of_memory(len.saturating_mul(size_of::<T>())))?;
    Ok(values)
}

/// `values` on a [`HOST_ALIGN`]-byte boundary: the buffer itself where it starts on one, else
/// a copy in a buffer of the pool (an error when the host has no room for it).
pub(crate) fn on_boundary<T: Copy>(values: Vec<T>) -> Result<HostVec<T>> {
    let values = HostVec::from(values);
    if values.is_aligned() {
        return Ok(values);
    }
    copied(&values)
}

/// A copy of `values` in a buffer of the pool (an error when the host has no room for it).
pub(crate) fn copied<T: Copy>(values: &[T]) -> Result<HostVec<T>> {
    let mut copy = with_capacity(values.len())?;
    copy.extend_from_slice(values);
    Ok(copy)
}

/// `count` elements from the bytes a device returned (or a file held), in a buffer of the
/// pool; an error naming `device` when they are not `count` elements of `T`.
pub(crate) fn from_bytes<T: Element>(
    bytes: &[u8],
    count: usize,
    device: Device,
) -> Result<HostVec<T>> {
    let mut values = for_overwrite(count)?;
    bytes_into(bytes, &mut values, device)?;
    Ok(values)
}

/// A kept block of `len` elements' room, if the pool has one (counted as a hit or a miss).
fn take_block<T: Copy>(len: usize) -> Option<Block> {
    let layout = kept_layout::<T>(len)?;
    let block = pool().take(layout);
    HOST_METER.pool_request(block.is_some());
    block
}

/// An empty buffer with room for exactly `len` elements: a kept block of that size when the
/// pool has one, else a new allocation; an error when the allocator has no room.
pub(crate) fn with_capacity<T: Copy>(len: usize) -> Result<HostVec<T>> {
    match take_block::<T>(len) {
        // SAFETY: the block was allocated by the global allocator with `kept_layout::<T>(len)`
        // (its key in the pool: equal size and alignment), the pool let go of it, and the
        // length 0 claims no initialised element.
        Some(block) => Ok(unsafe { HostVec::from_block(block.ptr, 0, len) }),
        None => HostVec::try_with_capacity(len),
    }
}

/// `len` copies of `value` (as `vec![value; len]`), in a kept buffer when the pool has one,
/// otherwise in a new allocation; an error when the allocator has no room.
pub(crate) fn filled<T: Element>(len: usize, value: T) -> Result<HostVec<T>> {
    if let Some(block) = take_block::<T>(len) {
        // SAFETY: as in `with_capacity`.
        let mut values = unsafe { HostVec::from_block(block.ptr, 0, len) };
        values.resize(len, value);
        return Ok(values);
    }
    if as_bytes(std::slice::from_ref(&value))
        .iter()
        .all(|&b| b == 0)
    {
        // SAFETY: all-zero bytes are a valid value of every element type (0, 0.0, `false`).
        return unsafe { HostVec::try_zeroed(len) };
    }
    let mut values = HostVec::try_with_capacity(len)?;
    values.resize(len, value);
    Ok(values)
}

/// `len` elements of unspecified values, for a result that writes every element: a block of
/// the pool whose bytes its last owner wrote is taken as it is (no fill), else as
/// [`filled`] with zeros. Not for `bool`, whose bytes are not all valid values: its
/// buffers are always filled.
pub(crate) fn for_overwrite<T: Element>(len: usize) -> Result<HostVec<T>> {
    if T::DTYPE == DType::Bool {
        return filled(len, T::zero());
    }
    match take_block::<T>(len) {
        Some(block) if block.initialised >= len * size_of::<T>() => {
            // SAFETY: the block was allocated for the layout of `len` elements of `T` (equal
            // size and alignment) and is owned by the pool alone; its bytes were all written
            // by its last owner (`initialised` covers them), as elements of an element type,
            // none of which has padding; every bit pattern is a valid value of `T` (it is
            // not `bool`), so the `len` elements are initialised values.
            Ok(unsafe { HostVec::from_block(block.ptr, len, len) })
        }
        Some(block) => {
            // SAFETY: as in `with_capacity`.
            let mut values = unsafe { HostVec::from_block(block.ptr, 0, len) };
            values.resize(len, T::zero());
            Ok(values)
        }
        // SAFETY: as in `filled`.
        None => unsafe { HostVec::try_zeroed(len) },
    }
}

/// Keeps a dropped buffer's memory for a later request of its size, or frees it when the pool
/// would hold more than its limit (or when it is an adopted `Vec`'s, which no request takes).
pub(super) fn give_back(block: RawBlock) {
    let key = (block.layout.size(), block.layout.align());
    let kept = Block {
        ptr: block.ptr,
        initialised: block.initialised,
    };
    if block.layout.align() != HOST_ALIGN {
        return dealloc(key, kept);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test uses a size of its own, so tests running at once do not take each other's
    /// blocks.
    #[test]
    fn a_buffer_given_back_is_taken_again_by_its_size() {
        let len = 4096 + 3;
        let first = filled(len, 1.5f32).unwrap();
        let address = first.as_ptr() as usize;
        drop(first);
        // The same bytes and alignment serve another element type of that size.
        let again: HostVec<i32> = with_capacity(len).unwrap();
        assert_eq!(again.as_ptr() as usize, address);
        assert!(again.is_empty());
        drop(again);
        let zeros = filled(len, 0i32).unwrap();
        assert_eq!(zeros.as_ptr() as usize, address);
        assert!(
            zeros.iter().all(|&z| z == 0),
            "values are written, not left over"
        );
        // A buffer whose last owner wrote it all is taken as it is for a full overwrite; one
        // it did not write is not.
        drop(zeros);
        let overwritten: HostVec<f32> = for_overwrite(len).unwrap();
        assert_eq!(overwritten.as_ptr() as usize, address);
        drop(HostVec::<f32>::try_with_capacity(len + 1).unwrap());
        let unwritten: HostVec<f32> = for_overwrite(len + 1).unwrap();
        assert!(unwritten.iter().all(|&z| z == 0.0));
        // Another size is a new allocation.
        let other: HostVec<f32> = with_capacity(len + 2).unwrap();
        assert_ne!(other.as_ptr() as usize, address);
    }

    #[test]
    fn empty_buffers_are_not_kept() {
        assert!(kept_layout::<u8>(0).is_none());
        assert!(kept_layout::<()>(10).is_none());
        assert!(kept_layout::<f64>(1).is_some());
    }
}
