//! Training at its edges, as a new user meets them: gradients asked of a tape that is gone,
//! clipping where the norm overflows its type, half-precision Adam, settings out of range,
//! non-finite values, and the messages of common mistakes. (Half-precision sums, gradient
//! accumulation and an f16 GPT run on every device from `backends/tests/common/edges.rs`.)

use axes::autodiff::Tape;
use axes::nn::transformer::{Batch, Gpt, GptConfig, Token};
use axes::nn::{Gradient, Init, Params, ParamsBuilder};
use axes::optim::{Adam, Formula, Sgd, WarmupCosine, clip_grad_norm, clip_grad_norm_checked};
use axes::prelude::*;
use half::{bf16, f16};

#[derive(Axis)]
struct Feature;
#[derive(Axis)]
struct Row;
#[derive(Axis)]
struct Col;

/// Parameters `weight` (3 elements) and `bias` (1), in an arena of element type `T`.
fn two_parameters<T: axes::Float>() -> Params<T> {
    let mut builder = ParamsBuilder::new();
    builder
        .add::<(Feature,)>("weight", Feature.len(3), Init::Zeros, 3, 3)
        .unwrap();
    builder
        .add::<(Feature,)>("bias", Feature.len(1), Init::Zeros, 1, 1)
        .unwrap();
    builder.build::<T>(0).unwrap()
}

/// A gradient holding `values` at the parameters' offsets (weight's three, then bias's).
fn gradient<T: axes::Float>(params: &Params<T>, values: [f64; 4]) -> Gradient<T> {
    let mut flat = vec![T::zero(); params.arena().len()];
    let mut next = values.into_iter();
    for layout in params.arena().layouts() {
        let count = layout.element_count().unwrap();
        for slot in &mut flat[layout.offset()..layout.offset() + count] {
            *slot = T::from_f64(next.next().unwrap());
        }
    }
    Gradient::from_vec(params, flat).unwrap()
}

/// The values at the parameters' offsets, as f64.
fn values<T: axes::Float>(params: &Params<T>, flat: &[T]) -> Vec<f64> {
    (params.arena().layouts().iter())
        .flat_map(|l| flat[l.offset()..l.offset() + l.element_count().unwrap()].to_vec())
        .map(|v| v.to_f64())
        .collect()
}

/// A tape made after another is dropped often gets its address: gradients of the old tape
/// asked for a variable of the new one were a panic, or the old tape's values as `Ok`.
#[test]
fn gradients_of_a_dropped_tape_are_never_read_for_a_new_one() {
    for round in 0..50 {
        let grads = {
            let tape = Tape::<f32>::new();
            let x = tape.var(Tensor::<f32, (Feature,)>::ones(Feature.len(3)).unwrap());
            (&x * 2.0).sum::<(Feature,)>().unwrap().backward().unwrap()
        };
        let tape = Tape::<f32>::new();
        let y = tape.var(Tensor::<f32, (Feature,)>::ones(Feature.len(3)).unwrap());
        let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| grads.get(&y)));
        match asked {
            Ok(Err(axes::Error::NoGradient { reason })) => {
                assert!(reason.contains("another tape"), "{reason}")
            }
            Ok(other) => panic!("round {round}: {other:?}"),
            Err(_) => panic!("round {round}: a panic"),
        }
    }
}

/// The norm is computed in f64: squares of f32 elements of 1e20 are past f32's range (the
/// norm was inf and every gradient became 0), and f16 norms above 256 overflowed.
#[test]
fn clipping_computes_the_norm_where_it_does_not_overflow() {
    let params = two_parameters::<f32>();
    let grad = gradient(&params, [1e20; 4]);
    let (clipped, norm) = clip_grad_norm(&params, grad, 1.0).unwrap();
    assert_eq!(norm.to_vec(), [2.0 * 1e20f32]);
    let clipped = values(&params, &clipped.to_vec().unwrap());
    assert!(
        clipped.iter().all(|&v| (v - 0.5).abs() < 1e-6),
        "{clipped:?}"
    );

    let halves = two_parameters::<f16>();
    let (clipped, norm) = clip_grad_norm(&halves, gradient(&halves, [300.0; 4]), 1.0).unwrap();
    assert_eq!(norm.to_vec(), [600.0]);
    let clipped = values(&halves, &clipped.to_vec().unwrap());
    assert!(
        clipped.iter().all(|&v| (v - 0.5).abs() < 1e-3),
        "{clipped:?}"
    );

    let brains = two_parameters::<bf16>();
    let (_, norm) = clip_grad_norm(&brains, gradient(&brains, [158.0; 4]), 1.0).unwrap();
    assert_eq!(norm.to_vec(), [316.0]);
}

