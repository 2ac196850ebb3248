//! Fused expressions against a hand-written loop and ndarray, measured in one process.
//!
//! W1 `a*x + b*y` (16M f32, 1 and 2 threads) · W2 `sum((x-y)^2)` (16M) · W3 `x[h,w] + y[w,h]`
//! with y stored transposed (4096²) · W4 sum over each axis of 4096² · W5 W1 at 4096
//! elements (per-call cost) · W6 `tanh(x)*y + exp(-x)` (16M) against std's scalar functions
//! · W7 `sum((x-y)^2)` at every size from 4^3 to 4^12 · W8 W1 into a fresh result each call
//! against a hand `.collect()` · a triad `a = b + s*c` as the bandwidth reference · W1 and
//! W6 from 2^12 to 2^20 elements on one and two threads (where splits start to pay) · what
//! handing work to a pool of two threads costs.
//!
//! After criterion's own report, prints a table of medians, GB/s and ratios to the peers.
//! `cargo bench --bench fused`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;

use axes::prelude::*;
use axes::storage::HostVec;
use criterion::{BenchmarkId, Criterion, Throughput};
use ndarray::Array1;

mod support;
use support::median_ns;

#[derive(Axis)]
struct N;
#[derive(Axis)]
struct H;
#[derive(Axis)]
struct W;

const BIG: usize = 1 << 24;
const SIDE: usize = 4096;
const SMALL: usize = 4096;

fn data(n: usize, seed: u64) -> HostVec<f32> {
    let t = Tensor::<f32, (N,)>::random_uniform(N.len(n), -1.0, 1.0, seed).unwrap();
    t.storage().as_slice().iter().copied().collect()
}

/// `n` zeros for a peer to write, in memory like the library's own (on a cache line, and
/// asking for huge pages from 4 MiB), so that peers and the library read and write the same
/// kind of memory.
fn zeros(n: usize) -> HostVec<f32> {
    std::iter::repeat_n(0f32, n).collect()
}

/// Splits `out` and the inputs in `threads` pieces and runs `f` on each on its own thread.
fn hand_parallel(threads: usize, out: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync) {
    if threads == 1 {
        f(0, out);
        return;
    }
    let piece = out.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (k, chunk) in out.chunks_mut(piece).enumerate() {
            let f = &f;
            s.spawn(move || f(k * piece, chunk));
        }
    });
}

/// `sum((x-y)^2)` the way a careful hand loop writes it: `LANES` accumulators (8 for W2,
/// 16 for W7).
fn hand_l2<const LANES: usize>(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (xc, yc) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..LANES {
            let d = a[l] - b[l];
            acc[l] += d * d;
        }
    }
    let tail: f32 = xr.iter().zip(yr).map(|(a, b)| (a - b) * (a - b)).sum();
    acc.iter().sum::<f32>() + tail
}

/// The lengths of W7: 4^3 to 4^12.
fn l2_sizes() -> impl Iterator<Item = usize> {
    (3..=12).map(|k| 1 << (2 * k))
}

/// `(&x - &y).square().sum_all()` at every size from 4^3 to 4^12: the per-call cost at small
/// sizes (against a 16-accumulator hand loop) and whether two threads ever lose to one.
fn w7(c: &mut Criterion) {
    let mut g = c.benchmark_group("W7 l2 by size");
    for n in l2_sizes() {
        let (x, y) = (data(n, 5), data(n, 6));
        let tx = Tensor::<f32, (N,)>::from_vec(N.len(n), x.to_vec()).unwrap();
        let ty = Tensor::<f32, (N,)>::from_vec(N.len(n), y.to_vec()).unwrap();
        for threads in [1, 2] {
            axes::set_threads(threads).unwrap();
            g.bench_function(BenchmarkId::new(format!("axes {threads}t"), n), |bench| {
                bench.iter(|| black_box((&tx - &ty).square().sum_all().unwrap()))
            });
        }
        g.bench_function(BenchmarkId::new("hand 16 acc 1t", n), |bench| {
            bench.iter(|| black_box(hand_l2::<16>(&x, &y)))
        });
    }
    g.finish();
}

