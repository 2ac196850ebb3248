//! Shared, reference-counted element buffers, in host memory or on a device. Several tensors
//! may view one buffer at different offsets and strides (the Cortex split of description
//! and data).

mod alloc;
mod host_vec;
pub(crate) mod limits;
mod pool;

pub(crate) use alloc::{
    copied, filled, for_overwrite, from_bytes, on_boundary, try_vec, with_capacity,
};
pub(crate) use host_vec::ElementBuffer;
pub use host_vec::{HOST_ALIGN, HostVec};

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::protocol::{Backend, BufferRef, Device, DeviceMemory, HOST_METER, as_bytes};

/// Set once the process makes its first buffer on a device: until then every tensor is in
/// host memory, and dispatch need not look at where an expression's leaves are. (A tensor
/// that reaches another thread carries the store with it: the hand-over orders it.)
static DEVICE_BUFFERS_MADE: AtomicBool = AtomicBool::new(false);

/// Whether any buffer was ever made on a device in this process.
#[inline]
pub(crate) fn device_buffers_made() -> bool {
    DEVICE_BUFFERS_MADE.load(Ordering::Relaxed)
}

/// A reference-counted buffer of elements, in host memory or on a device.
///
/// Cloning a `Storage` shares the buffer. Writing through [`Storage::make_mut`] copies the
/// buffer first when it is shared (copy-on-write), so a write never shows through another
/// tensor by accident.
pub struct Storage<T>(Arc<Buffer<T>>);

enum Buffer<T> {
    Host(HostVec<T>),
    Device {
        backend: &'static dyn Backend,
        memory: DeviceMemory,
        len: usize,
        /// The elements copied to the host, on the first read from the host.
        host: OnceLock<HostVec<T>>,
    },
}

impl<T> Drop for Buffer<T> {
    /// A host buffer's bytes are counted as freed (its memory goes back to the pool).
    fn drop(&mut self) {
        if let Buffer::Host(values) = self {
            let bytes = values.capacity() * std::mem::size_of::<T>();
            if bytes > 0 {
                HOST_METER.freed(bytes);
            }
        }
    }
}

impl<T> Clone for Storage<T> {
    fn clone(&self) -> Self {
        Storage(Arc::clone(&self.0))
    }
}

impl<T> fmt::Debug for Storage<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Buffer::Host(values) => write!(f, "Storage(cpu, {} elements)", values.len()),
            Buffer::Device { backend, len, .. } => {
                write!(f, "Storage({}, {len} elements)", Device::Backend(*backend))
            }
        }
    }
}

impl<T: Element> Storage<T> {
    /// A host buffer holding `data`, adopted without a copy (it keeps the allocator's
    /// alignment; the library's own buffers are on a [`HOST_ALIGN`]-byte boundary, see
    /// [`Storage::from_host_vec`]).
    ///
    /// ```
    /// use axes_core::Storage;
    /// let values = vec![1.0f32, 2.0];
    /// let address = values.as_ptr();
    /// assert_eq!(Storage::new(values).as_slice().as_ptr(), address);
    /// ```
    pub fn new(data: Vec<T>) -> Self {
        Self::from_host_vec(data.into())
    }

    /// A host buffer holding `data`.
    ///
    /// ```
    /// use axes_core::storage::{HOST_ALIGN, HostVec};
    /// use axes_core::Storage;
    /// let values: HostVec<f32> = (0..100).map(|k| k as f32).collect();
    /// let storage = Storage::from_host_vec(values);
    /// assert_eq!(storage.as_slice().as_ptr() as usize % HOST_ALIGN, 0);
    /// ```
    pub fn from_host_vec(data: HostVec<T>) -> Self {
        let bytes = data.capacity() * std::mem::size_of::<T>();
        if bytes > 0 {
            HOST_METER.allocated(bytes);
        }
        Storage(Arc::new(Buffer::Host(data)))
    }

