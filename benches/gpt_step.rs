//! One training step (forward, backward, clipping, AdamW) of the character-level GPT of
//! `examples/gpt.rs` (4 blocks of 4 heads, 128 wide, context 128, batch 32; 828k parameters),
//! f32, on 1 and 2 threads, beside the same model in PyTorch CPU (`benches/gpt_torch.py
//! --bench`, run as a child process when `python3` — or `$AXES_TORCH_PYTHON` — can import
//! torch); and in bf16 over f32 master weights (`Params::bind_as`), against f32. Prints ms per
//! step, the ratios and the most bytes a step held after criterion's report.
//!
//! `cargo bench --bench gpt_step`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;

use axes::autodiff::Tape;
use axes::nn::transformer::{Batch, Gpt, GptConfig, Token};
use axes::nn::{Params, ParamsBuilder};
use axes::optim::{Adam, clip_grad_norm};
use axes::prelude::*;
use axes::{Device, Float};
use criterion::BenchmarkId;
use half::bf16;

mod support;
use support::{median_ns, python_peer};

const VOCAB: usize = 73;
const CONTEXT: usize = 128;
const BATCH: usize = 32;
const GROUP: &str = "gpt step 4x128 ctx128 b32";

fn model() -> (Gpt, Params<f32>) {
    let config = GptConfig {
        vocab: VOCAB,
        context: CONTEXT,
        hidden: 128,
        heads: 4,
        head_dim: 32,
        inner: 512,
        layers: 4,
    };
    let mut builder = ParamsBuilder::new();
    let gpt = Gpt::new(&mut builder, "gpt", &config).unwrap();
    (gpt, builder.build(1).unwrap())
}

/// Token ids of a batch of windows.
type Ids = Tensor<i64, (Batch, Token)>;

/// Ids and the ids that follow them: windows of a fixed pseudo-random sequence.
fn data() -> (Ids, Ids) {
    let ids: Vec<i64> = (0..BATCH * CONTEXT + 1)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as i64 % VOCAB as i64)
        .collect();
    let lens = (Batch.len(BATCH), Token.len(CONTEXT));
    (
        Tensor::from_vec(lens, ids[..BATCH * CONTEXT].to_vec()).unwrap(),
        Tensor::from_vec(lens, ids[1..].to_vec()).unwrap(),
    )
}

/// One step with the forward and backward passes in `H` (f32: the parameters themselves).
fn step<H: Float<Wide = f32>>(
    model: &Gpt,
    params: &mut Params<f32>,
    adam: &mut Adam<f32>,
    ids: &Ids,
    targets: &Ids,
) -> f64 {
    let tape = Tape::<H>::new();
    let p = params.bind_as::<H>(&tape).unwrap();
    let loss = model.loss(&p, ids, targets).unwrap();
    let grad = p.gradient(&loss.backward().unwrap()).unwrap();
    let (grad, _) = clip_grad_norm(params, grad.widened().unwrap(), 1.0).unwrap();
    adam.step(params, &grad).unwrap();
    loss.value().to_vec()[0].to_f64()
}

/// The most bytes the host held during one step in `H`, in MB.
fn peak_mb<H: Float<Wide = f32>>(ids: &Ids, targets: &Ids) -> f64 {
    let (gpt, mut params) = model();
    let mut adam = Adam::new(1e-3).with_weight_decay(0.01);
    step::<H>(&gpt, &mut params, &mut adam, ids, targets);
    Device::Cpu.reset_peak();
    step::<H>(&gpt, &mut params, &mut adam, ids, targets);
    Device::Cpu.counters().map_or(0, |c| c.peak_bytes) as f64 / 1e6
}

fn main() {
    let mut c = support::criterion(10, (2000, 500), (10, 3));
    let (ids, targets) = data();
    let mut group = c.benchmark_group(GROUP);
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let (gpt, mut params) = model();
        let mut adam = Adam::new(1e-3).with_weight_decay(0.01);
        group.bench_function(BenchmarkId::new("axes", threads), |b| {
            b.iter(|| black_box(step::<f32>(&gpt, &mut params, &mut adam, &ids, &targets)))
        });
        let (gpt, mut params) = model();
        let mut adam = Adam::new(1e-3).with_weight_decay(0.01);
        group.bench_function(BenchmarkId::new("axes-bf16", threads), |b| {
            b.iter(|| black_box(step::<bf16>(&gpt, &mut params, &mut adam, &ids, &targets)))
        });
    }
    group.finish();
    c.final_summary();
    println!("\none training step of the GPT of examples/gpt.rs, batch 32 × 128, f32 (ms, median)");
    for threads in [1, 2] {
        let Some(ours) = median_ns(GROUP, &format!("axes/{threads}")).map(|ns| ns / 1e6) else {
            continue;
        };
        let args = [
            "benches/gpt_torch.py",
            "--bench",
            "--threads",
            &threads.to_string(),
        ];
        let torch = python_peer(&args, "median_ms_per_step");
        print!("axes, {threads} thread(s): {ours:7.1} ms");
        if let Some(torch) = torch {
            print!(
                "   PyTorch ({threads} thread(s)): {torch:7.1} ms  ratio {:.2}",
                torch / ours
            );
        }
        println!("   (ratio = PyTorch's time / ours; > 1 means axes is faster)");
        if let Some(bf16) = median_ns(GROUP, &format!("axes-bf16/{threads}")) {
            let bf16 = bf16 / 1e6;
            println!(
                "axes in bf16, {threads} thread(s): {bf16:7.1} ms  ratio to f32 {:.2}",
                ours / bf16
            );
        }
    }
    let (f32_mb, bf16_mb) = (
        peak_mb::<f32>(&ids, &targets),
        peak_mb::<bf16>(&ids, &targets),
    );
    println!("most bytes held during a step: f32 {f32_mb:.0} MB, bf16 {bf16_mb:.0} MB");
}
