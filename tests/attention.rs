//! Fused attention against the composition it replaces (`dot_over`, a scale, masks, `softmax`
//! along the keys, `dot_over`) and against central finite differences: values and gradients,
//! causal, masked and unmasked, on lengths and widths around the block size, on permuted,
//! strided and broadcast operands, with a fully masked row.

use axes::autodiff::{self, Tape, Var};
use axes::nn::causal_mask;
use axes::prelude::*;
use axes::{Attention, Float};

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct H;
#[derive(Axis)]
struct Q;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct D;
#[derive(Axis)]
struct E;

type Out = (B, H, Q, E);

/// Queries, keys, values and a padding mask.
type Operands<T> = (
    Tensor<T, (B, H, Q, D)>,
    Tensor<T, (B, H, K, D)>,
    Tensor<T, (B, H, K, E)>,
    Tensor<T, (B, K)>,
);

/// `‖a − b‖ / ‖b‖` over every element (0 for two zero tensors).
fn relative_error<T: Float, A: AxisSet>(a: &Tensor<T, A>, b: &Tensor<T, A>) -> f64 {
    let (a, b) = (a.to_vec(), b.to_vec());
    let diff: f64 = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x.to_f64() - y.to_f64()).powi(2))
        .sum();
    let norm: f64 = b.iter().map(|y| y.to_f64().powi(2)).sum();
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// The attention composed from the library's other ops, on the tape.
fn composed<T: Float>(
    q: &Var<T, (B, H, Q, D)>,
    k: &Var<T, (B, H, K, D)>,
    v: &Var<T, (B, H, K, E)>,
    causal: bool,
    mask: Option<&Tensor<T, (B, K)>>,
    scale: f64,
) -> Result<Var<T, Out>, axes::Error> {
    let tape = q.tape();
    let scores = autodiff::dot_over::<(D,), _, _, _, _, _>(q, k)?;
    let (nq, nk) = (q.value().len_of::<Q>(), k.value().len_of::<K>());
    let hide = if causal {
        causal_mask::<T, Q, K>(Q.len(nq), K.len(nk))?
    } else {
        Tensor::zeros((Q.len(nq), K.len(nk)))?
    };
    let hide = tape.constant(hide);
    let scale = tape.constant(Tensor::<T, ()>::from_vec((), vec![T::from_f64(scale)])?);
    let mut scores = (scores * &scale + &hide).eval()?;
    if let Some(mask) = mask {
        let mask = tape.constant(mask.clone());
        scores = (scores + &mask).eval()?;
    }
    let p = scores.softmax::<K>()?;
    autodiff::dot_over::<(K,), _, _, _, _, _>(&p, v)
}

struct Case {
    batch: usize,
    heads: usize,
    queries: usize,
    keys: usize,
    width: usize,
    value_width: usize,
    causal: bool,
    padded: bool,
}

/// Random operands of `case`, and a padding mask that hides the second half of batch entry
/// 0's keys (the first key stays visible).
fn operands<T: Float>(case: &Case, seed: u64) -> Operands<T> {
    let (lo, hi) = (T::from_f64(-1.0), T::from_f64(1.0));
    let q = Tensor::random_uniform(
        (
            B.len(case.batch),
            H.len(case.heads),
            Q.len(case.queries),
            D.len(case.width),
        ),
        lo,
        hi,
        seed,
    )
    .unwrap();
    let k = Tensor::random_uniform(
        (
            B.len(case.batch),
            H.len(case.heads),
            K.len(case.keys),
            D.len(case.width),
        ),
        lo,
        hi,
        seed + 1,
    )
    .unwrap();
    let v = Tensor::random_uniform(
        (
            B.len(case.batch),
            H.len(case.heads),
            K.len(case.keys),
            E.len(case.value_width),
        ),
        lo,
        hi,
        seed + 2,
    )
    .unwrap();
    let visible = case.keys.div_ceil(2);
    let mask = Tensor::from_fn((B.len(case.batch), K.len(case.keys)), |ix| {
        if ix.of::<B>() == 0 && ix.of::<K>() >= visible {
            T::from_f64(f64::NEG_INFINITY)
        } else {
            T::zero()
        }
    })
    .unwrap();
    (q, k, v, mask)
}

