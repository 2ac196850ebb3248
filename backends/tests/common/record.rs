//! Recorded training steps against the same steps run plainly, on any backend: the same
//! parameters and losses bit for bit, replays that plan nothing, and clear errors.

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::io::TensorFile;
use axes::nn::{Init, Linear, Params, ParamsBuilder};
use axes::optim::{Adam, OptimizerState, Sgd, WarmupCosine, clip_grad_norm};
use axes::prelude::*;
use axes::record::Recorded;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;

#[derive(Axis)]
pub struct Sample;
#[derive(Axis)]
pub struct Feature;
#[derive(Axis)]
pub struct Hidden;

/// A minibatch: inputs and class labels.
type Batch = (Tensor<f32, (Sample, Feature)>, Tensor<i64, (Sample,)>);

/// A two-layer classifier of 5 features into 5 classes.
struct Mlp {
    hidden: Linear<Feature, Hidden>,
    out: Linear<Hidden, Feature>,
}

impl Mlp {
    fn new() -> (Mlp, Params<f32>) {
        let mut builder = ParamsBuilder::new();
        let hidden = Linear::new(
            &mut builder,
            "hidden",
            Feature.len(5),
            Hidden.len(7),
            Init::He,
        )
        .unwrap();
        let out = Linear::new(
            &mut builder,
            "out",
            Hidden.len(7),
            Feature.len(5),
            Init::Glorot,
        )
        .unwrap();
        (Mlp { hidden, out }, builder.build::<f32>(5).unwrap())
    }

    /// The mean loss over `batch` and the parameters' gradient, clipped to norm 0.5 (which
    /// clips some steps and not others).
    fn loss_and_gradient(
        &self,
        params: &Params<f32>,
        (x, labels): &Batch,
    ) -> axes::Result<(Tensor<f32, ()>, axes::nn::Gradient<f32>)> {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = self.hidden.forward(&p, &tape.constant(x.clone()))?.tanh();
        let logits = self.out.forward(&p, h)?;
        let loss =
            softmax_cross_entropy::<Feature, _, _, _, _>(logits, labels)?.mean::<(Sample,)>()?;
        let grad = p.gradient(&loss.backward()?)?;
        let (grad, _) = clip_grad_norm(params, grad, 0.5)?;
        Ok((loss.value().clone(), grad))
    }
}

/// An optimizer of either kind.
enum Optimizer {
    Sgd(Sgd<f32>),
    Adam(Adam<f32>),
}

impl Optimizer {
    fn new(adam: bool) -> Optimizer {
        match adam {
            false => Optimizer::Sgd(Sgd::new(0.05, 0.9)),
            true => Optimizer::Adam(
                Adam::new(0.0)
                    .with_weight_decay(0.01)
                    .with_schedule(WarmupCosine::new(0.02, 0.002, 5, 40).unwrap()),
            ),
        }
    }

    fn step(
        &mut self,
        params: &mut Params<f32>,
        grad: &axes::nn::Gradient<f32>,
    ) -> axes::Result<()> {
        match self {
            Optimizer::Sgd(sgd) => sgd.step(params, grad),
            Optimizer::Adam(adam) => adam.step(params, grad),
        }
    }

