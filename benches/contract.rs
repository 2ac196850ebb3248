//! Contractions beside the `gemm` crate called directly (same settings) and ndarray's `dot`,
//! f32, 64³ to 2048³, 1 and 2 threads, plus a permuted operand (stored transposed, used
//! through a view: no copy). Prints GFLOP/s and the ratio to gemm after criterion's report,
//! then the ratio to OpenBLAS through numpy (`benches/peers.py`, run with
//! `$AXES_TORCH_PYTHON` or `python3` where numpy imports) on the same thread counts.
//!
//! `cargo bench --bench contract`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;

use axes::prelude::*;
use criterion::{BenchmarkId, Criterion};

mod support;
use support::{json_number, median_ns, python_output};

#[derive(Axis)]
struct M;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct N;

/// `c = a · b` for n×n matrices; `a_transposed` reads `a` stored column-major (the layout of
/// the permuted operand).
fn gemm_direct(threads: usize, n: usize, a: &[f32], a_transposed: bool, b: &[f32], c: &mut [f32]) {
    let (a_cs, a_rs) = if a_transposed {
        (n as isize, 1)
    } else {
        (1, n as isize)
    };
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: a, b and c hold n×n elements each, read and written with unit and n strides.
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

fn bench(c: &mut Criterion, n: usize) {
    let x = Tensor::<f32, (M, K)>::random_uniform((M.len(n), K.len(n)), -1.0, 1.0, 1).unwrap();
    let w = Tensor::<f32, (K, N)>::random_uniform((K.len(n), N.len(n)), -1.0, 1.0, 2).unwrap();
    // the same x stored (K, M): used as (M, K) through a view
    let x_t = x.to_layout::<(K, M)>().unwrap();
    let (a, b) = (x.to_vec(), w.to_vec());
    let a_t = x_t.storage().as_slice().to_vec();
    let mut out = vec![0f32; n * n];
    let mut g = c.benchmark_group(format!("matmul {n}"));
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        g.bench_function(BenchmarkId::new("axes", threads), |bench| {
            bench.iter(|| black_box(dot(&x, &w).unwrap()))
        });
        g.bench_function(BenchmarkId::new("axes permuted", threads), |bench| {
            bench.iter(|| black_box(dot(&x_t.axes_with_order::<(M, K)>(), &w).unwrap()))
        });
        g.bench_function(BenchmarkId::new("gemm", threads), |bench| {
            bench.iter(|| pool.install(|| gemm_direct(threads, n, &a, false, &b, &mut out)))
        });
        g.bench_function(BenchmarkId::new("gemm permuted", threads), |bench| {
            bench.iter(|| pool.install(|| gemm_direct(threads, n, &a_t, true, &b, &mut out)))
        });
    }
    let (na, nb) = (
        ndarray::Array2::from_shape_vec((n, n), a.clone()).unwrap(),
        ndarray::Array2::from_shape_vec((n, n), b.clone()).unwrap(),
    );
    g.bench_function(BenchmarkId::new("ndarray", 1), |bench| {
        bench.iter(|| black_box(na.dot(&nb)))
    });
    g.finish();
}

fn main() {
    let mut c = support::criterion(10, (1000, 300), (5, 2));
    let sizes = [64, 256, 1024, 2048];
    for n in sizes {
        bench(&mut c, n);
    }
    c.final_summary();
    println!(
        "\n{:<14} {:<18} {:>10} {:>9} {:>12}",
        "size", "variant", "time", "GFLOP/s", "vs gemm with the same operand layout"
    );
    for n in sizes {
        let group = format!("matmul {n}");
        let flops = 2.0 * (n as f64).powi(3);
        for threads in [1, 2] {
            for variant in ["axes", "axes permuted", "gemm", "gemm permuted", "ndarray"] {
                let peer = if variant.ends_with("permuted") {
                    "gemm permuted"
                } else {
                    "gemm"
                };
                let Some(reference) = median_ns(&group, &format!("{peer}/{threads}")) else {
                    continue;
                };
                let id = if variant == "ndarray" {
                    "ndarray/1".to_string()
                } else {
                    format!("{variant}/{threads}")
                };
                if variant == "ndarray" && threads == 2 {
                    continue;
                }
                if let Some(ns) = median_ns(&group, &id) {
                    println!(
                        "{:<14} {:<18} {:>8.2}ms {:>9.1} {:>11.1}%",
                        format!("{n}³ {threads}t"),
                        variant,
                        ns / 1e6,
                        flops / ns,
                        100.0 * reference / ns
                    );
                }
            }
        }
    }
    openblas_peer(&sizes);
}

/// `axes` against numpy's matrix product (OpenBLAS in its wheels), f32 n³, on 1 and 2
/// threads: the peer's median from `benches/peers.py` beside criterion's median of `axes`.
fn openblas_peer(sizes: &[usize]) {
    println!(
        "\n{:<14} {:>12} {:>12} {:>14}",
        "size", "axes", "OpenBLAS", "axes/OpenBLAS"
    );
    for threads in [1, 2] {
        let threads_arg = threads.to_string();
        let args = [
            "benches/peers.py",
            "--threads",
            &threads_arg,
            "--only",
            "matmul",
        ];
        let Some(out) = python_output(&args) else {
            return;
        };
        for &n in sizes {
            let peer = out.lines().find(|line| {
                line.contains("\"framework\": \"numpy\"")
                    && json_number(line, "size") == Some(n as f64)
            });
            let (Some(peer_us), Some(ours_ns)) = (
                peer.and_then(|line| json_number(line, "median_us")),
                median_ns(&format!("matmul {n}"), &format!("axes/{threads}")),
            ) else {
                continue;
            };
            let flops = 2.0 * (n as f64).powi(3);
            println!(
                "{:<14} {:>7.1} GF/s {:>7.1} GF/s {:>13.2}",
                format!("{n}³ {threads}t"),
                flops / ours_ns,
                flops / (peer_us * 1e3),
                peer_us * 1e3 / ours_ns
            );
        }
    }
}
