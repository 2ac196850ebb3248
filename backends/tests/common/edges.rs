//! The edges of training, on every device: half-precision sums and means that combine in f32,
//! gradients accumulated over micro-batches, an f16 model trained without NaN, and the
//! integer and bitwise ops against plain references.

use axes::Device;
use axes::prelude::*;
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::ops::{B, I, J};

/// `t` on `device`.
fn on<T: Element, A: AxisSet>(t: Tensor<T, A>, device: &Device) -> Tensor<T, A> {
    let t = t.to(device).unwrap();
    assert_eq!(t.device(), *device);
    t
}

/// Sums and means of f16 and bf16 combine in f32 and round once: a running sum in the half
/// type stalls (65,536 bf16 ones summed to 16,384; the f16 sum of 60,000 halves to 29,984),
/// and an f16 sum of 1M ones is past f16's largest value while their mean is 1.
pub fn half_sums(device: &Device) {
    let million = 1 << 20;
    let bf16_ones = on(Tensor::<bf16, (I,)>::ones(I.len(million)).unwrap(), device);
    let sum = bf16_ones.sum::<(I,)>().unwrap().to_vec()[0];
    assert_eq!(
        sum.to_f32(),
        1_048_576.0,
        "bf16 sum of 2^20 ones on {device}"
    );
    assert_eq!(
        bf16_ones.sum_all().unwrap().to_f32(),
        1_048_576.0,
        "bf16 sum_all"
    );
    let mean = bf16_ones.mean::<(I,)>().unwrap().to_vec()[0];
    assert_eq!(mean.to_f32(), 1.0, "bf16 mean of 2^20 ones on {device}");
    let f16_ones = on(Tensor::<f16, (I,)>::ones(I.len(million)).unwrap(), device);
    let mean = f16_ones.mean::<(I,)>().unwrap().to_vec()[0];
    assert_eq!(mean.to_f32(), 1.0, "f16 mean of 2^20 ones on {device}");
    let halves = on(
        Tensor::<f16, (I,)>::full(I.len(60_000), f16::from_f32(0.5)).unwrap(),
        device,
    );
    let sum = halves.sum::<(I,)>().unwrap().to_vec()[0];
    assert_eq!(
        sum.to_f32(),
        30_000.0,
        "f16 sum of 60,000 halves on {device}"
    );
    // Over an outer axis (each result combined from rows, not along one), and into a tensor
    // that already holds values.
    let rows = on(
        Tensor::<bf16, (B, I)>::ones((B.len(65_536), I.len(3))).unwrap(),
        device,
    );
    let sums = rows.sum::<(B,)>().unwrap().to_vec();
    assert!(
        sums.iter().all(|s| s.to_f32() == 65_536.0),
        "bf16 column sums {sums:?}"
    );
    let variance = rows.var::<(B,)>().unwrap().to_vec();
    assert!(
        variance.iter().all(|v| v.to_f32() == 0.0),
        "bf16 variance {variance:?}"
    );
    let start = Tensor::<bf16, (I,)>::full(I.len(3), bf16::from_f32(512.0)).unwrap();
    let mut into = on(start, device);
    into.add_sum::<(B,), _>(&rows).unwrap();
    let into = into.to(&Device::Cpu).unwrap().to_vec();
    assert!(
        into.iter().all(|s| s.to_f32() == 66_048.0),
        "512 + Σ 65,536 ones: {into:?}"
    );
    // A mean on the tape (a loss): over 10^6 elements 1/n is no f16 value, and 0.01/n
    // underflows f16, so the scaling is done in f32 too.
    use axes::autodiff::Tape;
    for (value, count) in [(1.0, 1_000_000), (0.01, 100_000)] {
        let value = f16::from_f32(value);
        let tape = Tape::<f16>::new();
        let x = Tensor::<f16, (I,)>::full(I.len(count), value).unwrap();
        let mean = tape.var(on(x, device)).expr().mean::<(I,)>().unwrap();
        let got = mean.value().to(&Device::Cpu).unwrap().to_vec()[0];
        assert_eq!(
            got, value,
            "the tape's f16 mean of {count} × {value} on {device}"
        );
    }
}