/// Random weights of the output elements in a test's loss.
fn loss_weights<T: Float>(case: &Case, seed: u64) -> Tensor<T, Out> {
    Tensor::random_uniform(
        (
            B.len(case.batch),
            H.len(case.heads),
            Q.len(case.queries),
            E.len(case.value_width),
        ),
        T::from_f64(-1.0),
        T::from_f64(1.0),
        seed + 3,
    )
    .unwrap()
}

/// The fused attention a case asks for (causal or not; the mask comes with the call).
fn attention_of(case: &Case) -> Attention<Q, K, D> {
    if case.causal {
        Attention::causal()
    } else {
        Attention::new()
    }
}

/// The fused attention's values and gradients against the composition's, for a loss that
/// weighs every output element by a random factor.
fn check_against_composition<T: Float>(case: &Case, tolerance: f64, seed: u64) {
    let (q, k, v, mask) = operands::<T>(case, seed);
    let (weights, attention) = (loss_weights::<T>(case, seed), attention_of(case));
    let scale = 1.0 / (case.width as f64).sqrt();
    let mask = case.padded.then_some(&mask);
    let run = |fused: bool| {
        let tape = Tape::<T>::new();
        let (qv, kv, vv) = (
            tape.var(q.clone()),
            tape.var(k.clone()),
            tape.var(v.clone()),
        );
        let out = if fused {
            match mask {
                Some(m) => attention.run_var_masked(&qv, &kv, &vv, m),
                None => attention.run_var(&qv, &kv, &vv),
            }
        } else {
            composed(&qv, &kv, &vv, case.causal, mask, scale)
        }
        .unwrap();
        let w = tape.constant(weights.clone());
        let grads = (&out * &w)
            .sum::<(B, H, Q, E)>()
            .unwrap()
            .backward()
            .unwrap();
        (
            out.value().clone(),
            grads.get(&qv).unwrap(),
            grads.get(&kv).unwrap(),
            grads.get(&vv).unwrap(),
        )
    };
    let (fused, composed) = (run(true), run(false));
    let name = format!(
        "{}×{} heads, {} queries × {} keys, widths {}/{}, causal {}, padded {}",
        case.batch,
        case.heads,
        case.queries,
        case.keys,
        case.width,
        case.value_width,
        case.causal,
        case.padded
    );
    for (what, error) in [
        ("values", relative_error(&fused.0, &composed.0)),
        ("dq", relative_error(&fused.1, &composed.1)),
        ("dk", relative_error(&fused.2, &composed.2)),
        ("dv", relative_error(&fused.3, &composed.3)),
    ] {
        assert!(error <= tolerance, "{name}: {what} off by {error:e}");
    }
    // The tensor form gives the tape's values.
    let plain = match mask {
        Some(m) => attention.run_masked(&q, &k, &v, m),
        None => attention.run(&q, &k, &v),
    }
    .unwrap();
    assert_eq!(
        plain.to_vec(),
        fused.0.to_vec(),
        "{name}: tensor and tape forms"
    );
}

#[test]
fn matches_the_composition_in_f64_and_f32() {
    let mut seed = 0;
    for (queries, keys) in [(1, 1), (7, 7), (129, 129), (7, 129), (129, 7), (1, 7)] {
        for width in [1, 8, 33] {
            for (causal, padded) in [(true, false), (false, true), (false, false), (true, true)] {
                let case = Case {
                    batch: 2,
                    heads: 2,
                    queries,
                    keys,
                    width,
                    value_width: if width == 8 { 5 } else { width },
                    causal,
                    padded,
                };
                seed += 10;
                check_against_composition::<f64>(&case, 1e-12, seed);
                check_against_composition::<f32>(&case, 1e-5, seed);
            }
        }
    }
}

#[test]
fn many_batch_entries_match_the_composition() {
    // From 8 batch entries the backward runs one pass per entry.
    for (queries, keys, causal, padded) in [
        (70, 70, true, true),
        (129, 65, false, true),
        (7, 7, true, false),
    ] {
        let case = Case {
            batch: 4,
            heads: 3,
            queries,
            keys,
            width: 16,
            value_width: 8,
            causal,
            padded,
        };
        check_against_composition::<f64>(&case, 1e-12, queries as u64);
        check_against_composition::<f32>(&case, 1e-5, queries as u64);
    }
}

