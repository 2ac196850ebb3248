//! On the OpenCL device (PoCL on the CPU in CI), into existing tensors at 1M and 4M f32: a
//! copy (`z.assign(&x)`), `x + yᵀ` (the second operand stored in the other axis order) and
//! `Σ(x − y)²` into a device tensor, beside the runtime's own buffer copy
//! (`clEnqueueCopyBuffer`) of the same size; and f32 matrix products (a GPT layer's
//! 4096 × 128 · 128 × 384 and 512²) beside the same products in host memory (the `gemm`
//! crate). Without a device it prints `SKIPPED (no OpenCL device): <reason>` and exits.
//!
//! `cargo bench -p axes-backends --features opencl --bench opencl`; `AXES_BENCH_QUICK=1` for
//! a short run. The kernels' tuning variables (`axes_backends::tuning`) apply, e.g.
//! `AXES_TILE=32x8` to force tiles on a CPU runtime.

use axes::prelude::*;
use axes_backends::opencl::OpenCl;
use axes_core::protocol::Backend;

#[path = "../../benches/support/mod.rs"]
mod support;

#[derive(Axis)]
struct Row;
#[derive(Axis)]
struct Col;
#[derive(Axis)]
struct Inner;

/// The products: (label, rows, contracted length, columns).
const PRODUCTS: [(&str, usize, usize, usize); 2] = [
    ("4096x128x384", 4096, 128, 384),
    ("512x512x512", 512, 512, 512),
];

/// The workloads: (label, side of a square f32 matrix).
const SIZES: [(&str, usize); 2] = [("1M", 1 << 10), ("4M", 1 << 11)];

fn main() {
    let cl = match OpenCl::shared() {
        Ok(cl) => cl,
        Err(e) => {
            println!("SKIPPED (no OpenCL device): {e}");
            return;
        }
    };
    let mut c = support::criterion(20, (1000, 300), (3, 1));
    let device = axes::Device::Backend(cl);
    let done = || cl.synchronize().unwrap();
    for (label, side) in SIZES {
        let lengths = (Row.len(side), Col.len(side));
        let on = |value: f32| {
            Tensor::<f32, (Row, Col)>::full(lengths, value)
                .and_then(|t| t.to(&device))
                .unwrap()
        };
        let (x, y, mut z) = (on(1.0), on(2.0), on(0.0));
        let yt = Tensor::<f32, (Col, Row)>::full(lengths, 2.0)
            .and_then(|t| t.to(&device))
            .unwrap();
        let mut total = Tensor::<f32, ()>::zeros(())
            .and_then(|t| t.to(&device))
            .unwrap();
        let bytes = 4 * side * side;
        let (from, mut to) = (
            Backend::upload(cl, &vec![0u8; bytes]).unwrap(),
            Backend::upload(cl, &vec![0u8; bytes]).unwrap(),
        );
        c.bench_function(&format!("opencl copy {label}"), |b| {
            b.iter(|| {
                assert!(cl.copy_bytes(&from, 0, &mut to, 0, bytes).unwrap());
                done()
            })
        });
        c.bench_function(&format!("opencl assign copy {label}"), |b| {
            b.iter(|| {
                z.assign(&x).unwrap();
                done()
            })
        });
        c.bench_function(&format!("opencl assign transposed add {label}"), |b| {
            b.iter(|| {
                z.assign(&x + &yt).unwrap();
                done()
            })
        });
        z.assign(&x + &yt).unwrap();
        assert_eq!(z.get((Row.at(side - 1), Col.at(0))).unwrap(), 3.0);
        c.bench_function(&format!("opencl assign_sum sq diff {label}"), |b| {
            b.iter(|| {
                total
                    .assign_sum::<(Row, Col), _>((&x - &y).square())
                    .unwrap();
                done()
            })
        });
        total
            .assign_sum::<(Row, Col), _>((&x - &y).square())
            .unwrap();
        let sum = total.to_vec()[0];
        assert!(
            (sum - (side * side) as f32).abs() < 1e-3 * (side * side) as f32,
            "Σ(x-y)² = {sum}"
        );
    }
    for (label, m, k, n) in PRODUCTS {
        let a = Tensor::<f32, (Row, Inner)>::from_fn((Row.len(m), Inner.len(k)), |ix| {
            ((ix.of::<Row>() * 7 + ix.of::<Inner>()) % 13) as f32 / 13.0
        })
        .unwrap();
        let w = Tensor::<f32, (Inner, Col)>::from_fn((Inner.len(k), Col.len(n)), |ix| {
            ((ix.of::<Inner>() * 5 + ix.of::<Col>()) % 11) as f32 / 11.0
        })
        .unwrap();
        let (a_cl, w_cl) = (a.to(&device).unwrap(), w.to(&device).unwrap());
        let mut out = Tensor::<f32, (Row, Col)>::zeros((Row.len(m), Col.len(n)))
            .and_then(|t| t.to(&device))
            .unwrap();
        c.bench_function(&format!("opencl matmul {label}"), |b| {
            b.iter(|| {
                out.assign(dot(&a_cl, &w_cl).unwrap()).unwrap();
                done()
            })
        });
        c.bench_function(&format!("host matmul {label}"), |b| {
            b.iter(|| dot(&a, &w).unwrap())
        });
        let (host, on_device) = (dot(&a, &w).unwrap().to_vec(), out.to_vec());
        let worst = (host.iter().zip(&on_device))
            .map(|(h, d)| (h - d).abs() / (1.0 + h.abs()))
            .fold(0.0, f32::max);
        assert!(
            worst < 1e-5,
            "{label}: the device's product is off by {worst}"
        );
    }
    c.final_summary();
    println!("\n{} (medians)", cl.name());
    for (label, side) in SIZES {
        let Some(copy) = median_ms(&format!("opencl copy {label}")) else {
            continue;
        };
        let gbs = |bytes: f64, ms: f64| bytes * 4.0 * (side * side) as f64 / ms / 1e6;
        let copy_gbs = gbs(2.0, copy);
        println!("{label} (copy {copy:.3} ms, {copy_gbs:.1} GB/s):");
        for (name, bytes) in [
            ("assign copy", 2.0),
            ("assign transposed add", 3.0),
            ("assign_sum sq diff", 2.0),
        ] {
            if let Some(ms) = median_ms(&format!("opencl {name} {label}")) {
                println!(
                    "  {name}: {ms:.3} ms, {:.1} GB/s = {:.2} of the copy",
                    gbs(bytes, ms),
                    gbs(bytes, ms) / copy_gbs
                );
            }
        }
    }
    for (label, m, k, n) in PRODUCTS {
        let (Some(device), Some(host)) = (
            median_ms(&format!("opencl matmul {label}")),
            median_ms(&format!("host matmul {label}")),
        ) else {
            continue;
        };
        let gflops = |ms: f64| 2.0 * (m * k * n) as f64 / ms / 1e6;
        println!(
            "matmul {label}: {device:.2} ms, {:.1} GFLOP/s = {:.2} of the host's gemm ({host:.2} ms)",
            gflops(device),
            host / device
        );
    }
}

/// Criterion's median for `name` in this run, in milliseconds.
fn median_ms(name: &str) -> Option<f64> {
    let (group, id) = name.split_once('/').unwrap_or((name, ""));
    support::median_ns(group, id).map(|ns| ns / 1e6)
}
