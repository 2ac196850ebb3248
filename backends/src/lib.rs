//! Execution backends of `axes` for generated kernels ([`axes_kernels`]).
//!
//! - `opencl` (cargo feature `opencl`): runs the OpenCL C dialect on any OpenCL runtime
//!   (PoCL on the CPU in CI; AMD and Intel GPUs). libOpenCL is loaded at run time, so this
//!   builds without it; no runtime is an error, never a panic.
//! - `cuda` (cargo feature `cuda`): cudarc with dynamic loading: NVRTC compiles the CUDA C
//!   dialect; the driver, NVRTC and cuBLAS are probed before any call, so a machine without
//!   CUDA gets an error naming what is missing.
//! - `nccl` (cargo feature `nccl`, with `cuda`): NCCL collectives between CUDA devices (the
//!   gradient all-reduce of data-parallel training, through `axes-dist`), loaded at run time.
//!
//! Each implements [`axes_core::protocol::Backend`]; `OpenCl::device()` and
//! `Cuda::device(ordinal)` give the [`Device`](axes_core::Device) that tensors are copied to
//! with `x.to(&device)`, after which expressions, reductions and `dot` over them run there.
//! [`device`] parses a device name (`cpu`, `cuda:0`, `opencl`).
//!
//! Host tensors need no backend: `axes-core` runs them (the monomorphised loop engine, the
//! gemm crate and the run-time IR interpreter). [`cpu`] is the CPU through the device
//! protocol, a test device that runs the device lowering on any machine.

/// The error for the device `name`, unavailable for `reason`.
fn unavailable(name: &str, reason: impl std::fmt::Display) -> axes_core::Error {
    axes_core::Error::DeviceUnavailable {
        device: name.to_string(),
        reason: reason.to_string(),
    }
}

/// The device a name gives: `cpu`, `cuda` or `cuda:N`, `opencl` or `opencl:0`. A name no
/// backend serves, a backend this build lacks (cargo features `cuda`, `opencl`), or a device
/// the machine lacks is [`Error::DeviceUnavailable`](axes_core::Error::DeviceUnavailable),
/// naming the device and why.
///
/// ```
/// use axes_core::{Device, Error};
/// assert_eq!(axes_backends::device("cpu")?, Device::Cpu);
/// let error = axes_backends::device("tpu").unwrap_err();
/// assert!(matches!(error, Error::DeviceUnavailable { .. }));
/// assert!(error.to_string().contains("`tpu`"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn device(name: &str) -> axes_core::Result<axes_core::Device> {
    let (kind, number) = match name.split_once(':') {
        Some((kind, number)) => (kind, Some(number)),
        None => (name, None),
    };
    let number = number
        .map(|n| {
            n.parse::<usize>()
                .map_err(|_| unavailable(name, format!("`{n}` is not a device number")))
        })
        .transpose()?
        .unwrap_or(0);
    let found = match kind {
        "cpu" if number == 0 => Ok(axes_core::Device::Cpu),
        "cpu" => return Err(unavailable(name, "there is one CPU device, `cpu`")),
        #[cfg(feature = "cuda")]
        "cuda" => cuda::Cuda::device(number),
        #[cfg(feature = "opencl")]
        "opencl" if number == 0 => opencl::OpenCl::device(),
        #[cfg(feature = "opencl")]
        "opencl" => {
            return Err(unavailable(
                name,
                "only the first OpenCL device, `opencl:0`, is used",
            ));
        }
        #[cfg(not(feature = "cuda"))]
        "cuda" => return Err(unavailable(name, "this build lacks the `cuda` feature")),
        #[cfg(not(feature = "opencl"))]
        "opencl" => return Err(unavailable(name, "this build lacks the `opencl` feature")),
        _ => return Err(unavailable(name, "expected cpu, cuda, cuda:N or opencl")),
    };
    found.map_err(|e| match e {
        axes_core::Error::Unsupported { what } => unavailable(name, what),
        other => unavailable(name, other),
    })
}

#[cfg(any(feature = "cuda", feature = "opencl"))]
mod attention;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod disk_cache;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod launch;
#[cfg(feature = "nccl")]
pub mod nccl;
#[cfg(feature = "opencl")]
pub mod opencl;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod plan;
/// The plain reference the kernel tests compare with (shared with the integration tests).
#[cfg(all(test, any(feature = "cuda", feature = "opencl")))]
#[path = "../tests/common/reference.rs"]
mod reference;
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub mod tuning;
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) use plan::{JobPlan, Slot};

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
#[cfg(feature = "cuda")]
plain!(half::f16, half::bf16);

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