#[test]
fn wide_heads_match_the_composition() {
    for width in [256, 300] {
        let case = Case {
            batch: 1,
            heads: 1,
            queries: 70,
            keys: 70,
            width,
            value_width: width,
            causal: true,
            padded: false,
        };
        check_against_composition::<f64>(&case, 1e-12, width as u64);
        check_against_composition::<f32>(&case, 1e-5, width as u64);
    }
}

#[test]
fn half_types_are_computed_in_f32() {
    use half::{bf16, f16};
    let case = Case {
        batch: 1,
        heads: 2,
        queries: 65,
        keys: 65,
        width: 16,
        value_width: 16,
        causal: true,
        padded: false,
    };
    let (q, k, v, _) = operands::<f32>(&case, 7);
    let attention = Attention::<Q, K, D>::causal();
    let exact = attention.run(&q, &k, &v).unwrap();
    let narrow_f16 = attention
        .run(
            &q.cast::<f16>().eval().unwrap(),
            &k.cast::<f16>().eval().unwrap(),
            &v.cast::<f16>().eval().unwrap(),
        )
        .unwrap();
    let narrow_bf16 = attention
        .run(
            &q.cast::<bf16>().eval().unwrap(),
            &k.cast::<bf16>().eval().unwrap(),
            &v.cast::<bf16>().eval().unwrap(),
        )
        .unwrap();
    // Inputs rounded to the half type, then one rounding of each result.
    assert!(relative_error(&narrow_f16.cast::<f32>().eval().unwrap(), &exact) < 4e-3);
    assert!(relative_error(&narrow_bf16.cast::<f32>().eval().unwrap(), &exact) < 3e-2);
}

#[test]
fn gradients_match_finite_differences() {
    let case = Case {
        batch: 1,
        heads: 2,
        queries: 9,
        keys: 7,
        width: 3,
        value_width: 2,
        causal: true,
        padded: true,
    };
    let (q, k, v, mask) = operands::<f64>(&case, 99);
    let attention = Attention::<Q, K, D>::causal();
    let loss = |q: &Tensor<f64, (B, H, Q, D)>,
                k: &Tensor<f64, (B, H, K, D)>,
                v: &Tensor<f64, (B, H, K, E)>| {
        let out = attention.run_masked(q, k, v, &mask).unwrap();
        out.to_vec()
            .iter()
            .enumerate()
            .map(|(i, x)| x * (1.0 + i as f64 * 0.1))
            .sum::<f64>()
    };
    let tape = Tape::<f64>::new();
    let (qv, kv, vv) = (
        tape.var(q.clone()),
        tape.var(k.clone()),
        tape.var(v.clone()),
    );
    let out = attention.run_var_masked(&qv, &kv, &vv, &mask).unwrap();
    let n = out.value().to_vec().len();
    let weights = Tensor::<f64, Out>::from_vec(
        (B.len(1), H.len(2), Q.len(9), E.len(2)),
        (0..n).map(|i| 1.0 + i as f64 * 0.1).collect(),
    )
    .unwrap();
    let w = tape.constant(weights);
    let grads = (&out * &w)
        .sum::<(B, H, Q, E)>()
        .unwrap()
        .backward()
        .unwrap();
    let h = 1e-6;
    let check = |name: &str, analytic: Vec<f64>, numeric: &dyn Fn(usize, f64) -> f64| {
        for (i, &g) in analytic.iter().enumerate() {
            let fd = (numeric(i, h) - numeric(i, -h)) / (2.0 * h);
            assert!(
                (fd - g).abs() <= 1e-6 * (1.0 + g.abs()),
                "{name}[{i}]: {g} against {fd}"
            );
        }
    };
    let bump = |t: &Tensor<f64, (B, H, Q, D)>, i: usize, d: f64| {
        let mut values = t.to_vec();
        values[i] += d;
        Tensor::from_vec((B.len(1), H.len(2), Q.len(9), D.len(3)), values).unwrap()
    };
    check("dq", grads.get(&qv).unwrap().to_vec(), &|i, d| {
        loss(&bump(&q, i, d), &k, &v)
    });
    let bump_k = |t: &Tensor<f64, (B, H, K, D)>, i: usize, d: f64| {
        let mut values = t.to_vec();
        values[i] += d;
        Tensor::from_vec((B.len(1), H.len(2), K.len(7), D.len(3)), values).unwrap()
    };
    check("dk", grads.get(&kv).unwrap().to_vec(), &|i, d| {
        loss(&q, &bump_k(&k, i, d), &v)
    });
    let bump_v = |t: &Tensor<f64, (B, H, K, E)>, i: usize, d: f64| {
        let mut values = t.to_vec();
        values[i] += d;
        Tensor::from_vec((B.len(1), H.len(2), K.len(7), E.len(2)), values).unwrap()
    };
    check("dv", grads.get(&vv).unwrap().to_vec(), &|i, d| {
        loss(&q, &k, &bump_v(&v, i, d))
    });
}

