//! A training step recorded once and replayed (`axes::record::Recorded`) against the same
//! step run plainly, on the CPU backend and on OpenCL (PoCL where there is no GPU): a tiny
//! MLP first (4 samples, 8-16-16-4: the host's work per launch is most of the step), then the
//! digits-sized MLP (64-256-256-10 at batch 128) and a 2-layer GPT (64 wide, context 32,
//! batch 4), all with AdamW and clipping. Each step reads its loss, so the time includes the
//! device's work; the `host` variants time only the queuing of a step, the device idle
//! before and waited for after. Prints the time per step and per launch, plain and replayed.
//!
//! `cargo bench --bench recorded_step`; `AXES_BENCH_QUICK=1` for a short run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::transformer::{Batch as Rows, Gpt, GptConfig, Token};
use axes::nn::{Gradient, Init, Linear, Params, ParamsBuilder};
use axes::optim::{Adam, clip_grad_norm};
use axes::prelude::*;
use axes::record::Recorded;
use criterion::Criterion;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod support;
use support::median_ns;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Hidden2;
#[derive(Axis)]
struct Class;

/// A ReLU MLP with two hidden layers.
struct Mlp {
    first: Linear<Pixel, Hidden>,
    second: Linear<Hidden, Hidden2>,
    last: Linear<Hidden2, Class>,
}

/// An MLP's inputs and labels.
type Images = (Tensor<f32, (Batch, Pixel)>, Tensor<i64, (Batch,)>);

impl Mlp {
    fn new(widths: [usize; 4]) -> (Mlp, Params<f32>) {
        let [inputs, hidden, hidden2, classes] = widths;
        let mut b = ParamsBuilder::new();
        let first = Linear::new(
            &mut b,
            "first",
            Pixel.len(inputs),
            Hidden.len(hidden),
            Init::He,
        );
        let second = Linear::new(
            &mut b,
            "second",
            Hidden.len(hidden),
            Hidden2.len(hidden2),
            Init::He,
        );
        let last = Linear::new(
            &mut b,
            "last",
            Hidden2.len(hidden2),
            Class.len(classes),
            Init::Glorot,
        );
        let model = Mlp {
            first: first.unwrap(),
            second: second.unwrap(),
            last: last.unwrap(),
        };
        (model, b.build(1).unwrap())
    }

    fn loss_and_gradient(&self, params: &Params<f32>, (x, y): &Images) -> LossAndGradient {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = self.first.forward(&p, &tape.constant(x.clone()))?.relu();
        let h = self.second.forward(&p, h)?.relu();
        let logits = self.last.forward(&p, h)?;
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, y)?.mean::<(Batch,)>()?;
        let grad = p.gradient(&loss.backward()?)?;
        let (grad, _) = clip_grad_norm(params, grad, 1.0)?;
        Ok((loss.value().clone(), grad))
    }

    fn images(&self, device: &Device, widths: [usize; 4], batch: usize) -> Images {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let x = Tensor::from_fn((Batch.len(batch), Pixel.len(widths[0])), |_| {
            rng.random_range(-1.0..1.0)
        });
        let y = Tensor::from_fn(Batch.len(batch), |_| rng.random_range(0..widths[3] as i64));
        (
            x.unwrap().to(device).unwrap(),
            y.unwrap().to(device).unwrap(),
        )
    }
}

/// A step's loss and clipped gradient.
type LossAndGradient = axes::Result<(Tensor<f32, ()>, Gradient<f32>)>;

/// A GPT's token ids and targets.
type Tokens = (Tensor<i64, (Rows, Token)>, Tensor<i64, (Rows, Token)>);

fn gpt(device: &Device) -> (Gpt, Params<f32>, Tokens) {
    let config = GptConfig {
        vocab: 65,
        context: 32,
        hidden: 64,
        heads: 4,
        head_dim: 16,
        inner: 256,
        layers: 2,
    };
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config).unwrap();
    let params = builder.build::<f32>(2).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut ids = || {
        let values = (0..4 * 32).map(|_| rng.random_range(0..65)).collect();
        (Tensor::from_vec((Rows.len(4), Token.len(32)), values).unwrap())
            .to(device)
            .unwrap()
    };
    let tokens = (ids(), ids());
    (model, params, tokens)
}

fn adam() -> Adam<f32> {
    Adam::new(1e-3).with_weight_decay(0.01)
}

