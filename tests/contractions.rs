//! Contractions against a naive reference: random lengths (0 and 1 included), axis orders,
//! strides (sliced, reversed, transposed views), batch axes, dual axes on either side, every
//! element type, and the identity dot(x, y) == transpose(dot(transpose(y), transpose(x))).

use axes::contract::packed_operands;
use axes::prelude::*;
use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::{Ref, assert_close, assert_matches};

#[derive(Axis)]
struct A;
#[derive(Axis)]
struct B;
#[derive(Axis)]
struct C;
#[derive(Axis)]
struct D;

/// The naive contraction of two references over the axis names in `over` (after renaming
/// `x`'s axes by `rename`, for dual pairs).
fn naive(x: &Ref, y: &Ref, over: &[&str]) -> Ref {
    x.zip(y, |a, b| a * b).reduce(over, 0.0, |s, v| s + v)
}

fn renamed(r: &Ref, from: &str, to: &str) -> Ref {
    let mut r = r.clone();
    for n in &mut r.names {
        if n == from {
            *n = to.to_string();
        }
    }
    r
}

/// A 3-axis tensor over (A, B, C) from a reference, through a random view: stored in another
/// order, reversed, or every other element of a wider tensor.
fn abc_view(rng: &mut ChaCha8Rng, lens: [usize; 3]) -> (Tensor<f64, (A, B, C)>, Ref) {
    match rng.random_range(0..3) {
        0 => {
            let r = Ref::random_with(rng, &["C", "A", "B"], &[lens[2], lens[0], lens[1]]);
            let t = Tensor::<f64, (C, A, B)>::from_vec(
                (C.len(lens[2]), A.len(lens[0]), B.len(lens[1])),
                r.data.clone(),
            )
            .unwrap();
            (t.axes_with_order(), r)
        }
        1 => {
            let r = Ref::random_with(rng, &["A", "B", "C"], &[lens[0], lens[1], lens[2]]);
            let t = Tensor::<f64, (A, B, C)>::from_vec(
                (A.len(lens[0]), B.len(lens[1]), C.len(lens[2])),
                r.data.clone(),
            )
            .unwrap();
            (t.slice::<B>(.., -1).unwrap(), r.slice("B", 0, lens[1], -1))
        }
        _ => {
            let r = Ref::random_with(rng, &["A", "B", "C"], &[lens[0], 2 * lens[1], lens[2]]);
            let t = Tensor::<f64, (A, B, C)>::from_vec(
                (A.len(lens[0]), B.len(2 * lens[1]), C.len(lens[2])),
                r.data.clone(),
            )
            .unwrap();
            (
                t.slice::<B>(.., 2).unwrap(),
                r.slice("B", 0, 2 * lens[1], 2),
            )
        }
    }
}

#[test]
fn shared_axes_contract_in_any_order_and_stride() {
    let mut rng = ChaCha8Rng::seed_from_u64(50);
    for _ in 0..100 {
        let lens = [
            rng.random_range(0..4),
            rng.random_range(0..4),
            rng.random_range(0..4),
        ];
        let (x, rx) = abc_view(&mut rng, lens);
        let d = rng.random_range(0..4);
        let ry = Ref::random_with(&mut rng, &["B", "C", "D"], &[lens[1], lens[2], d]);
        let y = Tensor::<f64, (B, C, D)>::from_vec(
            (B.len(lens[1]), C.len(lens[2]), D.len(d)),
            ry.data.clone(),
        )
        .unwrap();
        // (A, B, C) · (B, C, D) -> (A, D)
        let z: Tensor<f64, (A, D)> = dot(&x, &y).unwrap();
        assert_close(&z, &naive(&rx, &ry, &["B", "C"]), 1e-12);
        // y seen in another order: (D, C, B) · (A, B, C) -> (D, A)
        let yt = y.axes_with_order::<(D, C, B)>();
        let z2: Tensor<f64, (D, A)> = dot(&yt, &x).unwrap();
        assert_close(&z2, &naive(&ry, &rx, &["B", "C"]), 1e-12);
        // (A, B, C) · (A,) -> (B, C)
        let ra = Ref::random_with(&mut rng, &["A"], &[lens[0]]);
        let a = Tensor::<f64, (A,)>::from_vec(A.len(lens[0]), ra.data.clone()).unwrap();
        assert_close(&dot(&x, &a).unwrap(), &naive(&rx, &ra, &["A"]), 1e-12);
        // vector · vector -> scalar; no shared axis -> `outer` (dot would not compile)
        let s: Tensor<f64, ()> = dot(&a, &a).unwrap();
        assert_close(&s, &naive(&ra, &ra, &["A"]), 1e-12);
        let rd = Ref::random_with(&mut rng, &["D"], &[d]);
        let dv = Tensor::<f64, (D,)>::from_vec(D.len(d), rd.data.clone()).unwrap();
        let ad: Tensor<f64, (A, D)> = outer(&a, &dv).unwrap();
        assert_matches(&ad, &ra.zip(&rd, |p, q| p * q));
        let da: Tensor<f64, (D, C, B)> = outer(&dv, &yt.sum::<(D,)>().unwrap()).unwrap();
        assert_matches(
            &da,
            &rd.zip(&ry.reduce(&["D"], 0.0, |s, v| s + v), |p, q| p * q),
        );
        let abcd: Tensor<f64, (A, B, C, D)> = outer(&x, &dv).unwrap();
        assert_matches(&abcd, &rx.zip(&rd, |p, q| p * q));
    }
}

