//! The library's own expressions and reductions evaluated on the OpenCL device
//! (`eval_on`, `sum_on`, ...) agree with the CPU engine (itself tested against plain
//! references): every element-wise op, on permuted, broadcast and reversed (sliced) inputs,
//! in f32, f64 and i32, and every reduction over one or several axes.
#![cfg(feature = "opencl")]

mod common;

use axes::device::ReduceKind;
use axes::prelude::*;
use axes::{ExprExt, dot_on};
use axes_backends::opencl::OpenCl;

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;

fn device() -> Option<&'static OpenCl> {
    common::opencl_device()
}

fn agree<T: Element + Into<f64>, A: AxisSet>(
    what: &str,
    cpu: Tensor<T, A>,
    device: Tensor<T, A>,
    tolerance: f64,
) {
    assert_eq!(cpu.lens(), device.lens(), "{what}: lengths");
    for (i, (c, d)) in cpu.to_vec().into_iter().zip(device.to_vec()).enumerate() {
        let (c, d): (f64, f64) = (c.into(), d.into());
        let ok =
            (c.is_nan() && d.is_nan()) || c == d || (c - d).abs() <= tolerance * (1.0 + c.abs());
        assert!(ok, "{what}: element {i}: CPU {c}, device {d}");
    }
}

fn agree_bool<A: AxisSet>(what: &str, cpu: Tensor<bool, A>, device: Tensor<bool, A>) {
    assert_eq!(cpu.to_vec(), device.to_vec(), "{what}");
}

/// Values in [-2, 2] kept away from 0, stored (I, B) and used as (B, I): a permuted view.
/// A signed matrix, a positive one, and a vector.
type Inputs = (Tensor<f32, (B, I)>, Tensor<f32, (B, I)>, Tensor<f32, (I,)>);

fn inputs() -> Inputs {
    let (nb, ni) = (37, 29);
    let x = Tensor::<f32, (I, B)>::from_fn((I.len(ni), B.len(nb)), |ix| {
        let v = ((ix.of::<I>() * 31 + ix.of::<B>() * 17) % 41) as f32 / 10.0 - 2.05;
        if v.abs() < 0.1 { v + 0.25 } else { v }
    })
    .unwrap();
    let x: Tensor<f32, (B, I)> = x.axes_with_order();
    let positive = Tensor::<f32, (B, I)>::from_fn((B.len(nb), I.len(ni)), |ix| {
        0.25 + ((ix.of::<I>() * 7 + ix.of::<B>() * 3) % 23) as f32 / 8.0
    })
    .unwrap();
    // Reversed along B: a negative stride.
    let positive = positive.slice::<B>(.., -1).unwrap();
    let y = Tensor::<f32, (I,)>::from_fn(I.len(ni), |ix| ix.of::<I>() as f32 / 7.0 - 1.9).unwrap();
    (x, positive, y)
}

#[test]
fn every_elementwise_op_matches_the_cpu() {
    let Some(cl) = device() else { return };
    let (x, p, y) = inputs();
    let tol = 2e-6;
    macro_rules! check {
        ($name:literal, $e:expr) => {
            agree($name, $e.eval().unwrap(), $e.eval_on(cl).unwrap(), tol)
        };
    }
    check!("neg", -&x);
    check!("abs", x.abs());
    check!("square", x.square());
    check!("signum", x.signum());
    check!("relu", x.relu());
    check!("exp", x.exp());
    check!("ln", p.ln());
    check!("sqrt", p.sqrt());
    check!("rsqrt", p.rsqrt());
    check!("tanh", x.tanh());
    check!("sigmoid", x.sigmoid());
    check!("sin", x.sin());
    check!("cos", x.cos());
    check!("recip", x.recip());
    check!("floor", x.floor());
    check!("ceil", x.ceil());
    check!("powi", (&x).powi(3));
    check!("powf", (&p).powf(1.5));
    check!("clamp", (&x).clamp(-0.5, 0.75));
    // Binary ops with y broadcast along B, scalars on both sides.
    check!("add", &x + &y);
    check!("sub", &x - &y);
    check!("mul", &x * &y);
    check!("div", &x / &p);
    check!("max", (&x).max(&y));
    check!("min", (&x).min(&y));
    check!("pow", (&p).pow(&x));
    check!("scalars", 2.0 * &x - 1.5);
    check!("mul_add", (&x).mul_add(&y, &p));
    check!("select", select((&x).less(&y), &x, &p));
    check!("fused", ((&x * 2.0 + &y).tanh() * &p - x.exp()).abs());
    agree_bool(
        "less",
        (&x).less(&y).eval().unwrap(),
        (&x).less(&y).eval_on(cl).unwrap(),
    );
    agree_bool(
        "greater_equal",
        (&x).greater_equal(&p).eval().unwrap(),
        (&x).greater_equal(&p).eval_on(cl).unwrap(),
    );
    agree_bool(
        "equal",
        (&x).equal(&x).eval().unwrap(),
        (&x).equal(&x).eval_on(cl).unwrap(),
    );
    // Casts and other element types.
    agree(
        "cast f64",
        x.cast::<f64>().eval().unwrap(),
        x.cast::<f64>().eval_on(cl).unwrap(),
        0.0,
    );
    let xd: Tensor<f64, (B, I)> = x.cast::<f64>().eval().unwrap();
    agree(
        "f64 tanh·exp",
        (xd.tanh() * xd.exp()).eval().unwrap(),
        (xd.tanh() * xd.exp()).eval_on(cl).unwrap(),
        1e-13,
    );
    let xi: Tensor<i32, (B, I)> = ((&x) * 10.0).cast::<i32>().eval().unwrap();
    let yi: Tensor<i32, (I,)> = ((&y) * 10.0).cast::<i32>().eval().unwrap();
    agree(
        "i32 arithmetic",
        ((&xi) * 3 - &yi).abs().eval().unwrap(),
        ((&xi) * 3 - &yi).abs().eval_on(cl).unwrap(),
        0.0,
    );
    agree(
        "i32 division",
        ((&xi) / &yi).eval().unwrap(),
        ((&xi) / &yi).eval_on(cl).unwrap(),
        0.0,
    );
}

