//! Writable views (`slice_mut`, `index_mut`): `fill`, `assign` and `add_sum` through a
//! slice (any step, backwards too) or one position of any axis write exactly those elements
//! of the tensor, on random lengths and parents laid out in every axis order or strided;
//! copies taken before are untouched, and an expression may read the tensor's old values.

use axes::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
struct P;
#[derive(Axis)]
struct Q;
#[derive(Axis)]
struct R;
#[derive(Axis)]
struct S;

type Xyz = Tensor<f64, (P, Q, R)>;

/// The reference: values row-major over (P, Q, R).
struct Plain {
    lens: [usize; 3],
    values: Vec<f64>,
}

impl Plain {
    fn at(&self, i: [usize; 3]) -> f64 {
        self.values[(i[0] * self.lens[1] + i[1]) * self.lens[2] + i[2]]
    }

    /// Sets every element whose coordinate along `axis` is one of `along` (view coordinate
    /// `k` at `along[k]`) to `f(view coordinates over (P, Q, R), old value)`; a `keep` of
    /// false drops the axis from the view coordinates (an index, not a slice).
    fn update(&mut self, axis: usize, along: &[usize], f: impl Fn([usize; 3], f64) -> f64) {
        for p in 0..self.lens[0] {
            for q in 0..self.lens[1] {
                for r in 0..self.lens[2] {
                    let mut at = [p, q, r];
                    let Some(k) = along.iter().position(|&x| x == at[axis]) else {
                        continue;
                    };
                    let old = self.at(at);
                    let flat = (p * self.lens[1] + q) * self.lens[2] + r;
                    at[axis] = k;
                    self.values[flat] = f(at, old);
                }
            }
        }
    }
}

/// The positions `Tensor::slice(start..end, step)` covers, in view order.
fn positions(start: usize, end: usize, step: isize) -> Vec<usize> {
    let all: Vec<usize> = (start..end).collect();
    if step > 0 {
        all.into_iter().step_by(step as usize).collect()
    } else {
        all.into_iter().rev().step_by((-step) as usize).collect()
    }
}

/// A random parent over (P, Q, R) and its reference: stored in a random axis order, or a
/// strided slice of a larger tensor.
fn parent(rng: &mut ChaCha8Rng) -> (Xyz, Plain) {
    let lens = [0; 3].map(|_| rng.random_range(1..6));
    let value = |p: usize, q: usize, r: usize| (p * 100 + q * 10 + r) as f64 + 0.5;
    let x = match rng.random_range(0..3) {
        0 => Xyz::from_fn((P.len(lens[0]), Q.len(lens[1]), R.len(lens[2])), |ix| {
            value(ix.of::<P>(), ix.of::<Q>(), ix.of::<R>())
        })
        .unwrap(),
        1 => Tensor::<f64, (R, P, Q)>::from_fn(
            (P.len(lens[0]), Q.len(lens[1]), R.len(lens[2])),
            |ix| value(ix.of::<P>(), ix.of::<Q>(), ix.of::<R>()),
        )
        .unwrap()
        .axes_with_order(),
        _ => Xyz::from_fn((P.len(2 * lens[0]), Q.len(lens[1]), R.len(lens[2])), |ix| {
            value(ix.of::<P>() / 2, ix.of::<Q>(), ix.of::<R>())
        })
        .unwrap()
        .slice::<P>(.., 2)
        .unwrap(),
    };
    let mut values = Vec::new();
    for p in 0..lens[0] {
        for q in 0..lens[1] {
            for r in 0..lens[2] {
                values.push(value(p, q, r));
            }
        }
    }
    (x, Plain { lens, values })
}

/// One random write through a slice of axis `$X` (position `$a` of (P, Q, R)).
macro_rules! slice_case {
    ($rng:expr, $x:expr, $plain:expr, $X:ident, $a:expr) => {{
        let len = $plain.lens[$a];
        let start = $rng.random_range(0..len);
        let end = $rng.random_range(start + 1..=len);
        let step = [1isize, 2, -1, -2][$rng.random_range(0..4)];
        let along = positions(start, end, step);
        let mut view = $x.slice_mut::<$X>(start..end, step).unwrap();
        let vl = view.lens().to_vec();
        let lengths = (P.len(vl[0]), Q.len(vl[1]), R.len(vl[2]));
        let new = |i: [usize; 3]| (i[0] * 7 + i[1] * 3 + i[2]) as f64 - 20.0;
        match $rng.random_range(0..3) {
            0 => {
                view.fill(-1.0).unwrap();
                $plain.update($a, &along, |_, _| -1.0);
            }
            1 => {
                let values = Tensor::<f64, (R, Q, P)>::from_fn(lengths, |ix| {
                    new([ix.of::<P>(), ix.of::<Q>(), ix.of::<R>()])
                })
                .unwrap();
                view.assign(&values * 1.0).unwrap();
                $plain.update($a, &along, |i, _| new(i));
            }
            _ => {
                let extra = Tensor::<f64, (S, P, Q, R)>::from_fn(
                    (S.len(2), P.len(vl[0]), Q.len(vl[1]), R.len(vl[2])),
                    |ix| {
                        new([ix.of::<P>(), ix.of::<Q>(), ix.of::<R>()]) * (ix.of::<S>() + 1) as f64
                    },
                )
                .unwrap();
                view.add_sum::<(S,), _>(&extra).unwrap();
                $plain.update($a, &along, |i, old| old + 3.0 * new(i));
            }
        }
    }};
}