    /// The optimizer's state for `params` as the bytes of a safetensors file.
    fn saved(&self, params: &Params<f32>) -> Vec<u8> {
        let mut file = TensorFile::new();
        match self {
            Optimizer::Sgd(sgd) => sgd.save_state(params, &mut file).unwrap(),
            Optimizer::Adam(adam) => adam.save_state(params, &mut file).unwrap(),
        }
        let path = std::env::temp_dir().join(format!(
            "axes-recorded-state-{}-{:?}.safetensors",
            std::process::id(),
            std::thread::current().id()
        ));
        file.write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    fn steps(&self) -> usize {
        match self {
            Optimizer::Sgd(sgd) => sgd.steps().unwrap(),
            Optimizer::Adam(adam) => adam.steps().unwrap(),
        }
    }
}

/// Three minibatches on `device`: two of 6 samples, one of 4 (a layout of its own).
fn batches(device: &Device) -> Vec<Batch> {
    let mut rng = ChaCha8Rng::seed_from_u64(46);
    [6, 6, 4]
        .into_iter()
        .map(|n| {
            let x =
                Tensor::<f32, (Sample, Feature)>::from_fn((Sample.len(n), Feature.len(5)), |_| {
                    rng.random_range(-2.0..2.0)
                })
                .unwrap();
            let labels =
                Tensor::<i64, (Sample,)>::from_fn(Sample.len(n), |_| rng.random_range(0..5))
                    .unwrap();
            (x.to(device).unwrap(), labels.to(device).unwrap())
        })
        .collect()
}

/// `steps` steps of the MLP with SGD and with AdamW (a warmup and cosine schedule, clipping)
/// on `device`, plainly and recorded, from the same start over the same batches: the losses
/// and the parameters must be the same bits. Each replay must launch what its recording
/// holds and look up no kernel for it, and the closure must run only to record. The
/// optimizer's state, saved between replays (twice: a replay writes the buffers a save
/// read), must be the plain optimizer's, its step count included. Returns the replays
/// checked.
pub fn recorded_steps_match_plain(device: &Device, steps: usize) -> usize {
    let (model, start) = Mlp::new();
    let batches = batches(device);
    let mut replays = 0;
    for adam in [false, true] {
        let mut plain_params = start.to(device).unwrap();
        let mut plain = Optimizer::new(adam);
        let mut recorded_params = start.to(device).unwrap();
        // Shared with the step, so that it can be saved between steps.
        let optimizer = RefCell::new(Optimizer::new(adam));
        let mut calls = 0;
        let mut step = Recorded::new(device, |params: &mut Params<f32>, batch: &Batch| {
            calls += 1;
            let (loss, grad) = model.loss_and_gradient(params, batch)?;
            optimizer.borrow_mut().step(params, &grad)?;
            Ok(loss)
        });
        for k in 0..steps {
            let batch = &batches[k % batches.len()];
            let (loss, grad) = model.loss_and_gradient(&plain_params, batch).unwrap();
            plain.step(&mut plain_params, &grad).unwrap();
            let before = device.counters();
            let recorded_loss = step.run(&mut recorded_params, batch).unwrap();
            let after = device.counters();
            assert_eq!(
                recorded_loss.to_vec(),
                loss.to_vec(),
                "Adam: {adam}, step {k}: the loss"
            );
            // A batch's layout runs plainly, is recorded, then replays: the 6-sample batches
            // from step 3 on, the 4-sample one (every third step) from step 8.
            let replayed = if k % 3 == 2 { k >= 8 } else { k >= 3 };
            let on_host = *device == Device::Cpu;
            if let (true, false, Some(before), Some(after)) = (replayed, on_host, before, after) {
                let launches = step.launches(batch).unwrap() as u64;
                // The replay looks up no kernel, and the inputs' copies into the recorded
                // buffers and the loss's copy out are three of the device's byte copies.
                assert_eq!(after.launches - before.launches, launches + 3, "step {k}");
                assert_eq!(after.kernel_lookups, before.kernel_lookups, "step {k}");
                replays += 1;
            }
            if k == steps / 2 || k + 1 == steps {
                let state = optimizer.borrow();
                assert_eq!(state.steps(), k + 1, "Adam: {adam}: the steps taken");
                assert!(
                    state.saved(&recorded_params) == plain.saved(&plain_params),
                    "Adam: {adam}, step {k}: the optimizer's state"
                );
            }
        }
        drop(step);
        // On the host the closure runs at every step.
        let expected = if *device == Device::Cpu { steps } else { 4 };
        assert_eq!(calls, expected, "two runs of the closure per layout");
        let (a, b) = (
            plain_params.to(&Device::Cpu).unwrap(),
            recorded_params.to(&Device::Cpu).unwrap(),
        );
        assert_eq!(
            a.arena().flat(),
            b.arena().flat(),
            "Adam: {adam}: the parameters"
        );
        assert_ne!(
            start.arena().flat(),
            a.arena().flat(),
            "Adam: {adam}: trained"
        );
    }
    replays
}

/// A recorded step's misuses are errors saying what is wrong: a host read inside the step, a
/// replay of a layout with no recording, parameters replaced or shared after recording, and
/// inputs on another device.
pub fn recorded_step_errors(device: &Device) {
    let (model, start) = Mlp::new();
    let batches = batches(device);
    let mut params = start.to(device).unwrap();
    let mut sgd = Sgd::new(0.05, 0.9);
    let mut reads = Recorded::new(device, |params: &mut Params<f32>, batch: &Batch| {
        let (loss, grad) = model.loss_and_gradient(params, batch)?;
        println!("loss {}", loss.try_to_vec()?[0]);
        sgd.step(params, &grad)?;
        Ok(loss)
    });
    reads.run(&mut params, &batches[0]).unwrap();
    let error = reads.run(&mut params, &batches[0]).unwrap_err().to_string();
    assert!(
        error.contains("read back to the host inside the recorded step"),
        "{error}"
    );
    drop(reads);

    let mut sgd = Sgd::new(0.05, 0.9);
    let mut step = Recorded::new(device, |params: &mut Params<f32>, batch: &Batch| {
        let (loss, grad) = model.loss_and_gradient(params, batch)?;
        sgd.step(params, &grad)?;
        Ok(loss)
    });
    let error = step
        .replay(&mut params, &batches[0])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("no recording for inputs of lengths [[6, 5], [6]]"),
        "{error}"
    );
    step.run(&mut params, &batches[0]).unwrap();
    step.run(&mut params, &batches[0]).unwrap();
    step.replay(&mut params, &batches[0]).unwrap();
    let mut others = start.to(device).unwrap();
    let error = step.run(&mut others, &batches[0]).unwrap_err().to_string();
    assert!(
        error.contains("not the one the step was recorded with"),
        "{error}"
    );
    let view = params.arena().storage().clone();
    let error = step.run(&mut params, &batches[0]).unwrap_err().to_string();
    assert!(error.contains("shared"), "{error}");
    drop(view);
    step.run(&mut params, &batches[0]).unwrap();
    let on_host = (batches[0].0.to(&Device::Cpu).unwrap(), batches[0].1.clone());
    let error = step.run(&mut params, &on_host).unwrap_err().to_string();
    assert!(
        error.contains("move it with `.to(&device)` first"),
        "{error}"
    );
}

