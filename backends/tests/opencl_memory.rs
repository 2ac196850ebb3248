//! The OpenCL device's pool of freed buffers (PoCL in CI): a training step on the device
//! takes every buffer (results and small uploads) from the pool once the pool has seen a
//! step; the pool keeps to
//! its limit and gives its memory back on demand. A file of its own: the device's counters
//! are the process's, so no other test may run beside this one.
#![cfg(feature = "opencl")]

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::memory;
use axes::nn::{Init, Linear, Params, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;
#[derive(Axis)]
struct Sample;

#[test]
fn device_results_are_pooled_capped_and_released() {
    let device = match axes_backends::opencl::OpenCl::device() {
        Ok(device) => device,
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => return println!("SKIPPED (no OpenCL device): {e}"),
    };
    let counters = || device.counters().expect("OpenCL counts its memory");

    // A training step: results after the first step come from the pool.
    let mut builder = ParamsBuilder::new();
    let first = Linear::new(
        &mut builder,
        "first",
        Pixel.len(64),
        Hidden.len(256),
        Init::He,
    );
    let last = Linear::new(
        &mut builder,
        "last",
        Hidden.len(256),
        Class.len(10),
        Init::Glorot,
    );
    let (first, last) = (first.unwrap(), last.unwrap());
    let mut params: Params<f32> = builder.build::<f32>(1).unwrap().to(&device).unwrap();
    let mut adam = Adam::new(1e-3);
    let lengths = (Batch.len(128), Pixel.len(64));
    let x = Tensor::<f32, (Batch, Pixel)>::random_normal(lengths, 0.0, 1.0, 3).unwrap();
    let y = Tensor::<i64, (Batch,)>::from_fn(Batch.len(128), |i| (i.of::<Batch>() % 10) as i64);
    let (x, y) = (x.to(&device).unwrap(), y.unwrap().to(&device).unwrap());
    let mut per_step = Vec::new();
    for _ in 0..5 {
        let before = counters();
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = first.forward(&p, &tape.constant(x.clone())).unwrap().relu();
        let logits = last.forward(&p, h).unwrap();
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)
            .unwrap()
            .mean::<(Batch,)>()
            .unwrap();
        let grad = p.gradient(&loss.backward().unwrap()).unwrap();
        adam.step(&mut params, &grad).unwrap();
        device.synchronize().unwrap();
        let after = counters();
        per_step.push((
            after.buffers - before.buffers,
            after.pool_hits - before.pool_hits,
            after.pool_misses - before.pool_misses,
        ));
    }
    println!("each step on {device}: (buffers, pool hits, pool misses) {per_step:?}");
    for &(buffers, hits, misses) in &per_step[2..] {
        assert_eq!((hits, misses), (buffers, 0), "{per_step:?}");
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
    assert!(counters().pooled_bytes > 0);
    assert!(memory::release_pool(&device) > 0);
    assert_eq!(counters().pooled_bytes, 0);
    memory::set_pool_limit(&device, memory::DEFAULT_LIMIT);
}
