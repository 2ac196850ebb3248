//! Fused expressions and reductions against a plain reference, over random lengths, axis
//! orders and strided, permuted, broadcast, sliced and padded inputs, in every element type.

use std::f64::consts::PI;

use axes::expr::Scalar;
use axes::prelude::*;
use axes::{Error, ExprExt, Num};
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::{Ref, assert_close, assert_matches};

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;
#[derive(Axis)]
struct K;

fn tensor_ij(r: &Ref) -> Tensor<f64, (I, J)> {
    Tensor::from_vec((I.len(r.lens[0]), J.len(r.lens[1])), r.data.clone()).unwrap()
}

fn tensor_jk(r: &Ref) -> Tensor<f64, (J, K)> {
    Tensor::from_vec((J.len(r.lens[0]), K.len(r.lens[1])), r.data.clone()).unwrap()
}

/// A random (I, J) tensor seen through a random view: reversed, strided, transposed-stored or
/// padded; returns the tensor and its reference.
fn random_view(rng: &mut ChaCha8Rng, j_len: usize) -> (Tensor<f64, (I, J)>, Ref) {
    let i_len = rng.random_range(0..5);
    match rng.random_range(0..4) {
        0 => {
            let r = Ref::random_with(rng, &["I", "J"], &[i_len, j_len]);
            (tensor_ij(&r), r)
        }
        1 => {
            // stored (J, I): the (I, J) view has unit stride on I
            let r = Ref::random_with(rng, &["J", "I"], &[j_len, i_len]);
            let t = Tensor::<f64, (J, I)>::from_vec((J.len(j_len), I.len(i_len)), r.data.clone())
                .unwrap();
            (t.axes_with_order::<(I, J)>(), r)
        }
        2 => {
            // every other column of a wider tensor, reversed
            let wide = Ref::random_with(rng, &["I", "J"], &[i_len, 2 * j_len]);
            let t = tensor_ij(&wide).slice::<J>(.., -2).unwrap();
            (t, wide.slice("J", 0, 2 * j_len, -2))
        }
        _ => {
            // padded on I
            let inner = Ref::random_with(rng, &["I", "J"], &[i_len, j_len]);
            let t = tensor_ij(&inner).pad::<I>(1, 2).unwrap();
            (t, inner.pad("I", 1, 2))
        }
    }
}

/// Two operands with their references.
type Pair = (Tensor<f64, (I, J)>, Ref, Tensor<f64, (J, K)>, Ref);

/// A random (I, J) view (see [`random_view`]) and a (J, K) tensor of the same J length, with
/// their references.
fn random_ij_and_jk(rng: &mut ChaCha8Rng) -> Pair {
    let j = rng.random_range(0..5);
    let (x, rx) = random_view(rng, j);
    let ry = Ref::random(rng, &["J", "K"], 4);
    let ry = Ref::build(ry.names.clone(), vec![j, ry.lens[1]], |ix| {
        (ix[0] * 3 + ix[1]) as f64 + 0.5
    });
    (x, rx, tensor_jk(&ry), ry)
}

#[test]
fn binary_ops_broadcast_by_name_against_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    for _ in 0..200 {
        let (x, rx, y, ry) = random_ij_and_jk(&mut rng);
        // (I, J) op (J, K) -> (I, J, K)
        let sum: Tensor<f64, (I, J, K)> = (&x + &y).eval().unwrap();
        assert_matches(&sum, &rx.zip(&ry, |a, b| a + b));
        assert_matches(&(&x - &y).eval().unwrap(), &rx.zip(&ry, |a, b| a - b));
        assert_matches(&(&x * &y).eval().unwrap(), &rx.zip(&ry, |a, b| a * b));
        assert_matches(&(&x / &y).eval().unwrap(), &rx.zip(&ry, |a, b| a / b));
        assert_matches(&(&x).max(&y).eval().unwrap(), &rx.zip(&ry, f64::max));
        assert_matches(&(&x).min(&y).eval().unwrap(), &rx.zip(&ry, f64::min));
        // the other operand order puts y's axes first: (J, K, I)
        let rev: Tensor<f64, (J, K, I)> = (&y * &x).eval().unwrap();
        assert_matches(&rev, &ry.zip(&rx, |a, b| a * b));
        // evaluated into another order
        let other: Tensor<f64, (K, I, J)> = (&x + &y).eval_in().unwrap();
        assert_matches(&other, &rx.zip(&ry, |a, b| a + b));
        // scalars on both sides
        assert_matches(
            &(2.0 * &x - 1.0).eval().unwrap(),
            &rx.map(|v| 2.0 * v - 1.0),
        );
        assert_matches(&(-&x).eval().unwrap(), &rx.map(|v| -v));
    }
}

