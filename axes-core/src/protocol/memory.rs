//! Device buffers, and the buffers of an expression's leaves as plain data.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::Device;
use super::meter::{Meter, Metered};
use crate::element::{DType, Element, Elements, with_dtype};
use crate::error::{Error, Result};

/// A buffer in a device's memory, owned by the backend that made it (opaque to the core).
pub struct DeviceMemory {
    buffer: Box<dyn Any + Send + Sync>,
    bytes: usize,
    /// The backend's meter, counting these bytes while the buffer lives.
    _metered: Option<Metered>,
    /// The backend's pool, which takes the buffer back when this is dropped.
    recycle: Option<Arc<dyn Recycle>>,
}

/// A backend's pool of freed buffers: takes back the buffer of each dropped
/// [`DeviceMemory`] made with [`DeviceMemory::pooled`], for its next result of that size.
pub trait Recycle: Send + Sync {
    /// Keeps `buffer` (the backend's own type, as it was wrapped) or frees it.
    fn recycle(&self, buffer: Box<dyn Any + Send + Sync>);
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        if let Some(pool) = self.recycle.take() {
            pool.recycle(std::mem::replace(&mut self.buffer, Box::new(())));
        }
    }
}

impl DeviceMemory {
    /// Wraps a backend's buffer of `bytes` bytes.
    pub fn new<B: Any + Send + Sync>(buffer: B, bytes: usize) -> DeviceMemory {
        DeviceMemory {
            buffer: Box::new(buffer),
            bytes,
            _metered: None,
            recycle: None,
        }
    }

    /// Wraps a backend's buffer of `bytes` bytes, counted by `meter` until it is dropped.
    pub fn metered<B: Any + Send + Sync>(
        buffer: B,
        bytes: usize,
        meter: &Arc<Meter>,
    ) -> DeviceMemory {
        DeviceMemory {
            buffer: Box::new(buffer),
            bytes,
            _metered: Some(Metered::new(meter, bytes)),
            recycle: None,
        }
    }

    /// Wraps a backend's buffer of `bytes` bytes, counted by `meter`, which goes to `pool`
    /// when dropped instead of being freed. The backend must hand a recycled buffer out
    /// again only where that is safe: after the work queued on the old one (an in-order
    /// queue or stream does that by itself).
    pub fn pooled<B: Any + Send + Sync>(
        buffer: B,
        bytes: usize,
        meter: &Arc<Meter>,
        pool: Arc<dyn Recycle>,
    ) -> DeviceMemory {
        let mut memory = DeviceMemory::metered(buffer, bytes, meter);
        memory.recycle = Some(pool);
        memory
    }

    /// The size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// An error unless `bytes` bytes from byte `at` on lie inside this buffer.
    pub fn check_span(&self, at: usize, bytes: usize) -> Result<()> {
        match at.checked_add(bytes) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(Error::Unsupported {
                what: format!(
                    "a copy of {bytes} bytes from byte {at} of a buffer of {} bytes",
                    self.bytes
                ),
            }),
        }
    }

    /// The backend's buffer, if it is a `B`.
    pub fn buffer<B: Any>(&self) -> Option<&B> {
        self.buffer.downcast_ref()
    }

    /// The backend's buffer for writing, if it is a `B`.
    pub fn buffer_mut<B: Any>(&mut self) -> Option<&mut B> {
        self.buffer.downcast_mut()
    }
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceMemory({} bytes)", self.bytes)
    }
}

/// A leaf's whole buffer, with its element type (for devices).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct LeafBuffer<'a> {
    /// The element type.
    pub dtype: DType,
    /// Where the elements are.
    pub data: BufferRef<'a>,
}

/// The leaves' buffers of one expression, in visiting order (inline up to four).
#[doc(hidden)]
pub type Buffers<'a> = smallvec::SmallVec<[LeafBuffer<'a>; 4]>;

/// Where a leaf's elements are: host memory (as bytes) or a device buffer.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum BufferRef<'a> {
    /// Host memory.
    Host(&'a [u8]),
    /// A buffer on the backend's device.
    Device(
        &'static dyn crate::protocol::Backend,
        &'a crate::protocol::DeviceMemory,
    ),
}

impl std::fmt::Debug for BufferRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BufferRef::Host(bytes) => write!(f, "Host({} bytes)", bytes.len()),
            BufferRef::Device(backend, memory) => write!(
                f,
                "Device({}, {memory:?})",
                crate::protocol::Device::Backend(*backend)
            ),
        }
    }
}

impl LeafBuffer<'_> {
    /// The device holding the leaf.
    pub fn device(&self) -> crate::protocol::Device {
        match self.data {
            BufferRef::Host(_) => crate::protocol::Device::Cpu,
            BufferRef::Device(backend, _) => crate::protocol::Device::Backend(backend),
        }
    }
}

/// The bytes of a slice of elements.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: element types are plain numbers (f32 f64 f16 bf16 i32 i64 u8, and bool, whose
    // byte is 0 or 1): every byte is initialised, and the byte view covers exactly the
    // slice's memory, borrowed for as long as the slice.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The elements of `dtype` whose bytes `as_bytes` gave: how run-time typed code (the CPU's
/// IR interpreter) reads a host leaf of an expression.
pub(crate) fn host_elements(dtype: DType, bytes: &[u8]) -> Elements<'_> {
    fn typed<T: Element>(bytes: &[u8]) -> &[T] {
        // SAFETY: the bytes are a host buffer's elements of `T` (`as_bytes` of its slice): as
        // many, as aligned, and each a valid `T` (a `bool` is 0 or 1). The assert below
        // checks the first two.
        let (head, elements, tail) = unsafe { bytes.align_to::<T>() };
        assert!(
            head.is_empty() && tail.is_empty(),
            "a host buffer holds whole, aligned elements"
        );
        elements
    }
    with_dtype!(dtype, T => T::elements(typed::<T>(bytes)))
}

/// Writes the bytes a device returned over `out`, element by element; an error naming the
/// device when they are not `out.len()` elements of `T` (or hold a bool that is neither 0
/// nor 1).
pub(crate) fn bytes_into<T: Element>(bytes: &[u8], out: &mut [T], device: Device) -> Result<()> {
    let count = out.len();
    if bytes.len() != std::mem::size_of_val(out) {
        return Err(Error::Unsupported {
            what: format!(
                "{device} returned {} bytes for {count} elements of {}",
                bytes.len(),
                T::DTYPE.name()
            ),
        });
    }
    if T::DTYPE == DType::Bool && bytes.iter().any(|&b| b > 1) {
        return Err(Error::Unsupported {
            what: format!("{device} returned a bool that is neither 0 nor 1"),
        });
    }
    // SAFETY: `out` holds `count` plain elements, `bytes.len()` bytes (checked above), all
    // overwritten; every byte of a bool is 0 or 1 (checked above), and every bit pattern of
    // the other element types is a value.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_bad_bools_are_errors() {
        let values = [1.5f32, -2.0, 0.25];
        let mut back = [0f32; 3];
        bytes_into(as_bytes(&values), &mut back, Device::Cpu).unwrap();
        assert_eq!(back, values);
        assert!(bytes_into(as_bytes(&values), &mut back[..2], Device::Cpu).is_err());
        let mut bools = [false; 3];
        bytes_into(&[0, 1, 1], &mut bools, Device::Cpu).unwrap();
        assert_eq!(bools, [false, true, true]);
        let err = bytes_into(&[0, 2, 1], &mut bools, Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("neither 0 nor 1"), "{err}");
    }
}