/// The lengths of the split-by-size group: 2^12 to 2^20, where splitting starts to pay.
fn split_sizes() -> impl Iterator<Item = usize> {
    (12..=20).map(|k| 1 << k)
}

/// Element-wise assignments by size on one and two threads, a light one (`a*x + b*y`: memory)
/// and a heavy one (`tanh(x) y + exp(-x)`: arithmetic): where the thread split's cost model
/// hands work to the pool, two threads should not lose to one.
fn split_by_size(c: &mut Criterion) {
    let mut g = c.benchmark_group("split by size");
    for n in split_sizes() {
        let tx = Tensor::<f32, (N,)>::from_vec(N.len(n), data(n, 20).to_vec()).unwrap();
        let ty = Tensor::<f32, (N,)>::from_vec(N.len(n), data(n, 21).to_vec()).unwrap();
        let mut out = Tensor::<f32, (N,)>::zeros(N.len(n)).unwrap();
        for threads in [1, 2] {
            axes::set_threads(threads).unwrap();
            g.bench_function(BenchmarkId::new(format!("axpby {threads}t"), n), |bench| {
                bench.iter(|| out.assign(&tx * 1.5f32 + &ty * -0.5f32).unwrap())
            });
            g.bench_function(
                BenchmarkId::new(format!("tanh exp {threads}t"), n),
                |bench| bench.iter(|| out.assign(tx.tanh() * &ty + (-&tx).exp()).unwrap()),
            );
        }
    }
    g.finish();
}

