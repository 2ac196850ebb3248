//! The transformer's must-shows: gradients of attention against finite differences,
//! causality (a token never changes the logits before it), and the tape-free forward equal to
//! the taped one. The copy task that only attention can learn runs on every device from the
//! backends' shared suite (`backends/tests/common/ops.rs`).

use axes::autodiff::{Tape, Var};
use axes::nn::transformer::{Batch, Gpt, GptConfig, Hidden, MultiHeadAttention, Stream, Token};
use axes::nn::transformer::{Head, HeadDim, Key};
use axes::nn::{Init, Params, ParamsBuilder};
use axes::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn config(vocab: usize, context: usize) -> GptConfig {
    GptConfig {
        vocab,
        context,
        hidden: 32,
        heads: 2,
        head_dim: 16,
        inner: 64,
        layers: 2,
    }
}

fn random_ids(batch: usize, tokens: usize, vocab: usize, seed: u64) -> Tensor<i64, (Batch, Token)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Tensor::from_fn((Batch.len(batch), Token.len(tokens)), |_| {
        rng.random_range(0..vocab as i64)
    })
    .unwrap()
}

/// The logits of `ids` in (Batch, Token, Vocab) order, taped and tape-free.
fn logits<T: axes::Float>(
    model: &Gpt,
    params: &Params<T>,
    ids: &Tensor<i64, (Batch, Token)>,
) -> (Vec<T>, Vec<T>) {
    let tape = Tape::new();
    let taped = model.forward(&params.bind(&tape), ids).unwrap();
    (
        taped.value().to_vec(),
        model.infer(params, ids).unwrap().to_vec(),
    )
}

#[test]
fn a_token_never_changes_the_logits_before_it() {
    let (vocab, tokens) = (7, 9);
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config(vocab, tokens)).unwrap();
    let params = builder.build::<f32>(5).unwrap();
    let ids = random_ids(2, tokens, vocab, 1);
    let (before, before_inferred) = logits(&model, &params, &ids);
    let per_token = vocab;
    for t in 0..tokens {
        let mut changed = ids.to_vec();
        for b in 0..2 {
            let at = b * tokens + t;
            changed[at] = (changed[at] + 1) % vocab as i64;
        }
        let changed = Tensor::from_vec((Batch.len(2), Token.len(tokens)), changed).unwrap();
        let (after, after_inferred) = logits(&model, &params, &changed);
        for b in 0..2 {
            let row = |v: &[f32], from: usize, to: usize| {
                v[(b * tokens + from) * per_token..(b * tokens + to) * per_token].to_vec()
            };
            // bit-identical before t, taped and tape-free
            assert_eq!(row(&before, 0, t), row(&after, 0, t), "taped, token {t}");
            assert_eq!(
                row(&before_inferred, 0, t),
                row(&after_inferred, 0, t),
                "tape-free, token {t}"
            );
            // and the change is seen from t on
            assert_ne!(row(&before, t, t + 1), row(&after, t, t + 1), "token {t}");
        }
    }
}

#[test]
fn the_tape_free_forward_gives_the_taped_logits() {
    let (vocab, tokens) = (6, 5);
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config(vocab, 8)).unwrap();
    let ids = random_ids(3, tokens, vocab, 2);
    let params = builder.build::<f64>(6).unwrap();
    let (taped, inferred) = logits(&model, &params, &ids);
    let worst = (taped.iter().zip(&inferred)).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(worst < 1e-12, "f64: largest difference {worst:e}");
    let params = params
        .arena()
        .flat()
        .iter()
        .map(|&v| v as f32)
        .collect::<Vec<_>>();
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config(vocab, 8)).unwrap();
    let mut params32 = builder.build::<f32>(0).unwrap();
    params32.arena_mut().flat_mut().copy_from_slice(&params);
    let (taped, inferred) = logits(&model, &params32, &ids);
    let worst = (taped.iter().zip(&inferred)).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(worst < 1e-5, "f32: largest difference {worst:e}");
    // longer than the context: an error naming Token
    let long = random_ids(1, 9, vocab, 3);
    let error = model.infer(&params32, &long).unwrap_err().to_string();
    assert!(error.contains("`Token`") && error.contains('9'), "{error}");
}

