//! Training resumed from a checkpoint (the parameters, the optimizer's state and the step,
//! saved by another process) gives the same bits as training straight through (SGD with momentum and a schedule; AdamW with a warmup and
//! cosine schedule and clipping), in host memory, on the CPU backend and on OpenCL; a state of another
//! optimizer, of another model, or for parameters the optimizer does not step is an error
//! that leaves the optimizer as it was.

use axes::autodiff::Tape;
use axes::io::TensorFile;
use axes::nn::{Init, Linear, Params, ParamsBuilder, load_checkpoint, save_checkpoint};
use axes::optim::{Adam, OptimizerState, Sgd, WarmupCosine, clip_grad_norm};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

struct Mlp {
    first: Linear<Pixel, Hidden>,
    second: Linear<Hidden, Class>,
}

/// The model and its parameters, initialised from `seed`.
fn mlp(seed: u64) -> (Mlp, Params<f32>) {
    let mut builder = ParamsBuilder::new();
    let first = Linear::new(&mut builder, "0", Pixel.len(5), Hidden.len(7), Init::He).unwrap();
    let second = Linear::new(&mut builder, "2", Hidden.len(7), Class.len(3), Init::He).unwrap();
    (Mlp { first, second }, builder.build::<f32>(seed).unwrap())
}

/// Inputs and targets.
type Pair = (Tensor<f32, (Batch, Pixel)>, Tensor<f32, (Batch, Class)>);

/// An optimizer's step.
type Update<O> = fn(&mut O, &mut Params<f32>, &axes::nn::Gradient<f32>) -> axes::Result<()>;

type Batches = Vec<Pair>;

fn batches(device: &Device) -> Batches {
    (0..4)
        .map(|b| {
            let x = (0..20)
                .map(|i| ((i * 7 + b * 3) % 11) as f32 / 5.0 - 1.0)
                .collect();
            let y = (0..12)
                .map(|i| ((i * 5 + b) % 7) as f32 / 3.0 - 1.0)
                .collect();
            (
                Tensor::from_vec((Batch.len(4), Pixel.len(5)), x)
                    .unwrap()
                    .to(device)
                    .unwrap(),
                Tensor::from_vec((Batch.len(4), Class.len(3)), y)
                    .unwrap()
                    .to(device)
                    .unwrap(),
            )
        })
        .collect()
}

/// One step on `params` with `optimizer`; the loss.
fn step<O>(
    model: &Mlp,
    params: &mut Params<f32>,
    optimizer: &mut O,
    update: Update<O>,
    (x, y): &Pair,
) -> Vec<f32> {
    let (loss, grad) = {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = model
            .first
            .forward(&p, &tape.constant(x.clone()))
            .unwrap()
            .tanh();
        let out = model.second.forward(&p, h).unwrap();
        let loss = (out - &tape.constant(y.clone()))
            .square()
            .mean::<(Batch, Class)>()
            .unwrap();
        (
            loss.value().to_vec(),
            p.gradient(&loss.backward().unwrap()).unwrap(),
        )
    };
    let (grad, _) = clip_grad_norm(params, grad, 0.5).unwrap();
    update(optimizer, params, &grad).unwrap();
    loss
}

/// The steps of a run, and the step its checkpoint is saved after.
const TOTAL: usize = 9;
const SAVED_AT: usize = 4;

/// The environment variables that make [`child_trains_and_saves_a_checkpoint`] run: the
/// checkpoint's path, and the case (`{device}/{optimizer}`).
const CHECKPOINT: &str = "AXES_RESUME_CHECKPOINT";
const CASE: &str = "AXES_RESUME_CASE";

/// A device by the name the parent gives its child.
fn device_named(name: &str) -> Device {
    match name {
        "cpu" => Device::Cpu,
        "cpu-backend" => Device::Backend(&axes::engine::cpu::CPU_BACKEND),
        other => axes::device(other).unwrap(),
    }
}

/// The child of [`training_resumed_from_a_checkpoint_gives_the_same_bits`]: trains the case
/// `AXES_RESUME_CASE` for the first steps and saves a checkpoint at `AXES_RESUME_CHECKPOINT`.
#[test]
#[ignore = "run by training_resumed_from_a_checkpoint_gives_the_same_bits as its child process"]
fn child_trains_and_saves_a_checkpoint() {
    let path = std::env::var(CHECKPOINT).expect("run as a child");
    let case = std::env::var(CASE).expect("run as a child");
    let (device, optimizer) = case.split_once('/').unwrap();
    let device = device_named(device);
    let batches = batches(&device);
    let (model, start) = mlp(3);
    let mut params = start.to(&device).unwrap();
    let saved_at = SAVED_AT.to_string();
    let metadata = [("step", saved_at.as_str())];
    if optimizer == "sgd" {
        let mut sgd = momentum_sgd();
        for batch in batches.iter().cycle().take(SAVED_AT) {
            step(&model, &mut params, &mut sgd, Sgd::step, batch);
        }
        save_checkpoint(&path, &params, &sgd, &metadata).unwrap();
    } else {
        let mut adam = adamw();
        for batch in batches.iter().cycle().take(SAVED_AT) {
            step(&model, &mut params, &mut adam, Adam::step, batch);
        }
        save_checkpoint(&path, &params, &adam, &metadata).unwrap();
    }
}