/// Every kind of operand on either side of an operator: borrowed and owned tensors,
/// expressions by value and borrowed (a sub-expression used twice), scalars.
#[test]
fn every_kind_of_operand_combines_against_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for _ in 0..50 {
        let (x, rx, y, ry) = random_ij_and_jk(&mut rng);
        let d = &x - &y;
        let rd = rx.zip(&ry, |a, b| a - b);
        let squares = rd.map(|v| v * v);
        assert_matches(&(&d * &d).eval().unwrap(), &squares);
        assert_matches(&(&d * 2.0).eval().unwrap(), &rd.map(|v| v * 2.0));
        assert_matches(&(2.0 * &d - &d).eval().unwrap(), &rd);
        assert_matches(&(-&d).eval().unwrap(), &rd.map(|v| -v));
        assert_matches(&(&d).max(&d).eval().unwrap(), &rd);
        let owned = x.contiguous().unwrap();
        assert_matches(&(owned.clone() - &y).eval().unwrap(), &rd);
        assert_matches(
            &(owned.clone() + &d).eval().unwrap(),
            &rx.zip(&rd, |a, b| a + b),
        );
        assert_matches(
            &(owned.clone() * (&d * 1.0)).eval().unwrap(),
            &rx.zip(&rd, |a, b| a * b),
        );
        assert_matches(
            &(owned.clone() - owned.clone()).eval().unwrap(),
            &rx.map(|_| 0.0),
        );
        assert_matches(
            &(owned.clone() / Scalar(2.0)).eval().unwrap(),
            &rx.map(|v| v / 2.0),
        );
        assert_matches(&(Scalar(1.0) - &x).eval().unwrap(), &rx.map(|v| 1.0 - v));
        assert_matches(&(d + &x).eval().unwrap(), &rd.zip(&rx, |a, b| a + b));
    }
}

#[test]
fn large_expressions_split_across_threads_match_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let rx = Ref::random(&mut rng, &["I", "J"], 1).map(|v| v / 7.0);
    let rx = Ref::build(vec!["I".into(), "J".into()], vec![700, 300], |ix| {
        ((ix[0] * 31 + ix[1] * 17) % 101) as f64 + rx.data.first().copied().unwrap_or(0.0)
    });
    let ry = Ref::build(vec!["J".into(), "K".into()], vec![300, 2], |ix| {
        (ix[0] % 13) as f64 - ix[1] as f64
    });
    let (x, y) = (tensor_ij(&rx), tensor_jk(&ry));
    let expected = rx.zip(&ry, |a, b| a * 2.0 + b);
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let r: Tensor<f64, (I, J, K)> = (&x * 2.0 + &y).eval().unwrap();
        assert_matches(&r, &expected);
        let t: Tensor<f64, (K, J, I)> = (&x * 2.0 + &y).eval_in().unwrap();
        assert_matches(&t, &expected);
    }
}