    /// A buffer of `len` elements held in `memory`, which `device`'s backend made (for
    /// backends and collectives that fill a device buffer themselves). An error when `device`
    /// is the CPU or `memory` is not `len` elements of `T`; a buffer that another backend made
    /// is refused by the backend on first use.
    ///
    /// ```
    /// use axes_core::protocol::DeviceMemory;
    /// use axes_core::{Device, Storage};
    /// let memory = DeviceMemory::new(vec![0u8; 8], 8);
    /// assert!(Storage::<f32>::from_device_memory(Device::Cpu, memory, 2).is_err());
    /// ```
    pub fn from_device_memory(device: Device, memory: DeviceMemory, len: usize) -> Result<Self> {
        let Device::Backend(backend) = device else {
            return Err(Error::Unsupported {
                what: "device memory on the CPU: host elements go through `Storage::new`".into(),
            });
        };
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        if bytes != Some(memory.bytes()) {
            return Err(Error::Unsupported {
                what: format!(
                    "a buffer of {} bytes on {device} for {len} elements of {}",
                    memory.bytes(),
                    T::DTYPE.name()
                ),
            });
        }
        Ok(Self::on_device(backend, memory, len))
    }

    /// A buffer of `len` elements in `memory` on `backend`'s device.
    pub(crate) fn on_device(
        backend: &'static dyn Backend,
        memory: DeviceMemory,
        len: usize,
    ) -> Self {
        DEVICE_BUFFERS_MADE.store(true, Ordering::Relaxed);
        Storage(Arc::new(Buffer::Device {
            backend,
            memory,
            len,
            host: OnceLock::new(),
        }))
    }

    /// This device buffer keeping `values`, its elements, in host memory as well: reading
    /// them then waits for nothing queued on the device (the copy goes when the buffer is next
    /// written in place). A host buffer, or values of another length, are left as they are.
    pub(crate) fn with_host_copy(self, values: HostVec<T>) -> Self {
        if let Buffer::Device { host, len, .. } = &*self.0
            && *len == values.len()
        {
            let _ = host.set(values);
        }
        self
    }

    /// The elements in host memory when they are there without waiting: a host buffer, or a
    /// device buffer's host copy (see [`Storage::with_host_copy`]).
    pub(crate) fn host_now(&self) -> Option<&[T]> {
        match &*self.0 {
            Buffer::Host(data) => Some(data),
            Buffer::Device { host, .. } => host.get().map(|values| &values[..]),
        }
    }

    /// The device that holds the elements.
    pub fn device(&self) -> Device {
        match &*self.0 {
            Buffer::Host(_) => Device::Cpu,
            Buffer::Device { backend, .. } => Device::Backend(*backend),
        }
    }

    /// The elements, in host memory: a buffer on a device is copied to the host on the first
    /// call, and the copy kept until the buffer is written in place through its only handle
    /// (an optimizer's update, which drops it; a recorded step's replay writes the buffers it
    /// recorded behind their handles, so what it writes is read through the parameters, whose
    /// copy each replay drops, or an optimizer's saved state, read afresh).
    #[inline]
    pub fn host(&self) -> Result<&[T]> {
        match &*self.0 {
            Buffer::Host(values) => Ok(values),
            Buffer::Device {
                backend,
                memory,
                len,
                host,
            } => device_to_host(*backend, memory, *len, host),
        }
    }

    /// The elements as they are now, in host memory: a device buffer is read from the device
    /// again, not from the host copy [`Storage::host`] kept, which a recorded step's replay
    /// (writing the buffer behind its handles) leaves as it was.
    pub(crate) fn current_values(&self) -> Result<HostVec<T>> {
        match &*self.0 {
            Buffer::Host(values) => copied(values),
            Buffer::Device {
                backend,
                memory,
                len,
                ..
            } => from_bytes(&backend.download(memory)?, *len, Device::Backend(*backend)),
        }
    }