#[test]
fn batch_axes_with_the_named_form() {
    let mut rng = ChaCha8Rng::seed_from_u64(51);
    for _ in 0..60 {
        let (nb, nm, nk, nn) = (
            rng.random_range(0..4),
            rng.random_range(0..4),
            rng.random_range(0..5),
            rng.random_range(0..4),
        );
        let rx = Ref::random_with(&mut rng, &["B", "A", "C"], &[nb, nm, nk]);
        let ry = Ref::random_with(&mut rng, &["C", "B", "D"], &[nk, nb, nn]);
        let x =
            Tensor::<f64, (B, A, C)>::from_vec((B.len(nb), A.len(nm), C.len(nk)), rx.data.clone())
                .unwrap();
        let y =
            Tensor::<f64, (C, B, D)>::from_vec((C.len(nk), B.len(nb), D.len(nn)), ry.data.clone())
                .unwrap();
        // contract C only: B is a batch axis, kept once
        let z: Tensor<f64, (B, A, D)> = dot_over::<(C,), _, _, _>(&x, &y).unwrap();
        assert_close(&z, &naive(&rx, &ry, &["C"]), 1e-12);
        // contracting both shared axes is plain dot
        let full: Tensor<f64, (A, D)> = dot_over::<(B, C), _, _, _>(&x, &y).unwrap();
        assert_close(&full, &naive(&rx, &ry, &["B", "C"]), 1e-12);
    }
}

#[test]
fn dual_axes_pair_first_from_either_side() {
    let mut rng = ChaCha8Rng::seed_from_u64(52);
    for _ in 0..60 {
        let (h, b) = (rng.random_range(0..5), rng.random_range(0..4));
        let rw = Ref::random_with(&mut rng, &["Dual<A>", "A"], &[h, h]);
        let w = Tensor::<f64, (Dual<A>, A)>::from_vec(
            (Len::<Dual<A>>::new(h), A.len(h)),
            rw.data.clone(),
        )
        .unwrap();
        let rx = Ref::random_with(&mut rng, &["A", "B"], &[h, b]);
        let x = Tensor::<f64, (A, B)>::from_vec((A.len(h), B.len(b)), rx.data.clone()).unwrap();
        // (Dual<A>, A) · (A, B) -> (A, B): the weight's Dual<A> meets x's A
        let y: Tensor<f64, (A, B)> = dot(&w, &x).unwrap();
        let expected = naive(
            &renamed(&rw, "A", "A'"),
            &renamed(&rx, "A", "Dual<A>"),
            &["Dual<A>"],
        );
        assert_close(&y, &renamed(&expected, "A'", "A"), 1e-12);
        // (B, A) · (Dual<A>, A) -> (B, A)
        let xt = x.axes_with_order::<(B, A)>();
        let y2: Tensor<f64, (B, A)> = dot(&xt, &w).unwrap();
        let expected2 = naive(
            &renamed(&rx, "A", "Dual<A>"),
            &renamed(&rw, "A", "A'"),
            &["Dual<A>"],
        );
        assert_close(&y2, &renamed(&expected2, "A'", "A"), 1e-12);
    }
}

