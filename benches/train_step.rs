//! One training step (forward, backward, Adam) of a 64-256-256-10 ReLU MLP at batch 128, f32:
//! `axes` beside the same model written by hand with ndarray (same process), and beside
//! PyTorch CPU (`benches/train_step_torch.py`, run as a child process when `python3` can
//! import torch). Prints µs per step and the ratios after criterion's report.
//!
//! `cargo bench --bench train_step`; `AXES_BENCH_QUICK=1` for a short run. With
//! `AXES_BENCH_DEVICE=cuda:0` (or `opencl:0`) it times the step on that device instead (beside
//! PyTorch on CUDA for a CUDA device) and counts the launches of one step; each step reads its
//! loss, which waits for the device.

use std::hint::black_box;

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::{Init, Linear, Params, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;
use criterion::{BenchmarkId, Criterion};
use ndarray::{Array1, Array2, Axis as NdAxis};

mod support;
use support::{median_ns, python_peer};

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden1;
#[derive(Axis)]
struct Hidden2;
#[derive(Axis)]
struct Class;

const BATCH: usize = 128;
const IN: usize = 64;
const HIDDEN: usize = 256;
const CLASSES: usize = 10;
const LR: f64 = 1e-3;

struct Mlp {
    first: Linear<Pixel, Hidden1>,
    second: Linear<Hidden1, Hidden2>,
    last: Linear<Hidden2, Class>,
}

fn axes_model() -> (Mlp, Params<f32>) {
    let mut b = ParamsBuilder::new();
    let model = Mlp {
        first: Linear::new(
            &mut b,
            "first",
            Pixel.len(IN),
            Hidden1.len(HIDDEN),
            Init::He,
        )
        .unwrap(),
        second: Linear::new(
            &mut b,
            "second",
            Hidden1.len(HIDDEN),
            Hidden2.len(HIDDEN),
            Init::He,
        )
        .unwrap(),
        last: Linear::new(
            &mut b,
            "last",
            Hidden2.len(HIDDEN),
            Class.len(CLASSES),
            Init::Glorot,
        )
        .unwrap(),
    };
    (model, b.build(1).unwrap())
}

fn axes_step(
    model: &Mlp,
    params: &mut Params<f32>,
    adam: &mut Adam<f32>,
    x: &Tensor<f32, (Batch, Pixel)>,
    y: &Tensor<i64, (Batch,)>,
) -> f32 {
    let tape = Tape::new();
    let p = params.bind(&tape);
    let h = model
        .first
        .forward(&p, &tape.constant(x.clone()))
        .unwrap()
        .relu();
    let h = model.second.forward(&p, h).unwrap().relu();
    let logits = model.last.forward(&p, h).unwrap();
    let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, y)
        .unwrap()
        .mean::<(Batch,)>()
        .unwrap();
    let value = loss.value().to_vec()[0];
    let grad = p.gradient(&loss.backward().unwrap()).unwrap();
    adam.step(params, &grad).unwrap();
    value
}

/// The same model, its backward written out by hand with ndarray.
struct NdMlp {
    params: Vec<Array2<f32>>, // w1, b1 (1×H), w2, b2, w3, b3
    m: Vec<Array2<f32>>,
    v: Vec<Array2<f32>>,
    steps: i32,
}

impl NdMlp {
    fn new(from: &Params<f32>, model: &Mlp) -> Self {
        let matrix = |t: Vec<f32>, r: usize, c: usize| Array2::from_shape_vec((r, c), t).unwrap();
        let params = vec![
            matrix(
                from.tensor(&model.first.weight).unwrap().to_vec(),
                IN,
                HIDDEN,
            ),
            matrix(from.tensor(&model.first.bias).unwrap().to_vec(), 1, HIDDEN),
            matrix(
                from.tensor(&model.second.weight).unwrap().to_vec(),
                HIDDEN,
                HIDDEN,
            ),
            matrix(from.tensor(&model.second.bias).unwrap().to_vec(), 1, HIDDEN),
            matrix(
                from.tensor(&model.last.weight).unwrap().to_vec(),
                HIDDEN,
                CLASSES,
            ),
            matrix(from.tensor(&model.last.bias).unwrap().to_vec(), 1, CLASSES),
        ];
        let zeros: Vec<Array2<f32>> = params.iter().map(|p| Array2::zeros(p.dim())).collect();
        NdMlp {
            m: zeros.clone(),
            v: zeros,
            params,
            steps: 0,
        }
    }

