//! The interpreter against plain loops: types, reductions, splits, vector paths, blocks.

use super::blocks::{Isa, run_checked};
use super::*;
use crate::engine::{cost, threads};
use crate::ir::{BinaryOp, CompareOp, IrNode, UnaryOp};

/// Several element types in one program: `select(cast(a) < b, cast(a), b * 2)`.
#[test]
fn mixed_types_and_reductions() {
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    let wide = ir.push(IrNode::Cast(DType::I64, a));
    let less = ir.push(IrNode::Compare(CompareOp::Less, wide, b));
    let two = ir.push(IrNode::Scalar(2.0));
    let doubled = ir.push(IrNode::Binary(BinaryOp::Mul, b, two));
    let root = ir.push(IrNode::Select(less, wide, doubled));
    // `a` is i32, `b` i64: the select's branches are both i64.
    let program = Program::compile(&ir, &[root], &[DType::I32, DType::I64], DType::I64).unwrap();
    let (xs, ys) = ([1i32, 5, -3], [4i64, 2, -7]);
    let sources = || {
        [Elements::I32(&xs), Elements::I64(&ys)].map(|data| StridedSource {
            data,
            offset: 0,
            strides: smallvec::smallvec![1],
        })
    };
    let mut out = [0i64; 3];
    let sink = StridedSink {
        data: ElementsMut::I64(&mut out),
        offset: 0,
        strides: smallvec::smallvec![1],
        combine: None,
    };
    run(&program, &[3], &sources(), &mut [sink]).unwrap();
    assert_eq!(out, [1, 4, -14]);
    // A maximum over the one axis: stride 0 into one element that starts at the identity.
    let mut best = [i64::MIN];
    let sink = StridedSink {
        data: ElementsMut::I64(&mut best),
        offset: 0,
        strides: smallvec::smallvec![0],
        combine: Some(ReduceOp::Max),
    };
    run(&program, &[3], &sources(), &mut [sink]).unwrap();
    assert_eq!(best, [4]);
}

