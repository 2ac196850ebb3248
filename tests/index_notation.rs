//! The `tensor!` index notation against a plain reference: implicit sums (the einsum and
//! Cortex rule), explicit reductions, accumulation, scalars, functions, new and existing
//! destinations.

use axes::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::{Ref, assert_close};

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct I;
#[derive(Axis)]
struct O;

fn t2<X: Axis, Y: Axis>(r: &Ref) -> Tensor<f64, (X, Y)>
where
    (X, Y): AxisSet + SameAxes<(X, Y)>,
{
    Tensor::from_vec(
        (Len::<X>::new(r.lens[0]), Len::<Y>::new(r.lens[1])),
        r.data.clone(),
    )
    .unwrap()
}

#[test]
fn implicit_sums_explicit_reductions_and_accumulation() {
    let mut rng = ChaCha8Rng::seed_from_u64(40);
    for _ in 0..50 {
        let (nb, ni, no) = (
            rng.random_range(1..5),
            rng.random_range(0..5),
            rng.random_range(1..5),
        );
        let rx = Ref::random_with(&mut rng, &["B", "I"], &[nb, ni]);
        let rw = Ref::random_with(&mut rng, &["I", "O"], &[ni, no]);
        let rc = Ref::random_with(&mut rng, &["O"], &[no]);
        let x = t2::<B, I>(&rx);
        let w = t2::<I, O>(&rw);
        let c = Tensor::<f64, (O,)>::from_vec(O.len(no), rc.data.clone()).unwrap();
        let product = rx.zip(&rw, |a, b| a * b).reduce(&["I"], 0.0, |a, b| a + b);

        // a new tensor; I is summed because it is on the right only
        let z = tensor!([B, O] = x[B, I] * w[I, O]).unwrap();
        assert_close(&z, &product, 1e-12);
        // into an existing tensor stored in another order, with an explicit sum and a bias
        let mut y = Tensor::<f64, (O, B)>::zeros((B.len(nb), O.len(no))).unwrap();
        tensor!(y[B, O] = sum[I](x[B, I] * w[I, O]) + 2.0 * c[O]).unwrap();
        assert_close(&y, &product.zip(&rc, |p, c| p + 2.0 * c), 1e-12);
        // accumulate: the Cortex rule db[O] += dy[B, O]
        let mut db = Tensor::<f64, (O,)>::ones(O.len(no)).unwrap();
        tensor!(db[O] += y[B, O]).unwrap();
        let expected = product
            .zip(&rc, |p, c| p + 2.0 * c)
            .reduce(&["B"], 0.0, |a, b| a + b)
            .map(|v| v + 1.0);
        assert_close(&db, &expected, 1e-12);
        // a scalar: the L2 distance
        let mut s = Tensor::<f64, ()>::zeros(()).unwrap();
        tensor!(s[] = (x[B, I] - {0.5}) * (x[B, I] - 0.5)).unwrap();
        let l2: f64 = rx.data.iter().map(|v| (v - 0.5) * (v - 0.5)).sum();
        assert!((s.get(()).unwrap() - l2).abs() <= 1e-9 * l2.max(1.0));
        // functions and other reductions
        let m = tensor!([B] = max[I](x[B, I]) + mean[I](exp(x[B, I] * 0.1)));
        if ni == 0 {
            // The max over an empty axis has no value.
            assert!(
                matches!(m, Err(axes::Error::EmptyReduction { .. })),
                "{m:?}"
            );
        } else {
            let rmax = rx.reduce(&["I"], f64::NEG_INFINITY, f64::max);
            let rmean = rx
                .map(|v| (v * 0.1).exp())
                .reduce(&["I"], 0.0, |a, b| a + b)
                .map(|s| s / ni as f64);
            assert_close(&m.unwrap(), &rmax.zip(&rmean, |a, b| a + b), 1e-12);
        }
        let scale = 3.0;
        let clipped = tensor!([B, I] = max(x[B, I], 0.0) * scale - relu(-x[B, I])).unwrap();
        assert_close(
            &clipped,
            &rx.map(|v| v.max(0.0) * 3.0 - (-v).max(0.0)),
            1e-12,
        );
    }
}

#[test]
fn index_notation_reports_length_mismatches() {
    let x = Tensor::<f32, (B, I)>::zeros((B.len(2), I.len(3))).unwrap();
    let w = Tensor::<f32, (I, O)>::zeros((I.len(4), O.len(1))).unwrap();
    let err = tensor!([B, O] = x[B, I] * w[I, O]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "axis `I` has length 3 in one operand and 4 in the other"
    );
}
