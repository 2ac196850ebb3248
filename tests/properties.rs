//! Property tests: random lengths (0 to 9), storage orders, and chains of sliced, reversed,
//! strided and padded views of (I, J, K) tensors, in several element types, against the plain
//! reference in `common` (index loops, f64). Each property runs 256 cases (proptest shrinks a
//! failure to a small readable case: lengths, storage order and view chain are printed).

use axes::prelude::*;
use half::f16;
use proptest::prelude::*;

mod common;
use common::{Ref, assert_close};

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct L;

/// One view step applied to an (I, J, K) tensor.
#[derive(Clone, Debug)]
enum Step {
    /// `slice::<axis>(start..end, step)` with start/end as fractions of the length.
    Slice {
        axis: usize,
        from: u8,
        to: u8,
        step: i8,
    },
    /// `pad::<axis>(before, after)`.
    Pad {
        axis: usize,
        before: usize,
        after: usize,
    },
}

/// How to build one (I, J, K) operand.
#[derive(Clone, Debug)]
struct ViewSpec {
    lens: [usize; 3],
    /// Storage order: a permutation of (I, J, K).
    order: [usize; 3],
    seed: u64,
    steps: Vec<Step>,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            0..3usize,
            0..=8u8,
            0..=8u8,
            prop_oneof![Just(1i8), Just(2), Just(3), Just(-1), Just(-2)]
        )
            .prop_map(|(axis, a, b, step)| Step::Slice {
                axis,
                from: a.min(b),
                to: a.max(b),
                step
            }),
        (0..3usize, 0..3usize, 0..3usize).prop_map(|(axis, before, after)| Step::Pad {
            axis,
            before,
            after
        }),
    ]
}

fn view_spec() -> impl Strategy<Value = ViewSpec> {
    let orders = prop_oneof![
        Just([0, 1, 2]),
        Just([0, 2, 1]),
        Just([1, 0, 2]),
        Just([1, 2, 0]),
        Just([2, 0, 1]),
        Just([2, 1, 0])
    ];
    (
        [0..=9usize, 0..=9usize, 0..=9usize],
        orders,
        any::<u64>(),
        prop::collection::vec(step(), 0..3),
    )
        .prop_map(|(lens, order, seed, steps)| ViewSpec {
            lens,
            order,
            seed,
            steps,
        })
}

const NAMES: [&str; 3] = ["I", "J", "K"];

/// Builds the tensor and its reference from a spec.
fn build(spec: &ViewSpec) -> (Tensor<f64, (I, J, K)>, Ref) {
    let stored_names: Vec<&str> = spec.order.iter().map(|&a| NAMES[a]).collect();
    let stored_lens: Vec<usize> = spec.order.iter().map(|&a| spec.lens[a]).collect();
    let count: usize = stored_lens.iter().product();
    let data: Vec<f64> = (0..count)
        .map(|k| ((k as u64 * 2654435761 + spec.seed) % 19) as f64 - 9.0)
        .collect();
    let mut r = Ref {
        names: stored_names.iter().map(|s| s.to_string()).collect(),
        lens: stored_lens.clone(),
        data: data.clone(),
    };
    let lens = |axis: usize| stored_lens[spec.order.iter().position(|&a| a == axis).unwrap()];
    let mut t: Tensor<f64, (I, J, K)> = match spec.order {
        [0, 1, 2] => Tensor::<f64, (I, J, K)>::from_vec(
            (I.len(lens(0)), J.len(lens(1)), K.len(lens(2))),
            data,
        ),
        [0, 2, 1] => Tensor::<f64, (I, J, K)>::from_vec(
            (I.len(lens(0)), K.len(lens(2)), J.len(lens(1))),
            data,
        ),
        [1, 0, 2] => Tensor::<f64, (I, J, K)>::from_vec(
            (J.len(lens(1)), I.len(lens(0)), K.len(lens(2))),
            data,
        ),
        [1, 2, 0] => Tensor::<f64, (I, J, K)>::from_vec(
            (J.len(lens(1)), K.len(lens(2)), I.len(lens(0))),
            data,
        ),
        [2, 0, 1] => Tensor::<f64, (I, J, K)>::from_vec(
            (K.len(lens(2)), I.len(lens(0)), J.len(lens(1))),
            data,
        ),
        _ => Tensor::<f64, (I, J, K)>::from_vec(
            (K.len(lens(2)), J.len(lens(1)), I.len(lens(0))),
            data,
        ),
    }
    .unwrap();
    for step in &spec.steps {
        match *step {
            Step::Slice {
                axis,
                from,
                to,
                step,
            } => {
                let len = r.lens[r.axis(NAMES[axis])];
                let (start, end) = (len * from as usize / 8, len * to as usize / 8);
                t = match axis {
                    0 => t.slice::<I>(start..end, step as isize),
                    1 => t.slice::<J>(start..end, step as isize),
                    _ => t.slice::<K>(start..end, step as isize),
                }
                .unwrap();
                r = r.slice(NAMES[axis], start, end, step as isize);
            }
            Step::Pad {
                axis,
                before,
                after,
            } => {
                t = match axis {
                    0 => t.pad::<I>(before, after),
                    1 => t.pad::<J>(before, after),
                    _ => t.pad::<K>(before, after),
                }
                .unwrap();
                r = r.pad(NAMES[axis], before, after);
            }
        }
    }
    (t, r)
}