/// Gradients of 4 micro-batches of 8, summed with `Gradient::add` and scaled by 1/4, step
/// Adam to the parameters one batch of 32 gives (within f32 rounding), three steps in a row.
pub fn accumulated_gradients(device: &Device) {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::{Gradient, Init, Linear, Params, ParamsBuilder};
    use axes::optim::Adam;
    let mut builder = ParamsBuilder::new();
    let hidden = Linear::<I, J>::new(&mut builder, "h", I.len(5), J.len(7), Init::He).unwrap();
    let out = Linear::<J, I>::new(&mut builder, "o", J.len(7), I.len(5), Init::Glorot).unwrap();
    let start = builder.build::<f32>(3).unwrap().to(device).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let x = Tensor::<f32, (B, I)>::from_fn((B.len(32), I.len(5)), |_| rng.random_range(-1.0..1.0))
        .unwrap();
    let labels = Tensor::<i64, (B,)>::from_fn(B.len(32), |_| rng.random_range(0..5)).unwrap();
    // The gradient of the mean loss over rows `rows` of the batch.
    let gradient = |params: &Params<f32>, rows: std::ops::Range<usize>| {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let x = tape.constant(on(x.slice::<B>(rows.clone(), 1).unwrap(), device));
        let labels = on(labels.slice::<B>(rows, 1).unwrap(), device);
        let h = hidden.forward(&p, &x).unwrap().tanh();
        let logits = out.forward(&p, h).unwrap();
        let loss = softmax_cross_entropy::<I, _, _, _, _>(logits, &labels)
            .unwrap()
            .mean::<(B,)>()
            .unwrap();
        p.gradient(&loss.backward().unwrap()).unwrap()
    };
    let (mut whole, mut micro) = (start.to(device).unwrap(), start.to(device).unwrap());
    let (mut adam_whole, mut adam_micro) = (Adam::new(0.05), Adam::new(0.05));
    for _ in 0..3 {
        let g = gradient(&whole, 0..32);
        adam_whole.step(&mut whole, &g).unwrap();
        let mut sum = Gradient::zeros(&micro).unwrap();
        for k in 0..4 {
            sum = sum.add(&gradient(&micro, 8 * k..8 * k + 8)).unwrap();
        }
        let mean = sum.scaled(0.25).unwrap();
        assert_eq!(mean.device(), *device);
        adam_micro.step(&mut micro, &mean).unwrap();
    }
    let host = |p: &Params<f32>| p.arena().storage().host().unwrap().to_vec();
    let (whole, micro) = (host(&whole), host(&micro));
    for (k, (a, b)) in whole.iter().zip(&micro).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
            "parameter element {k} on {device}: {a} from one batch, {b} from micro-batches"
        );
    }
}

/// A one-block GPT for the copy task over sequences of `half` symbols, its parameters added
/// to `builder`.
fn copy_task_gpt(builder: &mut axes::nn::ParamsBuilder, half: usize) -> axes::nn::transformer::Gpt {
    let config = axes::nn::transformer::GptConfig {
        vocab: 5,
        context: 2 * half,
        hidden: 16,
        heads: 2,
        head_dim: 8,
        inner: 32,
        layers: 1,
    };
    axes::nn::transformer::Gpt::new(builder, "gpt", &config).unwrap()
}

/// A GPT in f16 trains 20 steps of the copy task with Adam and no NaN or infinity in its
/// loss or parameters (Adam's `eps · √c₂` is 0 in f16: updated in f16, every element whose
/// gradient was 0 became 0/0). The loss falls.
pub fn f16_gpt_trains(device: &Device) {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::ParamsBuilder;
    use axes::nn::transformer::{Batch, Token, Vocab};
    use axes::optim::Adam;
    let half = 4;
    let mut builder = ParamsBuilder::new();
    let model = copy_task_gpt(&mut builder, half);
    let mut params = builder.build::<f16>(7).unwrap().to(device).unwrap();
    let mut adam = Adam::new(3e-3).checking_finite();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut losses = Vec::new();
    for step in 0..20 {
        let (ids, targets) = super::ops::copy_batch(&mut rng, 8, half);
        let (ids, targets) = (on(ids, device), on(targets, device));
        let tape = Tape::new();
        let p = params.bind(&tape);
        let logits = model.forward(&p, &ids).unwrap();
        let loss = softmax_cross_entropy::<Vocab, _, _, _, _>(&logits, &targets)
            .unwrap()
            .mean::<(Batch, Token)>()
            .unwrap();
        let value = loss.value().to(&Device::Cpu).unwrap().to_vec()[0].to_f32();
        assert!(value.is_finite(), "step {step} on {device}: loss {value}");
        losses.push(value);
        let grads = p.gradient(&loss.backward().unwrap()).unwrap();
        adam.step(&mut params, &grads).unwrap();
    }
    let values = params.arena().storage().host().unwrap().to_vec();
    let broken = values.iter().filter(|v| !v.is_finite()).count();
    assert_eq!(
        broken,
        0,
        "{broken} of {} parameters not finite on {device}",
        values.len()
    );
    let (first, last) = (
        losses[..5].iter().sum::<f32>(),
        losses[15..].iter().sum::<f32>(),
    );
    assert!(
        last < first,
        "the f16 loss did not fall on {device}: {losses:?}"
    );
}

