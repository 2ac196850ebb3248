//! Fused attention ([`Attention`]) on a device against the composition it replaces run on
//! the host (`dot_over`, a scale, masks, `softmax` along the keys, `dot_over`): values and
//! the gradients of the queries, keys and values, in f64 and f32, causal, padding-masked and
//! unmasked, over lengths around the kernels' tiles and head widths 1 to 256, on permuted
//! and strided operands, with fully masked rows; the launches of one call; and the device
//! bytes one call at context 1,024 holds.

use axes::autodiff::{self, Tape, Var};
use axes::nn::causal_mask;
use axes::prelude::*;
use axes::{Attention, Device, Float};

#[derive(Axis)]
pub struct Entry;
#[derive(Axis)]
pub struct Head;
#[derive(Axis)]
pub struct Query;
#[derive(Axis)]
pub struct Key;
#[derive(Axis)]
pub struct Width;
#[derive(Axis)]
pub struct ValueWidth;

type Out = (Entry, Head, Query, ValueWidth);

/// What a case's mask hides of batch entry 0's keys (entry 1 sees every key).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Hide {
    /// No mask.
    Nothing,
    /// The second half of the keys (the first stays visible).
    SecondHalf,
    /// Every key: entry 0's queries see none.
    Everything,
}

/// One call's lengths and masks.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub heads: usize,
    pub queries: usize,
    pub keys: usize,
    pub width: usize,
    pub value_width: usize,
    pub causal: bool,
    pub hide: Hide,
}

/// A case's operands on the host: queries stored in another axis order, keys stored
/// (Key, Width, Entry, Head) and read through that order, and values that are every other
/// key of a tensor twice as long (a strided view).
struct Operands<T: Float> {
    q: Tensor<T, (Entry, Head, Query, Width)>,
    k: Tensor<T, (Key, Width, Entry, Head)>,
    v: Tensor<T, (Entry, Head, Key, ValueWidth)>,
    mask: Tensor<T, (Entry, Key)>,
    weights: Tensor<T, Out>,
}

impl<T: Float> Operands<T> {
    fn new(case: &Case, seed: u64) -> Self {
        let (lo, hi) = (T::from_f64(-1.0), T::from_f64(1.0));
        let (e, h) = (Entry.len(2), Head.len(case.heads));
        let q = Tensor::<T, (Width, Query, Head, Entry)>::random_uniform(
            (Width.len(case.width), Query.len(case.queries), h, e),
            lo,
            hi,
            seed,
        )
        .unwrap()
        .axes_with_order();
        let k = Tensor::random_uniform(
            (Key.len(case.keys), Width.len(case.width), e, h),
            lo,
            hi,
            seed + 1,
        )
        .unwrap();
        let v = Tensor::<T, (Entry, Head, Key, ValueWidth)>::random_uniform(
            (
                e,
                h,
                Key.len(2 * case.keys),
                ValueWidth.len(case.value_width),
            ),
            lo,
            hi,
            seed + 2,
        )
        .unwrap()
        .slice::<Key>(.., 2)
        .unwrap();
        let visible = match case.hide {
            Hide::Nothing => case.keys,
            Hide::SecondHalf => case.keys.div_ceil(2),
            Hide::Everything => 0,
        };
        let mask = Tensor::from_fn((e, Key.len(case.keys)), |ix| {
            if ix.of::<Entry>() == 0 && ix.of::<Key>() >= visible {
                T::from_f64(f64::NEG_INFINITY)
            } else {
                T::zero()
            }
        })
        .unwrap();
        let weights = Tensor::random_uniform(
            (
                e,
                h,
                Query.len(case.queries),
                ValueWidth.len(case.value_width),
            ),
            lo,
            hi,
            seed + 3,
        )
        .unwrap();
        Operands {
            q,
            k,
            v,
            mask,
            weights,
        }
    }

    /// The same operands (the same views) on `device`.
    fn to(&self, device: &Device) -> Self {
        Operands {
            q: self.q.to(device).unwrap(),
            k: self.k.to(device).unwrap(),
            v: self.v.to(device).unwrap(),
            mask: self.mask.to(device).unwrap(),
            weights: self.weights.to(device).unwrap(),
        }
    }
}