/// Every unary op in f64 against std.
#[test]
fn unary_ops_against_std() {
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    for _ in 0..50 {
        let j = rng.random_range(0..6);
        let (x, rx) = random_view(&mut rng, j);
        let x = (&x * 0.25).eval().unwrap();
        let rx = rx.map(|v| v * 0.25);
        let pos = x.abs().eval().unwrap();
        let rpos = rx.map(f64::abs);
        macro_rules! check {
            ($e:expr, $f:expr) => {
                assert_close(&$e.eval().unwrap(), &$f, 1e-12);
            };
        }
        check!(x.abs(), rpos);
        check!(x.square(), rx.map(|v| v * v));
        check!(
            x.signum(),
            rx.map(|v| if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            })
        );
        check!(x.relu(), rx.map(|v| v.max(0.0)));
        check!(x.exp(), rx.map(f64::exp));
        check!((&pos + 0.5).ln(), rpos.map(|v| (v + 0.5).ln()));
        check!(pos.sqrt(), rpos.map(f64::sqrt));
        check!((&pos + 1.0).rsqrt(), rpos.map(|v| 1.0 / (v + 1.0).sqrt()));
        check!(x.tanh(), rx.map(f64::tanh));
        check!(
            x.gelu(),
            rx.map(|v| 0.5 * v * (1.0 + ((2.0 / PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh()))
        );
        check!(
            x.gelu_derivative(),
            rx.map(|v| {
                let t = ((2.0 / PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh();
                0.5 * (1.0 + t)
                    + 0.5 * v * (1.0 - t * t) * (2.0 / PI).sqrt() * (1.0 + 0.134145 * v * v)
            })
        );
        check!(x.sigmoid(), rx.map(|v| 1.0 / (1.0 + (-v).exp())));
        check!(x.silu(), rx.map(|v| v / (1.0 + (-v).exp())));
        check!(x.softplus(), rx.map(|v| v.exp().ln_1p()));
        check!(x.sin(), rx.map(f64::sin));
        check!(x.cos(), rx.map(f64::cos));
        check!((&pos + 1.0).recip(), rpos.map(|v| 1.0 / (v + 1.0)));
        check!((&x).powi(3), rx.map(|v| v.powi(3)));
        check!((&pos).powf(1.5), rpos.map(|v| v.powf(1.5)));
        check!(x.floor(), rx.map(f64::floor));
        check!(x.ceil(), rx.map(f64::ceil));
        check!((&x).clamp(-0.5, 0.5), rx.map(|v| v.clamp(-0.5, 0.5)));
        check!((&pos).pow(&x), rpos.zip(&rx, f64::powf));
        check!((&x).mul_add(2.0, &pos), rx.zip(&rpos, |a, b| a * 2.0 + b));
        check!((&x).map(|v: f64| v * v * v), rx.map(|v| v * v * v));
    }
}

/// f32 ops (vectorised approximations included) within a tolerance set by the dtype.
#[test]
fn f32_and_half_precision_ops_within_dtype_tolerance() {
    let data: Vec<f64> = (0..997).map(|k| (k as f64 - 498.0) / 61.0).collect();
    let r = Ref {
        names: vec!["I".into()],
        lens: vec![data.len()],
        data: data.clone(),
    };
    let x32 =
        Tensor::<f32, (I,)>::from_vec(I.len(data.len()), data.iter().map(|&v| v as f32).collect())
            .unwrap();
    let eps32 = f32::EPSILON as f64;
    assert_close(&x32.exp().eval().unwrap(), &r.map(f64::exp), 8.0 * eps32);
    assert_close(&x32.tanh().eval().unwrap(), &r.map(f64::tanh), 16.0 * eps32);
    assert_close(
        &x32.sigmoid().eval().unwrap(),
        &r.map(|v| 1.0 / (1.0 + (-v).exp())),
        8.0 * eps32,
    );
    assert_close(
        &x32.abs().ln().eval().unwrap(),
        &r.map(|v| v.abs().ln()),
        8.0 * eps32,
    );
    assert_close(
        &(x32.tanh() * &x32 + (-&x32).exp()).eval().unwrap(),
        &r.map(|v| v.tanh() * v + (-v).exp()),
        16.0 * eps32,
    );
    // Softplus keeps its relative accuracy where e^x is tiny (f32's normal range ends near
    // e^-87) as where it is huge.
    let ends: Vec<f32> = (0..=400).map(|k| (k - 200) as f32 * 0.4).collect();
    let soft = Tensor::<f32, (I,)>::from_vec(I.len(ends.len()), ends.clone())
        .unwrap()
        .softplus()
        .eval()
        .unwrap();
    for (&x, got) in ends.iter().zip(soft.to_vec()) {
        let want = f64::from(x).exp().ln_1p();
        let error = (f64::from(got) - want).abs() / want;
        assert!(error <= 4.0 * eps32, "softplus({x}) = {got}, want {want}");
    }
    let special =
        Tensor::<f32, (I,)>::from_vec(I.len(3), vec![f32::NAN, f32::INFINITY, -f32::INFINITY])
            .unwrap()
            .softplus()
            .eval()
            .unwrap()
            .to_vec();
    assert!(special[0].is_nan() && special[1] == f32::INFINITY && special[2] == 0.0);
    let x16: Tensor<f16, (I,)> = x32.cast::<f16>().eval().unwrap();
    let r16 = Ref {
        data: x16.to_vec().iter().map(|v| v.to_f64()).collect(),
        ..r.clone()
    };
    assert_close(
        &(&x16 * &x16).eval().unwrap(),
        &r16.map(|v| v * v),
        2.0 * f16::EPSILON.to_f64(),
    );
    assert_close(
        &x16.exp().eval().unwrap(),
        &r16.map(f64::exp),
        2.0 * f16::EPSILON.to_f64(),
    );
    let xb: Tensor<bf16, (I,)> = x32.cast::<bf16>().eval().unwrap();
    let rb = Ref {
        data: xb.to_vec().iter().map(|v| v.to_f64()).collect(),
        ..r
    };
    assert_close(
        &(&xb + &xb).eval().unwrap(),
        &rb.map(|v| v + v),
        2.0 * bf16::EPSILON.to_f64(),
    );
}

#[test]
fn integer_ops_wrap_and_never_panic() {
    let x = Tensor::<i32, (I,)>::from_vec(I.len(4), vec![i32::MAX, -7, 0, i32::MIN]).unwrap();
    assert_eq!(
        (&x + 1).eval().unwrap().to_vec(),
        [i32::MIN, -6, 1, i32::MIN + 1]
    );
    assert!(matches!((&x / 0).eval(), Err(axes::Error::DivisionByZero)));
    assert_eq!(
        (&x / -1).eval().unwrap().to_vec(),
        [-i32::MAX, 7, 0, i32::MIN]
    );
    assert_eq!(x.abs().eval().unwrap().to_vec(), [i32::MAX, 7, 0, i32::MIN]);
    let b = Tensor::<u8, (I,)>::from_vec(I.len(3), vec![250, 3, 0]).unwrap();
    assert_eq!((&b + 10u8).eval().unwrap().to_vec(), [4, 13, 10]);
    assert_eq!(
        (&b).powi(2).eval().unwrap().to_vec(),
        [36, 9, 0],
        "250² wraps to 62500 mod 256"
    );
    let l = Tensor::<i64, (I,)>::from_vec(I.len(3), vec![i64::MAX, -1, 5]).unwrap();
    assert_eq!(
        l.cast::<i64>().eval().unwrap().to_vec(),
        [i64::MAX, -1, 5],
        "i64 stays exact"
    );
    assert_eq!(l.cast::<u8>().eval().unwrap().to_vec(), [255, 255, 5]);
}

#[test]
fn comparisons_select_and_casts() {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    for _ in 0..50 {
        let j = rng.random_range(0..5);
        let (x, rx) = random_view(&mut rng, j);
        let ry = Ref::build(vec!["J".into()], vec![j], |ix| ix[0] as f64 - 2.0);
        let y = Tensor::<f64, (J,)>::from_vec(J.len(j), ry.data.clone()).unwrap();
        let as_f = |b: bool| if b { 1.0 } else { 0.0 };
        let gt: Tensor<bool, (I, J)> = (&x).greater(&y).eval().unwrap();
        assert_matches(
            &gt.cast::<f64>().eval().unwrap(),
            &rx.zip(&ry, |a, b| as_f(a > b)),
        );
        for (got, want) in [
            (
                (&x).less(&y).cast::<f64>().eval().unwrap(),
                rx.zip(&ry, |a, b| as_f(a < b)),
            ),
            (
                (&x).less_equal(&y).cast::<f64>().eval().unwrap(),
                rx.zip(&ry, |a, b| as_f(a <= b)),
            ),
            (
                (&x).greater_equal(&y).cast::<f64>().eval().unwrap(),
                rx.zip(&ry, |a, b| as_f(a >= b)),
            ),
            (
                (&x).equal(&y).cast::<f64>().eval().unwrap(),
                rx.zip(&ry, |a, b| as_f(a == b)),
            ),
            (
                (&x).not_equal(&y).cast::<f64>().eval().unwrap(),
                rx.zip(&ry, |a, b| as_f(a != b)),
            ),
        ] {
            assert_matches(&got, &want);
        }
        let s: Tensor<f64, (I, J)> = select(&gt, &x, &y).eval().unwrap();
        assert_matches(&s, &rx.zip(&ry, |a, b| if a > b { a } else { b }));
        let as_int: Tensor<i32, (I, J)> = (&x * 1.5).cast::<i32>().eval().unwrap();
        assert_matches(
            &as_int.cast::<f64>().eval().unwrap(),
            &rx.map(|v| (v * 1.5).trunc()),
        );
    }
}

#[test]
fn reductions_over_named_axes_against_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    for _ in 0..100 {
        let j = rng.random_range(1..6);
        let (x, rx) = random_view(&mut rng, j);
        let ry = Ref::build(vec!["J".into(), "K".into()], vec![j, 3], |ix| {
            (ix[0] + 2 * ix[1]) as f64 - 3.0
        });
        let y = tensor_jk(&ry);
        let e = rx.zip(&ry, |a, b| a * b - 1.0);
        let expr = || &x * &y - 1.0;
        let by_j: Tensor<f64, (I, K)> = expr().sum::<(J,)>().unwrap();
        assert_close(&by_j, &e.reduce(&["J"], 0.0, |a, b| a + b), 1e-12);
        let by_ik: Tensor<f64, (J,)> = expr().sum::<(K, I)>().unwrap();
        assert_close(&by_ik, &e.reduce(&["I", "K"], 0.0, |a, b| a + b), 1e-12);
        if e.lens[e.axis("I")] == 0 {
            let err = expr().max_over::<(I,)>().unwrap_err();
            assert!(matches!(err, axes::Error::EmptyReduction { .. }), "{err}");
        } else {
            assert_close(
                &expr().max_over::<(I,)>().unwrap(),
                &e.reduce(&["I"], f64::NEG_INFINITY, f64::max),
                0.0,
            );
        }
        assert_close(
            &expr().min_over::<(J, K)>().unwrap(),
            &e.reduce(&["J", "K"], f64::INFINITY, f64::min),
            0.0,
        );
        assert_close(
            &expr().prod::<(K,)>().unwrap(),
            &e.reduce(&["K"], 1.0, |a, b| a * b),
            1e-12,
        );
        let n_i = e.lens[e.axis("I")] as f64;
        assert_close(
            &expr().mean::<(I,)>().unwrap(),
            &e.reduce(&["I"], 0.0, |a, b| a + b).map(|s| s / n_i),
            1e-12,
        );
        let all: f64 = e.data.iter().sum();
        assert!((expr().sum_all().unwrap() - all).abs() <= 1e-9 * all.abs().max(1.0));
        // logsumexp, var, std over K
        let lse = e.reduce(&["K"], 0.0, |a, b| a + b.exp()).map(f64::ln);
        assert_close(&expr().logsumexp::<(K,)>().unwrap(), &lse, 1e-12);
        let mean_k = e.reduce(&["K"], 0.0, |a, b| a + b).map(|s| s / 3.0);
        let var = Ref::build(mean_k.names.clone(), mean_k.lens.clone(), |ix| {
            (0..3)
                .map(|k| {
                    let mut full = vec![0; 3];
                    let names = ["I", "J", "K"];
                    for (a, n) in names.iter().enumerate() {
                        full[e.axis(n)] = if *n == "K" { k } else { ix[mean_k.axis(n)] };
                        let _ = a;
                    }
                    (e.at(&full) - mean_k.at(ix)).powi(2)
                })
                .sum::<f64>()
                / 3.0
        });
        assert_close(&expr().var::<(K,)>().unwrap(), &var, 1e-9);
        assert_close(&expr().std::<(K,)>().unwrap(), &var.map(f64::sqrt), 1e-9);
    }
}

#[test]
fn reductions_give_the_same_bits_for_any_thread_count() {
    let n = 1 << 20;
    let x =
        Tensor::<f32, (I, J)>::random_uniform((I.len(n / 256), J.len(256)), -1.0, 1.0, 3).unwrap();
    // Below the reductions' fixed blocks: the flat path on one thread, whatever the count.
    let small = Tensor::<f32, (I,)>::random_uniform(I.len(100_000), -1.0, 1.0, 4).unwrap();
    let mut results = Vec::new();
    for threads in 1..=16 {
        axes::set_threads(threads).unwrap();
        let total = x.square().sum_all().unwrap();
        let rows: Tensor<f32, (J,)> = x.sum::<(I,)>().unwrap();
        let cols: Tensor<f32, (I,)> = x.sum::<(J,)>().unwrap();
        let flat = (&small * &small).sum_all().unwrap();
        results.push((
            total.to_bits(),
            rows.to_vec(),
            cols.to_vec(),
            flat.to_bits(),
        ));
    }
    axes::set_threads(2).unwrap();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    // and the sum is accurate: compare with an f64 sum
    let exact: f64 = x
        .to_vec()
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum();
    let rel = (f64::from(f32::from_bits(results[0].0)) - exact).abs() / exact;
    assert!(rel < 1e-5, "relative error {rel}");
}

#[test]
fn nan_and_infinity_through_reductions() {
    let x =
        Tensor::<f32, (I,)>::from_vec(I.len(4), vec![1.0, f32::NAN, 3.0, f32::INFINITY]).unwrap();
    assert!(x.sum_all().unwrap().is_nan());
    assert!(
        x.max_over::<(I,)>().unwrap().to_vec()[0].is_nan(),
        "max propagates NaN"
    );
    assert!(
        x.min_over::<(I,)>().unwrap().to_vec()[0].is_nan(),
        "min propagates NaN"
    );
    let inf = Tensor::<f32, (I,)>::from_vec(I.len(2), vec![f32::NEG_INFINITY, f32::NEG_INFINITY])
        .unwrap();
    assert_eq!(
        inf.logsumexp::<(I,)>().unwrap().to_vec(),
        [f32::NEG_INFINITY]
    );
    let empty = Tensor::<f32, (I, J)>::zeros((I.len(0), J.len(2))).unwrap();
    assert_eq!(empty.sum::<(I,)>().unwrap().to_vec(), [0.0, 0.0]);
    let err = empty.max_over::<(I,)>().unwrap_err();
    assert!(matches!(err, axes::Error::EmptyReduction { .. }), "{err}");
    assert!(
        empty
            .mean::<(I,)>()
            .unwrap()
            .to_vec()
            .iter()
            .all(|v| v.is_nan())
    );
    assert!(matches!(
        argmax::<_, _, I>(&empty),
        Err(Error::EmptyReduction { .. })
    ));
}

#[test]
fn softmax_log_softmax_and_argmax() {
    let mut rng = ChaCha8Rng::seed_from_u64(35);
    for _ in 0..30 {
        let j = rng.random_range(1..6);
        let (x, rx) = random_view(&mut rng, j);
        let x = (&x * 100.0).eval().unwrap();
        let rx = rx.map(|v| v * 100.0).reorder(&<(I, J)>::names());
        let m = rx.reduce(&["J"], f64::NEG_INFINITY, f64::max);
        let z = rx
            .zip(&m, |a, b| (a - b).exp())
            .reduce(&["J"], 0.0, |a, b| a + b);
        let p = rx.zip(&m, |a, b| a - b).zip(&z, |a, b| a.exp() / b);
        assert_close(&x.softmax::<J>().unwrap(), &p, 1e-12);
        assert_close(&x.log_softmax::<J>().unwrap(), &p.map(f64::ln), 1e-9);
        let am: Tensor<i64, (I,)> = argmax::<_, _, J>(&x).unwrap();
        let an: Tensor<i64, (I,)> = argmin::<_, _, J>(&x).unwrap();
        for i in 0..rx.lens[0] {
            let row: Vec<f64> = (0..j).map(|c| rx.at(&[i, c])).collect();
            let best = row
                .iter()
                .enumerate()
                .fold(0, |b, (k, &v)| if v > row[b] { k } else { b });
            let worst = row
                .iter()
                .enumerate()
                .fold(0, |b, (k, &v)| if v < row[b] { k } else { b });
            assert_eq!(am.get(I.at(i)).unwrap(), best as i64);
            assert_eq!(an.get(I.at(i)).unwrap(), worst as i64);
        }
    }
}

#[test]
fn assignment_converts_checks_lengths_and_handles_overlap() {
    let x = Tensor::<f32, (I, J)>::from_vec((I.len(2), J.len(2)), vec![1., 2., 3., 4.]).unwrap();
    let mut dst = Tensor::<f64, (J, I)>::zeros((J.len(2), I.len(2))).unwrap();
    dst.assign(&x * 10.0).unwrap();
    assert_eq!(dst.to_vec(), [10., 30., 20., 40.]);
    // x + x transposed, written into x's own storage
    let mut y = x.clone();
    let t = x.axes_with_order::<(J, I)>().cast_axes::<(I, J)>().unwrap();
    y.assign(&y.clone() + &t).unwrap();
    assert_eq!(y.to_vec(), [2., 5., 5., 8.]);
    assert_eq!(
        x.to_vec(),
        [1., 2., 3., 4.],
        "the original keeps its values"
    );
    // a destination with a broadcast axis is made contiguous before writing
    let mut b = Tensor::<f32, (J,)>::ones(J.len(2))
        .unwrap()
        .broadcast::<(I, J)>(I.len(2))
        .unwrap();
    b.assign(&x).unwrap();
    assert_eq!(b.to_vec(), [1., 2., 3., 4.]);
    // lengths are checked
    let small = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3))).unwrap();
    let mut d = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(2))).unwrap();
    assert_eq!(
        d.assign(&small).unwrap_err().to_string(),
        "axis `J` has length 2 in one operand and 3 in the other"
    );
}