/// Times `loss_and_gradient` with AdamW on `device`, plainly and recorded, in `group`; the
/// launches of one step.
fn plain_and_recorded<I: axes::record::StepInputs>(
    c: &mut Criterion,
    group: &str,
    device: &Device,
    start: &Params<f32>,
    inputs: &I,
    loss_and_gradient: &dyn Fn(&Params<f32>, &I) -> LossAndGradient,
) -> u64 {
    let mut g = c.benchmark_group(group);
    let (mut params, mut optimizer) = (start.to(device).unwrap(), adam());
    // The host's time to queue a step (the device idle before and waited for after, untimed).
    g.bench_function("plain host", |b| {
        b.iter_custom(|iters| {
            let mut host = Duration::ZERO;
            for _ in 0..iters {
                device.synchronize().unwrap();
                let start = Instant::now();
                let (loss, grad) = loss_and_gradient(&params, inputs).unwrap();
                optimizer.step(&mut params, &grad).unwrap();
                host += start.elapsed();
                device.synchronize().unwrap();
                drop((loss, grad));
            }
            host
        })
    });
    g.bench_function("plain", |b| {
        b.iter(|| {
            let (loss, grad) = loss_and_gradient(&params, inputs).unwrap();
            optimizer.step(&mut params, &grad).unwrap();
            black_box(loss.to_vec()[0])
        })
    });
    let (mut params, mut optimizer) = (start.to(device).unwrap(), adam());
    let mut step = Recorded::new(device, |params: &mut Params<f32>, inputs: &I| {
        let (loss, grad) = loss_and_gradient(params, inputs)?;
        optimizer.step(params, &grad)?;
        Ok(loss)
    });
    for _ in 0..2 {
        step.run(&mut params, inputs).unwrap();
    }
    g.bench_function("recorded host", |b| {
        b.iter_custom(|iters| {
            let mut host = Duration::ZERO;
            for _ in 0..iters {
                device.synchronize().unwrap();
                let start = Instant::now();
                let loss = step.run(&mut params, inputs).unwrap();
                host += start.elapsed();
                device.synchronize().unwrap();
                drop(loss);
            }
            host
        })
    });
    g.bench_function("recorded", |b| {
        b.iter(|| black_box(step.run(&mut params, inputs).unwrap().to_vec()[0]))
    });
    g.finish();
    step.launches(inputs).unwrap_or(0) as u64
}

fn main() {
    let mut c = support::criterion(20, (1000, 200), (4, 1));
    let mut devices = vec![Device::Backend(&axes_backends::cpu::CPU_BACKEND)];
    devices.extend(axes_backends::device("opencl").ok());
    let mut rows = Vec::new();
    for device in &devices {
        let name = match device.kind() {
            axes::DeviceKind::Cpu => "cpu-backend",
            _ => "opencl",
        };
        for (label, widths, batch) in [
            ("tiny MLP 8-16-16-4 b4", [8, 16, 16, 4], 4),
            ("MLP 64-256-256-10 b128", [64, 256, 256, 10], 128),
        ] {
            let (model, start) = Mlp::new(widths);
            let images = model.images(device, widths, batch);
            let group = format!("recorded step {label} {name}");
            let launches = plain_and_recorded(&mut c, &group, device, &start, &images, &|p, i| {
                model.loss_and_gradient(p, i)
            });
            rows.push((group, launches));
        }
        let (model, start, tokens) = gpt(device);
        let group = format!("recorded step GPT 2x64 ctx32 b4 {name}");
        let launches = plain_and_recorded(&mut c, &group, device, &start, &tokens, &|params,
                                                                                     (
            ids,
            targets,
        )| {
            let tape = Tape::new();
            let p = params.bind(&tape);
            let loss = model.loss(&p, ids, targets)?;
            let grad = p.gradient(&loss.backward()?)?;
            let (grad, _) = clip_grad_norm(params, grad, 1.0)?;
            Ok((loss.value().clone(), grad))
        });
        rows.push((group, launches));
    }
    c.final_summary();
    println!(
        "\nrecorded against plain steps (median µs per step, waiting for the device; host: the \
         time to queue a step, the device idle; per launch: divided by the recording's launches)"
    );
    for (group, launches) in rows {
        let us = |id: &str| median_ns(&group, id).map(|ns| ns / 1e3);
        let (Some(plain), Some(recorded)) = (us("plain"), us("recorded")) else {
            continue;
        };
        let per = |t: f64| t / launches.max(1) as f64;
        println!(
            "{group}: {launches} launches; plain {plain:9.1} µs ({:6.2} µs/launch), recorded \
             {recorded:9.1} µs ({:6.2} µs/launch); recorded/plain {:.3}",
            per(plain),
            per(recorded),
            recorded / plain
        );
        if let (Some(plain), Some(recorded)) = (us("plain host"), us("recorded host")) {
            println!(
                "    host: plain {plain:9.1} µs ({:6.2} µs/launch), recorded {recorded:9.1} µs \
                 ({:6.2} µs/launch); recorded/plain {:.3}",
                per(plain),
                per(recorded),
                recorded / plain
            );
        }
    }
}
