//! The CPU backend's buffers: bytes in host memory on a [`HOST_ALIGN`] boundary, which its
//! ops read and write in place as elements, each op locking the buffers it touches at once.
//!
//! [`HOST_ALIGN`]: crate::storage::HOST_ALIGN

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use smallvec::SmallVec;

use crate::element::{DType, Element, Elements, ElementsMut, with_dtype};
use crate::error::{Error, Result};
use crate::protocol::DeviceMemory;
use crate::storage::{self, HostVec};

/// A buffer of the CPU backend: bytes on a [`HOST_ALIGN`](crate::storage::HOST_ALIGN)
/// boundary (from the host pool), so that an op reads and writes its elements in place;
/// behind a lock, so that a job can write a buffer its leaves hold ([`WriteTo::Over`]), as a
/// device kernel does; shared, so that a recording keeps the buffers it names.
///
/// [`WriteTo::Over`]: crate::protocol::WriteTo::Over
pub(super) type Buffer = Arc<Mutex<HostVec<u8>>>;

/// What a [`DeviceMemory`] of this backend wraps.
pub(super) struct HostBytes(pub(super) Buffer);

/// The buffer of `memory`, or an error where it is another device's.
pub(super) fn buffer_of(memory: &DeviceMemory) -> Result<&Buffer> {
    let HostBytes(buffer) = memory
        .buffer::<HostBytes>()
        .ok_or_else(|| Error::Unsupported {
            what: "a buffer of another device in a job on the CPU backend".into(),
        })?;
    Ok(buffer)
}

/// `buffer`'s bytes, locked (a lock poisoned by a panic elsewhere still gives them).
pub(super) fn lock(buffer: &Buffer) -> MutexGuard<'_, HostVec<u8>> {
    buffer.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bytes of a buffer of this backend, locked.
pub(super) fn bytes_of(memory: &DeviceMemory) -> Result<MutexGuard<'_, HostVec<u8>>> {
    Ok(lock(buffer_of(memory)?))
}

/// A new buffer for `count` elements of `dtype`, of unspecified values (an error when their
/// size overflows or the host has no room).
pub(super) fn new_buffer(dtype: DType, count: usize) -> Result<Buffer> {
    let bytes = count
        .checked_mul(dtype.size())
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{count} elements of {}", dtype.name()),
        })?;
    Ok(Arc::new(Mutex::new(storage::for_overwrite(bytes)?)))
}

/// A handle on `buffer`, of the bytes it holds now.
pub(super) fn handle(buffer: &Buffer) -> DeviceMemory {
    let bytes = lock(buffer).len();
    memory_of_buffer(Arc::clone(buffer), bytes)
}

/// A buffer of this backend holding `bytes`.
pub(super) fn memory_of_bytes(bytes: HostVec<u8>) -> DeviceMemory {
    let len = bytes.len();
    memory_of_buffer(Arc::new(Mutex::new(bytes)), len)
}

/// A handle on `buffer`, of `len` bytes.
pub(super) fn memory_of_buffer(buffer: Buffer, len: usize) -> DeviceMemory {
    DeviceMemory::new(HostBytes(buffer), len)
}

/// An error for bytes that are not whole elements of `dtype` on their alignment.
fn not_elements(bytes: usize, dtype: DType) -> Error {
    Error::Unsupported {
        what: format!(
            "a buffer of {bytes} bytes on the CPU backend read as elements of {}",
            dtype.name()
        ),
    }
}

/// `bytes` read in place as elements of `T`: an error where they are not whole elements on
/// their alignment, or hold a bool that is neither 0 nor 1.
pub(super) fn typed<T: Element>(bytes: &[u8]) -> Result<&[T]> {
    if T::DTYPE == DType::Bool && bytes.iter().any(|&b| b > 1) {
        return Err(Error::Unsupported {
            what: "a bool that is neither 0 nor 1 in a buffer of the CPU backend".into(),
        });
    }
    // SAFETY: every bit pattern of the element types other than bool is a value of them, and
    // a bool's bytes were checked above; `align_to` gives only whole elements on their
    // alignment, borrowed for as long as `bytes`.
    let (head, elements, tail) = unsafe { bytes.align_to::<T>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(not_elements(bytes.len(), T::DTYPE));
    }
    Ok(elements)
}