#[test]
fn reductions_match_the_cpu() {
    let Some(cl) = device() else { return };
    let (x, p, y) = inputs();
    let e = || (&x * &y + &p).sin() + 1.5;
    agree(
        "sum over B",
        e().sum::<(B,)>().unwrap(),
        e().sum_on::<(B,)>(cl).unwrap(),
        1e-5,
    );
    agree(
        "sum over I",
        e().sum::<(I,)>().unwrap(),
        e().sum_on::<(I,)>(cl).unwrap(),
        1e-5,
    );
    agree(
        "sum over all",
        e().sum::<(B, I)>().unwrap(),
        e().sum_on::<(I, B)>(cl).unwrap(),
        1e-5,
    );
    agree(
        "max over B",
        e().max_over::<(B,)>().unwrap(),
        e().reduce_on::<(B,)>(cl, ReduceKind::Max).unwrap(),
        1e-6,
    );
    agree(
        "min over I",
        e().min_over::<(I,)>().unwrap(),
        e().reduce_on::<(I,)>(cl, ReduceKind::Min).unwrap(),
        1e-6,
    );
    let q = || (&p * 0.1).exp();
    agree(
        "prod over I",
        q().prod::<(I,)>().unwrap(),
        q().reduce_on::<(I,)>(cl, ReduceKind::Prod).unwrap(),
        1e-5,
    );
    // A leaf with an axis the result does not have, broadcast along another.
    let z = Tensor::<f32, (J, I)>::from_fn((J.len(5), I.len(29)), |ix| {
        (ix.of::<J>() + ix.of::<I>()) as f32 / 9.0
    })
    .unwrap();
    agree(
        "sum over J",
        (&z * &x).sum::<(J,)>().unwrap(),
        (&z * &x).sum_on::<(J,)>(cl).unwrap(),
        1e-5,
    );
}

#[test]
fn device_errors_name_the_problem() {
    let Some(cl) = device() else { return };
    let (x, _, _) = inputs();
    let err = (&x).map(|v| v * 2.0).eval_on(cl).unwrap_err().to_string();
    assert!(err.contains("closure"), "{err}");
    let short = Tensor::<f32, (I,)>::zeros(I.len(3)).unwrap();
    let err = (&x + &short).eval_on(cl).unwrap_err().to_string();
    assert_eq!(
        err,
        "axis `I` has length 29 in one operand and 3 in the other"
    );
    let half = Tensor::<half::f16, (I,)>::zeros(I.len(3)).unwrap();
    assert!((&half).eval_on(cl).is_err());
    let padded = x.pad::<I>(1, 0).unwrap();
    assert!(
        padded
            .exp()
            .eval_on(cl)
            .unwrap_err()
            .to_string()
            .contains("padded")
    );
}

#[test]
fn contractions_match_the_cpu() {
    let Some(cl) = device() else { return };
    let (x, p, _) = inputs();
    let w = Tensor::<f32, (I, J)>::from_fn((I.len(29), J.len(19)), |ix| {
        ((ix.of::<I>() * 5 + ix.of::<J>() * 3) % 11) as f32 / 6.0 - 0.8
    })
    .unwrap();
    // x is a permuted view, p a reversed slice (packed before the copy), w plain.
    agree(
        "dot",
        dot(&x, &w).unwrap(),
        dot_on(&x, &w, cl).unwrap(),
        1e-5,
    );
    agree(
        "dot reversed",
        dot(&p, &w).unwrap(),
        dot_on(&p, &w, cl).unwrap(),
        1e-5,
    );
    let wt: Tensor<f32, (J, I)> = w.axes_with_order();
    agree(
        "dot transposed weight",
        dot(&wt, &x).unwrap(),
        dot_on(&wt, &x, cl).unwrap(),
        1e-5,
    );
    // A square weight: x's I meets its Dual<I>.
    let sq =
        Tensor::<f64, (Dual<I>, I)>::from_fn((Dual::<I>::default().len(29), I.len(29)), |ix| {
            ((ix.of::<Dual<I>>() * 13 + ix.of::<I>()) % 17) as f64 / 9.0 - 0.9
        })
        .unwrap();
    let xd: Tensor<f64, (B, I)> = x.cast::<f64>().eval().unwrap();
    agree(
        "dot dual",
        dot(&xd, &sq).unwrap(),
        dot_on(&xd, &sq, cl).unwrap(),
        1e-12,
    );
    let short = Tensor::<f32, (I, J)>::zeros((I.len(3), J.len(2))).unwrap();
    assert_eq!(
        dot_on(&x, &short, cl).unwrap_err().to_string(),
        "axis `I` has length 29 in one operand and 3 in the other"
    );
}
