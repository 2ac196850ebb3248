//! CUDA's memory through `axes::memory`: the driver's pool reports the bytes freed into it,
//! takes a limit, and hands its memory back on demand. A file of its own (one process): the
//! pool is the device's, so no other test may allocate beside this one. Where there is no
//! CUDA device the test prints `SKIPPED (no CUDA device): <reason>`.
#![cfg(feature = "cuda")]

use axes::memory;
use axes::prelude::*;

#[derive(Axis)]
struct Sample;

#[test]
fn the_driver_pool_reports_its_freed_bytes_and_releases_them() {
    let gpu = match axes_backends::cuda::Cuda::device(0) {
        Ok(gpu) => gpu,
        Err(e) => return println!("SKIPPED (no CUDA device): {e}"),
    };
    let counters = || gpu.counters().expect("CUDA counts its memory");
    let len = 16 << 20; // 64 MiB of f32
    let doubled = (&Tensor::<f32, (Sample,)>::zeros(Sample.len(len))
        .unwrap()
        .to(&gpu)
        .unwrap()
        * 2.0)
        .eval()
        .unwrap();
    assert!(counters().bytes >= 4 * len as u64);
    drop(doubled);
    gpu.synchronize().unwrap();
    let pooled = counters().pooled_bytes;
    println!("freed into the driver pool: {pooled} bytes");
    assert!(pooled >= 4 * len as u64, "{pooled} bytes pooled");
    assert!(memory::release_pool(&gpu) >= 4 * len);
    assert_eq!(counters().pooled_bytes, 0);

    let unbounded = memory::pool_limit(&gpu);
    memory::set_pool_limit(&gpu, 1 << 20);
    assert_eq!(memory::pool_limit(&gpu), 1 << 20);
    memory::set_pool_limit(&gpu, unbounded);
    assert_eq!(memory::pool_limit(&gpu), unbounded);
}
