//! Reuse of large host buffers. A training step frees and allocates the same large buffers
//! (activations, gradients, the arena-shaped gradient) every step; when glibc's allocator
//! hands such a buffer's pages back to the system in between (trimming the heap's top), each
//! step pays for fresh pages (one fault and a zeroing per 4 KiB). Buffers of a size worth
//! keeping go back here when their last [`Storage`](super::Storage) handle drops, and
//! [`filled`] and [`with_capacity`] take one of the same size before asking the allocator.
//!
//! The pool holds at most [`HELD_BYTES`] bytes, in blocks of [`MIN_BYTES`] to [`MAX_BYTES`];
//! a block is reused only for exactly its size and alignment.

use std::alloc::Layout;
use std::mem::{ManuallyDrop, align_of, size_of};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::protocol::as_bytes;

/// The smallest buffer kept: below it the allocator's own bins serve well.
pub(crate) const MIN_BYTES: usize = 64 << 10;
/// The largest buffer kept.
pub(crate) const MAX_BYTES: usize = 16 << 20;
/// The most bytes the pool holds at once.
pub(crate) const HELD_BYTES: usize = 64 << 20;

/// An allocation of the global allocator that no `Vec` owns now.
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
    /// How many bytes from the start the buffer's last owner had written.
    initialised: usize,
}

// SAFETY: a block is memory nobody else points to (its `Vec` was forgotten when it came
// here), so moving it between threads moves nothing shared.
unsafe impl Send for Block {}

/// The blocks held, and their total size.
struct Held {
    blocks: Vec<Block>,
    bytes: usize,
}

static POOL: Mutex<Held> = Mutex::new(Held {
    blocks: Vec::new(),
    bytes: 0,
});

/// The layout of a `Vec<T>` of capacity `capacity`, if the pool keeps buffers of that size.
fn kept_layout<T>(capacity: usize) -> Option<Layout> {
    let layout = Layout::array::<T>(capacity).ok()?;
    (size_of::<T>() > 0 && (MIN_BYTES..=MAX_BYTES).contains(&layout.size())).then_some(layout)
}

/// A kept buffer with room for exactly `len` elements, empty, if the pool has one.
fn take<T>(len: usize) -> Option<Vec<T>> {
    let layout = kept_layout::<T>(len)?;
    let mut held = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let k = held.blocks.iter().position(|b| b.layout == layout)?;
    let block = held.blocks.swap_remove(k);
    held.bytes -= layout.size();
    // SAFETY: the block was allocated by the global allocator with `layout`, which is
    // `Layout::array::<T>(len)`: the alignment of `T` and `len` elements' size, as
    // `Vec::from_raw_parts` requires; the length 0 claims no initialised element.
    Some(unsafe { Vec::from_raw_parts(block.ptr.as_ptr().cast::<T>(), 0, len) })
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
        let mut held = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let found =
            (held.blocks.iter()).position(|b| b.layout == layout && b.initialised >= layout.size());
        if let Some(k) = found {
            let block = held.blocks.swap_remove(k);
            held.bytes -= layout.size();
            // SAFETY: the block was allocated for `layout`, the layout of `len` elements of
            // `T` (equal size and alignment), and is owned by the pool alone; its bytes were
            // all written by its last owner (`initialised` covers the layout), as elements of
            // an element type, none of which has padding; every bit pattern is a valid value
            // of `T` (it is not `bool`), so the `len` elements are initialised values.
            return Ok(unsafe { Vec::from_raw_parts(block.ptr.as_ptr().cast::<T>(), len, len) });
        }
    }
    filled(len, T::zero())
}

/// Keeps `values`' buffer for a later [`with_capacity`] of its size (its elements are
/// dropped), or frees it when the pool does not keep that size or is full.
pub(crate) fn give_back<T>(mut values: Vec<T>) {
    let Some(layout) = kept_layout::<T>(values.capacity()) else {
        return;
    };
    debug_assert_eq!(layout.align(), align_of::<T>());
    let mut held = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if held.bytes + layout.size() > HELD_BYTES {
        return;
    }
    let initialised = values.len() * size_of::<T>();
    values.clear();
    let mut values = ManuallyDrop::new(values);
    let ptr = NonNull::new(values.as_mut_ptr().cast::<u8>()).expect("a Vec's pointer is not null");
    held.blocks.push(Block {
        ptr,
        layout,
        initialised,
    });
    held.bytes += layout.size();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test uses a size of its own, so tests running at once do not take each other's
    /// blocks.
    #[test]
    fn a_buffer_given_back_is_taken_again_by_its_size() {
        let len = (MIN_BYTES + 4096) / 4;
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
        // Another size is a new allocation.
        let other: Vec<f32> = with_capacity(len + 1).unwrap();
        assert_ne!(other.as_ptr() as usize, address);
    }

    #[test]
    fn small_and_huge_buffers_are_not_kept() {
        assert!(kept_layout::<u8>(MIN_BYTES - 1).is_none());
        assert!(kept_layout::<u8>(MAX_BYTES + 1).is_none());
        assert!(kept_layout::<()>(MIN_BYTES).is_none());
        assert!(kept_layout::<f64>(MIN_BYTES / 8).is_some());
    }
}
