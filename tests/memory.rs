//! Host memory as a managed resource: the pool's limit holds, `release_pool` gives its memory
//! back, and a training step in steady state takes every tensor buffer from the pool. One
//! test function: the pool and its counters are the process's, so nothing else may run
//! beside it.

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

fn counters() -> memory::DeviceCounters {
    Device::Cpu.counters().expect("the host counts its memory")
}

/// A capped pool never holds more than its cap; `release_pool` empties it; a buffer of a
/// size the pool holds is taken from it (a hit), a new size is not (a miss); the bytes of
/// live tensors are counted while they live.
fn pool_limit_release_and_counts() {
    let cap = 1 << 20;
    memory::set_pool_limit(&Device::Cpu, cap);
    for k in 1..=40 {
        let t = Tensor::<f32, (Sample,)>::zeros(Sample.len(k * 3000)).unwrap();
        drop(t);
        let held = counters().pooled_bytes;
        assert!(held <= cap as u64, "{held} bytes held over a cap of {cap}");
    }
    let before = counters();
    let big = Tensor::<f32, (Sample,)>::zeros(Sample.len(cap)).unwrap();
    assert!(counters().bytes >= before.bytes + 4 * cap as u64);
    drop(big);
    assert!(
        counters().pooled_bytes <= cap as u64,
        "a buffer over the cap is freed"
    );
    assert!(memory::release_pool(&Device::Cpu) > 0);
    assert_eq!(counters().pooled_bytes, 0);
    assert_eq!(memory::release_pool(&Device::Cpu), 0);

    memory::set_pool_limit(&Device::Cpu, memory::DEFAULT_LIMIT);
    let sizes = Sample.len(12_345);
    drop(Tensor::<f32, (Sample,)>::zeros(sizes).unwrap());
    let before = counters();
    drop(Tensor::<f32, (Sample,)>::full(sizes, 2.0).unwrap());
    let after = counters();
    assert_eq!(after.pool_hits, before.pool_hits + 1);
    assert_eq!(after.pool_misses, before.pool_misses);
    drop(Tensor::<f32, (Sample,)>::full(Sample.len(12_346), 2.0).unwrap());
    assert_eq!(counters().pool_misses, after.pool_misses + 1);
}

/// The digits model (64-256-10 here, batch 128) trained with Adam: after the second step,
/// every tensor buffer a step takes comes from the pool.
fn training_steps_reuse_every_buffer() {
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
    let mut params: Params<f32> = builder.build(1).unwrap();
    let mut adam = Adam::new(1e-3);
    let x =
        Tensor::<f32, (Batch, Pixel)>::random_normal((Batch.len(128), Pixel.len(64)), 0.0, 1.0, 3)
            .unwrap();
    let y = Tensor::<i64, (Batch,)>::from_fn(Batch.len(128), |i| (i.of::<Batch>() % 10) as i64)
        .unwrap();
    let mut per_step = Vec::new();
    for _ in 0..6 {
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
        let after = counters();
        per_step.push((
            after.buffers - before.buffers,
            after.pool_hits - before.pool_hits,
            after.pool_misses - before.pool_misses,
        ));
    }
    println!("each step's (buffers, pool hits, pool misses): {per_step:?}");
    for &(buffers, hits, misses) in &per_step[2..] {
        assert_eq!((hits, misses), (buffers, 0), "{per_step:?}");
    }
}

#[test]
fn host_memory_is_pooled_capped_and_counted() {
    pool_limit_release_and_counts();
    training_steps_reuse_every_buffer();
}
