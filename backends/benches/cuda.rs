//! On a CUDA device: fused `a*x + b*y` and `sum((x - y)²)` over 16M f32, as a fraction of a
//! device-to-device copy's bandwidth measured in the same run — both as bare jobs given to the
//! backend (`Backend::run`) and through the library on tensors that live on the GPU
//! (`(&x * 2.0 + &y * 3.0).eval()`, `(&x - &y).square().sum::<(Elem,)>()`, each allocating its
//! result); and matrix products (2048³) in GFLOP/s: the library's `dot` on GPU tensors (which
//! calls cuBLAS) and cuBLAS SGEMM called directly; and, into existing tensors at 16M and 256M
//! f32, a copy, `a*x + b*y`, a transposed add and `Σ(x - y)²` (into a device tensor, and read
//! back to the host) beside a copy of the same size. The kernels' tuning variables
//! (`axes_backends::tuning`: tile shape, reduction groups and reads, launch groups) apply, so
//! one run per setting sweeps them.
//! Without a device it prints `SKIPPED (no CUDA device): <reason>` and exits.
//!
//! `cargo bench -p axes-backends --features cuda --bench cuda`; `AXES_BENCH_QUICK=1` for a
//! short run. To run on a GPU machine without Rust, build here with `--no-run`, carry the
//! binary, and run it there with `--bench`.

use std::hint::black_box;
use std::sync::Arc;

use axes_backends::cuda::Cuda;
use axes_core::DType;
use axes_core::ir::{Ir, IrNode, ReduceOp};
use axes_core::protocol::{Backend, DeviceMemory, Job, JobLeaf, OutputJob, WriteTo};
use criterion::Criterion;

#[path = "../../benches/support/mod.rs"]
mod support;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys::cublasOperation_t};

const N: usize = 1 << 24;
const SIDE: usize = 2048;
/// The stream workloads into existing tensors: (label, side of a square f32 matrix), 16M and
/// 256M elements (64 MiB and 1 GiB a tensor).
const STREAM: [(&str, usize); 2] = [("16M", 1 << 12), ("256M", 1 << 14)];

fn axpby() -> Ir {
    let mut ir = Ir::default();
    let (x, y) = (ir.leaf(), ir.leaf());
    let a = ir.push(IrNode::Scalar(2.0));
    let b = ir.push(IrNode::Scalar(3.0));
    let ax = ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Mul, a, x));
    let by = ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Mul, b, y));
    ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Add, ax, by));
    ir
}

fn squared_difference() -> Ir {
    let mut ir = Ir::default();
    let (x, y) = (ir.leaf(), ir.leaf());
    let d = ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Sub, x, y));
    ir.push(IrNode::Unary(axes_core::ir::UnaryOp::Square, d));
    ir
}

/// Criterion's median for `name` in this run, in milliseconds.
fn median_ms(name: &str) -> Option<f64> {
    let (group, id) = name.split_once('/').unwrap_or((name, ""));
    support::median_ns(group, id).map(|ns| ns / 1e6)
}