/// A 2-layer GPT's token ids and targets.
type Tokens = (super::ops::Ids, super::ops::Ids);

/// `steps` steps of a 2-layer GPT with AdamW, a warmup and cosine schedule and clipping to
/// `max_norm` on `device`, plainly and recorded, over the same batches: the losses and the
/// parameters must be the same bits. Returns the replays.
pub fn recorded_gpt_steps_match_plain(device: &Device, steps: usize, max_norm: f64) -> usize {
    use axes::nn::transformer::Gpt;
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &super::ops::tiny_gpt()).unwrap();
    let start = builder.build::<f32>(11).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(47);
    let batches: Vec<Tokens> = (0..3)
        .map(|_| {
            let (ids, targets) = super::ops::copy_batch(&mut rng, 3, 3);
            (ids.to(device).unwrap(), targets.to(device).unwrap())
        })
        .collect();
    let loss_and_gradient = |params: &Params<f32>, (ids, targets): &Tokens| {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let loss = model.loss(&p, ids, targets)?;
        let grad = p.gradient(&loss.backward()?)?;
        let (grad, _) = clip_grad_norm(params, grad, max_norm)?;
        Ok::<_, axes::Error>((loss.value().clone(), grad))
    };
    let adam = || {
        Adam::<f32>::new(0.0)
            .with_weight_decay(0.1)
            .with_schedule(WarmupCosine::new(3e-2, 3e-3, 4, steps).unwrap())
    };
    let (mut plain_params, mut plain) = (start.to(device).unwrap(), adam());
    let (mut recorded_params, mut optimizer) = (start.to(device).unwrap(), adam());
    let mut step = Recorded::new(device, |params: &mut Params<f32>, batch: &Tokens| {
        let (loss, grad) = loss_and_gradient(params, batch)?;
        optimizer.step(params, &grad)?;
        Ok(loss)
    });
    let mut replays = 0;
    for k in 0..steps {
        let batch = &batches[k % batches.len()];
        let (loss, grad) = loss_and_gradient(&plain_params, batch).unwrap();
        plain.step(&mut plain_params, &grad).unwrap();
        let recorded_loss = step.run(&mut recorded_params, batch).unwrap();
        assert_eq!(recorded_loss.to_vec(), loss.to_vec(), "step {k}: the loss");
        replays += usize::from(k >= 2 && *device != Device::Cpu);
    }
    drop(step);
    let (a, b) = (
        plain_params.to(&Device::Cpu).unwrap(),
        recorded_params.to(&Device::Cpu).unwrap(),
    );
    assert_eq!(a.arena().flat(), b.arena().flat(), "the parameters");
    assert_ne!(start.arena().flat(), a.arena().flat(), "trained");
    replays
}
