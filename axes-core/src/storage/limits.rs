//! The pools' limits and their release, public as `axes::memory` (one path for each).

use super::pool;
use crate::protocol::Device;

pub use pool::{DEFAULT_LIMIT, limit_from_env};

/// The most bytes `device`'s pool of freed buffers holds. On CUDA the pool is the driver's
/// and this is its release threshold, which counts the memory in use too (unbounded by
/// default); 0 for a device that keeps no pool.
pub fn pool_limit(device: &Device) -> usize {
    match device {
        Device::Cpu => pool::host_limit(),
        Device::Backend(backend) => backend.pool_limit(),
    }
}

/// Sets the most bytes `device`'s pool of freed buffers holds, freeing buffers until it
/// holds no more (`0`: keep nothing). The default is [`DEFAULT_LIMIT`], or the environment
/// variable `AXES_POOL_BYTES` where set.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::{Device, memory};
/// let before = memory::pool_limit(&Device::Cpu);
/// memory::set_pool_limit(&Device::Cpu, 64 << 20);
/// assert_eq!(memory::pool_limit(&Device::Cpu), 64 << 20);
/// memory::set_pool_limit(&Device::Cpu, before);
/// ```
pub fn set_pool_limit(device: &Device, bytes: usize) {
    match device {
        Device::Cpu => pool::set_host_limit(bytes),
        Device::Backend(backend) => backend.set_pool_limit(bytes),
    }
}

/// Frees every buffer `device`'s pool holds (on the host the memory goes back to the
/// allocator, which may return it to the system); the bytes freed.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::memory;
/// #[derive(Axis)] struct Sample;
/// drop(Tensor::<f32, (Sample,)>::zeros(Sample.len(1 << 16))?);
/// assert!(memory::release_pool(&Device::Cpu) >= 4 << 16);
/// assert_eq!(Device::Cpu.counters().unwrap().pooled_bytes, 0);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn release_pool(device: &Device) -> usize {
    match device {
        Device::Cpu => pool::release_host(),
        Device::Backend(backend) => backend.release_pool(),
    }
}
