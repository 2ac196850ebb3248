//! Helpers for the backends' integration tests: the plain reference (`reference`), random
//! jobs (`jobs`), the shared operation suite (`ops`, and fused attention in `attention`) and
//! recorded steps (`record`).
#![allow(dead_code, unreachable_pub)]

pub mod attention;
pub mod edges;
pub mod jobs;
pub mod ops;
pub mod record;
pub mod recurrent;
pub mod reference;
pub mod spatial;

pub use reference::*;

/// The shared OpenCL device, or `None` after printing why the test is skipped; with
/// `AXES_REQUIRE_OPENCL` set (as in CI) a missing device fails instead.
#[cfg(feature = "opencl")]
pub fn opencl_device() -> Option<&'static axes_backends::opencl::OpenCl> {
    match axes_backends::opencl::OpenCl::shared() {
        Ok(device) => Some(device),
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => {
            println!("SKIPPED (no OpenCL device): {e}");
            None
        }
    }
}

/// A second device on the shared one's OpenCL device whose kernels are cut as on a GPU —
/// tiles wherever operands disagree on their fastest axis, reductions reading four elements
/// or vectors a round — which a CPU runtime such as PoCL does not do by default: made once,
/// after the shared device, so that those kernels run in CI.
#[cfg(feature = "opencl")]
pub fn opencl_gpu_like_device() -> Option<&'static axes_backends::opencl::OpenCl> {
    use axes_backends::opencl::OpenCl;
    use axes_backends::tuning::Tile;
    static GPU_LIKE: std::sync::OnceLock<OpenCl> = std::sync::OnceLock::new();
    opencl_device()?;
    Some(GPU_LIKE.get_or_init(|| {
        OpenCl::first_tuned(|tuning| {
            tuning.tile = Some(Tile::DEFAULT);
            tuning.reduce_unroll = axes_kernels::REDUCE_UNROLL;
            tuning.vector_reads = true;
        })
        .expect("a second device on the OpenCL device the shared one found")
    }))
}