/// The attention composed from the library's other ops, on the tape.
fn composed<T: Float>(
    q: &Var<T, (Entry, Head, Query, Width)>,
    k: &Var<T, (Key, Width, Entry, Head)>,
    v: &Var<T, (Entry, Head, Key, ValueWidth)>,
    case: &Case,
    mask: Option<&Tensor<T, (Entry, Key)>>,
) -> Var<T, Out> {
    let tape = q.tape();
    let scores = autodiff::dot_over::<(Width,), _, _, _, _, _>(q, k).unwrap();
    let (nq, nk) = (Query.len(case.queries), Key.len(case.keys));
    let hide = if case.causal {
        causal_mask::<T, Query, Key>(nq, nk).unwrap()
    } else {
        Tensor::zeros((nq, nk)).unwrap()
    };
    let scale = 1.0 / (case.width as f64).sqrt();
    let scale = Tensor::<T, ()>::from_vec((), vec![T::from_f64(scale)]).unwrap();
    let mut scores = (scores * &tape.constant(scale) + &tape.constant(hide))
        .eval()
        .unwrap();
    if let Some(mask) = mask {
        scores = (scores + &tape.constant(mask.clone())).eval().unwrap();
    }
    let p = scores.softmax::<Key>().unwrap();
    autodiff::dot_over::<(Key,), _, _, _, _, _>(&p, v).unwrap()
}

/// The values and the queries', keys' and values' gradients of a loss weighing every output
/// element by a random factor, read back to the host: fused on the operands' device, or
/// composed.
fn run<T: Float>(x: &Operands<T>, case: &Case, fused: bool) -> [Vec<T>; 4] {
    let tape = Tape::<T>::new();
    let (q, k, v) = (
        tape.var(x.q.clone()),
        tape.var(x.k.clone()),
        tape.var(x.v.clone()),
    );
    let mask = (case.hide != Hide::Nothing).then_some(&x.mask);
    let out = if fused {
        let attention = if case.causal {
            Attention::<Query, Key, Width>::causal()
        } else {
            Attention::new()
        };
        match mask {
            Some(m) => attention.run_var_masked(&q, &k, &v, m),
            None => attention.run_var(&q, &k, &v),
        }
        .unwrap()
    } else {
        composed(&q, &k, &v, case, mask)
    };
    assert_eq!(
        out.value().device(),
        x.q.device(),
        "the result stays on the device"
    );
    let grads = (&out * &tape.constant(x.weights.clone()))
        .sum::<Out>()
        .unwrap()
        .backward()
        .unwrap();
    [
        out.value().to_vec(),
        grads.get(&q).unwrap().to_vec(),
        grads.get(&k).unwrap().to_vec(),
        grads.get(&v).unwrap().to_vec(),
    ]
}

/// `‖a − b‖ / ‖b‖` (`‖a − b‖` where `b` is 0).
fn relative_error<T: Float>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len());
    let diff: f64 = (a.iter().zip(b))
        .map(|(x, y)| (x.to_f64() - y.to_f64()).powi(2))
        .sum();
    let norm: f64 = b.iter().map(|y| y.to_f64().powi(2)).sum();
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// Fused attention on `device` against the composition on the host (against the host's
/// fused attention where a row sees no key, which the composition makes NaN), within
/// `tolerance` (relative 2-norm error of values and of each gradient).
pub fn check<T: Float>(device: &Device, case: &Case, tolerance: f64, seed: u64) {
    let host = Operands::<T>::new(case, seed);
    let there = run(&host.to(device), case, true);
    let reference = run(&host, case, case.hide == Hide::Everything);
    for (what, (a, b)) in ["values", "dq", "dk", "dv"]
        .iter()
        .zip(there.iter().zip(&reference))
    {
        let error = relative_error(a, b);
        assert!(
            error <= tolerance,
            "{case:?} on {device}: {what} off by {error:e}"
        );
    }
}

/// The cases every device runs, in f64 (1e-12) and f32 (1e-5).
pub fn matches_the_composition(device: &Device) {
    let mut seed = 0;
    for (queries, keys) in [(1, 1), (7, 129), (129, 7), (129, 129), (1, 7)] {
        for width in [1, 8, 33] {
            for (causal, hide) in [
                (true, Hide::Nothing),
                (false, Hide::SecondHalf),
                (false, Hide::Nothing),
                (true, Hide::SecondHalf),
            ] {
                let case = Case {
                    heads: 2,
                    queries,
                    keys,
                    width,
                    value_width: if width == 8 { 5 } else { width },
                    causal,
                    hide,
                };
                seed += 10;
                check::<f64>(device, &case, 1e-12, seed);
                check::<f32>(device, &case, 1e-5, seed);
            }
        }
    }
}