/// A non-finite gradient passes `clip_grad_norm` with its norm (as in PyTorch), and is an
/// error naming the parameter from `clip_grad_norm_checked` and from an optimizer that checks.
#[test]
fn non_finite_values_are_errors_where_checked() {
    let params = two_parameters::<f32>();
    let broken = gradient(&params, [1.0, 2.0, 3.0, f64::NAN]);
    let (_, norm) =
        clip_grad_norm(&params, gradient(&params, [1.0, 2.0, 3.0, f64::NAN]), 1.0).unwrap();
    assert!(norm.to_vec()[0].is_nan());
    let error = clip_grad_norm_checked(&params, broken, 1.0).unwrap_err();
    assert!(matches!(error, axes::Error::NonFinite { .. }), "{error}");
    assert!(
        error.to_string().contains("gradient of parameter `bias`"),
        "{error}"
    );

    let mut params = two_parameters::<f32>();
    let infinite = gradient(&params, [1.0, f64::INFINITY, 3.0, 4.0]);
    let mut sgd = Sgd::new(0.1, 0.9).checking_finite();
    let error = sgd.step(&mut params, &infinite).unwrap_err().to_string();
    assert!(
        error.contains("gradient of parameter `weight` holds inf"),
        "{error}"
    );
    // Unchecked, the step is taken (and the parameter is what the user asked for).
    Sgd::new(0.1, 0.9).step(&mut params, &infinite).unwrap();
    let zeros = gradient(&params, [0.0; 4]);
    let error = Adam::new(0.1)
        .checking_finite()
        .step(&mut params, &zeros)
        .unwrap_err()
        .to_string();
    assert!(error.contains("parameter `weight` holds -inf"), "{error}");
}

/// Adam on f16 parameters: `eps · √c₂` is 0 in f16, so every element whose gradient was 0
/// became 0/0. The update is computed in f32, with the moments kept in f32.
#[test]
fn half_precision_adam_leaves_untouched_elements_finite() {
    /// The parameters after three Adam steps from zeros (gradient 0 on the last element).
    fn three_steps<T: axes::Float>() -> Vec<f64> {
        let mut params = two_parameters::<T>();
        let mut adam = Adam::new(1e-3);
        for _ in 0..3 {
            let grad = gradient(&params, [1e-3, 0.5, 1.0, 0.0]);
            adam.step(&mut params, &grad).unwrap();
        }
        values(&params, params.arena().storage().host().unwrap())
    }
    for (name, values) in [
        ("f16", three_steps::<f16>()),
        ("bf16", three_steps::<bf16>()),
    ] {
        assert!(values.iter().all(|v| v.is_finite()), "{name}: {values:?}");
        assert_eq!(values[3], 0.0, "{name}: no gradient, no change");
        assert!(values[0] < 0.0 && values[0] > -4e-3, "{name}: {values:?}");
    }
}

/// Settings out of their ranges are errors naming the setting and the range (PyTorch raises
/// for each optimizer case), checked at every step since they may change between steps.
/// A rate for each step, as a user writes one: a NaN at step 2.
#[derive(Debug)]
struct Halving;

impl axes::optim::Schedule for Halving {
    fn rate(&self) -> Formula {
        let t = Formula::step();
        t.below(1.0, 0.4, t.below(2.0, 0.2, f64::NAN))
    }
}