/// `bytes` written in place as elements of `T` (bools that are neither 0 nor 1 are set to 0
/// first): an error where they are not whole elements on their alignment.
pub(super) fn typed_mut<T: Element>(bytes: &mut [u8]) -> Result<&mut [T]> {
    if T::DTYPE == DType::Bool {
        bytes.iter_mut().filter(|b| **b > 1).for_each(|b| *b = 0);
    }
    let len = bytes.len();
    // SAFETY: as in `typed` (bools made 0 or 1 above); and every value written through the
    // elements is a value of `T`, whose bytes (no padding in any element type) are all
    // initialised `u8`s.
    let (head, elements, tail) = unsafe { bytes.align_to_mut::<T>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(not_elements(len, T::DTYPE));
    }
    Ok(elements)
}

/// `bytes` read in place as elements of `dtype` (see [`typed`]).
pub(super) fn elements(bytes: &[u8], dtype: DType) -> Result<Elements<'_>> {
    with_dtype!(dtype, T => typed::<T>(bytes).map(T::elements))
}

/// `bytes` written in place as elements of `dtype` (see [`typed_mut`]).
pub(super) fn elements_mut(bytes: &mut [u8], dtype: DType) -> Result<ElementsMut<'_>> {
    with_dtype!(dtype, T => typed_mut::<T>(bytes).map(T::elements_mut))
}

/// Each locked buffer's bytes to read, or `None` where they are written ([`Guards::split`]).
pub(super) type Reads<'a> = SmallVec<[Option<&'a [u8]>; 8]>;

/// Each locked buffer's bytes to write, or `None` where they are read ([`Guards::split`]).
pub(super) type Writes<'a> = SmallVec<[Option<&'a mut [u8]>; 8]>;

/// Buffers locked for one op, each once (a job may name a buffer many times) and in the
/// order of their addresses, so that two ops locking some of the same buffers on two threads
/// cannot each wait for the other.
pub(super) struct Guards<'b>(SmallVec<[Guard<'b>; 8]>);

/// A buffer, and its bytes locked.
type Guard<'b> = (&'b Buffer, MutexGuard<'b, HostVec<u8>>);

impl<'b> Guards<'b> {
    /// Locks `buffers`.
    pub(super) fn lock(buffers: impl IntoIterator<Item = &'b Buffer>) -> Guards<'b> {
        let mut distinct: SmallVec<[&Buffer; 8]> = buffers.into_iter().collect();
        distinct.sort_unstable_by_key(|b| Arc::as_ptr(b));
        distinct.dedup_by_key(|b| Arc::as_ptr(b));
        Guards(distinct.into_iter().map(|b| (b, lock(b))).collect())
    }

    /// The position of `buffer` among the locked ones (it must be one of them).
    pub(super) fn at(&self, buffer: &Buffer) -> usize {
        (self.0)
            .binary_search_by_key(&Arc::as_ptr(buffer), |(b, _)| Arc::as_ptr(b))
            .expect("a buffer the op locked")
    }

    /// The bytes of the buffer at `at`.
    pub(super) fn bytes(&self, at: usize) -> &[u8] {
        &self.0[at].1
    }

    /// The bytes of the buffer at `at`, to write.
    pub(super) fn bytes_mut(&mut self, at: usize) -> &mut [u8] {
        &mut self.0[at].1
    }

    /// The bytes of every buffer: to write where `written` says so, to read elsewhere.
    pub(super) fn split(&mut self, written: impl Fn(usize) -> bool) -> (Reads<'_>, Writes<'_>) {
        let (mut reads, mut writes) = (SmallVec::new(), SmallVec::new());
        for (at, (_, guard)) in self.0.iter_mut().enumerate() {
            if written(at) {
                reads.push(None);
                writes.push(Some(&mut guard[..]));
            } else {
                reads.push(Some(&guard[..]));
                writes.push(None);
            }
        }
        (reads, writes)
    }
}
