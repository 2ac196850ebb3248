//! Mixed precision in host memory: the working copy `Params::bind_as` makes follows the f32
//! master weights, a loss scale skips the steps whose gradient overflowed and adjusts, and
//! checkpoints hold the master. (The steps against f32's, on every device: the shared suite's
//! `mixed_precision_steps`.)

use axes::Float;
use axes::arena::Slot;
use axes::autodiff::Tape;
use axes::io::TensorFile;
use axes::nn::{Gradient, Init, Params, ParamsBuilder, save_checkpoint};
use axes::optim::{Adam, LossScale, OptimizerState, Sgd};
use axes::prelude::*;
use half::{bf16, f16};

#[derive(Axis)]
struct Feature;

/// Four weights drawn from a normal distribution.
fn model() -> (Slot<(Feature,)>, Params<f32>) {
    let mut builder = ParamsBuilder::new();
    let w = builder
        .add::<(Feature,)>("w", Feature.len(4), Init::Normal(1.0), 4, 4)
        .unwrap();
    (w, builder.build::<f32>(3).unwrap())
}

/// The values the model sees when bound as `H`, in f32.
fn seen_as<H: Float<Wide = f32>>(params: &Params<f32>, w: &Slot<(Feature,)>) -> Vec<f32> {
    let tape = Tape::<H>::new();
    let bound = params.bind_as::<H>(&tape).unwrap();
    let values = bound.var(w).unwrap().value().to_vec();
    values.iter().map(|v| v.to_f64() as f32).collect()
}

/// `values` rounded to `H`.
fn rounded<H: Float>(values: &[f32]) -> Vec<f32> {
    let round = |v: f32| H::from_f64(f64::from(v)).to_f64() as f32;
    values.iter().map(|&v| round(v)).collect()
}

#[test]
fn the_working_copy_follows_the_master() {
    let (w, mut params) = model();
    let master = |params: &Params<f32>| params.tensor(&w).unwrap().to_vec();
    assert_eq!(
        seen_as::<bf16>(&params, &w),
        rounded::<bf16>(&master(&params))
    );
    // An optimizer's step rewrites the copy.
    let mut sgd = Sgd::new(0.1, 0.0);
    let grad = Gradient::from_vec(&params, vec![1.0, -2.0, 0.5, 3.0]).unwrap();
    sgd.step(&mut params, &grad).unwrap();
    assert_eq!(
        seen_as::<bf16>(&params, &w),
        rounded::<bf16>(&master(&params))
    );
    // Any other write leaves it stale until the next binding, which rewrites it.
    let set =
        Tensor::<f32, (Feature,)>::from_vec(Feature.len(4), vec![0.1, 0.2, 0.3, 0.4]).unwrap();
    params.arena_mut().set(&w, &set).unwrap();
    assert_eq!(
        seen_as::<bf16>(&params, &w),
        rounded::<bf16>(&[0.1, 0.2, 0.3, 0.4])
    );
    // Another narrow type replaces the copy; the parameters' own type binds them.
    assert_eq!(
        seen_as::<f16>(&params, &w),
        rounded::<f16>(&master(&params))
    );
    assert_eq!(seen_as::<f32>(&params, &w), master(&params));
}

/// One step of Adam on `params` from the f16 gradient of `Σ w · x`, which is `x` times the
/// scale: where `x` holds f16's largest value, the scaled gradient overflows.
fn scaled_step(
    (w, params): (&Slot<(Feature,)>, &mut Params<f32>),
    x: f32,
    adam: &mut Adam<f32>,
    scale: &mut LossScale,
) {
    let tape = Tape::<f16>::new();
    let p = params.bind_as::<f16>(&tape).unwrap();
    let x = Tensor::<f16, (Feature,)>::from_vec(Feature.len(4), vec![f16::from_f32(x); 4]).unwrap();
    let loss = (p.var(w).unwrap() * tape.constant(x))
        .sum::<(Feature,)>()
        .unwrap();
    let grad = p.gradient(&scale.backward(&loss).unwrap()).unwrap();
    let grad = scale.unscale(&grad).unwrap();
    adam.step(params, &grad).unwrap();
}

#[test]
fn an_overflowing_gradient_skips_the_step_and_halves_the_scale() {
    let (w, mut params) = model();
    let before = params.tensor(&w).unwrap().to_vec();
    let mut adam = Adam::new(1e-2);
    let mut scale = LossScale::new().with_growth_interval(2);
    assert_eq!(scale.scale().unwrap(), 65536.0);
    // 65504 · 2¹⁵ is infinite in f16: no step, and the scale halves.
    scaled_step((&w, &mut params), 65504.0, &mut adam, &mut scale);
    assert_eq!(params.tensor(&w).unwrap().to_vec(), before);
    assert_eq!(adam.steps().unwrap(), 0);
    assert_eq!(scale.scale().unwrap(), 16384.0);
    let mut state = TensorFile::new();
    adam.save_state(&params, &mut state).unwrap();
    let moment = state.get::<f32, (Feature,)>("w.exp_avg").unwrap();
    assert_eq!(moment.to_vec(), [0.0; 4]);
    // Two clean steps: taken, and the scale doubles back to 2¹⁵, the most f16 holds.
    for steps in 1..=4 {
        scaled_step((&w, &mut params), 1.0, &mut adam, &mut scale);
        assert_eq!(adam.steps().unwrap(), steps);
    }
    assert_eq!(scale.scale().unwrap(), 32768.0);
    // Adam's first steps move each weight by the rate, against the gradient's sign.
    let after = params.tensor(&w).unwrap().to_vec();
    for (a, b) in after.iter().zip(&before) {
        assert!((b - a - 4e-2).abs() < 1e-4, "{b} → {a}");
    }
}

#[test]
fn checkpoints_hold_the_f32_master() {
    let (w, mut params) = model();
    let mut adam = Adam::new(1e-4);
    for _ in 0..3 {
        let tape = Tape::<bf16>::new();
        let p = params.bind_as::<bf16>(&tape).unwrap();
        let loss = p.var(&w).unwrap().square().sum::<(Feature,)>().unwrap();
        let grad = p.gradient(&loss.backward().unwrap()).unwrap();
        adam.step(&mut params, &grad.widened().unwrap()).unwrap();
    }
    let master = params.tensor(&w).unwrap().to_vec();
    // Steps of 10⁻⁴ that bf16's 8 bits cannot hold: the master differs from its copy.
    assert_ne!(rounded::<bf16>(&master), master);
    let dir = std::env::temp_dir().join(format!("axes-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("checkpoint.safetensors");
    save_checkpoint(&path, &params, &adam, &[]).unwrap();
    let saved = TensorFile::read(&path).unwrap();
    let master: Vec<f64> = master.iter().map(|&v| f64::from(v)).collect();
    assert_eq!(saved.get::<f64, (Feature,)>("w").unwrap().to_vec(), master);
    std::fs::remove_dir_all(&dir).unwrap();
}
