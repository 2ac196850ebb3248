//! What a device's work costs, counted by its backend: launches, reads back to the host,
//! and the bytes its buffers hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A device's counters at one moment ([`Device::counters`](super::Device::counters)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Kernels and library calls (such as a cuBLAS product) launched so far.
    pub launches: u64,
    /// Kernels looked up (or built) for a launch so far, where the backend keeps compiled
    /// kernels (the CPU backend compiles an interpreter program per job and counts none): a
    /// replayed launch looks up none.
    pub kernel_lookups: u64,
    /// Copies of a buffer to the host so far: each waits for the work queued before it.
    pub reads: u64,
    /// Buffers made so far (on the CPU: every host buffer a tensor took, from the pool or
    /// from the system).
    pub buffers: u64,
    /// Bytes held now by the device buffers the backend made.
    pub bytes: u64,
    /// The most bytes held at once since the backend was made or [`Meter::reset_peak`].
    pub peak_bytes: u64,
    /// Buffers taken from the device's pool of freed buffers (on the CPU: the host pool of
    /// [`crate::memory::set_pool_limit`]).
    pub pool_hits: u64,
    /// Buffers that the pool could not serve, allocated by the system (or the driver) instead.
    pub pool_misses: u64,
    /// Bytes of freed buffers the pool holds now, for reuse.
    pub pooled_bytes: u64,
}

/// The counters a backend keeps (shared with the buffers it makes, which give their bytes
/// back when dropped).
///
/// ```
/// # extern crate axes_core as axes;
/// use std::sync::Arc;
/// use axes::protocol::{DeviceMemory, Meter};
/// let meter = Arc::new(Meter::default());
/// let a = DeviceMemory::metered((), 100, &meter);
/// let b = DeviceMemory::metered((), 50, &meter);
/// meter.launched();
/// meter.read();
/// drop(a);
/// let now = meter.counters();
/// assert_eq!((now.launches, now.reads, now.bytes, now.peak_bytes), (1, 1, 50, 150));
/// meter.reset_peak();
/// assert_eq!(meter.counters().peak_bytes, 50);
/// # drop(b);
/// ```
#[derive(Debug, Default)]
pub struct Meter {
    launches: AtomicU64,
    kernel_lookups: AtomicU64,
    reads: AtomicU64,
    buffers: AtomicU64,
    bytes: AtomicU64,
    peak_bytes: AtomicU64,
    pool_hits: AtomicU64,
    pool_misses: AtomicU64,
    pooled_bytes: AtomicU64,
}

/// The host's meter: the bytes of the tensors in host memory, and the host pool's figures
/// ([`crate::Device::counters`] of [`crate::Device::Cpu`]).
pub(crate) static HOST_METER: Meter = Meter::new();

impl Meter {
    /// All counters at zero.
    pub const fn new() -> Meter {
        Meter {
            launches: AtomicU64::new(0),
            kernel_lookups: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            buffers: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            peak_bytes: AtomicU64::new(0),
            pool_hits: AtomicU64::new(0),
            pool_misses: AtomicU64::new(0),
            pooled_bytes: AtomicU64::new(0),
        }
    }

    /// Counts a buffer taken from the pool (`hit`) or allocated because the pool had none.
    pub fn pool_request(&self, hit: bool) {
        let counter = if hit {
            &self.pool_hits
        } else {
            &self.pool_misses
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Sets the bytes the pool holds now.
    pub fn set_pooled_bytes(&self, bytes: u64) {
        self.pooled_bytes.store(bytes, Relaxed);
    }

    /// Counts one launch.
    pub fn launched(&self) {
        self.launches.fetch_add(1, Relaxed);
    }

    /// Counts one kernel looked up for a launch.
    pub fn looked_up(&self) {
        self.kernel_lookups.fetch_add(1, Relaxed);
    }

    /// Counts one read of a buffer back to the host.
    pub fn read(&self) {
        self.reads.fetch_add(1, Relaxed);
    }

    /// The counters now.
    pub fn counters(&self) -> DeviceCounters {
        DeviceCounters {
            launches: self.launches.load(Relaxed),
            kernel_lookups: self.kernel_lookups.load(Relaxed),
            reads: self.reads.load(Relaxed),
            buffers: self.buffers.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            peak_bytes: self.peak_bytes.load(Relaxed),
            pool_hits: self.pool_hits.load(Relaxed),
            pool_misses: self.pool_misses.load(Relaxed),
            pooled_bytes: self.pooled_bytes.load(Relaxed),
        }
    }

    /// Starts a new peak from the bytes held now.
    pub fn reset_peak(&self) {
        self.peak_bytes.store(self.bytes.load(Relaxed), Relaxed);
    }

    pub(crate) fn allocated(&self, bytes: usize) {
        self.buffers.fetch_add(1, Relaxed);
        let now = self.bytes.fetch_add(bytes as u64, Relaxed) + bytes as u64;
        self.peak_bytes.fetch_max(now, Relaxed);
    }

    pub(crate) fn freed(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes as u64, Relaxed);
    }
}

/// A buffer's share of its backend's meter: gives its bytes back when dropped.
pub(super) struct Metered {
    pub(super) meter: Arc<Meter>,
    pub(super) bytes: usize,
}

impl Metered {
    pub(super) fn new(meter: &Arc<Meter>, bytes: usize) -> Metered {
        meter.allocated(bytes);
        Metered {
            meter: Arc::clone(meter),
            bytes,
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.meter.freed(self.bytes);
    }
}
