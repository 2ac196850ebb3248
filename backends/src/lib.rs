//! Execution backends of `axes` for generated kernels ([`axes_kernels`]).
//!
//! - `opencl` (cargo feature `opencl`): runs the OpenCL C dialect on any OpenCL runtime
//!   (PoCL on the CPU in CI; AMD and Intel GPUs). libOpenCL is loaded at run time, so this
//!   builds without it; no runtime is an error, never a panic.
//! - `cuda` (cargo feature `cuda`): cudarc with dynamic loading: NVRTC compiles the CUDA C
//!   dialect; the driver, NVRTC and cuBLAS are probed before any call, so a machine without
//!   CUDA gets an error naming what is missing.
//!
//! The CPU backend is `axes-core` itself (the monomorphised loop engine, the gemm crate and
//! the run-time IR interpreter). Tensors do not yet carry a device: these backends run
//! kernels on buffers, which is what the device-dispatch layer will call.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "opencl")]
pub mod opencl;

/// One kernel argument besides the buffers: an index, length, offset or stride, passed as
/// the kernel's index type (32 or 64 bits, [`axes_kernels::Spec::wide`]).
pub type Index = i64;

/// The global size of a launch: `items` work items rounded up to a multiple of `local`,
/// capped at `cap` groups (kernels stride over the rest).
pub fn global_size(items: usize, local: usize, cap_groups: usize) -> usize {
    items.div_ceil(local).clamp(1, cap_groups) * local
}