/// An optimizer's schedule gives each step its rate — SGD's and Adam's, counted from the
/// first step on the parameters, and again from parameters of another size — and a rate out
/// of range is an error naming the setting, the step not taken.
#[test]
fn schedules_give_each_step_its_rate() {
    let mut params = two_parameters::<f64>();
    let grad = gradient(&params, [1.0, 2.0, -1.0, 0.5]);
    let mut sgd = Sgd::new(0.0, 0.0).with_schedule(Halving);
    sgd.step(&mut params, &grad).unwrap();
    assert_eq!(sgd.lr, 0.4);
    sgd.step(&mut params, &grad).unwrap();
    assert_eq!(sgd.lr, 0.2);
    let flat = params.arena().storage().host().unwrap().to_vec();
    // Plain SGD: -(0.4 + 0.2) g.
    for (p, g) in values(&params, &flat).iter().zip([1.0, 2.0, -1.0, 0.5]) {
        assert!((p + 0.6 * g).abs() < 1e-15, "{p} for gradient {g}");
    }
    let error = sgd.step(&mut params, &grad).unwrap_err().to_string();
    assert!(error.contains("`Sgd::lr` is NaN"), "{error}");
    assert_eq!(
        params.arena().storage().host().unwrap().to_vec(),
        flat,
        "no step taken"
    );
    // Another model's parameters: an error naming both, and no step taken.
    let mut builder = ParamsBuilder::new();
    builder
        .add::<(Feature,)>("w", Feature.len(2), Init::Zeros, 2, 2)
        .unwrap();
    let mut others = builder.build::<f64>(0).unwrap();
    let other_grad = Gradient::from_vec(&others, vec![1.0, 1.0]).unwrap();
    let error = sgd.step(&mut others, &other_grad).unwrap_err().to_string();
    assert!(
        error.contains("`Sgd` steps the parameters of model #")
            && error.contains("(4 elements: `weight` … `bias`)")
            && error.contains("(2 elements: `w`)"),
        "{error}"
    );
    assert_eq!(others.arena().storage().host().unwrap().to_vec(), [0.0; 2]);

    let schedule = WarmupCosine::new(1e-2, 1e-3, 3, 10).unwrap();
    let (mut scheduled, mut by_hand) = (two_parameters::<f32>(), two_parameters::<f32>());
    let grad = gradient(&scheduled, [1.0, -2.0, 0.5, 3.0]);
    let grad_by_hand = gradient(&by_hand, [1.0, -2.0, 0.5, 3.0]);
    let mut adam = Adam::new(0.0).with_schedule(schedule);
    let mut manual = Adam::new(0.0);
    for step in 0..12 {
        adam.step(&mut scheduled, &grad).unwrap();
        manual.lr = schedule.at(step);
        manual.step(&mut by_hand, &grad_by_hand).unwrap();
    }
    // The schedule's rate is computed in f32 where the step runs, the rate set by hand in
    // f64 and rounded: the two agree to f32's precision.
    let (a, b) = (scheduled.arena().storage(), by_hand.arena().storage());
    for (a, b) in a.host().unwrap().iter().zip(b.host().unwrap()) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-3), "{a} against {b}");
    }
}