fn main() {
    let cuda = match Cuda::shared(0) {
        Ok(cuda) => cuda,
        Err(e) => {
            println!("SKIPPED (no CUDA device): {e}");
            return;
        }
    };
    let mut c = support::criterion(20, (1000, 200), (3, 1));
    let stream = Arc::clone(cuda.stream());
    let x = cuda.upload(&vec![1.0f32; N]).unwrap();
    let mut out = cuda.upload(&vec![0.0f32; N]).unwrap();

    c.bench_function("cuda copy 16M", |b| {
        b.iter(|| {
            stream.memcpy_dtod(&x, &mut out).unwrap();
            stream.synchronize().unwrap();
        })
    });
    {
        let n = STREAM[1].1 * STREAM[1].1;
        let x = stream.alloc_zeros::<f32>(n).unwrap();
        let mut out = stream.alloc_zeros::<f32>(n).unwrap();
        c.bench_function(&format!("cuda copy {}", STREAM[1].0), |b| {
            b.iter(|| {
                stream.memcpy_dtod(&x, &mut out).unwrap();
                stream.synchronize().unwrap();
            })
        });
    }

    // The same work as bare jobs: what the backend adds to the kernels, without tensors.
    let bytes = |value: f32| -> Vec<u8> { (0..N).flat_map(|_| value.to_ne_bytes()).collect() };
    let (xm, ym) = (
        Backend::upload(cuda, &bytes(1.0)).unwrap(),
        Backend::upload(cuda, &bytes(2.0)).unwrap(),
    );
    let job = |ir: Ir, kept: usize, reduced: usize| OutputJob {
        ir,
        leaves: [&xm, &ym]
            .map(|memory: &DeviceMemory| JobLeaf {
                dtype: DType::F32,
                memory,
                offset: 0,
                strides: if kept > 1 { vec![1, 0] } else { vec![0, 1] },
            })
            .to_vec(),
        kept: vec![kept],
        reduced: vec![reduced],
        reduce: ReduceOp::Sum,
        out: DType::F32,
    };
    let axpby_job: Job<'_> = job(axpby(), N, 1).into();
    c.bench_function("cuda axpby 16M", |b| {
        b.iter(|| {
            black_box(cuda.run(&axpby_job, WriteTo::New).unwrap());
            cuda.synchronize().unwrap();
        })
    });
    let sum_job: Job<'_> = job(squared_difference(), 1, N).into();
    c.bench_function("cuda sum sq diff 16M", |b| {
        b.iter(|| {
            black_box(cuda.run(&sum_job, WriteTo::New).unwrap());
            cuda.synchronize().unwrap();
        })
    });
    let total = cuda.run(&sum_job, WriteTo::New).unwrap();
    let total = Backend::download(cuda, &total[0]).unwrap();
    let sum = f32::from_ne_bytes(total[..4].try_into().unwrap());
    assert!(
        (sum - N as f32).abs() < 1e-3 * N as f32,
        "Σ(x-y)² = {sum}, expected {N}"
    );

    // 2048³ products by cuBLAS, called directly.
    let a = cuda.upload(&vec![0.5f32; SIDE * SIDE]).unwrap();
    let bm = cuda.upload(&vec![0.25f32; SIDE * SIDE]).unwrap();
    let mut cm = cuda.upload(&vec![0.0f32; SIDE * SIDE]).unwrap();
    // SAFETY: only probes for the library.
    if unsafe { cudarc::cublas::sys::is_culib_present() } {
        let blas = CudaBlas::new(Arc::clone(&stream)).unwrap();
        let side = SIDE as i32;
        let config = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: side,
            n: side,
            k: side,
            alpha: 1.0f32,
            lda: side,
            ldb: side,
            beta: 0.0f32,
            ldc: side,
        };
        c.bench_function("cuda matmul cublas 2048", |b| {
            b.iter(|| {
                // SAFETY: a, bm and cm hold SIDE² elements each, as the configuration says.
                unsafe { blas.gemm(config, &bm, &a, &mut cm) }.unwrap();
                stream.synchronize().unwrap();
            })
        });
    } else {
        println!("cuBLAS not found: the cuBLAS comparison is not run");
    }
    black_box(&cm);

    // The same work through the library, on tensors that live on the GPU.
    library(&mut c, cuda);
    c.final_summary();

    println!("\n{} (medians)", cuda.name());
    let copy = median_ms("cuda copy 16M");
    if let Some(copy) = copy {
        let copy_gbs = 2.0 * 4.0 * N as f64 / copy / 1e6;
        println!("device-to-device copy: {copy:.3} ms, {copy_gbs:.0} GB/s");
        for (name, bytes) in [("cuda axpby 16M", 3.0), ("cuda sum sq diff 16M", 2.0)] {
            if let Some(ms) = median_ms(name) {
                let gbs = bytes * 4.0 * N as f64 / ms / 1e6;
                println!(
                    "{name}: {ms:.3} ms, {gbs:.0} GB/s = {:.2} of the copy",
                    gbs / copy_gbs
                );
            }
        }
    }
    if let Some(copy) = copy {
        let copy_gbs = 2.0 * 4.0 * N as f64 / copy / 1e6;
        for (name, bytes) in [
            ("cuda library axpby 16M", 3.0),
            ("cuda library sum sq diff 16M", 2.0),
        ] {
            if let Some(ms) = median_ms(name) {
                let gbs = bytes * 4.0 * N as f64 / ms / 1e6;
                println!(
                    "{name}: {ms:.3} ms, {gbs:.0} GB/s = {:.2} of the copy",
                    gbs / copy_gbs
                );
            }
        }
    }
    for (label, side) in STREAM {
        let Some(copy) = median_ms(&format!("cuda copy {label}")) else {
            continue;
        };
        let copy_gbs = 2.0 * 4.0 * (side * side) as f64 / copy / 1e6;
        println!("into existing tensors, {label} (copy {copy:.3} ms, {copy_gbs:.0} GB/s):");
        for (name, bytes) in [
            ("assign copy", 2.0),
            ("assign axpby", 3.0),
            ("assign transposed add", 3.0),
            ("assign_sum sq diff", 2.0),
            ("sum_all sq diff", 2.0),
        ] {
            if let Some(ms) = median_ms(&format!("cuda library {name} {label}")) {
                let gbs = bytes * 4.0 * (side * side) as f64 / ms / 1e6;
                println!(
                    "  {name}: {ms:.3} ms, {gbs:.0} GB/s = {:.2} of the copy",
                    gbs / copy_gbs
                );
            }
        }
    }
    let flops = 2.0 * (SIDE as f64).powi(3);
    if let (Some(ours), Some(blas)) = (
        median_ms("cuda library dot 2048"),
        median_ms("cuda matmul cublas 2048"),
    ) {
        println!(
            "library dot: {:.0} GFLOP/s; cuBLAS direct {:.0} GFLOP/s; ratio {:.2}",
            flops / ours / 1e6,
            flops / blas / 1e6,
            blas / ours
        );
    }
}