#[test]
#[allow(clippy::type_complexity)]
fn dot_equals_the_transpose_of_the_transposed_dot() {
    let mut rng = ChaCha8Rng::seed_from_u64(53);
    for _ in 0..40 {
        let (h, b, c) = (
            rng.random_range(1..5),
            rng.random_range(1..4),
            rng.random_range(1..4),
        );
        let w = Tensor::<f64, (Dual<A>, A, C)>::from_fn(
            (Len::<Dual<A>>::new(h), A.len(h), C.len(c)),
            |_| rng.clone().random_range(-5..5) as f64,
        )
        .unwrap();
        let w = (&w + Tensor::<f64, (C,)>::arange(C.len(c)).unwrap())
            .eval()
            .unwrap();
        let x =
            Tensor::<f64, (A, B)>::random_uniform((A.len(h), B.len(b)), -5.0, 5.0, rng.random())
                .unwrap();
        let x = x.floor().eval().unwrap();
        let lhs: Tensor<f64, (A, C, B)> = dot(&w, &x).unwrap();
        let wt: Tensor<f64, (A, Dual<A>, Dual<C>)> = w.transpose();
        let xt: Tensor<f64, (Dual<A>, Dual<B>)> = x.transpose();
        let inner: Tensor<f64, (Dual<B>, Dual<A>, Dual<C>)> = dot(&xt, &wt).unwrap();
        let rhs: Tensor<f64, (B, A, C)> = inner.transpose();
        assert_eq!(lhs, rhs, "integer-valued data: both sides are exact");
    }
}

#[test]
fn every_element_type() {
    let x = Tensor::<i32, (A, B)>::from_vec((A.len(2), B.len(3)), vec![1, 2, 3, 4, 5, 6]).unwrap();
    let y = Tensor::<i32, (B, C)>::from_vec((B.len(3), C.len(2)), vec![1, 0, 0, 1, 1, 1]).unwrap();
    assert_eq!(dot(&x, &y).unwrap().to_vec(), [4, 5, 10, 11]);
    let xf: Tensor<f32, (A, B)> = x.cast::<f32>().eval().unwrap();
    let yf: Tensor<f32, (B, C)> = y.cast::<f32>().eval().unwrap();
    assert_eq!(dot(&xf, &yf).unwrap().to_vec(), [4., 5., 10., 11.]);
    let xh: Tensor<f16, (A, B)> = x.cast::<f16>().eval().unwrap();
    let yh: Tensor<f16, (B, C)> = y.cast::<f16>().eval().unwrap();
    assert_eq!(
        dot(&xh, &yh)
            .unwrap()
            .cast::<f32>()
            .eval()
            .unwrap()
            .to_vec(),
        [4., 5., 10., 11.]
    );
    let bad = Tensor::<i32, (B, C)>::zeros((B.len(4), C.len(2))).unwrap();
    assert_eq!(
        dot(&x, &bad).unwrap_err().to_string(),
        "axis `B` has length 3 in one operand and 4 in the other"
    );
}

#[test]
fn transposed_views_are_not_copied() {
    let x = Tensor::<f32, (A, B)>::random_uniform((A.len(64), B.len(32)), -1.0, 1.0, 1).unwrap();
    let y = Tensor::<f32, (C, B)>::random_uniform((C.len(16), B.len(32)), -1.0, 1.0, 2).unwrap();
    let before = packed_operands();
    let z: Tensor<f32, (A, C)> = dot(&x, &y).unwrap(); // y is used transposed: a view
    let zt: Tensor<f32, (C, A)> = dot(
        &y.axes_with_order::<(B, C)>(),
        &x.axes_with_order::<(B, A)>(),
    )
    .unwrap();
    assert_eq!(
        packed_operands(),
        before,
        "views whose strides allow GEMM are not packed"
    );
    assert!(
        z.to_vec()
            .iter()
            .zip(zt.to_vec_in::<(A, C)>())
            .all(|(a, b)| (a - b).abs() < 1e-5)
    );
    // a reversed contracted axis (negative stride) is packed once
    let strided = x.slice::<B>(.., -1).unwrap();
    let ys = y.slice::<B>(.., -1).unwrap();
    let packed: Tensor<f32, (A, C)> = dot(&strided, &ys).unwrap();
    assert!(packed_operands() > before);
    let reference: Tensor<f32, (A, C)> =
        dot(&strided.contiguous().unwrap(), &ys.contiguous().unwrap()).unwrap();
    assert_eq!(packed, reference);
}
