//! A recurrent layer learning what one time step cannot tell: [`Gru`] recalls the bit seen
//! two steps before, where a dense layer over the current step stays at chance.

use axes::Device;
use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::{Bound, Gru, Init, Linear, Params, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
pub struct Seq;
#[derive(Axis)]
#[axis(role = Time)]
pub struct Step;
#[derive(Axis)]
pub struct Bit;
#[derive(Axis)]
pub struct Memory;
#[derive(Axis)]
pub struct Class;

const STEPS: usize = 10;
const DELAY: usize = 2;
const BATCH: usize = 32;

/// Bit sequences, and the labels of their steps from `DELAY` on.
type Sequences = (Tensor<f32, (Seq, Step, Bit)>, Tensor<i64, (Seq, Step)>);

/// Random bit sequences and, at each step from `DELAY` on, the bit `DELAY` steps before.
fn batch(rng: &mut ChaCha8Rng, device: &Device) -> Sequences {
    let bits: Vec<u8> = (0..BATCH * STEPS).map(|_| rng.random_range(0..2)).collect();
    let x = bits.iter().map(|&b| f32::from(b)).collect();
    let y = (0..BATCH * (STEPS - DELAY))
        .map(|i| i64::from(bits[(i / (STEPS - DELAY)) * STEPS + i % (STEPS - DELAY)]))
        .collect();
    (
        Tensor::from_vec((Seq.len(BATCH), Step.len(STEPS), Bit.len(1)), x)
            .unwrap()
            .to(device)
            .unwrap(),
        Tensor::from_vec((Seq.len(BATCH), Step.len(STEPS - DELAY)), y)
            .unwrap()
            .to(device)
            .unwrap(),
    )
}

/// The fraction of `y` the logits get right.
fn accuracy(logits: &Tensor<f32, (Seq, Step, Class)>, y: &Tensor<i64, (Seq, Step)>) -> f64 {
    let predicted = argmax::<_, _, Class>(logits).unwrap().to_vec();
    let labels = y.to_vec();
    let right = predicted
        .iter()
        .zip(&labels)
        .filter(|(p, l)| p == l)
        .count();
    right as f64 / labels.len() as f64
}

/// Trains a GRU (16 units) and, beside it, a dense layer that sees one step at a time, on
/// delayed recall on `device`; returns their accuracies on fresh sequences.
pub fn learns_delayed_recall(device: &Device, training_steps: usize) -> (f64, f64) {
    let mut builder = ParamsBuilder::new();
    let gru = Gru::new(&mut builder, "gru", Bit.len(1), Memory.len(16)).unwrap();
    let head = Linear::new(
        &mut builder,
        "head",
        Memory.len(16),
        Class.len(2),
        Init::Glorot,
    )
    .unwrap();
    let dense = Linear::new(&mut builder, "dense", Bit.len(1), Memory.len(16), Init::He).unwrap();
    let dense_head = Linear::new(
        &mut builder,
        "dense_head",
        Memory.len(16),
        Class.len(2),
        Init::Glorot,
    )
    .unwrap();
    let mut params: Params<f32> = builder.build(3).unwrap().to(device).unwrap();
    let mut adam = Adam::new(0.02);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // Both models' logits at the steps that have a label.
    let logits = |p: &Bound<'_, f32>, x: &Tensor<f32, (Seq, Step, Bit)>| {
        let x = p.tape().constant(x.clone());
        let (states, _) = gru.forward(p, &x).unwrap();
        let states = states.slice::<Step>(DELAY.., 1).unwrap();
        let recurrent = head.forward(p, &states).unwrap().eval().unwrap();
        let seen = x.slice::<Step>(DELAY.., 1).unwrap();
        let h = dense.forward(p, &seen).unwrap().relu();
        let feed_forward = dense_head.forward(p, h).unwrap().eval().unwrap();
        (
            recurrent.axes_with_order::<(Seq, Step, Class)>(),
            feed_forward.axes_with_order::<(Seq, Step, Class)>(),
        )
    };
    for _ in 0..training_steps {
        let (x, y) = batch(&mut rng, device);
        let grad = {
            let tape = Tape::new();
            let p = params.bind(&tape);
            let (recurrent, feed_forward) = logits(&p, &x);
            let loss = |l| {
                softmax_cross_entropy::<Class, _, _, _, _>(l, &y)
                    .unwrap()
                    .mean::<(Seq, Step)>()
                    .unwrap()
            };
            let total = (loss(recurrent).expr() + &loss(feed_forward))
                .eval()
                .unwrap();
            let grads = total.backward().unwrap();
            p.gradient(&grads).unwrap()
        };
        adam.step(&mut params, &grad).unwrap();
    }
    let (x, y) = batch(&mut rng, device);
    let tape = Tape::new();
    let (recurrent, feed_forward) = logits(&params.bind(&tape), &x);
    let cpu = Device::Cpu;
    let y = y.to(&cpu).unwrap();
    (
        accuracy(&recurrent.value().to(&cpu).unwrap(), &y),
        accuracy(&feed_forward.value().to(&cpu).unwrap(), &y),
    )
}
