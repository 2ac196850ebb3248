//! Training resumed from saved parameters and optimizer state gives the same bits as
//! training straight through (SGD with momentum and a schedule; AdamW with a warmup and
//! cosine schedule and clipping), in host memory, on the CPU backend and on OpenCL; a state of another
//! optimizer, of another model, or for parameters the optimizer does not step is an error
//! that leaves the optimizer as it was.

use axes::autodiff::Tape;
use axes::io::TensorFile;
use axes::nn::{Init, Linear, Params, ParamsBuilder};
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

/// `total` steps straight, against `saved_at` steps, a save of the parameters and the state
/// to files, a fresh model and optimizer loading them, and the rest: the same losses and
/// parameters, bit for bit.
fn resumes_exactly<O: OptimizerState<f32>>(
    device: &Device,
    make: fn() -> O,
    update: Update<O>,
    label: &str,
) {
    let (total, saved_at) = (9, 4);
    let batches = batches(device);
    let (model, start) = mlp(3);
    let mut straight = start.to(device).unwrap();
    let mut optimizer = make();
    let losses: Vec<Vec<f32>> = (0..total)
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

    let mut first = start.to(device).unwrap();
    let mut optimizer = make();
    for (k, batch) in batches.iter().cycle().take(saved_at).enumerate() {
        let loss = step(&model, &mut first, &mut optimizer, update, batch);
        assert_eq!(loss, losses[k], "{label} on {device}: step {k}");
    }
    let params_path = std::env::temp_dir().join(format!(
        "axes-resume-{}-{label}-params.safetensors",
        std::process::id()
    ));
    let state_path = params_path.with_extension("state.safetensors");
    first.save(&params_path).unwrap();
    let mut state = TensorFile::new();
    optimizer.save_state(&first, &mut state).unwrap();
    state.write(&state_path).unwrap();
    drop((first, optimizer));

    // Another model of the same layout (initialised differently), loaded.
    let (model, resumed) = mlp(99);
    let mut resumed = resumed.to(device).unwrap();
    resumed.load(&params_path).unwrap();
    let mut optimizer = make();
    let state = TensorFile::read(&state_path).unwrap();
    optimizer.load_state(&resumed, &state).unwrap();
    for k in saved_at..total {
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
    std::fs::remove_file(&params_path).ok();
    std::fs::remove_file(&state_path).ok();
}

fn momentum_sgd() -> Sgd<f32> {
    Sgd::new(0.0, 0.9).with_schedule(WarmupCosine::new(0.05, 0.005, 2, 9).unwrap())
}

fn adam() -> Adam<f32> {
    Adam::new(0.0)
        .with_weight_decay(0.01)
        .with_schedule(WarmupCosine::new(0.02, 0.002, 2, 9).unwrap())
}

#[test]
fn training_resumed_from_saved_state_gives_the_same_bits() {
    let mut devices = vec![
        Device::Cpu,
        Device::Backend(&axes::engine::cpu::CPU_BACKEND),
    ];
    match axes::device("opencl") {
        Ok(device) => devices.push(device),
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => println!("SKIPPED on OpenCL (no OpenCL device): {e}"),
    }
    for device in &devices {
        resumes_exactly(device, momentum_sgd, Sgd::step, "sgd");
        resumes_exactly(device, adam, Adam::step, "adam");
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
    let mut adam = adam();
    let error = adam
        .load_state(&params, &sgd_state)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`adam.step`") && error.contains("the state of `sgd`"),
        "{error}"
    );
    assert_eq!(adam.steps(), 0);

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
}