/// Mixed precision: a GPT bound as bf16 ([`axes::nn::Params::bind_as`]), and as f16 under a
/// loss scale, takes three SGD steps whose f32 master weights move as the f32 model's do,
/// within the half type's rounding (the change over the three steps, in L2 norm). The
/// working copy follows the master: a stale one would compute the later gradients at the
/// first step's weights.
pub fn mixed_precision_steps(device: &Device) {
    let (start, f32_run) = mixed_run::<f32>(device, false);
    let moved = distance(&f32_run, &start);
    assert!(
        moved > 0.1,
        "the f32 steps moved the weights by {moved} on {device}"
    );
    for (name, run, tolerance) in [
        ("bf16", mixed_run::<bf16>(device, false).1, 0.03),
        (
            "f16 under a loss scale",
            mixed_run::<f16>(device, true).1,
            0.004,
        ),
    ] {
        let apart = distance(&run, &f32_run) / moved;
        assert!(
            apart < tolerance,
            "{name} on {device}: the steps differ from f32's by {apart} of their size"
        );
    }
}

/// The L2 distance between `a` and `b`.
fn distance(a: &[f32], b: &[f32]) -> f64 {
    let squares = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2));
    squares.sum::<f64>().sqrt()
}

/// A small GPT's f32 parameters before and after three SGD steps of the copy task run in
/// `H` (with a loss scale where `scaled`).
fn mixed_run<H: axes::Float<Wide = f32>>(device: &Device, scaled: bool) -> (Vec<f32>, Vec<f32>) {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::ParamsBuilder;
    use axes::nn::transformer::{Batch, Token, Vocab};
    use axes::optim::{LossScale, Sgd};
    let half = 4;
    let mut builder = ParamsBuilder::new();
    let model = copy_task_gpt(&mut builder, half);
    let mut params = builder.build::<f32>(7).unwrap().to(device).unwrap();
    let values = |params: &axes::nn::Params<f32>| params.arena().storage().host().unwrap().to_vec();
    let start = values(&params);
    let (mut sgd, mut scale) = (Sgd::new(0.5, 0.0), LossScale::new());
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for _ in 0..3 {
        let (ids, targets) = super::ops::copy_batch(&mut rng, 8, half);
        let (ids, targets) = (on(ids, device), on(targets, device));
        let tape = Tape::<H>::new();
        let p = params.bind_as::<H>(&tape).unwrap();
        let logits = model.forward(&p, &ids).unwrap();
        let loss = softmax_cross_entropy::<Vocab, _, _, _, _>(&logits, &targets)
            .unwrap()
            .mean::<(Batch, Token)>()
            .unwrap();
        let grad = if scaled {
            let grad = p.gradient(&scale.backward(&loss).unwrap()).unwrap();
            scale.unscale(&grad).unwrap()
        } else {
            p.gradient(&loss.backward().unwrap())
                .unwrap()
                .widened()
                .unwrap()
        };
        sgd.step(&mut params, &grad).unwrap();
    }
    (start, values(&params))
}

