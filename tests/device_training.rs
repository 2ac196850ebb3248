//! The digits MLP of `examples/train.rs`, trained for 20 steps from one seed on the CPU and
//! on OpenCL (PoCL in CI): every step's loss and, after the last step, every parameter
//! tensor agree (relative error ≤ 1e-4). Without an OpenCL runtime the test prints
//! `SKIPPED (no OpenCL device): <reason>`; with `AXES_REQUIRE_OPENCL=1` (as CI sets) it
//! fails instead.
#![cfg(feature = "opencl")]

use std::io::Read;

use axes::autodiff::{Tape, Var, softmax_cross_entropy};
use axes::nn::{Bound, Init, Linear, Params, ParamsBuilder, Square, minibatches};
use axes::optim::{Adam, Sgd};
use axes::prelude::*;
use axes::{Device, Error};

#[derive(Axis)]
struct Sample;
#[derive(Axis)]
struct Batch;
#[derive(Axis)]
#[axis(len = 64)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
#[axis(len = 10)]
struct Class;

const STEPS: usize = 20;
const BATCH: usize = 32;

struct Mlp {
    input: Linear<Pixel, Hidden>,
    middle: Square<Hidden>,
    output: Linear<Hidden, Class>,
}

impl Mlp {
    fn new(params: &mut ParamsBuilder) -> axes::Result<Self> {
        let hidden = Hidden.len(256);
        Ok(Mlp {
            input: Linear::new(params, "input", Pixel.len(64), hidden, Init::He)?,
            middle: Square::new(params, "middle", hidden, Init::He)?,
            output: Linear::new(params, "output", hidden, Class.len(10), Init::Glorot)?,
        })
    }

    fn logits(
        &self,
        p: &Bound<'_, f32>,
        x: &Var<f32, (Pixel, Batch)>,
    ) -> axes::Result<Var<f32, (Batch, Class)>> {
        let h = self.input.forward(p, x)?.relu();
        let h = self.middle.forward(p, h)?.relu();
        self.output.forward(p, h)?.eval()
    }

    /// The mean softmax cross-entropy of the minibatch `x` against `labels`.
    fn loss(
        &self,
        tape: &Tape<f32>,
        p: &Bound<'_, f32>,
        x: Tensor<f32, (Pixel, Batch)>,
        labels: &Tensor<i64, (Batch,)>,
    ) -> axes::Result<Var<f32, ()>> {
        let logits = self.logits(p, &tape.constant(x))?;
        softmax_cross_entropy::<Class, _, _, _, _>(logits, labels)?.mean::<(Batch,)>()
    }
}

/// Digit images (pixels scaled to [0, 1]) and their labels.
type Digits = (Tensor<f32, (Sample, Pixel)>, Tensor<i64, (Sample,)>);

/// Every digit image and its label.
fn digits() -> Digits {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits/digits.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let rows: Vec<Vec<f32>> = text
        .lines()
        .map(|line| line.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .collect();
    let pixels = rows
        .iter()
        .flat_map(|row| row[..64].iter().map(|p| p / 16.0))
        .collect();
    let labels = rows.iter().map(|row| row[64] as i64).collect();
    let n = Sample.len(rows.len());
    (
        Tensor::from_vec((n, Pixel.len(64)), pixels).unwrap(),
        Tensor::from_vec(n, labels).unwrap(),
    )
}

/// `STEPS` steps of AdamW on `device` from seed 7: each step's loss, and the parameters.
fn train(device: &Device) -> axes::Result<(Vec<f32>, Params<f32>)> {
    let (x, y) = digits();
    let mut builder = ParamsBuilder::new();
    let model = Mlp::new(&mut builder)?;
    let mut params = builder.build::<f32>(7)?.to(device)?;
    let mut adam = Adam::new(5e-3).with_weight_decay(1e-2);
    let mut losses = Vec::new();
    let batches = minibatches::<Batch>(x.len_of::<Sample>(), BATCH, 1)?;
    for indices in batches.iter().take(STEPS) {
        let xb = x.gather::<Sample, _, _>(indices)?.to(device)?;
        let yb = y.gather::<Sample, _, _>(indices)?.to(device)?;
        let tape = Tape::new();
        let p = params.bind(&tape);
        let loss = model.loss(&tape, &p, xb, &yb)?;
        assert_eq!(
            loss.value().device(),
            *device,
            "the loss stays on the device"
        );
        losses.push(loss.value().try_to_vec()?[0]);
        let grad = p.gradient(&loss.backward()?)?;
        adam.step(&mut params, &grad)?;
    }
    assert_eq!(
        params.device(),
        *device,
        "the parameters stay on the device"
    );
    Ok((losses, params.to(&Device::Cpu)?))
}

/// The OpenCL device, or `None` after printing why the test is skipped (a failure where
/// `AXES_REQUIRE_OPENCL` is set).
fn opencl() -> Option<Device> {
    match axes::device("opencl") {
        Ok(device) => Some(device),
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => {
            println!("SKIPPED (no OpenCL device): {e}");
            None
        }
    }
}

/// ‖a − b‖₂ and ‖b‖₂.
fn distance(a: &[f32], b: &[f32]) -> (f64, f64) {
    let squares = |v: &mut dyn Iterator<Item = f32>| v.map(|x| f64::from(x).powi(2)).sum::<f64>();
    let difference = squares(&mut a.iter().zip(b).map(|(a, b)| a - b)).sqrt();
    (difference, squares(&mut b.iter().copied()).sqrt())
}

/// [`opencl`], held by this test alone while the guard lives, so that one test's launches
/// and reads do not count in another's.
fn opencl_alone() -> Option<(Device, std::sync::MutexGuard<'static, ()>)> {
    static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let device = opencl()?;
    Some((device, DEVICE.lock().unwrap_or_else(|e| e.into_inner())))
}

#[test]
fn twenty_digit_steps_on_opencl_match_the_cpu() -> Result<(), Error> {
    let Some((device, _only)) = opencl_alone() else {
        return Ok(());
    };
    let (cpu_losses, cpu) = train(&Device::Cpu)?;
    let (device_losses, on_device) = train(&device)?;
    for (step, (a, b)) in device_losses.iter().zip(&cpu_losses).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * b.abs(),
            "step {step}: loss {a} on {device}, {b} on the CPU"
        );
    }
    assert!(
        cpu_losses[STEPS - 1] < 0.5 * cpu_losses[0],
        "the model learns: {cpu_losses:?}"
    );
    let names: Vec<&str> = cpu.names().collect();
    assert_eq!(names.len(), cpu.arena().layouts().len());
    for (name, layout) in names.iter().zip(cpu.arena().layouts()) {
        let region = layout.offset()..layout.offset() + layout.element_count().unwrap();
        let (a, b) = (
            &on_device.arena().flat()[region.clone()],
            &cpu.arena().flat()[region],
        );
        let (difference, norm) = distance(a, b);
        assert!(
            difference <= 1e-4 * norm,
            "parameter {name}: ‖a − b‖ = {difference:e}, ‖b‖ = {norm:e}"
        );
    }
    Ok(())
}