#[test]
fn mismatched_lengths_are_errors_naming_the_axis() {
    let x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3))).unwrap();
    let y = Tensor::<f32, (J, K)>::zeros((J.len(4), K.len(1))).unwrap();
    let err = (&x + &y).eval().unwrap_err();
    assert_eq!(
        err,
        Error::LengthMismatch {
            axis: "J".into(),
            left: 3,
            right: 4
        }
    );
    assert!(matches!(
        (&x * &y).sum_all(),
        Err(Error::LengthMismatch { .. })
    ));
}

#[test]
fn expressions_describe_themselves_as_ir() {
    let x = Tensor::<f32, (I,)>::zeros(I.len(2)).unwrap();
    let y = Tensor::<f32, (I,)>::zeros(I.len(2)).unwrap();
    let e = ((&x - &y).square() * 0.5).exp();
    assert_eq!(
        e.ir().to_string(),
        "exp(mul(square(sub(leaf0, leaf1)), 0.5))"
    );
    assert_eq!(
        select((&x).greater(0.0), &x, -&y).ir().to_string(),
        "select(gt(leaf0, 0), leaf1, neg(leaf2))"
    );
}

#[test]
fn expressions_with_many_leaves() {
    let x = Tensor::<f64, (I,)>::from_vec(I.len(3), vec![1., 2., 3.]).unwrap();
    let e = &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x
        + &x;
    assert_eq!(e.eval().unwrap().to_vec(), [20., 40., 60.]);
}