#[test]
fn settings_out_of_range_are_named() {
    let mut params = two_parameters::<f32>();
    let grad = gradient(&params, [1.0; 4]);
    let adam = |change: fn(&mut Adam<f32>)| {
        let mut adam = Adam::new(1e-3);
        change(&mut adam);
        adam
    };
    let cases: Vec<(Adam<f32>, &str)> = vec![
        (
            adam(|a| a.lr = f64::NAN),
            "`Adam::lr` is NaN, but it must be finite and ≥ 0",
        ),
        (adam(|a| a.lr = f64::INFINITY), "`Adam::lr` is inf"),
        (adam(|a| a.lr = -1e-3), "`Adam::lr` is -0.001"),
        (
            adam(|a| a.beta1 = 1.0),
            "`Adam::beta1` is 1, but it must be in [0, 1)",
        ),
        (adam(|a| a.beta2 = -0.1), "`Adam::beta2` is -0.1"),
        (
            adam(|a| a.eps = 0.0),
            "`Adam::eps` is 0, but it must be finite and > 0",
        ),
        (
            adam(|a| a.weight_decay = -1.0),
            "`Adam::weight_decay` is -1",
        ),
    ];
    for (mut adam, message) in cases {
        let error = adam.step(&mut params, &grad).unwrap_err();
        assert!(
            matches!(error, axes::Error::InvalidSetting { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains(message),
            "{error} lacks {message}"
        );
    }
    let error = Sgd::new(0.1, -0.5).step(&mut params, &grad).unwrap_err();
    assert!(
        error.to_string().contains("`Sgd::momentum` is -0.5"),
        "{error}"
    );
    let untouched = values(&params, params.arena().storage().host().unwrap());
    assert_eq!(untouched, [0.0; 4], "no step was taken");

    let error = WarmupCosine::new(1e-3, 1e-4, 100, 100)
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "`WarmupCosine::warmup` is 100, but it must be below `total` (100)"
    );
    assert!(WarmupCosine::new(f64::NAN, 1e-4, 10, 100).is_err());
    assert!(clip_grad_norm(&params, grad, -1.0).is_err());

    for (field, config) in [
        (
            "heads",
            GptConfig {
                heads: 0,
                ..gpt_config()
            },
        ),
        (
            "hidden",
            GptConfig {
                hidden: 0,
                ..gpt_config()
            },
        ),
        (
            "inner",
            GptConfig {
                inner: 0,
                ..gpt_config()
            },
        ),
    ] {
        let Err(error) = Gpt::new(&mut ParamsBuilder::new(), "gpt", &config) else {
            panic!("a GPT with {field} 0 was built");
        };
        assert_eq!(
            error.to_string(),
            format!("`GptConfig::{field}` is 0, but it must be at least 1")
        );
    }
}

fn gpt_config() -> GptConfig {
    GptConfig {
        vocab: 5,
        context: 4,
        hidden: 8,
        heads: 2,
        head_dim: 4,
        inner: 16,
        layers: 1,
    }
}

/// The messages of three common mistakes say what the user did.
#[test]
fn common_mistakes_are_named_in_the_users_words() {
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &gpt_config()).unwrap();
    let params = builder.build::<f32>(0).unwrap();
    let ids = |batch: usize, tokens: usize| {
        Tensor::<i64, (Batch, Token)>::zeros((Batch.len(batch), Token.len(tokens))).unwrap()
    };
    // A sequence longer than the context.
    let Err(error) = model.infer(&params, &ids(2, 5)) else {
        panic!("5 tokens in a context of 4")
    };
    assert_eq!(
        error.to_string(),
        "5 positions along axis `Token` exceed the model's context of 4"
    );
    // An empty batch: the mean of the loss names the empty axis.
    let tape = Tape::new();
    let Err(error) = model.loss(&params.bind(&tape), &ids(0, 3), &ids(0, 3)) else {
        panic!("the loss of an empty batch")
    };
    assert_eq!(
        error.to_string(),
        "cannot take the mean over the empty axis `Batch`: it has length 0"
    );
    // A view of a larger buffer swapped in.
    let slot = axes::memory::Swappable::new(
        Tensor::<f32, (Row, Col)>::zeros((Row.len(2), Col.len(3))).unwrap(),
    );
    let larger = Tensor::<f32, (Row, Col)>::zeros((Row.len(4), Col.len(3))).unwrap();
    let view = larger.slice::<Row>(0..2, 1).unwrap();
    let error = slot.swap(view).unwrap_err().to_string();
    assert_eq!(
        error,
        "the tensor (Row=2, Col=3) is a view of a buffer of 12 elements where a buffer of 6 is \
         needed; make it contiguous first (`.contiguous()`)"
    );
}

#[test]
fn an_optimizer_follows_its_parameters_to_another_device() {
    let device = Device::Backend(&axes::engine::cpu::CPU_BACKEND);
    let (mut moved, mut stayed) = (two_parameters::<f32>(), two_parameters::<f32>());
    let values = [0.5, -1.0, 2.0, 0.25];
    let schedule = WarmupCosine::new(0.1, 0.01, 1, 6).unwrap();
    let mut adam = Adam::new(0.1)
        .with_weight_decay(0.01)
        .with_schedule(schedule);
    let mut reference = adam.clone();
    for _ in 0..2 {
        let (g, h) = (gradient(&moved, values), gradient(&stayed, values));
        adam.step(&mut moved, &g).unwrap();
        reference.step(&mut stayed, &h).unwrap();
    }
    // The moments, the step count and the schedule's position go with the parameters.
    let mut moved = moved.to(&device).unwrap();
    for _ in 0..3 {
        let (g, h) = (gradient(&moved, values), gradient(&stayed, values));
        adam.step(&mut moved, &g).unwrap();
        reference.step(&mut stayed, &h).unwrap();
    }
    assert_eq!(adam.steps().unwrap(), 5);
    let moved = moved.to(&Device::Cpu).unwrap();
    let (a, b) = (moved.arena().storage(), stayed.arena().storage());
    for (a, b) in a.host().unwrap().iter().zip(b.host().unwrap()) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-3), "{a} against {b}");
    }
}
