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
use std::mem::{ManuallyDrop, size_of};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::protocol::{FreeBuffers, HOST_METER, as_bytes};

/// The bytes a device's pool of freed buffers holds at most (the host's, and OpenCL's),
/// unless the environment variable `AXES_POOL_BYTES` or [`crate::memory::set_pool_limit`]
/// says otherwise.
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// An allocation of the global allocator that no `Vec` owns now.
struct Block {
    ptr: NonNull<u8>,
    /// How many bytes from the start the buffer's last owner had written.
    initialised: usize,
}

// SAFETY: a block is memory nobody else points to (its `Vec` was forgotten when it came
// here), so moving it between threads moves nothing shared.
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

/// The layout of a `Vec<T>` of capacity `capacity`, if the pool keeps buffers of that size.
fn kept_layout<T>(capacity: usize) -> Option<Layout> {
    let layout = Layout::array::<T>(capacity).ok()?;
    (layout.size() > 0).then_some(layout)
}

/// A kept buffer with room for exactly `len` elements, empty, if the pool has one; counted
/// as a hit or a miss.
fn take<T>(len: usize) -> Option<Vec<T>> {
    let layout = kept_layout::<T>(len)?;
    let block = pool().take(layout);
    HOST_METER.pool_request(block.is_some());
    // SAFETY: the block was allocated by the global allocator with `layout`, which is
    // `Layout::array::<T>(len)`: the alignment of `T` and `len` elements' size, as
    // `Vec::from_raw_parts` requires; the length 0 claims no initialised element.
    Some(unsafe { Vec::from_raw_parts(block?.ptr.as_ptr().cast::<T>(), 0, len) })
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

/// An empty `Vec` with room for exactly `len` elements from the allocator, or the error.
pub(crate) fn try_vec<T>(len: usize) -> Result<Vec<T>> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| out_of_memory(len.saturating_mul(size_of::<T>())))?;
    Ok(values)
}

/// `len` zeros from the allocator's zeroed memory (fresh pages are not written), or the error.
fn zeroed<T: Element>(len: usize) -> Result<Vec<T>> {
    let layout = Layout::array::<T>(len).map_err(|_| out_of_memory(usize::MAX))?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout's size is not zero (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    let ptr = NonNull::new(ptr).ok_or_else(|| out_of_memory(layout.size()))?;
    // SAFETY: the global allocator gave `ptr` for `Layout::array::<T>(len)`: `T`'s alignment
    // and the size of `len` elements, as `Vec::from_raw_parts` requires of a capacity `len`;
    // every byte is zero, which is a valid value of every element type (0, 0.0, `false`), so
    // the `len` elements are initialised.
    Ok(unsafe { Vec::from_raw_parts(ptr.as_ptr().cast::<T>(), len, len) })
}

/// An empty `Vec` with room for exactly `len` elements: a kept buffer of that size when the
/// pool has one, else a new allocation; an error when the allocator has no room.
pub(crate) fn with_capacity<T>(len: usize) -> Result<Vec<T>> {
    match take(len) {
        Some(values) => Ok(values),
        None => try_vec(len),
    }
}

/// `len` copies of `value` (as `vec![value; len]`), in a kept buffer when the pool has one;
/// otherwise from the allocator, zeros without writing them; an error when the allocator has
/// no room.
pub(crate) fn filled<T: Element>(len: usize, value: T) -> Result<Vec<T>> {
    if let Some(mut values) = take(len) {
        values.resize(len, value);
        return Ok(values);
    }
    if as_bytes(std::slice::from_ref(&value))
        .iter()
        .all(|&b| b == 0)
    {
        return zeroed(len);
    }
    let mut values = try_vec(len)?;
    values.resize(len, value);
    Ok(values)
}

/// `len` elements of unspecified values, for a result that writes every element: a block of
/// the pool whose bytes its last owner wrote is taken as it is (no fill), else as
/// [`filled`] with zeros. Not for `bool`, whose bytes are not all valid values: its
/// buffers are always filled.
pub(crate) fn for_overwrite<T: Element>(len: usize) -> Result<Vec<T>> {
    if T::DTYPE != DType::Bool
        && let Some(layout) = kept_layout::<T>(len)
    {
        let block = pool().take(layout);
        HOST_METER.pool_request(block.is_some());
        return match block {
            Some(block) if block.initialised >= layout.size() => {
                // SAFETY: the block was allocated for `layout`, the layout of `len` elements
                // of `T` (equal size and alignment), and is owned by the pool alone; its bytes
                // were all written by its last owner (`initialised` covers the layout), as
                // elements of an element type, none of which has padding; every bit pattern
                // is a valid value of `T` (it is not `bool`), so the `len` elements are
                // initialised values.
                Ok(unsafe { Vec::from_raw_parts(block.ptr.as_ptr().cast::<T>(), len, len) })
            }
            Some(block) => {
                // SAFETY: as in `take`: allocated for `layout`, capacity `len`, and the
                // length 0 claims no initialised element.
                let mut values =
                    unsafe { Vec::from_raw_parts(block.ptr.as_ptr().cast::<T>(), 0, len) };
                values.resize(len, T::zero());
                Ok(values)
            }
            None => zeroed(len),
        };
    }
    filled(len, T::zero())
}

/// Keeps `values`' buffer for a later request of its size (its elements are dropped), or
/// frees it when the pool would hold more than its limit.
pub(crate) fn give_back<T>(mut values: Vec<T>) {
    let Some(layout) = kept_layout::<T>(values.capacity()) else {
        return;
    };
    let mut held = pool();
    let free = held.free();
    if free.bytes() + layout.size() > free.limit() {
        return;
    }
    let initialised = values.len() * size_of::<T>();
    values.clear();
    let mut values = ManuallyDrop::new(values);
    let ptr = NonNull::new(values.as_mut_ptr().cast::<u8>()).expect("a Vec's pointer is not null");
    let refused = free.keep((layout.size(), layout.align()), Block { ptr, initialised });
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
        give_back(first);
        // The same bytes and alignment serve another element type of that size.
        let again: Vec<i32> = with_capacity(len).unwrap();
        assert_eq!(again.as_ptr() as usize, address);
        assert!(again.is_empty());
        give_back(again);
        let zeros = filled(len, 0i32).unwrap();
        assert_eq!(zeros.as_ptr() as usize, address);
        assert!(
            zeros.iter().all(|&z| z == 0),
            "values are written, not left over"
        );
        // A buffer whose last owner wrote it all is taken as it is for a full overwrite; one
        // it did not write is not.
        give_back(zeros);
        let overwritten: Vec<f32> = for_overwrite(len).unwrap();
        assert_eq!(overwritten.as_ptr() as usize, address);
        give_back(Vec::<f32>::with_capacity(len + 1));
        let unwritten: Vec<f32> = for_overwrite(len + 1).unwrap();
        assert!(unwritten.iter().all(|&z| z == 0.0));
        // Another size is a new allocation.
        let other: Vec<f32> = with_capacity(len + 2).unwrap();
        assert_ne!(other.as_ptr() as usize, address);
    }

    #[test]
    fn empty_buffers_are_not_kept() {
        assert!(kept_layout::<u8>(0).is_none());
        assert!(kept_layout::<()>(10).is_none());
        assert!(kept_layout::<f64>(1).is_some());
    }
}