/// One random write through position `i` of axis `$X`, the view keeping `($Y, $Z)`.
macro_rules! index_case {
    ($rng:expr, $x:expr, $plain:expr, $X:ident, $a:expr, $Y:ident, $Z:ident) => {{
        let i = $rng.random_range(0..$plain.lens[$a]);
        let mut view = $x.index_mut($X.at(i)).unwrap();
        let vl = view.lens().to_vec();
        let new = |y: usize, z: usize| (y * 5 + z) as f64 + 0.25;
        if $rng.random_bool(0.5) {
            view.fill(9.0).unwrap();
            $plain.update($a, &[i], |_, _| 9.0);
        } else {
            let values = Tensor::<f64, ($Z, $Y)>::from_fn(($Y.len(vl[0]), $Z.len(vl[1])), |ix| {
                new(ix.of::<$Y>(), ix.of::<$Z>())
            })
            .unwrap();
            view.assign(&values).unwrap();
            // The view's coordinates are (P, Q, R) less the indexed axis.
            $plain.update($a, &[i], |c, _| {
                let rest: Vec<usize> = (0..3).filter(|&k| k != $a).map(|k| c[k]).collect();
                new(rest[0], rest[1])
            });
        }
    }};
}

fn check(x: &Xyz, plain: &Plain, what: &str) {
    let got = x.to_vec();
    assert_eq!(got, plain.values, "{what}");
}

#[test]
fn writes_through_slices_and_indices_match_a_plain_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    for case in 0..300 {
        let (mut x, mut plain) = parent(&mut rng);
        let before = x.clone();
        let kept = before.to_vec();
        for _ in 0..3 {
            match rng.random_range(0..6) {
                0 => slice_case!(rng, x, plain, P, 0),
                1 => slice_case!(rng, x, plain, Q, 1),
                2 => slice_case!(rng, x, plain, R, 2),
                3 => index_case!(rng, x, plain, P, 0, Q, R),
                4 => index_case!(rng, x, plain, Q, 1, P, R),
                _ => index_case!(rng, x, plain, R, 2, P, Q),
            }
            check(&x, &plain, &format!("case {case}"));
        }
        assert_eq!(
            before.to_vec(),
            kept,
            "case {case}: a copy taken before changed"
        );
    }
}

#[test]
fn an_expression_reads_the_old_values_of_the_tensor_it_writes() {
    // x[1:] = x[:-1] (a shift), read from a copy taken before the write.
    let mut x = Tensor::<f32, (P,)>::from_vec(P.len(5), vec![1., 2., 3., 4., 5.]).unwrap();
    let old = x.clone();
    x.slice_mut::<P>(1..5, 1)
        .unwrap()
        .assign(&old.slice::<P>(0..4, 1).unwrap())
        .unwrap();
    assert_eq!(x.to_vec(), [1., 1., 2., 3., 4.]);
    assert_eq!(old.to_vec(), [1., 2., 3., 4., 5.]);
    // Narrowing a view, and a broadcast parent written out first.
    let mut grid = Tensor::<f32, (P,)>::from_vec(P.len(2), vec![1., 2.])
        .unwrap()
        .broadcast::<(P, Q)>(Q.len(3))
        .unwrap();
    let mut column = grid.index_mut(Q.at(2)).unwrap();
    column.slice_mut::<P>(1..2, 1).unwrap().fill(0.0).unwrap();
    assert_eq!(grid.to_vec(), [1., 1., 1., 2., 2., 0.]);
}

#[test]
fn bad_regions_are_errors_naming_the_axis() {
    let mut x = Tensor::<f32, (P, Q)>::zeros((P.len(2), Q.len(3))).unwrap();
    let error = x.slice_mut::<Q>(1..5, 1).unwrap_err().to_string();
    assert!(error.contains("`Q`") && error.contains('3'), "{error}");
    let error = x.index_mut(P.at(2)).unwrap_err().to_string();
    assert!(error.contains("`P`"), "{error}");
    let mut view = x.slice_mut::<Q>(0..2, 1).unwrap();
    let wrong = Tensor::<f32, (P, Q)>::zeros((P.len(2), Q.len(3))).unwrap();
    let error = view.assign(&wrong).unwrap_err().to_string();
    assert!(error.contains("`Q`"), "{error}");
}
