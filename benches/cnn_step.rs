//! One training step (forward, backward, AdamW) of the digits CNN of `examples/cnn.rs` at
//! batch 32, f32 — two 3×3 convolutions (1→16→32 maps, padding 1), a 2×2 max pooling and two
//! dense layers — beside PyTorch CPU (`benches/cnn_torch.py --bench`, run as a child process
//! when `python3`, or `$AXES_TORCH_PYTHON`, can import torch) at 1 and 2 threads. Prints µs
//! per step and the ratios after criterion's report.
//!
//! `cargo bench --bench cnn_step`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::{Conv, Init, Linear, Params, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;
use axes::spatial::{Convolution, Pool};
use criterion::{BenchmarkId, Criterion};

mod support;
use support::{median_ns, python_peer};

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
#[axis(role = Channel)]
struct Gray;
#[derive(Axis)]
#[axis(role = Height)]
struct Rows;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
#[derive(Axis)]
#[axis(role = Channel, role = Channelout)]
struct Maps;
#[derive(Axis)]
#[axis(role = Channelout)]
struct Features;
#[derive(Axis)]
#[axis(role = Height)]
struct KRows;
#[derive(Axis)]
#[axis(role = Width)]
struct KCols;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

const BATCH: usize = 32;

struct Cnn {
    conv1: Conv<(Maps, Gray, KRows, KCols), Maps>,
    conv2: Conv<(Features, Maps, KRows, KCols), Features>,
    hidden: Linear<Flat<(Features, Rows, Cols)>, Hidden>,
    output: Linear<Hidden, Class>,
}

fn model() -> (Cnn, Params<f32>) {
    let mut b = ParamsBuilder::new();
    let same = Convolution::new().padding(1);
    let (k, l) = (KRows.len(3), KCols.len(3));
    let flat = Len::<Flat<(Features, Rows, Cols)>>::new(32 * 4 * 4);
    let model = Cnn {
        conv1: Conv::new(&mut b, "conv1", (Maps.len(16), Gray.len(1), k, l), same).unwrap(),
        conv2: Conv::new(
            &mut b,
            "conv2",
            (Features.len(32), Maps.len(16), k, l),
            same,
        )
        .unwrap(),
        hidden: Linear::new(&mut b, "hidden", flat, Hidden.len(64), Init::He).unwrap(),
        output: Linear::new(&mut b, "output", Hidden.len(64), Class.len(10), Init::He).unwrap(),
    };
    (model, b.build(1).unwrap())
}

type Images = Tensor<f32, (Batch, Gray, Rows, Cols)>;

fn step(
    model: &Cnn,
    params: &mut Params<f32>,
    adam: &mut Adam<f32>,
    x: &Images,
    y: &Tensor<i64, (Batch,)>,
) -> f32 {
    let (value, grad) = {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = model
            .conv1
            .forward(&p, &tape.constant(x.clone()))
            .unwrap()
            .relu()
            .eval()
            .unwrap();
        let h = model.conv2.forward(&p, &h).unwrap().relu().eval().unwrap();
        let h = Pool::max(2).run_var(&h).unwrap();
        let h = h.flatten::<(Features, Rows, Cols)>().unwrap();
        let h = model.hidden.forward(&p, &h).unwrap().relu();
        let logits = model.output.forward(&p, h).unwrap();
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, y)
            .unwrap()
            .mean::<(Batch,)>()
            .unwrap();
        let value = loss.value().to_vec()[0];
        (value, p.gradient(&loss.backward().unwrap()).unwrap())
    };
    adam.step(params, &grad).unwrap();
    value
}

fn data() -> (Images, Tensor<i64, (Batch,)>) {
    let lens = (Batch.len(BATCH), Gray.len(1), Rows.len(8), Cols.len(8));
    let x = Tensor::random_uniform(lens, 0.0, 1.0, 3).unwrap();
    let y = Tensor::from_fn(Batch.len(BATCH), |i| ((i.of::<Batch>() * 7) % 10) as i64).unwrap();
    (x, y)
}

const GROUP: &str = "cnn step b32";

fn main() {
    let mut c: Criterion = support::criterion(20, (1000, 200), (4, 1));
    let (x, y) = data();
    let mut group = c.benchmark_group(GROUP);
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let (model, mut params) = model();
        let mut adam = Adam::new(3e-3).with_weight_decay(1e-2);
        group.bench_function(BenchmarkId::new("axes", threads), |b| {
            b.iter(|| black_box(step(&model, &mut params, &mut adam, &x, &y)))
        });
    }
    group.finish();
    c.final_summary();
    println!("\none training step of the digits CNN, batch 32, f32 (µs per step, median)");
    for threads in [1, 2] {
        let Some(ours) = median_ns(GROUP, &format!("axes/{threads}")).map(|ns| ns / 1e3) else {
            continue;
        };
        let args = [
            "benches/cnn_torch.py",
            "--bench",
            "--threads",
            &threads.to_string(),
        ];
        print!("axes, {threads} thread(s): {ours:8.1} µs");
        if let Some(t) = python_peer(&args, "median_us_per_step") {
            print!(
                "   PyTorch ({threads} thread(s)): {t:8.1} µs  ratio {:.2}",
                t / ours
            );
        }
        println!("   (ratio = peer time / ours; > 1 means axes is faster)");
    }
}