/// An optimizer step updates the parameters and its state over the whole arena in one kernel
/// launch on a device, after one that advances its step scalars (after the first step, which
/// makes the state), giving what it gives on the CPU.
#[test]
fn an_optimizer_step_on_opencl_is_two_launches() -> Result<(), Error> {
    let Some((device, _only)) = opencl_alone() else {
        return Ok(());
    };
    let (x, y) = digits();
    let mut builder = ParamsBuilder::new();
    let model = Mlp::new(&mut builder)?;
    let start = builder.build::<f32>(3)?;
    let indices = Tensor::<i64, (Batch,)>::from_vec(Batch.len(BATCH), (0..BATCH as i64).collect())?;
    let (xb, yb) = (
        x.gather::<Sample, _, _>(&indices)?,
        y.gather::<Sample, _, _>(&indices)?,
    );
    // Two steps of each optimizer from the same gradient, on `device`; the launches of the
    // second step, and the parameters after it.
    let steps = |device: &Device, adam: bool| -> axes::Result<(u64, Params<f32>)> {
        let mut params = start.to(device)?;
        let tape = Tape::new();
        let p = params.bind(&tape);
        let loss = model.loss(&tape, &p, xb.to(device)?, &yb.to(device)?)?;
        let grad = p.gradient(&loss.backward()?)?;
        let mut adam_w = Adam::new(1e-2).with_weight_decay(1e-2);
        let mut sgd = Sgd::new(1e-2, 0.9);
        let mut step = |params: &mut Params<f32>| match adam {
            true => adam_w.step(params, &grad),
            false => sgd.step(params, &grad),
        };
        step(&mut params)?;
        let launched = || device.counters().map_or(0, |c| c.launches);
        let before = launched();
        step(&mut params)?;
        Ok((launched() - before, params.to(&Device::Cpu)?))
    };
    for adam in [true, false] {
        let (launches, on_device) = steps(&device, adam)?;
        let (_, on_cpu) = steps(&Device::Cpu, adam)?;
        assert_eq!(launches, 2, "Adam: {adam}");
        // The gradients differ in their last bits between the devices, and Adam's first
        // steps move a parameter by about the learning rate whatever its gradient's size.
        let (a, b) = (on_device.arena().flat(), on_cpu.arena().flat());
        let (difference, norm) = distance(a, b);
        assert!(
            difference <= 1e-5 * norm,
            "Adam: {adam}: ‖a − b‖ = {difference:e}, ‖b‖ = {norm:e}"
        );
    }
    Ok(())
}

/// A training step with a minibatch copied from host memory reads nothing back from the
/// device (the labels' range is checked on their host copy), so steps queue without waiting;
/// reading the loss is one read.
#[test]
fn a_training_step_on_opencl_reads_nothing_back() -> Result<(), Error> {
    let Some((device, _only)) = opencl_alone() else {
        return Ok(());
    };
    let (x, y) = digits();
    let mut builder = ParamsBuilder::new();
    let model = Mlp::new(&mut builder)?;
    let mut params = builder.build::<f32>(5)?.to(&device)?;
    let mut adam = Adam::new(1e-3);
    let reads = || device.counters().map_or(0, |c| c.reads);
    let batches = minibatches::<Batch>(x.len_of::<Sample>(), BATCH, 2)?;
    for (step, indices) in batches.iter().take(3).enumerate() {
        let before = reads();
        let xb = x.gather::<Sample, _, _>(indices)?.to(&device)?;
        let yb = y.gather::<Sample, _, _>(indices)?.to(&device)?;
        let tape = Tape::new();
        let p = params.bind(&tape);
        let loss = model.loss(&tape, &p, xb, &yb)?;
        let grad = p.gradient(&loss.backward()?)?;
        adam.step(&mut params, &grad)?;
        assert_eq!(reads() - before, 0, "step {step}");
        assert!(loss.value().try_to_vec()?[0].is_finite());
        assert_eq!(reads() - before, 1, "step {step}: reading the loss");
    }
    Ok(())
}