/// Fused attention on `device` against the host's, both in the half type `T` (computed in
/// f32, rounded once at the end), within `tolerance`.
fn check_half<T: Float>(device: &Device, case: &Case, tolerance: f64, seed: u64) {
    let host = Operands::<T>::new(case, seed);
    let (there, here) = (run(&host.to(device), case, true), run(&host, case, true));
    for (what, (a, b)) in ["values", "dq", "dk", "dv"]
        .iter()
        .zip(there.iter().zip(&here))
    {
        let error = relative_error(a, b);
        assert!(
            error <= tolerance,
            "{case:?} on {device}: {what} off by {error:e}"
        );
    }
}

/// Keys shared across heads and values across batch entries: on `device` as on the host, the
/// gradients summed over the axes they lack.
fn shared_keys_and_values(device: &Device) {
    let (e, h, n) = (Entry.len(2), Head.len(3), 70);
    let q = Tensor::<f64, (Entry, Head, Query, Width)>::random_uniform(
        (e, h, Query.len(n), Width.len(4)),
        -1.0,
        1.0,
        5,
    );
    let k = Tensor::<f64, (Entry, Key, Width)>::random_uniform(
        (e, Key.len(n), Width.len(4)),
        -1.0,
        1.0,
        6,
    );
    let v = Tensor::<f64, (Head, Key, ValueWidth)>::random_uniform(
        (h, Key.len(n), ValueWidth.len(3)),
        -1.0,
        1.0,
        7,
    );
    let w =
        Tensor::<f64, Out>::random_uniform((e, h, Query.len(n), ValueWidth.len(3)), -1.0, 1.0, 8);
    let (q, k, v, w) = (q.unwrap(), k.unwrap(), v.unwrap(), w.unwrap());
    let run = |on: &Device| {
        let tape = Tape::<f64>::new();
        let (qv, kv, vv) = (
            tape.var(q.to(on).unwrap()),
            tape.var(k.to(on).unwrap()),
            tape.var(v.to(on).unwrap()),
        );
        let out = Attention::<Query, Key, Width>::causal()
            .run_var(&qv, &kv, &vv)
            .unwrap();
        let grads = (&out * &tape.constant(w.to(on).unwrap()))
            .sum::<Out>()
            .unwrap()
            .backward()
            .unwrap();
        [
            out.value().to_vec(),
            grads.get(&qv).unwrap().to_vec(),
            grads.get(&kv).unwrap().to_vec(),
            grads.get(&vv).unwrap().to_vec(),
        ]
    };
    let (there, here) = (run(device), run(&Device::Cpu));
    for (what, (a, b)) in ["values", "dq", "dk", "dv"]
        .iter()
        .zip(there.iter().zip(&here))
    {
        let error = relative_error(a, b);
        assert!(
            error <= 1e-12,
            "shared keys on {device}: {what} off by {error:e}"
        );
    }
}

/// Heads 256 wide; rows that see no key (zeros, no gradient), causal or not; f16 and bf16;
/// keys and values shared along batch axes.
pub fn edge_cases(device: &Device) {
    shared_keys_and_values(device);
    let wide = Case {
        heads: 1,
        queries: 70,
        keys: 70,
        width: 256,
        value_width: 256,
        causal: true,
        hide: Hide::Nothing,
    };
    check::<f64>(device, &wide, 1e-12, 1);
    check::<f32>(device, &wide, 1e-5, 1);
    for causal in [false, true] {
        let empty = Case {
            heads: 2,
            queries: 9,
            keys: 67,
            width: 4,
            value_width: 3,
            causal,
            hide: Hide::Everything,
        };
        check::<f64>(device, &empty, 1e-12, 2);
        let [out, dq, ..] = run(&Operands::<f64>::new(&empty, 2).to(device), &empty, true);
        // Entry 0 comes first in the result's and the queries' order.
        let (rows, cols) = (2 * 9, (3, 4));
        assert!(out[..rows * cols.0].iter().all(|&x| x == 0.0));
        assert!(out[rows * cols.0..].iter().any(|&x| x != 0.0));
        assert!(dq[..rows * cols.1].iter().all(|&x| x == 0.0));
    }
    let halves = Case {
        heads: 2,
        queries: 70,
        keys: 67,
        width: 16,
        value_width: 8,
        causal: true,
        hide: Hide::SecondHalf,
    };
    // A half ulp is 2^-11 (f16) and 2^-8 (bf16): the two differ by at most one in a few
    // elements.
    check_half::<half::f16>(device, &halves, 1e-3, 3);
    check_half::<half::bf16>(device, &halves, 8e-3, 3);
}

