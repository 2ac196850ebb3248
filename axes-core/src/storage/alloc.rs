//! Making host buffers: a block of the pool ([`super::pool`]) where it holds one of the size
//! and alignment, else the allocator; an error, never an abort, when neither has room.

use std::alloc::Layout;
use std::mem::size_of;

use super::host_vec::HostVec;
use super::pool::{self, FreeBlock, out_of_memory};
use crate::element::{DType, Element};
use crate::error::Result;
use crate::protocol::{Device, as_bytes, bytes_into};

/// The layout of a buffer of `capacity` elements, if the pool keeps buffers of that size.
fn kept_layout<T: Copy>(capacity: usize) -> Option<Layout> {
    let layout = HostVec::<T>::layout_for(capacity)?;
    (layout.size() > 0).then_some(layout)
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

/// `values` on a [`HOST_ALIGN`](super::HOST_ALIGN)-byte boundary: the buffer itself where it starts on one, else
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
fn take_block<T: Copy>(len: usize) -> Option<FreeBlock> {
    pool::take(kept_layout::<T>(len)?)
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
