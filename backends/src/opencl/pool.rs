//! The device's pool of freed result buffers, by size class, and the buffers a recording
//! keeps apart from it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axes_core::error::Result;
use axes_core::protocol::{DeviceMemory, FreeBuffers, Meter, Recycle};
use opencl3::memory::{Buffer, ClMem};

use super::{DeviceBuffer, OpenCl};

/// The device's freed result buffers by size in bytes, their total, and the most it keeps.
pub(super) struct Pool {
    pub(super) held: Mutex<Held>,
    pub(super) meter: Arc<Meter>,
    /// The buffers recordings name (by handle), with how many times: never taken back.
    pub(super) named: Mutex<HashMap<usize, usize>>,
    /// Each recording's own buffers, by the thread that records it.
    pub(super) private: Mutex<HashMap<std::thread::ThreadId, Private>>,
}

/// The buffers a recording made, and those of them freed since: a buffer made and freed
/// during a recording is given again to a later result of the same recording (a replay
/// reuses it in the same order), as the plain step reuses the pool's — so a replay's working
/// set is the plain step's, not every intermediate at once.
#[derive(Default)]
pub(super) struct Private {
    pub(super) made: std::collections::HashSet<usize>,
    /// Freed buffers, with their size class.
    pub(super) free: Vec<(usize, Buffer<u8>)>,
}

pub(super) struct Held {
    /// Keyed by size in bytes.
    pub(super) buffers: FreeBuffers<usize, Buffer<u8>>,
    /// The host copies of uploads still being written (each freed once its write is done).
    pub(super) staged: Vec<(opencl3::event::Event, Vec<u8>)>,
}

impl Pool {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of exactly `bytes` bytes, if the pool holds one.
    pub(super) fn take(&self, bytes: usize) -> Option<Buffer<u8>> {
        let mut held = self.lock();
        // Frees the host copies of the uploads whose writes are done (or failed); one whose
        // state cannot be read is kept.
        held.staged.retain(|(event, _)| {
            event
                .command_execution_status()
                .map_or(true, |status| status.0 > cl3::event::CL_COMPLETE)
        });
        let buffer = held.buffers.take(bytes, |_| true);
        self.meter.set_pooled_bytes(held.buffers.bytes() as u64);
        buffer
    }

    /// A buffer of size class `class` this thread's recording made and freed, if it records
    /// and has one.
    pub(super) fn take_private(&self, class: usize) -> Option<Buffer<u8>> {
        let mut private = self.private.lock().expect("never poisoned");
        let own = private.get_mut(&std::thread::current().id())?;
        let at = own.free.iter().position(|(c, _)| *c == class)?;
        Some(own.free.swap_remove(at).1)
    }

    /// Notes `mem` as made by this thread's recording, if it records.
    pub(super) fn made_privately(&self, mem: usize) {
        let mut private = self.private.lock().expect("never poisoned");
        if let Some(own) = private.get_mut(&std::thread::current().id()) {
            own.made.insert(mem);
        }
    }

    /// Counts one more recording's reference to the buffer `mem`.
    pub(super) fn name(&self, mem: usize) {
        *self
            .named
            .lock()
            .expect("never poisoned")
            .entry(mem)
            .or_default() += 1;
    }

    /// Counts one recording's reference to `mem` less.
    pub(super) fn unname(&self, mem: usize) {
        let mut named = self.named.lock().expect("never poisoned");
        if let Some(count) = named.get_mut(&mem) {
            *count -= 1;
            if *count == 0 {
                named.remove(&mem);
            }
        }
    }

    /// Sets the most bytes the pool holds, releasing buffers until it holds no more.
    pub(super) fn set_limit(&self, limit: usize) {
        let mut held = self.lock();
        held.buffers.set_limit(limit, |_, _| {});
        self.meter.set_pooled_bytes(held.buffers.bytes() as u64);
    }

    /// Releases every buffer the pool holds; the bytes released.
    pub(super) fn release(&self) -> usize {
        let mut held = self.lock();
        let released = held.buffers.shrink_to(0, |_, _| {});
        self.meter.set_pooled_bytes(held.buffers.bytes() as u64);
        released
    }
}

impl Recycle for Pool {
    fn recycle(&self, buffer: Box<dyn std::any::Any + Send + Sync>) {
        let Ok(buffer) = buffer.downcast::<DeviceBuffer<u8>>() else {
            return;
        };
        let DeviceBuffer {
            buffer, capacity, ..
        } = *buffer;
        let mem = buffer.get() as usize;
        // A buffer this thread's recording made goes back to that recording alone.
        let mut private = self.private.lock().expect("never poisoned");
        if let Some(own) = private.get_mut(&std::thread::current().id())
            && own.made.contains(&mem)
        {
            own.free.push((capacity, buffer));
            return;
        }
        drop(private);
        // A buffer a recording names stays the recording's: released here (the recording
        // keeps a reference), never given to another result.
        if (self.named.lock().expect("never poisoned")).contains_key(&mem) {
            return;
        }
        let mut held = self.lock();
        // A buffer the pool has no room for is released (dropped) here.
        drop(held.buffers.keep(capacity, buffer));
        self.meter.set_pooled_bytes(held.buffers.bytes() as u64);
    }
}

/// The largest upload written from a pooled buffer and a host copy; larger ones get a buffer
/// of their own, filled when it is made (no second host copy of a large tensor).
pub(super) const STAGED_UPLOAD_MAX: usize = 1 << 20;

/// The size class of a buffer of `bytes`: at least 256 bytes, else `bytes` rounded up to a
/// quarter of the power of two below it (at most 25% more).
pub(super) fn size_class(bytes: usize) -> usize {
    if bytes <= 256 {
        return 256;
    }
    let quarter = 1usize << (usize::BITS - 1 - bytes.leading_zeros() - 2);
    bytes.div_ceil(quarter) * quarter
}

impl OpenCl {
    /// `buffer` (of `bytes` bytes) as device memory, counted by this device's meter.
    pub(super) fn memory<B: std::any::Any + Send + Sync>(
        &self,
        buffer: B,
        bytes: usize,
    ) -> DeviceMemory {
        DeviceMemory::metered(buffer, bytes, &self.meter)
    }

    /// A result buffer of `bytes` bytes, not initialised (every launch that gets one writes
    /// all of it before anything reads it): a pooled buffer of its size class where there
    /// is one, else a new one of that class; it goes back to the pool when dropped.
    pub(super) fn result_buffer(&self, bytes: usize) -> Result<DeviceMemory> {
        let class = size_class(bytes);
        if let Some(buffer) = self.pool.take_private(class) {
            let buffer = DeviceBuffer {
                buffer,
                len: bytes,
                capacity: class,
            };
            let pool: Arc<dyn Recycle> = self.pool.clone();
            return Ok(DeviceMemory::pooled(buffer, bytes, &self.meter, pool));
        }
        let pooled = self.pool.take(class);
        self.meter.pool_request(pooled.is_some());
        let buffer = match pooled {
            Some(buffer) => DeviceBuffer {
                buffer,
                len: bytes,
                capacity: class,
            },
            None => {
                // A class past the device's largest buffer: the exact size may still fit.
                let size = if self.check_room::<u8>(class).is_ok() {
                    class
                } else {
                    bytes
                };
                DeviceBuffer {
                    len: bytes,
                    ..self.alloc::<u8>(size)?
                }
            }
        };
        self.pool.made_privately(buffer.buffer.get() as usize);
        let pool: Arc<dyn Recycle> = self.pool.clone();
        Ok(DeviceMemory::pooled(buffer, bytes, &self.meter, pool))
    }
}