/// A transposed operand large enough to be staged in tiles (moved through registers 8×8 for
/// 4-byte elements), with lengths that are not multiples of 8 or of the tile (rows spanning
/// several chunks, and several tile widths), in f32 and i32, with and without an operand
/// gathered beside it (broadcast along the rows), against index arithmetic on the raw buffers.
#[test]
fn transposed_operands_through_tiles() {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    for (ni, nj) in [
        (131, 70),
        (64, 64),
        (9, 300),
        (200, 17),
        (70, 1100),
        (67, 8300),
    ] {
        let xs: Vec<f32> = (0..ni * nj).map(|_| rng.random_range(-1.0..1.0)).collect();
        let ys: Vec<f32> = (0..ni * nj).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x = Tensor::<f32, (I, J)>::from_vec((I.len(ni), J.len(nj)), xs.clone()).unwrap();
        // y stored J-major: element (i, j) at j * ni + i.
        let y = Tensor::<f32, (J, I)>::from_vec((J.len(nj), I.len(ni)), ys.clone()).unwrap();
        let z: Tensor<f32, (I, J)> = (&x + &y).eval().unwrap();
        let got = z.to_vec();
        for i in 0..ni {
            for j in 0..nj {
                assert_eq!(
                    got[i * nj + j],
                    xs[i * nj + j] + ys[j * ni + i],
                    "f32 ({i}, {j}) of {ni}×{nj}"
                );
            }
        }
        let cs: Vec<f32> = (0..ni).map(|i| i as f32).collect();
        let c = Tensor::<f32, (I,)>::from_vec(I.len(ni), cs.clone()).unwrap();
        let got: Vec<f32> = (&x + &y + &c).eval_in::<(I, J)>().unwrap().to_vec();
        for i in 0..ni {
            for j in 0..nj {
                assert_eq!(
                    got[i * nj + j],
                    xs[i * nj + j] + ys[j * ni + i] + cs[i],
                    "f32 with a broadcast ({i}, {j}) of {ni}×{nj}"
                );
            }
        }
        let xi: Vec<i32> = xs.iter().map(|v| (v * 1000.0) as i32).collect();
        let yi: Vec<i32> = ys.iter().map(|v| (v * 1000.0) as i32).collect();
        let x = Tensor::<i32, (I, J)>::from_vec((I.len(ni), J.len(nj)), xi.clone()).unwrap();
        let y = Tensor::<i32, (J, I)>::from_vec((J.len(nj), I.len(ni)), yi.clone()).unwrap();
        let got = (&x - &y).eval().unwrap().to_vec();
        for i in 0..ni {
            for j in 0..nj {
                assert_eq!(
                    got[i * nj + j],
                    xi[i * nj + j] - yi[j * ni + i],
                    "i32 ({i}, {j}) of {ni}×{nj}"
                );
            }
        }
    }
}