#[test]
fn permuted_strided_and_broadcast_operands() {
    // Queries stored in another order and read every other position; keys shared by the
    // heads (multi-query attention: no H axis); values broadcast along H (stride 0).
    let q_stored = Tensor::<f64, (Q, D, H, B)>::random_uniform(
        (Q.len(21), D.len(6), H.len(3), B.len(2)),
        -1.0,
        1.0,
        5,
    )
    .unwrap();
    let q = q_stored
        .slice::<Q>(.., 2)
        .unwrap()
        .axes_with_order::<(B, H, Q, D)>();
    let k_shared =
        Tensor::<f64, (K, B, D)>::random_uniform((K.len(13), B.len(2), D.len(6)), -1.0, 1.0, 6)
            .unwrap();
    let v_one =
        Tensor::<f64, (B, K, E)>::random_uniform((B.len(2), K.len(13), E.len(4)), -1.0, 1.0, 7)
            .unwrap();
    let v = v_one.broadcast::<(B, H, K, E)>(H.len(3)).unwrap();
    let attention = Attention::<Q, K, D>::causal();
    let tape = Tape::<f64>::new();
    let (qv, kv, vv) = (
        tape.var(q.clone()),
        tape.var(k_shared.clone()),
        tape.var(v.clone()),
    );
    let out: Var<f64, Out> = attention.run_var(&qv, &kv, &vv).unwrap();
    // The reference: every operand made dense over (B, H, ·, ·).
    let k_full = k_shared
        .broadcast::<(B, H, K, D)>(H.len(3))
        .unwrap()
        .contiguous()
        .unwrap();
    let tape2 = Tape::<f64>::new();
    let (rq, rk, rv) = (
        tape2.var(q.contiguous().unwrap()),
        tape2.var(k_full),
        tape2.var(v.contiguous().unwrap()),
    );
    let reference = composed(&rq, &rk, &rv, true, None, 1.0 / 6f64.sqrt()).unwrap();
    assert!(relative_error(out.value(), reference.value()) < 1e-12);
    let gq = out.sum::<(B, H, Q, E)>().unwrap().backward().unwrap();
    let gr = reference.sum::<(B, H, Q, E)>().unwrap().backward().unwrap();
    assert!(relative_error(&gq.get(&qv).unwrap(), &gr.get(&rq).unwrap()) < 1e-12);
    // The shared keys' gradient sums the heads'.
    let dk_full: Tensor<f64, (B, H, K, D)> = gr.get(&rk).unwrap();
    let dk_summed: Tensor<f64, (K, B, D)> = dk_full.sum::<(H,)>().unwrap().axes_with_order();
    assert!(relative_error(&gq.get(&kv).unwrap(), &dk_summed) < 1e-12);
    assert!(relative_error(&gq.get(&vv).unwrap(), &gr.get(&rv).unwrap()) < 1e-12);
}

