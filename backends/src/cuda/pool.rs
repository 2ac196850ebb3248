//! The device's stream-ordered memory pool, set to keep freed memory for the next allocation.

use axes_core::error::{Error, Result};
use cudarc::driver::CudaContext;

use super::cuda_error;

/// Keeps memory freed to the device's default pool (which stream-ordered allocations draw
/// from) for the next allocation, instead of handing it back to the driver at every
/// synchronisation (the pool's default): each step of a loop allocates the same result
/// buffers again, and mapping fresh memory for a large one costs as much as the kernel that
/// fills it.
pub(super) fn keep_freed_memory(context: &CudaContext) -> Result<()> {
    let pool = default_pool(context).ok_or_else(|| Error::Unsupported {
        what: "finding the CUDA device's memory pool".into(),
    })?;
    set_release_threshold(pool, u64::MAX)
        .map_err(|e| cuda_error("setting the memory pool's release threshold", e))
}

/// Sets the bytes `pool` keeps reserved (in use or freed) at a synchronisation before it
/// hands memory back to the driver.
pub(super) fn set_release_threshold(
    pool: cudarc::driver::sys::CUmemoryPool,
    bytes: u64,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let mut threshold = bytes;
    // SAFETY: the release threshold attribute takes a pointer to a u64, which `threshold`
    // is; the pool handle came from the driver for a live context.
    unsafe {
        cudarc::driver::sys::cuMemPoolSetAttribute(
            pool,
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    }
    .result()
}

/// The device's default memory pool, which stream-ordered allocations draw from (`None`
/// where the driver has none).
pub(super) fn default_pool(context: &CudaContext) -> Option<cudarc::driver::sys::CUmemoryPool> {
    if !context.has_async_alloc() {
        return None;
    }
    let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid place for the handle, and the device handle comes from a
    // live context.
    unsafe { cudarc::driver::sys::cuDeviceGetDefaultMemPool(&mut pool, context.cu_device()) }
        .result()
        .ok()
        .map(|()| pool)
}

/// A 64-bit attribute of `pool` (the thresholds and byte counts are all `u64`).
pub(super) fn pool_attribute(
    pool: cudarc::driver::sys::CUmemoryPool,
    attribute: cudarc::driver::sys::CUmemPool_attribute,
) -> Option<u64> {
    let mut value = 0u64;
    // SAFETY: the attributes asked for here take a pointer to a u64, which `value` is; the
    // pool handle came from the driver for a live context.
    unsafe {
        cudarc::driver::sys::cuMemPoolGetAttribute(pool, attribute, (&mut value as *mut u64).cast())
    }
    .result()
    .ok()
    .map(|()| value)
}