/// Writes `x + y` (`y` stored transposed, so the loop is tiled) and `x + x + x` into
/// destinations large enough to be written with streaming stores: a new tensor, and a view
/// whose rows start at every offset from a 16-byte boundary (rows of an odd length, one
/// column sliced off the front), on the given thread counts, against index arithmetic.
fn check_streamed_assignment<T: Num + std::fmt::Debug>(ni: usize, nj: usize, threads: &[usize]) {
    let bytes = ni * nj * std::mem::size_of::<T>();
    assert!(
        bytes >= axes::engine::exec::STREAM_MIN_BYTES,
        "{bytes} bytes are not streamed"
    );
    let value = |i: usize| T::from_f64((i * 7 % 61) as f64);
    let xs: Vec<T> = (0..ni * nj).map(value).collect();
    let ys: Vec<T> = (0..ni * nj).map(|i| value(i + 5)).collect();
    let x = Tensor::<T, (I, J)>::from_vec((I.len(ni), J.len(nj)), xs.clone()).unwrap();
    let y = Tensor::<T, (J, I)>::from_vec((J.len(nj), I.len(ni)), ys.clone()).unwrap();
    let sum = |i: usize, j: usize| T::from_f64(xs[i * nj + j].to_f64() + ys[j * ni + i].to_f64());
    let thrice = |i: usize, j: usize| T::from_f64(3.0 * xs[i * nj + j].to_f64());
    let check = |got: &[T], expected: &dyn Fn(usize, usize) -> T, what: &str| {
        for i in 0..ni {
            for j in 0..nj {
                assert_eq!(
                    got[i * nj + j],
                    expected(i, j),
                    "{what} ({i}, {j}) of {ni}×{nj}"
                );
            }
        }
    };
    for &threads in threads {
        axes::set_threads(threads).unwrap();
        let z: Tensor<T, (I, J)> = (&x + &y).eval().unwrap();
        check(&z.to_vec(), &sum, "new tensor, x + yᵀ");
        let wide = Tensor::<T, (I, J)>::zeros((I.len(ni), J.len(nj + 1))).unwrap();
        let mut view = wide.slice::<J>(1.., 1).unwrap();
        view.assign(&x + &y).unwrap();
        check(&view.to_vec(), &sum, "offset view, x + yᵀ");
        view.assign(&x + &x + &x).unwrap();
        check(&view.to_vec(), &thrice, "offset view, x + x + x");
    }
}