/// What handing work to a pool of two threads costs (the floor under any split's gain, for
/// the cost model of thread splits): a scope of two empty tasks, a scope on this thread with
/// one task on the pool, and the first after the pool sat idle for 1 ms (its threads asleep).
fn pool(c: &mut Criterion) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let two_tasks = || {
        pool.install(|| {
            rayon::scope(|s| {
                s.spawn(|_| black_box(()));
                s.spawn(|_| black_box(()));
            })
        })
    };
    let mut g = c.benchmark_group("pool hand-off");
    g.bench_function("scope of 2 tasks", |bench| bench.iter(two_tasks));
    g.bench_function("in-place scope of 1 task", |bench| {
        bench.iter(|| {
            pool.in_place_scope(|s| {
                s.spawn(|_| black_box(()));
                black_box(());
            })
        })
    });
    g.measurement_time(std::time::Duration::from_millis(300));
    g.bench_function("scope of 2 tasks after 1 ms idle", |bench| {
        bench.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                std::thread::sleep(std::time::Duration::from_millis(1));
                let start = std::time::Instant::now();
                two_tasks();
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// The split-by-size group's two-thread times against one thread's.
fn summary_split() {
    let group = "split by size";
    println!("\nelement-wise by size, median µs per call");
    println!(
        "{:>10} {:>10} {:>10} {:>8} {:>12} {:>12} {:>8}",
        "n", "axpby 1t", "axpby 2t", "2t/1t", "tanh exp 1t", "tanh exp 2t", "2t/1t"
    );
    for n in split_sizes() {
        let us = |id: &str| median_ns(group, &format!("{id}/{n}")).map(|ns| ns / 1e3);
        let (Some(a1), Some(a2), Some(t1), Some(t2)) = (
            us("axpby 1t"),
            us("axpby 2t"),
            us("tanh exp 1t"),
            us("tanh exp 2t"),
        ) else {
            continue;
        };
        println!(
            "{n:>10} {a1:>10.2} {a2:>10.2} {:>8.2} {t1:>12.2} {t2:>12.2} {:>8.2}",
            a2 / a1,
            t2 / t1
        );
    }
}

/// W7's ratios: axes on one thread against the hand loop, and two threads against one.
fn summary_by_size() {
    let group = "W7 l2 by size";
    println!("\nW7 (&x - &y).square().sum_all(), median µs per call");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "n", "axes 1t", "axes 2t", "hand 1t", "hand/axes", "2t/1t"
    );
    for n in l2_sizes() {
        let us = |id: &str| median_ns(group, &format!("{id}/{n}")).map(|ns| ns / 1e3);
        let (Some(one), Some(two), Some(hand)) =
            (us("axes 1t"), us("axes 2t"), us("hand 16 acc 1t"))
        else {
            continue;
        };
        println!(
            "{n:>10} {one:>10.3} {two:>10.3} {hand:>10.3} {:>12.2} {:>12.2}",
            hand / one,
            two / one
        );
    }
}

fn w1(c: &mut Criterion) {
    let (x, y) = (data(BIG, 1), data(BIG, 2));
    let (a, b) = (1.5f32, -0.5f32);
    let tx = Tensor::<f32, (N,)>::from_vec(N.len(BIG), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (N,)>::from_vec(N.len(BIG), y.to_vec()).unwrap();
    let mut out_t = Tensor::<f32, (N,)>::zeros(N.len(BIG)).unwrap();
    let mut out = zeros(BIG);
    let mut g = c.benchmark_group("W1 axpby 16M");
    g.throughput(Throughput::Bytes((3 * BIG * 4) as u64));
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        g.bench_function(BenchmarkId::new("axes", threads), |bench| {
            bench.iter(|| out_t.assign(&tx * a + &ty * b).unwrap())
        });
        g.bench_function(BenchmarkId::new("hand", threads), |bench| {
            bench.iter(|| {
                hand_parallel(threads, &mut out, |start, o| {
                    for ((v, xi), yi) in o.iter_mut().zip(&x[start..]).zip(&y[start..]) {
                        *v = a * xi + b * yi;
                    }
                })
            })
        });
    }
    let (nx, ny) = (Array1::from(x.to_vec()), Array1::from(y.to_vec()));
    g.bench_function(BenchmarkId::new("ndarray", 1), |bench| {
        bench.iter(|| black_box(&nx * a + &ny * b))
    });
    // The bound this row is measured against: the same traffic (two reads, one write).
    streaming_triad(&mut g, &mut out, &x, &y);
    g.finish();
}

/// `a*x + b*y` into a fresh result each time (dropped after it), against a hand-written
/// `.collect()` and against `assign` into one result kept across calls: what the host pool
/// saves (the fresh pages a new 64 MiB buffer faults in).
fn w8(c: &mut Criterion) {
    let (x, y) = (data(BIG, 1), data(BIG, 2));
    let (a, b) = (1.5f32, -0.5f32);
    let tx = Tensor::<f32, (N,)>::from_vec(N.len(BIG), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (N,)>::from_vec(N.len(BIG), y.to_vec()).unwrap();
    let mut out_t = Tensor::<f32, (N,)>::zeros(N.len(BIG)).unwrap();
    let mut g = c.benchmark_group("W8 axpby 16M fresh");
    g.throughput(Throughput::Bytes((3 * BIG * 4) as u64));
    axes::set_threads(1).unwrap();
    g.bench_function(BenchmarkId::new("axes fresh", 1), |bench| {
        bench.iter(|| black_box((&tx * a + &ty * b).eval().unwrap()))
    });
    g.bench_function(BenchmarkId::new("hand collect", 1), |bench| {
        bench.iter(|| {
            let out: Vec<f32> = (x.iter().zip(&y)).map(|(xi, yi)| a * xi + b * yi).collect();
            black_box(out)
        })
    });
    g.bench_function(BenchmarkId::new("axes assign", 1), |bench| {
        bench.iter(|| out_t.assign(&tx * a + &ty * b).unwrap())
    });
    g.finish();
}

fn w2(c: &mut Criterion) {
    let (x, y) = (data(BIG, 3), data(BIG, 4));
    let tx = Tensor::<f32, (N,)>::from_vec(N.len(BIG), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (N,)>::from_vec(N.len(BIG), y.to_vec()).unwrap();
    let mut g = c.benchmark_group("W2 l2 16M");
    g.throughput(Throughput::Bytes((2 * BIG * 4) as u64));
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        g.bench_function(BenchmarkId::new("axes", threads), |bench| {
            bench.iter(|| black_box((&tx - &ty).square().sum_all().unwrap()))
        });
        g.bench_function(BenchmarkId::new("hand", threads), |bench| {
            bench.iter(|| {
                if threads == 1 {
                    black_box(hand_l2::<8>(&x, &y))
                } else {
                    let h = BIG / 2;
                    let (l, r) = std::thread::scope(|s| {
                        let l = s.spawn(|| hand_l2::<8>(&x[..h], &y[..h]));
                        let r = hand_l2::<8>(&x[h..], &y[h..]);
                        (l.join().unwrap(), r)
                    });
                    black_box(l + r)
                }
            })
        });
    }
    let (nx, ny) = (Array1::from(x.to_vec()), Array1::from(y.to_vec()));
    g.bench_function(BenchmarkId::new("ndarray", 1), |bench| {
        bench.iter(|| black_box((&nx - &ny).mapv(|d| d * d).sum()))
    });
    g.finish();
}

fn w3(c: &mut Criterion) {
    let n = SIDE;
    let (x, y) = (data(n * n, 5), data(n * n, 6));
    let tx = Tensor::<f32, (H, W)>::from_vec((H.len(n), W.len(n)), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (W, H)>::from_vec((W.len(n), H.len(n)), y.to_vec()).unwrap();
    let mut out_t = Tensor::<f32, (H, W)>::zeros((H.len(n), W.len(n))).unwrap();
    let mut out = zeros(n * n);
    let mut g = c.benchmark_group("W3 transposed add 4096sq");
    g.throughput(Throughput::Bytes((3 * n * n * 4) as u64));
    axes::set_threads(1).unwrap();
    g.bench_function(BenchmarkId::new("axes", 1), |bench| {
        bench.iter(|| out_t.assign(&tx + &ty).unwrap())
    });
    g.bench_function(BenchmarkId::new("hand", 1), |bench| {
        bench.iter(|| {
            for h in 0..n {
                for w in 0..n {
                    out[h * n + w] = x[h * n + w] + y[w * n + h];
                }
            }
        })
    });
    let nx = ndarray::Array2::from_shape_vec((n, n), x.to_vec()).unwrap();
    let ny = ndarray::Array2::from_shape_vec((n, n), y.to_vec()).unwrap();
    g.bench_function(BenchmarkId::new("ndarray", 1), |bench| {
        bench.iter(|| black_box(&nx + &ny.t()))
    });
    // The best hand-written kernel we know for this machine: 8×8 blocks transposed in AVX2
    // registers, 64×64 tiles, y prefetched ahead — the ceiling a library can aim at.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let (xs, ys) = (tx.storage().as_slice(), ty.storage().as_slice());
        g.bench_function(BenchmarkId::new("hand blocked avx2", 1), |bench| {
            // SAFETY: AVX2 is present (checked above); the slices hold n² elements each.
            bench.iter(|| unsafe { blocked::transposed_add(&mut out, xs, ys, n) })
        });
        let mut tile = HostVec::new();
        g.bench_function(BenchmarkId::new("hand tiles 128 rows", 1), |bench| {
            // SAFETY: AVX2 is present (checked above).
            bench.iter(|| unsafe { blocked::transposed_add_tiles(&mut out, xs, ys, n, &mut tile) })
        });
    }
    // What bounds the library's tiles: `y` alone read as they read it — 512 bytes (the 128
    // rows of a tile) of each of its rows at a time, asked for 256 KiB ahead into L2 — with
    // nothing computed or written.
    #[cfg(target_arch = "x86_64")]
    {
        let ys = ty.storage().as_slice();
        g.throughput(Throughput::Bytes((n * n * 4) as u64));
        g.bench_function(BenchmarkId::new("y read in tiles", 1), |bench| {
            bench.iter(|| black_box(blocked::sum_in_tiles(ys, n, 128)))
        });
        g.throughput(Throughput::Bytes((3 * n * n * 4) as u64));
    }
    // the bandwidth reference: triad
    let (tb, tc) = (data(n * n, 7), data(n * n, 8));
    let mut ta = zeros(n * n);
    g.bench_function(BenchmarkId::new("triad", 1), |bench| {
        bench.iter(|| {
            for ((a, b), c) in ta.iter_mut().zip(&tb).zip(&tc) {
                *a = b + 0.5 * c;
            }
            black_box(&ta);
        })
    });
    streaming_triad(&mut g, &mut ta, &tb, &tc);
    g.finish();
}

/// The peer "triad streaming" of a group: `a = b + 0.5 c` with streaming stores, as the
/// library writes large results — the stricter bandwidth reference (it skips reading the
/// destination before writing it).
fn streaming_triad(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    a: &mut [f32],
    b: &[f32],
    c: &[f32],
) {
    #[cfg(target_arch = "x86_64")]
    g.bench_function(BenchmarkId::new("triad streaming", 1), |bench| {
        bench.iter(|| {
            blocked::triad_streaming(a, b, c);
            black_box(&*a);
        })
    });
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (g, a, b, c);
}

fn w4(c: &mut Criterion) {
    let n = SIDE;
    let x = data(n * n, 9);
    let tx = Tensor::<f32, (H, W)>::from_vec((H.len(n), W.len(n)), x.to_vec()).unwrap();
    let mut g = c.benchmark_group("W4 axis sums 4096sq");
    g.throughput(Throughput::Bytes((n * n * 4) as u64));
    axes::set_threads(1).unwrap();
    g.bench_function(BenchmarkId::new("axes over H", 1), |bench| {
        bench.iter(|| black_box(tx.sum::<(H,)>().unwrap()))
    });
    g.bench_function(BenchmarkId::new("hand over H", 1), |bench| {
        bench.iter(|| {
            let mut out = vec![0f32; n];
            for h in 0..n {
                for (o, v) in out.iter_mut().zip(&x[h * n..(h + 1) * n]) {
                    *o += v;
                }
            }
            black_box(out)
        })
    });
    g.bench_function(BenchmarkId::new("axes over W", 1), |bench| {
        bench.iter(|| black_box(tx.sum::<(W,)>().unwrap()))
    });
    g.bench_function(BenchmarkId::new("hand over W", 1), |bench| {
        bench.iter(|| {
            let out: Vec<f32> = (0..n)
                .map(|h| {
                    let row = &x[h * n..(h + 1) * n];
                    let mut acc = [0f32; 8];
                    for c in row.chunks_exact(8) {
                        for l in 0..8 {
                            acc[l] += c[l];
                        }
                    }
                    acc.iter().sum()
                })
                .collect();
            black_box(out)
        })
    });
    g.finish();
}

fn w5(c: &mut Criterion) {
    let (x, y) = (data(SMALL, 10), data(SMALL, 11));
    let (a, b) = (1.5f32, -0.5f32);
    let tx = Tensor::<f32, (N,)>::from_vec(N.len(SMALL), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (N,)>::from_vec(N.len(SMALL), y.to_vec()).unwrap();
    let mut out_t = Tensor::<f32, (N,)>::zeros(N.len(SMALL)).unwrap();
    let mut out = zeros(SMALL);
    axes::set_threads(1).unwrap();
    let mut g = c.benchmark_group("W5 axpby 4096");
    g.throughput(Throughput::Bytes((3 * SMALL * 4) as u64));
    g.bench_function(BenchmarkId::new("axes", 1), |bench| {
        bench.iter(|| out_t.assign(&tx * a + &ty * b).unwrap())
    });
    g.bench_function(BenchmarkId::new("hand", 1), |bench| {
        bench.iter(|| {
            for ((v, xi), yi) in out.iter_mut().zip(&x).zip(&y) {
                *v = a * xi + b * yi;
            }
            black_box(&out);
        })
    });
    let (nx, ny) = (Array1::from(x.to_vec()), Array1::from(y.to_vec()));
    g.bench_function(BenchmarkId::new("ndarray", 1), |bench| {
        bench.iter(|| black_box(&nx * a + &ny * b))
    });
    g.finish();
}

fn w6(c: &mut Criterion) {
    let (x, y) = (data(BIG, 12), data(BIG, 13));
    let tx = Tensor::<f32, (N,)>::from_vec(N.len(BIG), x.to_vec()).unwrap();
    let ty = Tensor::<f32, (N,)>::from_vec(N.len(BIG), y.to_vec()).unwrap();
    let mut out_t = Tensor::<f32, (N,)>::zeros(N.len(BIG)).unwrap();
    let mut out = zeros(BIG);
    axes::set_threads(1).unwrap();
    let mut g = c.benchmark_group("W6 tanh exp 16M");
    g.throughput(Throughput::Bytes((3 * BIG * 4) as u64));
    g.bench_function(BenchmarkId::new("axes", 1), |bench| {
        bench.iter(|| out_t.assign(tx.tanh() * &ty + (-&tx).exp()).unwrap())
    });
    g.bench_function(BenchmarkId::new("hand std", 1), |bench| {
        bench.iter(|| {
            for ((v, xi), yi) in out.iter_mut().zip(&x).zip(&y) {
                *v = xi.tanh() * yi + (-xi).exp();
            }
            black_box(&out);
        })
    });
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        g.bench_function(BenchmarkId::new("hand same math avx512", 1), |bench| {
            bench.iter(|| {
                // SAFETY: the CPU has AVX-512 (checked above).
                unsafe { blocked::tanh_exp_avx512(&mut out, &x, &y) };
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn summary() {
    const W3: &str = "W3 transposed add 4096sq";
    const W3_BYTES: f64 = 3.0 * (SIDE * SIDE) as f64 * 4.0;
    let rows: [(&str, &str, &str, f64); 22] = [
        ("W1 axpby 16M", "axes/1", "hand/1", 3.0 * BIG as f64 * 4.0),
        ("W1 axpby 16M", "axes/2", "hand/2", 3.0 * BIG as f64 * 4.0),
        (
            "W1 axpby 16M",
            "axes/1",
            "ndarray/1",
            3.0 * BIG as f64 * 4.0,
        ),
        (
            "W1 axpby 16M",
            "axes/1",
            "triad streaming/1",
            3.0 * BIG as f64 * 4.0,
        ),
        ("W2 l2 16M", "axes/1", "hand/1", 2.0 * BIG as f64 * 4.0),
        ("W2 l2 16M", "axes/2", "hand/2", 2.0 * BIG as f64 * 4.0),
        ("W2 l2 16M", "axes/1", "ndarray/1", 2.0 * BIG as f64 * 4.0),
        (W3, "axes/1", "triad/1", W3_BYTES),
        (W3, "axes/1", "triad streaming/1", W3_BYTES),
        (W3, "hand/1", "triad/1", W3_BYTES),
        (W3, "axes/1", "hand blocked avx2/1", W3_BYTES),
        (W3, "hand blocked avx2/1", "triad/1", W3_BYTES),
        (W3, "axes/1", "hand tiles 128 rows/1", W3_BYTES),
        (W3, "hand tiles 128 rows/1", "triad/1", W3_BYTES),
        (W3, "y read in tiles/1", "triad/1", W3_BYTES),
        (
            "W4 axis sums 4096sq",
            "axes over H/1",
            "hand over H/1",
            (SIDE * SIDE) as f64 * 4.0,
        ),
        (
            "W4 axis sums 4096sq",
            "axes over W/1",
            "hand over W/1",
            (SIDE * SIDE) as f64 * 4.0,
        ),
        (
            "W5 axpby 4096",
            "axes/1",
            "hand/1",
            3.0 * SMALL as f64 * 4.0,
        ),
        (
            "W6 tanh exp 16M",
            "axes/1",
            "hand std/1",
            3.0 * BIG as f64 * 4.0,
        ),
        (
            "W6 tanh exp 16M",
            "axes/1",
            "hand same math avx512/1",
            3.0 * BIG as f64 * 4.0,
        ),
        (
            "W8 axpby 16M fresh",
            "axes fresh/1",
            "hand collect/1",
            3.0 * BIG as f64 * 4.0,
        ),
        (
            "W8 axpby 16M fresh",
            "axes fresh/1",
            "axes assign/1",
            3.0 * BIG as f64 * 4.0,
        ),
    ];
    println!(
        "\n{:<30} {:>14} {:>10} {:>9} {:>14} {:>10} {:>9}  ours/peer speed",
        "workload", "ours", "time", "GB/s", "peer", "time", "GB/s"
    );
    for (group, ours, peer, bytes) in rows {
        let (Some(a), Some(b)) = (median_ns(group, ours), median_ns(group, peer)) else {
            println!("{group:<30} (not measured in this run)");
            continue;
        };
        let gbs = |ns: f64| bytes / ns;
        println!(
            "{group:<30} {ours:>14} {:>8.3}ms {:>9.2} {peer:>14} {:>8.3}ms {:>9.2}  {:.2}",
            a / 1e6,
            gbs(a),
            b / 1e6,
            gbs(b),
            b / a
        );
    }
}

fn main() {
    let mut c = support::criterion(10, (1000, 200), (4, 1));
    w1(&mut c);
    w2(&mut c);
    w3(&mut c);
    w4(&mut c);
    w5(&mut c);
    w6(&mut c);
    w7(&mut c);
    w8(&mut c);
    split_by_size(&mut c);
    pool(&mut c);
    c.final_summary();
    summary();
    summary_by_size();
    summary_split();
    let group = "pool hand-off";
    println!("\npool of 2 threads, median µs per hand-off");
    for id in [
        "scope of 2 tasks",
        "in-place scope of 1 task",
        "scope of 2 tasks after 1 ms idle",
    ] {
        if let Some(ns) = median_ns(group, id) {
            println!("{id:>34} {:>8.1}", ns / 1e3);
        }
    }
}

/// A hand-tuned `out[h][w] = x[h][w] + y[w][h]` for square row-major f32 matrices, a
/// triad with streaming stores, and W6 as a plain AVX-512 loop over the library's math.
#[cfg(target_arch = "x86_64")]
mod blocked {
    use std::arch::x86_64::*;

    use axes::storage::HostVec;

    /// `out = tanh(x) y + exp(-x)` with the library's own `tanh` and `exp`, in a plain loop
    /// compiled for AVX-512: what the engine adds to the same arithmetic.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
    pub(crate) fn tanh_exp_avx512(out: &mut [f32], x: &[f32], y: &[f32]) {
        for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
            *o = axes::math::tanh_f32(x) * y + axes::math::exp_f32(-x);
        }
    }

    /// The sum of the `n × n` row-major `y`, read `rows` elements of each row at a time down
    /// all the rows, then the next `rows` of each: the order in which a tile `rows` tall
    /// reads a transposed operand. Each row's piece is asked for 256 KiB ahead into L2.
    pub(crate) fn sum_in_tiles(y: &[f32], n: usize, rows: usize) -> f32 {
        let ahead = (256 << 10) / (rows * 4);
        let mut acc = [0f32; 16];
        for start in (0..n).step_by(rows) {
            for row in 0..n {
                let wanted = y.as_ptr().wrapping_add((row + ahead) * n + start);
                for line in (0..rows).step_by(16) {
                    // SAFETY: a prefetch is a hint that never faults; SSE is part of x86-64.
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(wanted.wrapping_add(line).cast()) };
                }
                for piece in y[row * n + start..row * n + start + rows].chunks_exact(16) {
                    for (a, v) in acc.iter_mut().zip(piece) {
                        *a += v;
                    }
                }
            }
        }
        acc.iter().sum()
    }

    /// `a = b + 0.5 c` with 16-byte streaming stores (SSE2, part of x86-64).
    pub(crate) fn triad_streaming(a: &mut [f32], b: &[f32], c: &[f32]) {
        let n = a.len().min(b.len()).min(c.len());
        let mut i = 0;
        while i < n && !(a[i..].as_ptr() as usize).is_multiple_of(16) {
            a[i] = b[i] + 0.5 * c[i];
            i += 1;
        }
        // SAFETY: i + 4 <= n for every vector access; a + i is 16-byte aligned (the loop
        // above stopped there and each step adds 16 bytes); SSE2 is part of x86-64.
        unsafe {
            let half = _mm_set1_ps(0.5);
            while i + 4 <= n {
                let sum = _mm_add_ps(
                    _mm_loadu_ps(b.as_ptr().add(i)),
                    _mm_mul_ps(half, _mm_loadu_ps(c.as_ptr().add(i))),
                );
                _mm_stream_ps(a.as_mut_ptr().add(i), sum);
                i += 4;
            }
            _mm_sfence();
        }
        for j in i..n {
            a[j] = b[j] + 0.5 * c[j];
        }
    }

    /// Transposes 8 rows of 8 lanes.
    #[target_feature(enable = "avx2")]
    fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
    }

    /// # Safety
    /// AVX2 is available; `out`, `x` and `y` hold `n`² elements; `n` is a multiple of 64.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn transposed_add(out: &mut [f32], x: &[f32], y: &[f32], n: usize) {
        const TILE: usize = 64;
        const AHEAD: usize = 16;
        assert!(
            out.len() == n * n && x.len() == n * n && y.len() == n * n && n.is_multiple_of(TILE)
        );
        let (o, xp, yp) = (out.as_mut_ptr(), x.as_ptr(), y.as_ptr());
        for h0 in (0..n).step_by(TILE) {
            for w0 in (0..n).step_by(TILE) {
                for h in (h0..h0 + TILE).step_by(8) {
                    for w in (w0..w0 + TILE).step_by(8) {
                        // SAFETY: every index below is under n² (h, w < n and blocks of 8 in
                        // a multiple of 64); prefetches may point anywhere.
                        unsafe {
                            for i in 0..8 {
                                let ahead = (w + AHEAD + i).min(n - 1) * n + h;
                                _mm_prefetch::<_MM_HINT_T0>(yp.add(ahead).cast::<i8>());
                            }
                            let mut rows = [_mm256_setzero_ps(); 8];
                            for (i, row) in rows.iter_mut().enumerate() {
                                *row = _mm256_loadu_ps(yp.add((w + i) * n + h));
                            }
                            let columns = transpose8(rows);
                            for (i, column) in columns.iter().enumerate() {
                                let at = (h + i) * n + w;
                                let sum = _mm256_add_ps(_mm256_loadu_ps(xp.add(at)), *column);
                                _mm256_storeu_ps(o.add(at), sum);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `out[h][w] = x[h][w] + y[w][h]` in the library's own scheme, with nothing generic: tiles
    /// of `ROWS` rows by the whole width; each tile's columns of `y` first transposed into
    /// `tile` (rows one line longer than `n`) by 8 × 8 blocks through AVX2 registers, the
    /// columns asked for 256 KiB ahead into L2; then each row `x + tile` with streaming
    /// stores: how fast that scheme can go where it runs.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn transposed_add_tiles(
        out: &mut [f32],
        x: &[f32],
        y: &[f32],
        n: usize,
        tile: &mut HostVec<f32>,
    ) {
        const ROWS: usize = 128;
        let stride = n + 16;
        assert!(
            out.len() == n * n && x.len() == n * n && y.len() == n * n && n.is_multiple_of(ROWS)
        );
        assert!((out.as_ptr() as usize).is_multiple_of(32));
        tile.resize(ROWS * stride, 0.0);
        let (o, xp, yp, t) = (out.as_mut_ptr(), x.as_ptr(), y.as_ptr(), tile.as_mut_ptr());
        let ahead = (256 << 10) / (ROWS * 4);
        for h0 in (0..n).step_by(ROWS) {
            for k0 in (0..n).step_by(8) {
                // SAFETY: every index below is under n² (h0 + r < n, k0 + j < n) or inside
                // the tile (r < ROWS, k0 + 8 <= n < stride); prefetches may point anywhere.
                unsafe {
                    for j in 0..8 {
                        let column = yp.wrapping_add((k0 + ahead + j) * n + h0);
                        for line in (0..ROWS).step_by(16) {
                            _mm_prefetch::<_MM_HINT_T1>(column.wrapping_add(line).cast());
                        }
                    }
                    for r0 in (0..ROWS).step_by(8) {
                        let mut rows = [_mm256_setzero_ps(); 8];
                        for (j, row) in rows.iter_mut().enumerate() {
                            *row = _mm256_loadu_ps(yp.add((k0 + j) * n + h0 + r0));
                        }
                        for (i, column) in transpose8(rows).into_iter().enumerate() {
                            _mm256_storeu_ps(t.add((r0 + i) * stride + k0), column);
                        }
                    }
                }
            }
            for r in 0..ROWS {
                let row = (h0 + r) * n;
                for w in (0..n).step_by(8) {
                    // SAFETY: row + w + 8 <= n², r * stride + w + 8 <= ROWS * stride; out
                    // starts on 32 bytes (asserted) and row + w is a multiple of 8.
                    unsafe {
                        let sum = _mm256_add_ps(
                            _mm256_loadu_ps(xp.add(row + w)),
                            _mm256_loadu_ps(t.add(r * stride + w)),
                        );
                        _mm256_stream_ps(o.add(row + w), sum);
                    }
                }
            }
        }
        _mm_sfence();
    }
}