/// One causal call at context 1,024 (2 heads of 32, f32) through the protocol: the forward is
/// one launch and the backward three, and the device holds less than one Query × Key buffer
/// more at any moment (a device that counts neither, the CPU backend, is skipped).
pub fn one_call_at_context_1024(device: &Device) {
    use axes::DType;
    use axes::protocol::{AttentionJob, AttentionOperand, AttentionSaved, AttentionShape};
    use rand::{Rng, SeedableRng};
    let Device::Backend(backend) = *device else {
        return;
    };
    let Some(meter) = backend.meter() else {
        return;
    };
    let (batch, context, width) = (2, 1024, 32);
    let elements = batch * context * width;
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut upload = || {
        let values: Vec<u8> = (0..elements)
            .flat_map(|_| rng.random_range(-1.0f32..1.0).to_ne_bytes())
            .collect();
        backend.upload(&values).unwrap()
    };
    let (q, k, v, grad) = (upload(), upload(), upload(), upload());
    let offsets: Vec<isize> = (0..batch).map(|b| (b * context * width) as isize).collect();
    let cols: Vec<isize> = (0..width as isize).collect();
    let rows = |memory| AttentionOperand {
        memory,
        batch: &offsets,
        row: width as isize,
        cols: &cols,
    };
    let job = AttentionJob {
        dtype: DType::F32,
        shape: AttentionShape {
            batch,
            queries: context,
            keys: context,
            width,
            value_width: width,
            scale: 1.0 / (width as f64).sqrt(),
            causal: true,
        },
        q: rows(&q),
        k: rows(&k),
        v: rows(&v),
        mask: None,
    };
    backend.synchronize().unwrap();
    meter.reset_peak();
    let before = meter.counters();
    let (out, lse) = backend.attention(&job).unwrap();
    let forward = meter.counters().launches - before.launches;
    let saved = AttentionSaved {
        out: rows(&out),
        grad: rows(&grad),
        lse: &lse,
    };
    let gradients = backend.attention_backward(&job, &saved).unwrap();
    backend.synchronize().unwrap();
    let after = meter.counters();
    assert_eq!(forward, 1, "launches of the forward on {device}");
    assert_eq!(
        after.launches - before.launches,
        4,
        "launches of a call on {device}"
    );
    let scores = (batch * context * context * 4) as u64;
    let held = after.peak_bytes - before.bytes;
    assert!(
        held < scores,
        "{device} held {held} more bytes during one call, one Query × Key buffer is {scores}"
    );
    drop(gradients);
}