#[test]
fn large_assignments_written_with_streaming_stores() {
    check_streamed_assignment::<f32>(2049, 2051, &[1, 2]);
    check_streamed_assignment::<f64>(1027, 2051, &[2]);
    check_streamed_assignment::<u8>(4099, 4097, &[2]);
}

/// A closure of two arguments (`map_with`) broadcasts its operands by axis identity as `+`
/// does, over a permuted view, with operands of two element types; on a device it is an
/// error, not a panic.
#[test]
fn a_closure_of_two_operands_broadcasts_like_an_operator() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (ni, nj) = (rng.random_range(1..20), rng.random_range(1..20));
    let x = Tensor::<f64, (J, I)>::from_fn((J.len(nj), I.len(ni)), |_| rng.random_range(-2.0..2.0))
        .unwrap();
    let x = x.axes_with_order::<(I, J)>();
    let n = Tensor::<i32, (J,)>::from_fn(J.len(nj), |_| rng.random_range(0..4)).unwrap();
    let y = x
        .map_with(&n, |x, n| x.powi(n) + f64::from(n))
        .eval()
        .unwrap();
    let (xs, ns) = (x.to_vec(), n.to_vec());
    let want: Vec<f64> = (0..ni * nj)
        .map(|k| xs[k].powi(ns[k % nj]) + f64::from(ns[k % nj]))
        .collect();
    assert_eq!(y.to_vec(), want);
    // (J,) with (I, J): the larger operand's order, as for `+`.
    let z: Tensor<bool, (I, J)> = n.map_with(&x, |n, x| x > f64::from(n)).eval().unwrap();
    let above: Vec<bool> = (0..ni * nj)
        .map(|k| xs[k] > f64::from(ns[k % nj]))
        .collect();
    assert_eq!(z.to_vec(), above);
    let device = axes::Device::Backend(&axes::backends::cpu::CPU_BACKEND);
    let on_device = x.to(&device).unwrap();
    let error = on_device
        .map_with(&on_device, |a, b| a * b)
        .eval()
        .unwrap_err();
    assert!(error.to_string().contains("closure"), "{error}");
}
