//! Memory pools in a training step, on the host and on the OpenCL device (PoCL in CI): once
//! the pool has seen a step, every buffer a step takes (results, and on OpenCL the small
//! uploads) comes from the pool; the device's pool keeps to its limit and gives its memory
//! back on demand. A file of its own: the counters are the process's, so no other test may
//! run beside this one.
#![cfg(feature = "opencl")]

mod common;

use axes::memory;
use axes::prelude::*;

#[derive(Axis)]
struct Sample;

#[test]
fn training_steps_take_every_buffer_from_the_pool_and_the_pool_keeps_its_limit() {
    let device = match axes_backends::opencl::OpenCl::device() {
        Ok(device) => device,
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => return println!("SKIPPED (no OpenCL device): {e}"),
    };
    let counters = || device.counters().expect("OpenCL counts its memory");

    for device in [Device::Cpu, device] {
        let per_step = common::ops::buffers_per_step(&device, 5);
        println!("each step on {device}: (buffers, pool hits, pool misses) {per_step:?}");
        for &(buffers, hits, misses) in &per_step[2..] {
            assert_eq!((hits, misses), (buffers, 0), "{device}: {per_step:?}");
        }
    }

    // The limit holds, and release gives everything back.
    let cap = 1 << 20;
    memory::set_pool_limit(&device, cap);
    assert_eq!(memory::pool_limit(&device), cap);
    for k in 1..=20 {
        let t = Tensor::<f32, (Sample,)>::zeros(Sample.len(k * 5000)).unwrap();
        let doubled = (&t.to(&device).unwrap() * 2.0).eval().unwrap();
        drop(doubled);
        let held = counters().pooled_bytes;
        assert!(held <= cap as u64, "{held} bytes held over a cap of {cap}");
    }
    // Nothing queued may still use a buffer when the process ends (PoCL's threads would
    // run on while it tears down).
    device.synchronize().unwrap();
    assert!(counters().pooled_bytes > 0);
    assert!(memory::release_pool(&device) > 0);
    assert_eq!(counters().pooled_bytes, 0);
    memory::set_pool_limit(&device, memory::DEFAULT_LIMIT);
}
