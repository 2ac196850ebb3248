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