    fn step(&mut self, x: &Array2<f32>, labels: &[usize]) -> f32 {
        let p = &self.params;
        let z1 = x.dot(&p[0]) + &p[1];
        let h1 = z1.mapv(|v| v.max(0.0));
        let z2 = h1.dot(&p[2]) + &p[3];
        let h2 = z2.mapv(|v| v.max(0.0));
        let logits = h2.dot(&p[4]) + &p[5];
        let n = x.nrows() as f32;
        let mut d = logits.clone();
        let mut loss = 0.0;
        for (mut row, &label) in d.axis_iter_mut(NdAxis(0)).zip(labels) {
            let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            row.mapv_inplace(|v| (v - max).exp());
            let total = row.sum();
            loss -= (row[label] / total).ln();
            row.mapv_inplace(|v| v / total / n);
            row[label] -= 1.0 / n;
        }
        let grads = {
            let gw3 = h2.t().dot(&d);
            let gb3 = d.sum_axis(NdAxis(0)).insert_axis(NdAxis(0));
            let dh2 = d.dot(&p[4].t()) * z2.mapv(|v| (v > 0.0) as u8 as f32);
            let gw2 = h1.t().dot(&dh2);
            let gb2 = dh2.sum_axis(NdAxis(0)).insert_axis(NdAxis(0));
            let dh1 = dh2.dot(&p[2].t()) * z1.mapv(|v| (v > 0.0) as u8 as f32);
            let gw1 = x.t().dot(&dh1);
            let gb1 = dh1.sum_axis(NdAxis(0)).insert_axis(NdAxis(0));
            [gw1, gb1, gw2, gb2, gw3, gb3]
        };
        self.steps += 1;
        let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        let c1 = 1.0 - b1.powi(self.steps);
        let c2 = 1.0 - b2.powi(self.steps);
        for (((p, m), v), g) in self
            .params
            .iter_mut()
            .zip(&mut self.m)
            .zip(&mut self.v)
            .zip(&grads)
        {
            ndarray::Zip::from(p)
                .and(m)
                .and(v)
                .and(g)
                .for_each(|p, m, v, &g| {
                    *m = b1 * *m + (1.0 - b1) * g;
                    *v = b2 * *v + (1.0 - b2) * g * g;
                    *p -= LR as f32 * (*m / c1) / ((*v / c2).sqrt() + eps);
                });
        }
        loss / n
    }
}

/// A batch of inputs and labels.
type Batch128 = (Tensor<f32, (Batch, Pixel)>, Tensor<i64, (Batch,)>);

fn data() -> Batch128 {
    let x = Tensor::random_normal((Batch.len(BATCH), Pixel.len(IN)), 0.0, 1.0, 3).unwrap();
    let y = Tensor::from_fn(Batch.len(BATCH), |i| {
        ((i.of::<Batch>() * 7) % CLASSES) as i64
    })
    .unwrap();
    (x, y)
}

fn bench(c: &mut Criterion) {
    let (x, y) = data();
    let mut group = c.benchmark_group("train step 64-256-256-10 b128");
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let (model, mut params) = axes_model();
        let mut adam = Adam::new(LR);
        group.bench_function(BenchmarkId::new("axes", threads), |b| {
            b.iter(|| black_box(axes_step(&model, &mut params, &mut adam, &x, &y)))
        });
    }
    axes::set_threads(1).unwrap();
    let (model, params) = axes_model();
    let mut nd = NdMlp::new(&params, &model);
    let xs = Array2::from_shape_vec((BATCH, IN), x.to_vec()).unwrap();
    let labels: Vec<usize> = y.to_vec().iter().map(|&l| l as usize).collect();
    group.bench_function(BenchmarkId::new("ndarray", 1), |b| {
        b.iter(|| black_box(nd.step(&xs, &labels)))
    });
    group.finish();
}

