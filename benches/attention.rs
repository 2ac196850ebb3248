//! Causal attention alone, forward and backward, at the GPT's head shapes (batch 8 × 4 heads,
//! head width 32, f32) and contexts 128, 512 and 1024, on 1 and 2 threads: the fused op
//! (`axes::Attention`) beside the composition it replaces (`dot_over`, scale, mask, `softmax`,
//! `dot_over`) and beside PyTorch's `scaled_dot_product_attention(is_causal=True)`
//! (`benches/attention_torch.py`, run as a child process when `python3` — or
//! `$AXES_TORCH_PYTHON` — can import torch); and the fused op unmasked at 1024, for the
//! causal skip. Prints the ratios after criterion's report.
//!
//! `cargo bench --bench attention`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;

use axes::Attention;
use axes::autodiff::{self, Tape};
use axes::nn::causal_mask;
use axes::prelude::*;
use criterion::BenchmarkId;

mod support;
use support::{median_ns, python_peer};

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct Q;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct H;
#[derive(Axis)]
struct D;

const BATCH: usize = 8;
const HEADS: usize = 4;
const WIDTH: usize = 32;
const GROUP: &str = "causal attention b8 h4 d32 fwd+bwd";

type Operands = (
    Tensor<f32, (B, Q, H, D)>,
    Tensor<f32, (B, K, H, D)>,
    Tensor<f32, (B, K, H, D)>,
);

fn operands(context: usize) -> Operands {
    let (b, h, d) = (B.len(BATCH), H.len(HEADS), D.len(WIDTH));
    (
        Tensor::random_uniform((b, Q.len(context), h, d), -1.0, 1.0, 1).unwrap(),
        Tensor::random_uniform((b, K.len(context), h, d), -1.0, 1.0, 2).unwrap(),
        Tensor::random_uniform((b, K.len(context), h, d), -1.0, 1.0, 3).unwrap(),
    )
}

/// Forward and backward of the fused op; the sum of the query gradient (kept alive).
fn fused(attention: Attention<Q, K, D>, (q, k, v): &Operands) -> f32 {
    let tape = Tape::new();
    let (qv, kv, vv) = (
        tape.var(q.clone()),
        tape.var(k.clone()),
        tape.var(v.clone()),
    );
    let out = attention.run_var(&qv, &kv, &vv).unwrap();
    let grads = out.sum::<(B, Q, H, D)>().unwrap().backward().unwrap();
    grads.get(&qv).unwrap().sum_all().unwrap()
}

/// The same through the composition.
fn composed((q, k, v): &Operands, mask: &Tensor<f32, (Q, K)>) -> f32 {
    let tape = Tape::new();
    let (qv, kv, vv) = (
        tape.var(q.clone()),
        tape.var(k.clone()),
        tape.var(v.clone()),
    );
    let mask = tape.constant(mask.clone());
    let scores = autodiff::dot_over::<(D,), _, _, _, _, _>(&qv, &kv).unwrap();
    let scores = (scores * (1.0 / (WIDTH as f32).sqrt()) + &mask)
        .eval()
        .unwrap();
    let p = scores.softmax::<K>().unwrap();
    let out = autodiff::dot_over::<(K,), _, _, _, _, _>(&p, &vv).unwrap();
    let grads = out.sum::<(B, H, Q, D)>().unwrap().backward().unwrap();
    grads.get(&qv).unwrap().sum_all().unwrap()
}

fn main() {
    let mut c = support::criterion(10, (1000, 300), (5, 2));
    let mut group = c.benchmark_group(GROUP);
    for context in [128, 512, 1024] {
        let ops = operands(context);
        let mask = causal_mask::<f32, Q, K>(Q.len(context), K.len(context)).unwrap();
        for threads in [1, 2] {
            axes::set_threads(threads).unwrap();
            let id = |what: &str| BenchmarkId::new(what, format!("ctx{context}-{threads}t"));
            group.bench_function(id("fused"), |b| {
                b.iter(|| black_box(fused(Attention::causal(), &ops)))
            });
            group.bench_function(id("composed"), |b| {
                b.iter(|| black_box(composed(&ops, &mask)))
            });
            if context == 1024 {
                group.bench_function(id("fused unmasked"), |b| {
                    b.iter(|| black_box(fused(Attention::new(), &ops)))
                });
            }
        }
    }
    group.finish();
    c.final_summary();
    println!("\ncausal attention forward + backward, batch 8 × 4 heads × 32, f32 (ms, median)");
    for context in [128, 512, 1024] {
        for threads in [1, 2] {
            let ms = |what: &str| {
                median_ns(GROUP, &format!("{what}/ctx{context}-{threads}t")).map(|ns| ns / 1e6)
            };
            let (Some(f), Some(c)) = (ms("fused"), ms("composed")) else {
                continue;
            };
            let args = [
                "benches/attention_torch.py",
                "--context",
                &context.to_string(),
                "--threads",
                &threads.to_string(),
            ];
            let torch = python_peer(&args, "median_ms");
            print!(
                "context {context:4}, {threads} thread(s): fused {f:8.2}  composed {c:8.2} (×{:.2})",
                c / f
            );
            if let Some(torch) = torch {
                print!("  PyTorch SDPA {torch:8.2} (×{:.2})", torch / f);
            }
            if let Some(u) = ms("fused unmasked") {
                print!("  unmasked {u:8.2} (causal/unmasked {:.2})", f / u);
            }
            println!();
        }
    }
    println!("(×: the peer's time over the fused op's; > 1 means the fused op is faster)");
}