/// Random iteration spaces (lengths 1 to 40 over up to 4 axes) with operands that are
/// permuted, strided, reversed and broadcast, and two results — one written, one summed
/// over a random subset of the axes onto its starting values — against a plain loop over
/// every position, on 1, 2 and 3 threads. The values are small integers, so every sum is
/// exact whatever the order of additions.
#[test]
fn canonical_and_split_runs_match_a_plain_loop() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // `a * b - c` and, for the second result, the same plus 1.
    let mut ir = Ir::default();
    let (a, b, c) = (ir.leaf(), ir.leaf(), ir.leaf());
    let ab = ir.push(IrNode::Binary(BinaryOp::Mul, a, b));
    let first = ir.push(IrNode::Binary(BinaryOp::Sub, ab, c));
    let one = ir.push(IrNode::Scalar(1.0));
    let second = ir.push(IrNode::Binary(BinaryOp::Add, first, one));
    let types = [DType::F64; 3];
    let program = Program::compile(&ir, &[first, second], &types, DType::F64).unwrap();
    for case in 0..60 {
        let rank = rng.random_range(1..=4);
        let lens: Vec<usize> = (0..rank)
            .map(|_| [1, 2, 3, 7, 16, 40][rng.random_range(0..6)])
            .collect();
        let count: usize = lens.iter().product();
        // Row-major strides over a random order of the axes, some reversed, some 0.
        let layout =
            |rng: &mut rand_chacha::ChaCha8Rng, broadcast: bool| -> (usize, Vec<isize>, usize) {
                let mut order: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
                let mut strides = vec![0isize; rank];
                let mut step = 1isize;
                for &axis in order.iter().rev() {
                    if broadcast && rng.random_bool(0.3) {
                        continue;
                    }
                    strides[axis] = step * rng.random_range(1..=2i64) as isize;
                    step = strides[axis] * lens[axis] as isize;
                }
                let len = step as usize;
                let mut offset = 0;
                for (axis, stride) in strides.iter_mut().enumerate() {
                    if rng.random_bool(0.3) {
                        offset += (lens[axis] - 1) * stride.unsigned_abs();
                        *stride = -*stride;
                    }
                }
                (offset, strides, len)
            };
        let mut inputs = Vec::new();
        for _ in 0..3 {
            let (offset, strides, len) = layout(&mut rng, true);
            let values: Vec<f64> = (0..len).map(|_| rng.random_range(-9..=9) as f64).collect();
            inputs.push((values, offset, strides));
        }
        let (written_offset, written_strides, written_len) = layout(&mut rng, false);
        // The sum keeps a random subset of the axes, row-major.
        let kept: Vec<bool> = (0..rank).map(|_| rng.random_bool(0.5)).collect();
        let mut sum_strides = vec![0isize; rank];
        let mut step = 1;
        for axis in (0..rank).rev() {
            if kept[axis] {
                sum_strides[axis] = step;
                step *= lens[axis] as isize;
            }
        }
        let sum_len = step as usize;
        let start: Vec<f64> = (0..sum_len).map(|i| i as f64).collect();
        // The plain loop.
        let mut want_written = vec![0.0; written_len];
        let mut want_sum = start.clone();
        let position = |offset: usize, strides: &[isize], index: &[usize]| {
            (offset as isize
                + index
                    .iter()
                    .zip(strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()) as usize
        };
        for flat in 0..count {
            let mut index = vec![0; rank];
            let mut rest = flat;
            for axis in (0..rank).rev() {
                index[axis] = rest % lens[axis];
                rest /= lens[axis];
            }
            let v: Vec<f64> = (inputs.iter())
                .map(|(values, offset, strides)| values[position(*offset, strides, &index)])
                .collect();
            let value = v[0] * v[1] - v[2];
            want_written[position(written_offset, &written_strides, &index)] = value;
            want_sum[position(0, &sum_strides, &index)] += value + 1.0;
        }
        for threads in [1, 2, 3] {
            threads::set_threads(threads).unwrap();
            let sources: Vec<StridedSource<'_>> = (inputs.iter())
                .map(|(values, offset, strides)| StridedSource {
                    data: Elements::F64(values),
                    offset: *offset,
                    strides: strides.as_slice().into(),
                })
                .collect();
            let mut written = vec![f64::NAN; written_len];
            let mut sum = start.clone();
            let mut sinks = [
                StridedSink {
                    data: ElementsMut::F64(&mut written),
                    offset: written_offset,
                    strides: written_strides.as_slice().into(),
                    combine: None,
                },
                StridedSink {
                    data: ElementsMut::F64(&mut sum),
                    offset: 0,
                    strides: sum_strides.as_slice().into(),
                    combine: Some(ReduceOp::Sum),
                },
            ];
            run(&program, &lens, &sources, &mut sinks).unwrap();
            let context = format!("case {case}: lens {lens:?}, {threads} threads");
            // Positions the loop never wrote stay NaN in both.
            let same = |x: &f64, y: &f64| x == y || (x.is_nan() && *y == 0.0);
            assert!(
                written.iter().zip(&want_written).all(|(x, y)| same(x, y)),
                "{context}"
            );
            assert_eq!(sum, want_sum, "{context}");
        }
    }
    threads::set_threads(2).unwrap();
}

/// Short rows run several to a block: every sum is the same bits as running the rows
/// one at a time — a sum along the rows (each row into one element) and a sum across
/// them (each column into one element), over a strided, reversed operand.
#[test]
fn rows_in_one_block_sum_as_rows_one_at_a_time() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut ir = Ir::default();
    let x = ir.leaf();
    let root = ir.push(IrNode::Unary(UnaryOp::Exp, x));
    let program = Program::compile(&ir, &[root], &[DType::F32], DType::F32).unwrap();
    for (rows, cols) in [(40, 3), (9, 16), (100, 17), (5, 128)] {
        let values: Vec<f32> = (0..2 * rows * cols).map(|_| rng.random()).collect();
        // Row r, column c at 2·(rows·cols − 1 − (r·cols + c)): strided and reversed.
        let source = |offset: usize, strides: Vec<isize>| StridedSource {
            data: Elements::F32(&values),
            offset,
            strides: strides.into(),
        };
        let last = 2 * (rows * cols - 1);
        let whole = [source(last, vec![-2 * cols as isize, -2])];
        let sum = |lens: &[usize],
                   sources: &[StridedSource<'_>],
                   out: &mut [f32],
                   strides: Vec<isize>| {
            let sink = StridedSink {
                data: ElementsMut::F32(out),
                offset: 0,
                strides: strides.into(),
                combine: Some(ReduceOp::Sum),
            };
            run(&program, lens, sources, &mut [sink]).unwrap();
        };
        let (mut along, mut across) = (vec![0.0f32; rows], vec![0.0f32; cols]);
        sum(&[rows, cols], &whole, &mut along, vec![1, 0]);
        sum(&[rows, cols], &whole, &mut across, vec![0, 1]);
        let (mut want_along, mut want_across) = (vec![0.0f32; rows], vec![0.0f32; cols]);
        for r in 0..rows {
            let row = [source(last - 2 * r * cols, vec![-2])];
            sum(&[cols], &row, &mut want_along[r..=r], vec![0]);
            sum(&[cols], &row, &mut want_across, vec![1]);
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&along), bits(&want_along), "{rows}×{cols} along");
        assert_eq!(bits(&across), bits(&want_across), "{rows}×{cols} across");
    }
}