    /// The elements, in host memory (see [`Storage::host`]).
    ///
    /// # Panics
    /// When the buffer is on a device and copying it to the host fails (a lost device); use
    /// [`Storage::host`] to handle that.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match self.host() {
            Ok(values) => values,
            Err(e) => unreadable(self.device(), e),
        }
    }

    /// The elements for writing, in host memory: copies them first if another handle shares
    /// this buffer, and brings a device buffer to the host (public operations that write
    /// elements run on the tensor's own device instead, or refuse).
    ///
    /// # Panics
    /// When that copy is needed and fails (the host has no room, or the device failed);
    /// [`Storage::try_make_mut`] returns the error instead.
    pub fn make_mut(&mut self) -> &mut [T] {
        let device = self.device();
        match self.try_make_mut() {
            Ok(values) => values,
            Err(e) => panic!("copying a buffer on {device} for writing: {e}"),
        }
    }

    /// [`Storage::make_mut`], with a failed copy as an error
    /// ([`Error::OutOfMemory`] when the host has no room for it).
    pub fn try_make_mut(&mut self) -> Result<&mut [T]> {
        let unique_host = matches!(*self.0, Buffer::Host(_)) && Arc::get_mut(&mut self.0).is_some();
        if !unique_host {
            *self = Storage::from_host_vec(copied(self.host()?)?);
        }
        match Arc::get_mut(&mut self.0) {
            Some(Buffer::Host(values)) => Ok(values),
            _ => unreachable!("a fresh host buffer has one handle"),
        }
    }

    /// The device buffer, for writing in place, when this handle is its only one (a host
    /// copy read earlier is dropped: the buffer is about to change); `None` in host memory
    /// or when the buffer is shared.
    pub(crate) fn unique_memory(&mut self) -> Option<&mut DeviceMemory> {
        match Arc::get_mut(&mut self.0)? {
            Buffer::Device { memory, host, .. } => {
                host.take();
                Some(memory)
            }
            Buffer::Host(_) => None,
        }
    }

    /// Number of elements in the buffer.
    pub fn len(&self) -> usize {
        match &*self.0 {
            Buffer::Host(values) => values.len(),
            Buffer::Device { len, .. } => *len,
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is the buffer's only handle (nothing else views it).
    pub(crate) fn is_unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && Arc::weak_count(&self.0) == 0
    }

    /// `Ok` when `other` can take this buffer's place: as many elements (of `what`, for the
    /// message) on the same device.
    pub(crate) fn check_replacement(&self, other: &Storage<T>, what: &str) -> Result<()> {
        if other.len() != self.len() {
            return Err(Error::ElementCount {
                lengths: what.into(),
                expected: self.len(),
                got: other.len(),
            });
        }
        if other.device() != self.device() {
            return Err(Error::DeviceMismatch {
                left: self.device().to_string(),
                right: other.device().to_string(),
            });
        }
        Ok(())
    }

    /// The buffer's identity while any handle holds it (its address).
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const () as usize
    }

    /// Whether two handles share one buffer.
    pub fn same_buffer(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Where the elements are, for a device job: host bytes, or the device buffer.
    pub(crate) fn leaf_data(&self) -> BufferRef<'_> {
        match &*self.0 {
            Buffer::Host(values) => BufferRef::Host(as_bytes(values)),
            Buffer::Device {
                backend, memory, ..
            } => BufferRef::Device(*backend, memory),
        }
    }

    /// The device buffer, when the elements are on a device (for backends and collectives
    /// that hand it to a device library; `None` in host memory).
    ///
    /// ```
    /// use axes_core::Storage;
    /// assert!(Storage::new(vec![1.0f32, 2.0]).device_memory().is_none());
    /// ```
    pub fn device_memory(&self) -> Option<&DeviceMemory> {
        match &*self.0 {
            Buffer::Host(_) => None,
            Buffer::Device { memory, .. } => Some(memory),
        }
    }
}

/// The elements of a device buffer in host memory: `host`, filled from `memory` on the first
/// call (kept out of line of [`Storage::host`], which every small evaluation calls for its
/// host leaves).
#[inline(never)]
fn device_to_host<'a, T: Element>(
    backend: &'static dyn Backend,
    memory: &DeviceMemory,
    len: usize,
    host: &'a OnceLock<HostVec<T>>,
) -> Result<&'a [T]> {
    if let Some(values) = host.get() {
        return Ok(values);
    }
    let bytes = backend.download(memory)?;
    let values = from_bytes(&bytes, len, Device::Backend(backend))?;
    Ok(host.get_or_init(|| values))
}

/// The panic of [`Storage::as_slice`] (out of line: the call is on every small evaluation's
/// path).
#[cold]
#[inline(never)]
fn unreadable(device: Device, error: Error) -> ! {
    panic!("reading a buffer on {device}: {error}")
}