/// The integer ops — remainder, bitwise and, or, xor, not, shifts — over a permuted operand
/// and a broadcast one, in i32, i64 and u8, against Rust's own operators: `%` truncated (the
/// sign of the dividend), shifts modulo the width (`wrapping_shl`, `wrapping_shr`:
/// arithmetic for signed types). Then the float remainder against Rust's `%` (C's `fmod`).
pub fn integer_ops(device: &Device) {
    macro_rules! check_type {
        ($t:ty, $low:expr, $high:expr) => {{
            for seed in 0..3u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(300 + seed);
                let (nb, ni) = (rng.random_range(1..9), rng.random_range(1..9));
                // Stored (I, B), used as (B, I); the divisor never 0.
                let a = Tensor::<$t, (I, B)>::from_fn((I.len(ni), B.len(nb)), |_| {
                    rng.random_range($low..$high)
                })
                .unwrap();
                let b = Tensor::<$t, (I,)>::from_fn(I.len(ni), |_| {
                    loop {
                        let v: $t = rng.random_range($low..$high);
                        if v != 0 {
                            break v;
                        }
                    }
                })
                .unwrap();
                let shift = Tensor::<$t, (I,)>::from_fn(I.len(ni), |_| {
                    rng.random_range(0..(3 * <$t>::BITS) as $t)
                })
                .unwrap();
                let a_host = a.axes_with_order::<(B, I)>();
                let (a, b, shift) = (
                    on(a, device).axes_with_order::<(B, I)>(),
                    on(b, device),
                    on(shift, device),
                );
                let (av, bv, sv) = (a_host.to_vec(), b.to_vec(), shift.to_vec());
                let expect = |f: &dyn Fn($t, $t, $t) -> $t| -> Vec<$t> {
                    (0..nb * ni)
                        .map(|k| f(av[k], bv[k % ni], sv[k % ni]))
                        .collect()
                };
                let got = |t: Tensor<$t, (B, I)>| {
                    assert_eq!(t.device(), *device);
                    t.to(&Device::Cpu).unwrap().to_vec()
                };
                let name = stringify!($t);
                let cases: [(&str, Tensor<$t, (B, I)>, Vec<$t>); 7] = [
                    (
                        "rem",
                        (&a % &b).eval().unwrap(),
                        expect(&|x, y, _| x.wrapping_rem(y)),
                    ),
                    (
                        "bit_and",
                        a.bit_and(&b).eval().unwrap(),
                        expect(&|x, y, _| x & y),
                    ),
                    (
                        "bit_or",
                        a.bit_or(&b).eval().unwrap(),
                        expect(&|x, y, _| x | y),
                    ),
                    (
                        "bit_xor",
                        a.bit_xor(&b).eval().unwrap(),
                        expect(&|x, y, _| x ^ y),
                    ),
                    (
                        "bit_not",
                        a.bit_not().eval().unwrap(),
                        expect(&|x, _, _| !x),
                    ),
                    (
                        "shl",
                        a.shift_left(&shift).eval().unwrap(),
                        expect(&|x, _, s| x.wrapping_shl(s as u32)),
                    ),
                    (
                        "shr",
                        a.shift_right(&shift).eval().unwrap(),
                        expect(&|x, _, s| x.wrapping_shr(s as u32)),
                    ),
                ];
                for (op, result, want) in cases {
                    assert_eq!(got(result), want, "{name} {op} on {device}, seed {seed}");
                }
                // Channel unpacking: `(pixel >> shift) & mask`, one expression.
                let unpacked = (a.shift_right(&shift).bit_and(3 as $t)).eval().unwrap();
                let want = expect(&|x, _, s| x.wrapping_shr(s as u32) & 3);
                assert_eq!(got(unpacked), want, "{name} unpacking on {device}");
            }
        }};
    }
    check_type!(i32, -1000, 1000);
    check_type!(i64, -1_000_000_000_000, 1_000_000_000_000);
    check_type!(u8, 0, 255);
    // MIN % -1 is 0 (Rust's `wrapping_rem`), not a trap.
    let min = on(
        Tensor::<i32, (I,)>::full(I.len(2), i32::MIN).unwrap(),
        device,
    );
    let minus_one = on(Tensor::<i32, (I,)>::full(I.len(2), -1).unwrap(), device);
    let rem = (&min % &minus_one)
        .eval()
        .unwrap()
        .to(&Device::Cpu)
        .unwrap()
        .to_vec();
    assert_eq!(rem, [0, 0], "i32::MIN % -1 on {device}");
    // A remainder by 0 is an error, as a division by 0 is.
    let zero = on(Tensor::<i32, (I,)>::zeros(I.len(2)).unwrap(), device);
    let error = (&min % &zero).eval().unwrap_err();
    assert!(
        matches!(error, axes::Error::DivisionByZero),
        "{error} on {device}"
    );
    // Floats: truncated, like Rust's `%` (C's `fmod`).
    fn float_rem<T: axes::Float>(device: &Device) {
        let values =
            |v: [f64; 4]| Tensor::<T, (I,)>::from_vec(I.len(4), v.map(T::from_f64).to_vec());
        let x = values([-7.5, 7.5, -7.5, 0.75]).unwrap();
        let y = values([2.0, -2.0, -2.0, 0.5]).unwrap();
        let rem = (&on(x.clone(), device) % &on(y.clone(), device))
            .eval()
            .unwrap();
        let want: Vec<f64> = (x.to_vec().iter().zip(y.to_vec()))
            .map(|(a, b)| a.to_f64() % b.to_f64())
            .collect();
        let got: Vec<f64> = (rem.to(&Device::Cpu).unwrap().to_vec().iter())
            .map(|v| v.to_f64())
            .collect();
        assert_eq!(got, want, "{} rem on {device}", T::DTYPE.name());
    }
    float_rem::<f64>(device);
    float_rem::<f32>(device);
    float_rem::<f16>(device);
    float_rem::<half::bf16>(device);
}