/// A run long enough to be split, whose parts each see different values: the result is
/// the same bits on every thread count, and an integer division by zero in any part is
/// an error.
#[test]
fn split_runs_are_the_same_on_every_thread_count() {
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    let e = ir.push(IrNode::Unary(UnaryOp::Exp, a));
    let root = ir.push(IrNode::Binary(BinaryOp::Div, e, b));
    let program = Program::compile(&ir, &[root], &[DType::F32; 2], DType::F32).unwrap();
    let (rows, cols) = (300, 257);
    let xs: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin()).collect();
    let ys: Vec<f32> = (0..rows * cols)
        .map(|i| 1.5 + (i as f32 * 0.11).cos())
        .collect();
    let result = |threads: usize| {
        threads::set_threads(threads).unwrap();
        let mut out = vec![0f32; rows * cols];
        let sources = [&xs, &ys].map(|v| row_major_source(Elements::F32(v), cols));
        let sink = row_major_sink(ElementsMut::F32(&mut out), cols);
        run(&program, &[rows, cols], &sources, &mut [sink]).unwrap();
        out
    };
    let one = result(1);
    assert!(
        one.iter()
            .zip(&xs)
            .zip(&ys)
            .all(|((&o, &x), &y)| { ((o - x.exp() / y) / o).abs() < 1e-6 })
    );
    assert!(one == result(2) && one == result(3));
    // An integer division by zero in the last part only.
    let program = Program::compile(&ir_div(), &[2], &[DType::I32; 2], DType::I32).unwrap();
    let mut divisors = vec![3i32; rows * cols];
    divisors[rows * cols - 1] = 0;
    let dividends = vec![7i32; rows * cols];
    for threads in [1, 2, 3] {
        threads::set_threads(threads).unwrap();
        let mut out = vec![0i32; rows * cols];
        let sources = [&dividends, &divisors].map(|v| row_major_source(Elements::I32(v), cols));
        let sink = row_major_sink(ElementsMut::I32(&mut out), cols);
        let err = run(&program, &[rows, cols], &sources, &mut [sink]).unwrap_err();
        assert!(
            matches!(err, Error::DivisionByZero),
            "{threads} threads: {err}"
        );
    }
    threads::set_threads(2).unwrap();
}

/// A bf16 sum over 4,096 rows into a strided view of a larger buffer (every other
/// element, from the third, running backwards): combined in f32 and rounded once, exact;
/// the elements the view skips are untouched.
#[test]
fn half_sums_into_a_strided_view_combine_in_f32() {
    let mut ir = Ir::default();
    let x = ir.leaf();
    let scale = ir.push(IrNode::Scalar(0.25));
    let quarter = ir.push(IrNode::Binary(BinaryOp::Mul, x, scale));
    let (rows, cols) = (4096, 3);
    let program = Program::compile(&ir, &[quarter], &[DType::BF16], DType::BF16).unwrap();
    let ones = vec![bf16::ONE; rows * cols];
    let source = row_major_source(Elements::BF16(&ones), cols);
    let mut data = vec![bf16::from_f32(8.0); 10];
    let mut sinks = [StridedSink {
        data: ElementsMut::BF16(&mut data),
        offset: 6,
        strides: smallvec::smallvec![0, -2],
        combine: Some(ReduceOp::Sum),
    }];
    run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
    let got: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
    // 8 + 4096 × 0.25 at 6, 4 and 2; 8 elsewhere.
    assert_eq!(got, [8., 8., 1032., 8., 1032., 8., 1032., 8., 8., 8.]);
}