/// Both implementations take the same steps from the same weights (a check that the peer
/// computes the same thing, not only something as fast).
fn agree() {
    axes::set_threads(1).unwrap();
    let (x, y) = data();
    let (model, mut params) = axes_model();
    let mut nd = NdMlp::new(&params, &model);
    let xs = Array2::from_shape_vec((BATCH, IN), x.to_vec()).unwrap();
    let labels: Vec<usize> = y.to_vec().iter().map(|&l| l as usize).collect();
    let mut adam = Adam::new(LR);
    for step in 0..5 {
        let (a, b) = (
            axes_step(&model, &mut params, &mut adam, &x, &y),
            nd.step(&xs, &labels),
        );
        assert!(
            (a - b).abs() < 1e-4 * a.abs().max(1.0),
            "step {step}: loss {a} vs ndarray {b}"
        );
    }
    let w: Array1<f32> = Array1::from(params.tensor(&model.last.weight).unwrap().to_vec());
    let w_nd = nd.params[4].iter().copied().collect::<Array1<f32>>();
    let diff = (&w - &w_nd).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
    assert!(diff < 1e-4, "weights differ by {diff}");
}

const DEVICE_GROUP: &str = "train step on a device";

/// The step on the device `name`, beside PyTorch on CUDA where it is a CUDA device.
fn on_device(c: &mut Criterion, name: &str) {
    let device = match axes::device(name) {
        Ok(device) => device,
        Err(e) => {
            println!("SKIPPED (no device {name}): {e}");
            return;
        }
    };
    let (x, y) = data();
    let (x, y) = (x.to(&device).unwrap(), y.to(&device).unwrap());
    let (model, params) = axes_model();
    let mut params = params.to(&device).unwrap();
    let mut adam = Adam::new(LR);
    let mut group = c.benchmark_group(DEVICE_GROUP);
    group.bench_function(BenchmarkId::new("axes", "device"), |b| {
        b.iter(|| black_box(axes_step(&model, &mut params, &mut adam, &x, &y)))
    });
    group.finish();
    let launches = || device.counters().map_or(0, |c| c.launches);
    let before = launches();
    axes_step(&model, &mut params, &mut adam, &x, &y);
    let per_step = launches() - before;
    c.final_summary();
    println!("\none training step, 64-256-256-10 MLP, batch 128, f32, on {device}");
    let Some(ours) = median_ns(DEVICE_GROUP, "axes/device").map(|ns| ns / 1e3) else {
        return;
    };
    print!("axes: {ours:8.1} µs, {per_step} launches");
    // PyTorch names CUDA devices as we do (`cuda`, `cuda:1`).
    let args = ["benches/train_step_torch.py", "--device", name];
    let torch = name
        .starts_with("cuda")
        .then(|| python_peer(&args, "median_us_per_step"));
    if let Some(t) = torch.flatten() {
        print!("   PyTorch ({name}): {t:8.1} µs  ratio {:.2}", t / ours);
    }
    println!("   (ratio = peer time / ours; > 1 means axes is faster)");
}

fn main() {
    let mut c = support::criterion(20, (1000, 200), (4, 1));
    if let Ok(name) = std::env::var("AXES_BENCH_DEVICE") {
        on_device(&mut c, &name);
        return;
    }
    agree();
    bench(&mut c);
    c.final_summary();
    let group = "train step 64-256-256-10 b128";
    let us = |id: &str| median_ns(group, id).map(|ns| ns / 1e3);
    println!("\none training step, 64-256-256-10 MLP, batch 128, f32 (µs per step, median)");
    let nd = us("ndarray/1");
    for threads in [1, 2] {
        let Some(ours) = us(&format!("axes/{threads}")) else {
            continue;
        };
        let args = [
            "benches/train_step_torch.py",
            "--threads",
            &threads.to_string(),
        ];
        let torch = python_peer(&args, "median_us_per_step");
        print!("axes, {threads} thread(s): {ours:8.1} µs");
        if let Some(nd) = nd {
            print!("   ndarray (1 thread): {nd:8.1} µs  ratio {:.2}", nd / ours);
        }
        if let Some(t) = torch {
            print!(
                "   PyTorch ({threads} thread(s)): {t:8.1} µs  ratio {:.2}",
                t / ours
            );
        }
        println!("   (ratio = peer time / ours; > 1 means axes is faster)");
    }
}