#[test]
fn a_query_that_sees_no_key_gets_zeros_and_passes_no_gradient() {
    let q = Tensor::<f64, (Q, D)>::random_uniform((Q.len(3), D.len(2)), -1.0, 1.0, 1).unwrap();
    let k = Tensor::<f64, (K, D)>::random_uniform((K.len(4), D.len(2)), -1.0, 1.0, 2).unwrap();
    let v = Tensor::<f64, (K, E)>::random_uniform((K.len(4), E.len(2)), -1.0, 1.0, 3).unwrap();
    // Query 1 sees nothing.
    let mask = Tensor::<f64, (Q, K)>::from_fn((Q.len(3), K.len(4)), |ix| {
        if ix.of::<Q>() == 1 {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap();
    let attention = Attention::<Q, K, D>::new();
    let tape = Tape::<f64>::new();
    let (qv, kv, vv) = (tape.var(q), tape.var(k), tape.var(v));
    let out = attention.run_var_masked(&qv, &kv, &vv, &mask).unwrap();
    let values = out.value().to_vec_in::<(Q, E)>();
    assert_eq!(values[2..4], [0.0, 0.0]);
    assert!(values.iter().all(|x| x.is_finite()));
    let grads = out.sum::<(Q, E)>().unwrap().backward().unwrap();
    let dq = grads.get(&qv).unwrap().to_vec_in::<(Q, D)>();
    assert_eq!(dq[2..4], [0.0, 0.0]);
    assert!(
        dq.iter()
            .chain(&grads.get(&kv).unwrap().to_vec())
            .all(|x| x.is_finite())
    );
}

#[test]
fn the_same_bits_on_one_and_two_threads() {
    // 6 batch entries (a task per block in the backward) and 12 (a task per entry).
    for batch in [2, 4] {
        same_bits_on_one_and_two_threads(batch);
    }
}

fn same_bits_on_one_and_two_threads(batch: usize) {
    let case = Case {
        batch,
        heads: 3,
        queries: 150,
        keys: 150,
        width: 16,
        value_width: 16,
        causal: true,
        padded: true,
    };
    let (q, k, v, mask) = operands::<f32>(&case, 3);
    let attention = Attention::<Q, K, D>::causal();
    let run = || {
        let tape = Tape::<f32>::new();
        let (qv, kv, vv) = (
            tape.var(q.clone()),
            tape.var(k.clone()),
            tape.var(v.clone()),
        );
        let out = attention.run_var_masked(&qv, &kv, &vv, &mask).unwrap();
        let grads = out.sum::<(B, H, Q, E)>().unwrap().backward().unwrap();
        (
            out.value().to_vec(),
            grads.get(&qv).unwrap().to_vec(),
            grads.get(&kv).unwrap().to_vec(),
        )
    };
    axes::set_threads(1).unwrap();
    let one = run();
    axes::set_threads(2).unwrap();
    let two = run();
    assert_eq!(one, two);
}

#[test]
fn lengths_that_disagree_are_errors_naming_the_axis() {
    let q = Tensor::<f32, (Q, D)>::zeros((Q.len(3), D.len(4))).unwrap();
    let k = Tensor::<f32, (K, D)>::zeros((K.len(5), D.len(2))).unwrap();
    let v = Tensor::<f32, (K, E)>::zeros((K.len(5), E.len(2))).unwrap();
    let error = Attention::<Q, K, D>::new().run(&q, &k, &v).unwrap_err();
    assert_eq!(
        error.to_string(),
        "axis `D` has length 4 in one operand and 2 in the other"
    );
    let k = Tensor::<f32, (K, D)>::zeros((K.len(5), D.len(4))).unwrap();
    let v = Tensor::<f32, (K, E)>::zeros((K.len(6), E.len(2))).unwrap();
    let error = Attention::<Q, K, D>::new().run(&q, &k, &v).unwrap_err();
    assert_eq!(
        error.to_string(),
        "axis `K` has length 5 in one operand and 6 in the other"
    );
}

/// A copy of `x` on `device`.
fn on<T: Float, A: AxisSet>(x: &Tensor<T, A>, device: &Device) -> Tensor<T, A> {
    x.to(device).unwrap()
}

/// The fused attention's values and gradients for a loss weighing every output element by a
/// random factor, with the operands on `device`, read back to the host.
fn fused_on<T: Float>(case: &Case, seed: u64, device: &Device) -> [Vec<T>; 4] {
    let (q, k, v, mask) = operands::<T>(case, seed);
    let (weights, attention) = (loss_weights::<T>(case, seed), attention_of(case));
    let tape = Tape::<T>::new();
    // The keys in another axis order, on the device as on the host.
    let k: Tensor<T, (K, D, B, H)> = k.axes_with_order();
    let (qv, kv, vv) = (
        tape.var(on(&q, device)),
        tape.var(on(&k, device)),
        tape.var(on(&v, device)),
    );
    let mask = on(&mask, device);
    let out = if case.padded {
        attention.run_var_masked(&qv, &kv, &vv, &mask)
    } else {
        attention.run_var(&qv, &kv, &vv)
    }
    .unwrap();
    let w = tape.constant(on(&weights, device));
    let grads = (&out * &w)
        .sum::<(B, H, Q, E)>()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(out.value().device(), *device);
    [
        out.value().to_vec(),
        grads.get(&qv).unwrap().to_vec(),
        grads.get(&kv).unwrap().to_vec(),
        grads.get(&vv).unwrap().to_vec(),
    ]
}

/// The CPU backend runs the protocol's attention job (the device path every backend takes)
/// with the host's kernel: the same bits as the host, values and gradients.
#[test]
fn the_cpu_backend_gives_the_hosts_bits() {
    let device = Device::Backend(&axes::backends::cpu::CPU_BACKEND);
    let mut seed = 100;
    for (queries, keys) in [(70, 70), (7, 129), (129, 7)] {
        for (causal, padded) in [(true, false), (false, true), (true, true)] {
            let case = Case {
                batch: 2,
                heads: 3,
                queries,
                keys,
                width: 8,
                value_width: 5,
                causal,
                padded,
            };
            seed += 10;
            assert!(
                fused_on::<f64>(&case, seed, &Device::Cpu) == fused_on::<f64>(&case, seed, &device),
                "{queries} × {keys}, causal {causal}, padded {padded} (f64)"
            );
            assert!(
                fused_on::<f32>(&case, seed, &Device::Cpu) == fused_on::<f32>(&case, seed, &device),
                "{queries} × {keys}, causal {causal}, padded {padded} (f32)"
            );
        }
    }
}

/// A job whose offsets leave a buffer, or whose offset lists do not match its lengths, is an
/// error naming the operand, before any kernel reads memory.
#[test]
fn malformed_attention_jobs_are_errors() {
    use axes::DType;
    use axes::protocol::{AttentionJob, AttentionOperand, AttentionShape, Backend};
    let backend = &axes::backends::cpu::CPU_BACKEND;
    // 2 rows of 3 f32 each.
    let memory = backend.upload(&[0u8; 24]).unwrap();
    let (batch, cols) = ([0isize], [0isize, 1, 2]);
    let rows = AttentionOperand {
        memory: &memory,
        batch: &batch,
        row: 3,
        cols: &cols,
    };
    let job = AttentionJob {
        dtype: DType::F32,
        shape: AttentionShape {
            batch: 1,
            queries: 2,
            keys: 2,
            width: 3,
            value_width: 3,
            scale: 1.0,
            causal: true,
        },
        q: rows,
        k: rows,
        v: rows,
        mask: None,
    };
    assert!(backend.attention(&job).is_ok());
    let far = [1isize];
    let past_the_end = AttentionJob {
        k: AttentionOperand {
            batch: &far,
            ..rows
        },
        ..job
    };
    let err = backend.attention(&past_the_end).unwrap_err().to_string();
    assert!(err.contains("the keys") && err.contains("1..=6"), "{err}");
    let short = AttentionJob {
        shape: AttentionShape {
            value_width: 4,
            ..job.shape
        },
        ..job
    };
    let err = backend.attention(&short).unwrap_err().to_string();
    assert!(
        err.contains("the values") && err.contains("3 column"),
        "{err}"
    );
    let ints = AttentionJob {
        dtype: DType::I32,
        ..job
    };
    assert!(backend.attention(&ints).is_err());
}
