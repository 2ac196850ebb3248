//! Host memory as a managed resource: the pool's limit holds, `release_pool` gives its memory
//! back, and the counters count hits, misses and bytes (a training step's use of the pool is
//! in `backends/tests/memory.rs`, beside the OpenCL device's). One test function: the pool
//! and its counters are the process's, so nothing else may run beside it.

use axes::memory;
use axes::prelude::*;

#[derive(Axis)]
struct Sample;

fn counters() -> memory::DeviceCounters {
    Device::Cpu.counters().expect("the host counts its memory")
}

/// A capped pool never holds more than its cap; `release_pool` empties it; a buffer of a
/// size the pool holds is taken from it (a hit), a new size is not (a miss); the bytes of
/// live tensors are counted while they live.
#[test]
fn host_memory_is_pooled_capped_and_counted() {
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