/// `TOTAL` steps straight, against a child process's `SAVED_AT` steps and checkpoint, then
/// a fresh model (initialised otherwise) and optimizer loading it here and taking the rest:
/// the same losses and parameters, bit for bit.
fn resumes_exactly<O: OptimizerState<f32>>(
    (device_name, device): (&str, &Device),
    make: fn() -> O,
    update: Update<O>,
    label: &str,
) {
    let batches = batches(device);
    let (model, start) = mlp(3);
    let mut straight = start.to(device).unwrap();
    let mut optimizer = make();
    let losses: Vec<Vec<f32>> = (0..TOTAL)
        .map(|k| {
            step(
                &model,
                &mut straight,
                &mut optimizer,
                update,
                &batches[k % 4],
            )
        })
        .collect();

    let path = std::env::temp_dir().join(format!(
        "axes-resume-{}-{device_name}-{label}.safetensors",
        std::process::id()
    ));
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_trains_and_saves_a_checkpoint",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHECKPOINT, &path)
        .env(CASE, format!("{device_name}/{label}"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child for {label} on {device} failed");

    let (model, resumed) = mlp(99);
    let mut resumed = resumed.to(device).unwrap();
    let mut optimizer = make();
    let metadata = load_checkpoint(&path, &mut resumed, &mut optimizer).unwrap();
    assert_eq!(metadata["step"], SAVED_AT.to_string());
    for k in SAVED_AT..TOTAL {
        let loss = step(
            &model,
            &mut resumed,
            &mut optimizer,
            update,
            &batches[k % 4],
        );
        assert_eq!(
            loss, losses[k],
            "{label} on {device}: step {k} after resuming"
        );
    }
    let (a, b) = (
        straight.to(&Device::Cpu).unwrap(),
        resumed.to(&Device::Cpu).unwrap(),
    );
    assert_eq!(a.arena().flat(), b.arena().flat(), "{label} on {device}");
    std::fs::remove_file(&path).ok();
}

fn momentum_sgd() -> Sgd<f32> {
    Sgd::new(0.0, 0.9).with_schedule(WarmupCosine::new(0.05, 0.005, 2, 9).unwrap())
}

fn adamw() -> Adam<f32> {
    Adam::new(0.0)
        .with_weight_decay(0.01)
        .with_schedule(WarmupCosine::new(0.02, 0.002, 2, 9).unwrap())
}

#[test]
fn training_resumed_from_a_checkpoint_gives_the_same_bits() {
    let mut devices = vec!["cpu", "cpu-backend"];
    match axes::device("opencl") {
        Ok(_) => devices.push("opencl"),
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => println!("SKIPPED on OpenCL (no OpenCL device): {e}"),
    }
    for name in devices {
        let device = device_named(name);
        resumes_exactly((name, &device), momentum_sgd, Sgd::step, "sgd");
        resumes_exactly((name, &device), adamw, Adam::step, "adam");
    }
}

#[test]
fn a_state_that_does_not_fit_is_an_error_that_changes_nothing() {
    let (model, mut params) = mlp(3);
    let batch = &batches(&Device::Cpu)[0];
    let mut sgd = momentum_sgd();
    step(&model, &mut params, &mut sgd, Sgd::step, batch);
    let mut sgd_state = TensorFile::new();
    sgd.save_state(&params, &mut sgd_state).unwrap();

    // Another optimizer's state.
    let mut adam = adamw();
    let error = adam
        .load_state(&params, &sgd_state)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`adam.step`") && error.contains("the state of `sgd`"),
        "{error}"
    );
    assert_eq!(adam.steps().unwrap(), 0);

    // Another model's state: the first parameter that differs is named.
    let mut builder = ParamsBuilder::new();
    Linear::<Pixel, Hidden>::new(&mut builder, "0", Pixel.len(5), Hidden.len(6), Init::He).unwrap();
    let other = builder.build::<f32>(0).unwrap();
    let mut fresh = momentum_sgd();
    let error = fresh
        .load_state(&other, &sgd_state)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`0.bias.momentum_buffer`") || error.contains("`0.weight.momentum_buffer`"),
        "{error}"
    );
    assert!(error.contains("[7]") || error.contains("[5, 7]"), "{error}");

    // A state for parameters this optimizer does not step: an error naming both, nothing
    // loaded.
    let error = sgd.load_state(&other, &sgd_state).unwrap_err().to_string();
    assert!(
        error.contains("`Sgd` steps the parameters of model #") && error.contains("`0.weight`"),
        "{error}"
    );
    let mut again = TensorFile::new();
    sgd.save_state(&params, &mut again).unwrap();
    let names: Vec<&str> = again.names().collect();
    assert_eq!(names, sgd_state.names().collect::<Vec<_>>());

    // A checkpoint that does not fit changes neither the parameters nor the optimizer.
    let path = std::env::temp_dir().join(format!(
        "axes-resume-{}-mismatch.safetensors",
        std::process::id()
    ));
    save_checkpoint(&path, &params, &sgd, &[]).unwrap();
    let (_, mut fresh_params) = mlp(5);
    let before = fresh_params.arena().flat().to_vec();
    let mut adam = adamw();
    let error = load_checkpoint(&path, &mut fresh_params, &mut adam).unwrap_err();
    assert!(error.to_string().contains("`adam.step`"), "{error}");
    let mut smaller = ParamsBuilder::new();
    Linear::<Pixel, Hidden>::new(&mut smaller, "0", Pixel.len(5), Hidden.len(7), Init::He).unwrap();
    let mut smaller = smaller.build::<f32>(0).unwrap();
    let smaller_before = smaller.arena().flat().to_vec();
    let error = load_checkpoint(&path, &mut smaller, &mut momentum_sgd()).unwrap_err();
    assert!(
        error.to_string().contains("`2.bias`") && error.to_string().contains("neither"),
        "{error}"
    );
    assert_eq!(fresh_params.arena().flat(), before);
    assert_eq!(smaller.arena().flat(), smaller_before);
    assert_eq!(adam.steps().unwrap(), 0);
    std::fs::remove_file(&path).ok();
}