#[derive(axes::Axis)]
struct Elem;
#[derive(axes::Axis)]
struct Row;
#[derive(axes::Axis)]
struct Inner;
#[derive(axes::Axis)]
struct Col;

/// `a*x + b*y`, `Σ(x - y)²` and a 2048³ `dot` through the library on GPU tensors, and the
/// stream workloads of [`STREAM`] into existing tensors: a copy, `a*x + b*y`, `x + yᵀ` (the
/// second operand stored in the other axis order) and `Σ(x - y)²` into a device tensor and
/// read back to the host.
fn library(c: &mut Criterion, cuda: &'static Cuda) {
    use axes::prelude::*;
    let gpu = axes::Device::Backend(cuda);
    let done = || cuda.synchronize().unwrap();
    for (label, side) in STREAM {
        let lengths = (Row.len(side), Col.len(side));
        let on = |value: f32| {
            Tensor::<f32, (Row, Col)>::full(lengths, value)
                .and_then(|t| t.to(&gpu))
                .unwrap()
        };
        let (x, y, mut z) = (on(1.0), on(2.0), on(0.0));
        let yt = Tensor::<f32, (Col, Row)>::full(lengths, 2.0)
            .and_then(|t| t.to(&gpu))
            .unwrap();
        c.bench_function(&format!("cuda library assign copy {label}"), |b| {
            b.iter(|| {
                z.assign(&x).unwrap();
                done()
            })
        });
        c.bench_function(&format!("cuda library assign axpby {label}"), |b| {
            b.iter(|| {
                z.assign(&x * 2.0 + &y * 3.0).unwrap();
                done()
            })
        });
        c.bench_function(
            &format!("cuda library assign transposed add {label}"),
            |b| {
                b.iter(|| {
                    z.assign(&x + &yt).unwrap();
                    done()
                })
            },
        );
        let mut total = Tensor::<f32, ()>::zeros(())
            .and_then(|t| t.to(&gpu))
            .unwrap();
        c.bench_function(&format!("cuda library assign_sum sq diff {label}"), |b| {
            b.iter(|| {
                total
                    .assign_sum::<(Row, Col), _>((&x - &y).square())
                    .unwrap();
                done()
            })
        });
        let sum = total.to_vec()[0];
        let n = (side * side) as f32;
        assert!((sum - n).abs() < 1e-3 * n, "Σ(x-y)² = {sum}");
        c.bench_function(&format!("cuda library sum_all sq diff {label}"), |b| {
            b.iter(|| black_box((&x - &y).square().sum_all().unwrap()))
        });
        assert_eq!(z.get((Row.at(side - 1), Col.at(0))).unwrap(), 3.0);
    }
    let on_gpu = |value: f32| {
        Tensor::<f32, (Elem,)>::from_vec(Elem.len(N), vec![value; N])
            .and_then(|t| t.to(&gpu))
            .unwrap()
    };
    let (x, y) = (on_gpu(1.0), on_gpu(2.0));
    // Library calls queue their kernels and return; each iteration waits for its work, as the
    // hand-launched kernels above do.
    c.bench_function("cuda library axpby 16M", |b| {
        b.iter(|| {
            black_box((&x * 2.0 + &y * 3.0).eval().unwrap());
            done()
        })
    });
    c.bench_function("cuda library sum sq diff 16M", |b| {
        b.iter(|| {
            black_box((&x - &y).square().sum::<(Elem,)>().unwrap());
            done()
        })
    });
    let total = (&x - &y).square().sum_all().unwrap();
    assert!(
        (total - N as f32).abs() < 1e-3 * N as f32,
        "Σ(x-y)² = {total}"
    );
    let a = Tensor::<f32, (Row, Inner)>::full((Row.len(SIDE), Inner.len(SIDE)), 0.5)
        .and_then(|t| t.to(&gpu))
        .unwrap();
    let bm = Tensor::<f32, (Inner, Col)>::full((Inner.len(SIDE), Col.len(SIDE)), 0.25)
        .and_then(|t| t.to(&gpu))
        .unwrap();
    c.bench_function("cuda library dot 2048", |b| {
        b.iter(|| {
            black_box(dot(&a, &bm).unwrap());
            done()
        })
    });
    let z = dot(&a, &bm).unwrap();
    assert_eq!(z.device(), gpu);
    let corner = z.get((Row.at(0), Col.at(0))).unwrap();
    assert!(
        (corner - 0.125 * SIDE as f32).abs() < 1e-2,
        "dot corner {corner}"
    );
}
