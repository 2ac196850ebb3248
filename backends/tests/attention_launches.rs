//! One fused attention call at context 1,024 on each device: one launch forward, three
//! backward, and less than one Query × Key buffer held at any moment. A file of its own: a
//! device's counters are the process's, so no other test on that device may run beside these.
#![cfg(any(feature = "opencl", feature = "cuda"))]

mod common;

#[cfg(feature = "opencl")]
#[test]
fn one_call_on_opencl() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    common::attention::one_call_at_context_1024(&axes::Device::Backend(cl));
}

#[cfg(feature = "cuda")]
#[test]
fn one_call_on_cuda() {
    match axes_backends::cuda::Cuda::shared(0) {
        Ok(cuda) => common::attention::one_call_at_context_1024(&axes::Device::Backend(cuda)),
        Err(e) => println!("SKIPPED (no CUDA device): {e}"),
    }
}