/// A bias's gradient (a sum over 4,096 rows) is cut into the same partial sums whether
/// its program is cheap enough to run on one thread or costly enough to split: the sums
/// are the same bits either way, whatever the cost model says.
#[test]
fn outer_sums_do_not_depend_on_the_cost_of_their_program() {
    let (rows, cols) = (4096, 128);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 97) as f32))
        .collect();
    let sum_of = |ones: usize| {
        let mut ir = Ir::default();
        let mut x = ir.leaf();
        let one = ir.push(IrNode::Scalar(1.0));
        for _ in 0..ones {
            x = ir.push(IrNode::Binary(BinaryOp::Mul, x, one));
        }
        let program = Program::compile(&ir, &[x], &[DType::F32], DType::F32).unwrap();
        let pays = cost::INTERPRETED.pays(cost::interpreted_ns(rows * cols, program.insts.len()));
        let mut sums = vec![0f32; cols];
        let mut sinks = [StridedSink {
            data: ElementsMut::F32(&mut sums),
            offset: 0,
            strides: smallvec::smallvec![0, 1],
            combine: Some(ReduceOp::Sum),
        }];
        let source = row_major_source(Elements::F32(&xs), cols);
        run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
        (pays, sums)
    };
    for threads in [1, 2] {
        threads::set_threads(threads).unwrap();
        let (cheap_pays, cheap) = sum_of(0);
        let (costly_pays, costly) = sum_of(4);
        assert!(
            !cheap_pays && costly_pays,
            "the two programs meet the cost model"
        );
        assert_eq!(cheap, costly, "{threads} threads");
        for (c, &sum) in cheap.iter().enumerate() {
            let exact: f64 = (0..rows).map(|r| xs[r * cols + c] as f64).sum();
            let scale: f64 = (0..rows).map(|r| xs[r * cols + c].abs() as f64).sum();
            assert!((sum as f64 - exact).abs() <= 1e-5 * scale, "column {c}");
        }
    }
    threads::set_threads(2).unwrap();
}

/// Sums and maxima over the outermost axis (a bias's gradient), beside a result that
/// keeps it: the run is cut into partial results combined in a fixed order, so the
/// values match a plain loop (exact on integer values) and are the same bits on every
/// thread count (on float values).
#[test]
fn outer_reductions_combine_partials_in_a_fixed_order() {
    let mut ir = Ir::default();
    let x = ir.leaf();
    let two = ir.push(IrNode::Scalar(2.0));
    let doubled = ir.push(IrNode::Binary(BinaryOp::Mul, x, two));
    let e = ir.push(IrNode::Unary(UnaryOp::Exp, x));
    let (rows, cols) = (300, 200);
    let run_with = |xs: &[f64], root: usize, threads: usize| {
        threads::set_threads(threads).unwrap();
        let program =
            Program::compile(&ir, &[doubled, root, root], &[DType::F64], DType::F64).unwrap();
        let (mut written, mut sums, mut maxima) = (
            vec![0.0; rows * cols],
            vec![1.0; cols],
            vec![f64::MIN; cols],
        );
        let source = row_major_source(Elements::F64(xs), cols);
        let over_rows = |data, combine| StridedSink {
            data,
            offset: 0,
            strides: smallvec::smallvec![0, 1],
            combine: Some(combine),
        };
        let mut sinks = [
            row_major_sink(ElementsMut::F64(&mut written), cols),
            over_rows(ElementsMut::F64(&mut sums), ReduceOp::Sum),
            over_rows(ElementsMut::F64(&mut maxima), ReduceOp::Max),
        ];
        run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
        (written, sums, maxima)
    };
    let ints: Vec<f64> = (0..rows * cols)
        .map(|i| ((i * 37) % 19) as f64 - 9.0)
        .collect();
    let (written, sums, maxima) = run_with(&ints, x, 2);
    assert!(written.iter().zip(&ints).all(|(w, x)| *w == 2.0 * x));
    for c in 0..cols {
        let column = (0..rows).map(|r| ints[r * cols + c]);
        assert_eq!(sums[c], 1.0 + column.clone().sum::<f64>(), "column {c}");
        assert_eq!(maxima[c], column.fold(f64::MIN, f64::max), "column {c}");
    }
    let floats: Vec<f64> = (0..rows * cols).map(|i| (i as f64 * 0.37).sin()).collect();
    let one = run_with(&floats, e, 1);
    assert!(one == run_with(&floats, e, 2) && one == run_with(&floats, e, 3));
    threads::set_threads(2).unwrap();
}

