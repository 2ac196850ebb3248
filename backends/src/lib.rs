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

/// Element types device buffers hold: plain numbers, for which every bit pattern a kernel may
/// write is a valid value (so no `bool`: kernels write booleans as `u8`).
pub trait Plain: Copy + Default + Send + Sync + 'static + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Plain for $t {}
    )*};
}

plain!(f32, f64, i32, i64, u8);

/// An index argument as a kernel with 32-bit indices takes it, or an error naming it.
pub fn narrow_index(kernel: &str, position: usize, value: Index) -> axes_core::Result<i32> {
    i32::try_from(value).map_err(|_| axes_core::Error::Unsupported {
        what: format!(
            "argument {position} of `{kernel}` is {value}, beyond 32-bit indices: generate the \
             kernel with `Spec::wide`"
        ),
    })
}

/// One kernel argument besides the buffers: an index, length, offset or stride, passed as
/// the kernel's index type (32 or 64 bits, [`axes_kernels::Spec::wide`]).
pub type Index = i64;

/// The global size of a launch: `items` work items rounded up to a multiple of `local`,
/// capped at `cap` groups (kernels stride over the rest).
pub fn global_size(items: usize, local: usize, cap_groups: usize) -> usize {
    let local = local.max(1);
    items.div_ceil(local).clamp(1, cap_groups.max(1)) * local
}