/// A second operand over (K, L) whose K matches `r`'s.
fn kl(r: &Ref, l: usize, seed: u64) -> (Tensor<f64, (K, L)>, Ref) {
    let k = r.lens[r.axis("K")];
    let data: Vec<f64> = (0..k * l)
        .map(|i| ((i as u64 * 40503 + seed) % 7) as f64 - 3.0)
        .collect();
    let rr = Ref {
        names: vec!["K".into(), "L".into()],
        lens: vec![k, l],
        data: data.clone(),
    };
    (Tensor::from_vec((K.len(k), L.len(l)), data).unwrap(), rr)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn view_chains_match_the_reference(spec in view_spec()) {
        let (t, r) = build(&spec);
        assert_close(&t, &r, 0.0);
        // reading back through a contiguous copy and an ndarray view agrees
        assert_close(&t.contiguous().unwrap(), &r, 0.0);
    }

    #[test]
    fn elementwise_ops_match_the_reference(spec in view_spec(), other in view_spec(), op in 0..8usize) {
        let (x, rx) = build(&spec);
        // a second operand over (K,) with the same K length, broadcast by name
        let k = rx.lens[rx.axis("K")];
        let ry = Ref { names: vec!["K".into()], lens: vec![k], data: (0..k).map(|i| (i as f64 + other.seed as f64 % 5.0) - 2.0).collect() };
        let y = Tensor::<f64, (K,)>::from_vec(K.len(k), ry.data.clone()).unwrap();
        let (got, want): (Tensor<f64, (I, J, K)>, Ref) = match op {
            0 => ((&x + &y).eval().unwrap(), rx.zip(&ry, |a, b| a + b)),
            1 => ((&x - &y).eval().unwrap(), rx.zip(&ry, |a, b| a - b)),
            2 => ((&x * &y).eval().unwrap(), rx.zip(&ry, |a, b| a * b)),
            3 => ((&x).max(&y).eval().unwrap(), rx.zip(&ry, f64::max)),
            4 => ((x.tanh() * 2.0).eval().unwrap(), rx.map(|a| a.tanh() * 2.0)),
            5 => ((x.square() - &y).abs().eval().unwrap(), rx.zip(&ry, |a, b| (a * a - b).abs())),
            6 => (select((&x).greater(&y), &x, &y).eval().unwrap(), rx.zip(&ry, |a, b| if a > b { a } else { b })),
            _ => ((x.exp() * 0.5).eval().unwrap(), rx.map(|a| a.exp() * 0.5)),
        };
        assert_close(&got, &want, 1e-12);
    }

    #[test]
    fn reductions_match_the_reference(spec in view_spec(), which in 0..6usize) {
        let (x, r) = build(&spec);
        match which {
            0 => assert_close(&x.sum::<(J,)>().unwrap(), &r.reduce(&["J"], 0.0, |a, b| a + b), 1e-12),
            1 => assert_close(&x.sum::<(I, K)>().unwrap(), &r.reduce(&["I", "K"], 0.0, |a, b| a + b), 1e-12),
            // The max and min over an empty axis are errors, not the identity.
            2 if x.len_of::<K>() == 0 => prop_assert!(matches!(x.max_over::<(K,)>(), Err(axes::Error::EmptyReduction { .. })), "max over an empty axis"),
            3 if x.len_of::<I>() == 0 => prop_assert!(matches!(x.min_over::<(I,)>(), Err(axes::Error::EmptyReduction { .. })), "min over an empty axis"),
            2 => assert_close(&x.max_over::<(K,)>().unwrap(), &r.reduce(&["K"], f64::NEG_INFINITY, f64::max), 0.0),
            3 => assert_close(&x.min_over::<(I,)>().unwrap(), &r.reduce(&["I"], f64::INFINITY, f64::min), 0.0),
            4 => assert_close(&x.prod::<(J, K)>().unwrap(), &r.reduce(&["J", "K"], 1.0, |a, b| a * b), 1e-12),
            _ => {
                let total: f64 = r.data.iter().sum();
                prop_assert!((x.sum_all().unwrap() - total).abs() <= 1e-9 * total.abs().max(1.0));
            }
        }
    }

    #[test]
    fn contractions_match_the_reference(spec in view_spec(), l in 0..5usize, seed in any::<u64>()) {
        let (x, r) = build(&spec);
        let (w, rw) = kl(&r, l, seed);
        let z: Tensor<f64, (I, J, L)> = dot(&x, &w).unwrap();
        assert_close(&z, &r.zip(&rw, |a, b| a * b).reduce(&["K"], 0.0, |a, b| a + b), 1e-12);
    }

    #[test]
    fn conversions_between_element_types(spec in view_spec()) {
        let (x, r) = build(&spec);
        let as_f32: Tensor<f32, (I, J, K)> = x.cast::<f32>().eval().unwrap();
        let as_i32: Tensor<i32, (I, J, K)> = x.cast::<i32>().eval().unwrap();
        let as_f16: Tensor<f16, (I, J, K)> = x.cast::<f16>().eval().unwrap();
        assert_close(&as_f32, &r, 0.0);
        assert_close(&as_i32, &r, 0.0);
        assert_close(&as_f16, &r, 0.0);
        // integer arithmetic on the converted tensor
        assert_close(&(&as_i32 * 3 - 1).eval().unwrap(), &r.map(|v| v * 3.0 - 1.0), 0.0);
        assert_close(&as_i32.sum::<(I,)>().unwrap(), &r.reduce(&["I"], 0.0, |a, b| a + b), 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Large lengths take the parallel and blocked paths of the executor.
    #[test]
    fn large_reductions_and_expressions(rows in 1..4usize, cols in 40_000..140_000usize, reversed in any::<bool>()) {
        let data: Vec<f64> = (0..rows * cols).map(|k| (k % 13) as f64 - 6.0).collect();
        let mut r = Ref { names: vec!["I".into(), "J".into()], lens: vec![rows, cols], data: data.clone() };
        let mut x = Tensor::<f64, (I, J)>::from_vec((I.len(rows), J.len(cols)), data).unwrap();
        if reversed {
            x = x.slice::<J>(.., -1).unwrap();
            r = r.slice("J", 0, cols, -1);
        }
        for threads in [1, 2] {
            axes::set_threads(threads).unwrap();
            assert_close(&x.sum::<(J,)>().unwrap(), &r.reduce(&["J"], 0.0, |a, b| a + b), 0.0);
            assert_close(&x.sum::<(I,)>().unwrap(), &r.reduce(&["I"], 0.0, |a, b| a + b), 0.0);
            assert_close(&(&x * 2.0 - 1.0).eval().unwrap(), &r.map(|v| v * 2.0 - 1.0), 0.0);
        }
    }
}