#[test]
fn attention_gradients_against_finite_differences() {
    let mut builder = ParamsBuilder::new();
    let attention = MultiHeadAttention::new(
        &mut builder,
        "attention",
        Hidden.len(6),
        Head.len(2),
        HeadDim.len(3),
        Init::Normal(0.5),
    )
    .unwrap();
    let params = builder.build::<f64>(3).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let lens = (Batch.len(2), Token.len(4), Hidden.len(6));
    let x = Tensor::<f64, Stream>::from_fn(lens, |_| rng.random_range(-1.0..1.0)).unwrap();
    let r = Tensor::<f64, Stream>::from_fn(lens, |_| rng.random_range(-1.0..1.0)).unwrap();
    let loss = |x: &Var<f64, Stream>| {
        let p = params.bind(x.tape());
        let out = attention.forward(&p, x).unwrap();
        (&out * &x.tape().constant(r.clone()))
            .sum::<Stream>()
            .unwrap()
    };
    let tape = Tape::new();
    let var = tape.var(x.clone());
    let analytic = loss(&var).backward().unwrap().get(&var).unwrap().to_vec();
    let base = x.to_vec();
    let at = |values: Vec<f64>| {
        let tape = Tape::new();
        let x = Tensor::from_vec(lens, values).unwrap();
        loss(&tape.var(x)).value().to_vec()[0]
    };
    let step = 1e-6;
    let numeric: Vec<f64> = (0..base.len())
        .map(|i| {
            let (mut up, mut down) = (base.clone(), base.clone());
            up[i] += step;
            down[i] -= step;
            (at(up) - at(down)) / (2.0 * step)
        })
        .collect();
    let diff: f64 = (analytic.iter().zip(&numeric))
        .map(|(a, n)| (a - n).powi(2))
        .sum();
    let norm: f64 = numeric.iter().map(|n| n * n).sum();
    let error = diff.sqrt() / norm.sqrt();
    assert!(error < 1e-6, "relative error {error:e}");
    println!("attention: relative error {error:.1e}");
}

#[test]
fn a_padding_mask_hides_its_keys() {
    let mut builder = ParamsBuilder::new();
    let attention = MultiHeadAttention::new(
        &mut builder,
        "attention",
        Hidden.len(8),
        Head.len(2),
        HeadDim.len(4),
        Init::Normal(0.3),
    )
    .unwrap();
    let params = builder.build::<f32>(9).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let lens = (Batch.len(2), Token.len(5), Hidden.len(8));
    let x = Tensor::<f32, Stream>::from_fn(lens, |_| rng.random_range(-1.0..1.0)).unwrap();
    // key 1 of the first example is padding
    let mask = Tensor::<f32, (Batch, Key)>::from_fn((Batch.len(2), Key.len(5)), |i| {
        if i.of::<Batch>() == 0 && i.of::<Key>() == 1 {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap();
    let run = |x: &Tensor<f32, Stream>| {
        let tape = Tape::new();
        let taped = attention
            .forward_masked(&params.bind(&tape), &tape.constant(x.clone()), &mask)
            .unwrap();
        let inferred = attention.infer_masked(&params, x, &mask).unwrap().to_vec();
        let taped = taped.value().to_vec();
        assert!(
            taped
                .iter()
                .zip(&inferred)
                .all(|(a, b)| (a - b).abs() < 1e-5)
        );
        taped
    };
    let mut changed = x.to_vec();
    for h in 0..8 {
        changed[8 + h] += 1.0; // example 0, token 1
    }
    let changed = Tensor::from_vec(lens, changed).unwrap();
    // example 0's outputs (its first 5 × 8 values) ignore its token 1 with the mask
    let first = |v: Vec<f32>| v[..40].to_vec();
    assert_eq!(first(run(&x)), first(run(&changed)));
    // and see it without
    let unmasked = |x| first(attention.infer(&params, x).unwrap().to_vec());
    let (before, after) = (unmasked(&x), unmasked(&changed));
    assert_eq!(before[..8], after[..8], "token 0 precedes it");
    assert_ne!(before[8..], after[8..]);
}