/// The math functions and an inner sum on every vector path: each path this CPU has
/// gives the bits of the baseline path; a path it lacks prints SKIPPED.
#[test]
fn every_vector_path_gives_the_same_bits() {
    let mut ir = Ir::default();
    let x = ir.leaf();
    let mut total = ir.push(IrNode::Unary(UnaryOp::Exp, x));
    for op in [UnaryOp::Ln, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Gelu] {
        let y = ir.push(IrNode::Unary(op, x));
        total = ir.push(IrNode::Binary(BinaryOp::Add, total, y));
    }
    let program = Program::compile(&ir, &[total, total], &[DType::F32], DType::F32).unwrap();
    let (rows, cols) = (40, 1000);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| 1e-3 + 12.0 * (i as f32 * 0.731).sin().abs())
        .collect();
    let on = |isa: Isa| {
        let source = row_major_source(Elements::F32(&xs), cols);
        let (mut values, mut sums) = (vec![0f32; rows * cols], vec![0f32; rows]);
        let mut sinks = [
            row_major_sink(ElementsMut::F32(&mut values), cols),
            StridedSink {
                data: ElementsMut::F32(&mut sums),
                offset: 0,
                strides: smallvec::smallvec![1, 0],
                combine: Some(ReduceOp::Sum),
            },
        ];
        run_checked(isa, &program, &[rows, cols], &[source], &mut sinks);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        (bits(&values), bits(&sums))
    };
    let baseline = on(Isa::Baseline);
    for &isa in Isa::ALL {
        if !isa.available() {
            println!("{isa:?}: SKIPPED (this CPU lacks it)");
            continue;
        }
        assert!(on(isa) == baseline, "{isa:?} differs from the baseline");
        println!("{isa:?}: ran, the same bits as the baseline");
    }
}

/// A source over `rows × cols` elements stored row-major.
fn row_major_source(data: Elements<'_>, cols: usize) -> StridedSource<'_> {
    StridedSource {
        data,
        offset: 0,
        strides: smallvec::smallvec![cols as isize, 1],
    }
}

/// A sink written over `rows × cols` elements stored row-major.
fn row_major_sink(data: ElementsMut<'_>, cols: usize) -> StridedSink<'_> {
    StridedSink {
        data,
        offset: 0,
        strides: smallvec::smallvec![cols as isize, 1],
        combine: None,
    }
}

/// `a / b`.
fn ir_div() -> Ir {
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    ir.push(IrNode::Binary(BinaryOp::Div, a, b));
    ir
}

#[test]
fn float_only_ops_on_integers_and_mismatched_buffers_are_errors() {
    let mut ir = Ir::default();
    let a = ir.leaf();
    let root = ir.push(IrNode::Unary(UnaryOp::Exp, a));
    let err = Program::compile(&ir, &[root], &[DType::I32], DType::I32).unwrap_err();
    assert!(err.to_string().contains("`exp` on i32"), "{err}");
    let program = Program::compile(&ir, &[root], &[DType::F32], DType::F32).unwrap();
    // Runs the program on one source over `len` elements into one f32.
    let run_on = |source: Elements<'_>, len: usize| {
        let mut out = [0f32];
        let source = StridedSource {
            data: source,
            offset: 0,
            strides: smallvec::smallvec![1],
        };
        let sink = StridedSink {
            data: ElementsMut::F32(&mut out),
            offset: 0,
            strides: smallvec::smallvec![1],
            combine: None,
        };
        run(&program, &[len], &[source], &mut [sink]).map(|()| out)
    };
    let err = run_on(Elements::F64(&[0.0]), 1).unwrap_err();
    assert!(
        err.to_string()
            .contains("leaf 0 of type f32 given a source of type f64"),
        "{err}"
    );
    assert_eq!(run_on(Elements::F32(&[0.0]), 1).unwrap(), [1.0]);
    let err = run_on(Elements::F32(&[0.0]), 2).unwrap_err();
    assert!(err.to_string().contains("leaves its buffer"), "{err}");
}