/// The queries', keys' and values' gradients of fused attention on `device` (f64, causal,
/// padding-masked) against central finite differences of its forward on `device`; the largest
/// error relative to `1 + |gradient|` (below 1e-6).
pub fn finite_differences(device: &Device) -> f64 {
    let case = Case {
        heads: 2,
        queries: 9,
        keys: 7,
        width: 3,
        value_width: 2,
        causal: true,
        hide: Hide::SecondHalf,
    };
    let host = Operands::<f64>::new(&case, 99);
    let [_, dq, dk, dv] = run(&host.to(device), &case, true);
    let attention = Attention::<Query, Key, Width>::causal();
    let (mask, weights) = (host.mask.to(device).unwrap(), host.weights.to_vec());
    let loss = |x: &Operands<f64>| {
        let out = attention
            .run_masked(
                &x.q.to(device).unwrap(),
                &x.k.to(device).unwrap(),
                &x.v.to(device).unwrap(),
                &mask,
            )
            .unwrap();
        (out.to_vec().iter().zip(&weights))
            .map(|(o, w)| o * w)
            .sum::<f64>()
    };
    let (e, h) = (Entry.len(2), Head.len(case.heads));
    let (nq, nk) = (Query.len(case.queries), Key.len(case.keys));
    let (d, dv_len) = (Width.len(case.width), ValueWidth.len(case.value_width));
    // Element `i` (in the operand's type order) of operand `which` moved by `by`.
    let bumped = |which: usize, i: usize, by: f64| {
        let moved = |t: Vec<f64>| {
            let mut t = t;
            t[i] += by;
            t
        };
        let mut x = Operands {
            q: host.q.clone(),
            k: host.k.clone(),
            v: host.v.clone(),
            mask: host.mask.clone(),
            weights: host.weights.clone(),
        };
        match which {
            0 => x.q = Tensor::from_vec((e, h, nq, d), moved(x.q.to_vec())).unwrap(),
            1 => x.k = Tensor::from_vec((nk, d, e, h), moved(x.k.to_vec())).unwrap(),
            _ => x.v = Tensor::from_vec((e, h, nk, dv_len), moved(x.v.to_vec())).unwrap(),
        }
        x
    };
    let step = 1e-6;
    let mut worst = 0.0f64;
    for (which, analytic) in [dq, dk, dv].iter().enumerate() {
        for (i, &g) in analytic.iter().enumerate() {
            let numeric =
                (loss(&bumped(which, i, step)) - loss(&bumped(which, i, -step))) / (2.0 * step);
            worst = worst.max((numeric - g).abs() / (1.0 + g.abs()));
        }
    }
    assert!(
        worst <= 1e-6,
        "gradients on {device} off finite differences by {worst:e}"
    );
    worst
}

/// `MultiHeadAttention` over heads wider than the device kernels take
/// ([`FUSED_ATTENTION_MAX_WIDTH`](axes::protocol::FUSED_ATTENTION_MAX_WIDTH)) composes them
/// on `device`: its output (taped and tape-free) and its parameters' gradients agree with the
/// host's fused ones. `Attention` itself over such heads on `device` gives the host's values,
/// or an error naming the width.
pub fn wider_heads_compose(device: &Device) {
    use axes::nn::transformer::{Batch, Head, HeadDim, Hidden, MultiHeadAttention, Token};
    use axes::nn::{Init, ParamsBuilder};
    let width = axes::protocol::FUSED_ATTENTION_MAX_WIDTH + 1;
    let mut builder = ParamsBuilder::new();
    let (hidden, heads) = (Hidden.len(6), Head.len(2));
    let layer = MultiHeadAttention::new(
        &mut builder,
        "a",
        hidden,
        heads,
        HeadDim.len(width),
        Init::Glorot,
    )
    .unwrap();
    let params = builder.build::<f64>(3).unwrap();
    let x = Tensor::<f64, (Batch, Token, Hidden)>::random_uniform(
        (Batch.len(2), Token.len(5), hidden),
        -1.0,
        1.0,
        4,
    )
    .unwrap();
    let run = |on: &Device| {
        let (params, x) = (params.to(on).unwrap(), x.to(on).unwrap());
        let tape = Tape::new();
        let p = params.bind(&tape);
        let out = layer.forward(&p, &tape.var(x.clone())).unwrap();
        let inferred = layer.infer(&params, &x).unwrap();
        let loss = out.sum::<(Batch, Token, Hidden)>().unwrap();
        let grads = p.gradient(&loss.backward().unwrap()).unwrap();
        [
            out.value().to_vec(),
            inferred.to_vec(),
            grads.to_vec().unwrap(),
        ]
    };
    let (there, here) = (run(device), run(&Device::Cpu));
    for (what, (a, b)) in ["output", "tape-free output", "gradients"]
        .iter()
        .zip(there.iter().zip(&here))
    {
        let error = relative_error(a, b);
        assert!(
            error <= 1e-12,
            "heads {width} wide on {device}: {what} off by {error:e}"
        );
    }
    let operands = Operands::<f64>::new(
        &Case {
            heads: 1,
            queries: 3,
            keys: 3,
            width,
            value_width: 2,
            causal: true,
            hide: Hide::Nothing,
        },
        5,
    );
    let attention = Attention::<Query, Key, Width>::causal();
    let host = attention
        .run(&operands.q, &operands.k, &operands.v)
        .unwrap();
    let on = operands.to(device);
    match attention.run(&on.q, &on.k, &on.v) {
        Ok(out) => assert!(relative_error(&out.to_vec(), &host.to_vec()) <= 1e-12),
        Err(e) => assert!(e.to_string().contains(&format!("{width} wide")), "{e}"),
    }
}
