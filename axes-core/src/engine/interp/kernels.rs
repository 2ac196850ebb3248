//! Each instruction over one block: gathers, arithmetic, comparisons, selections, casts and the
//! writes (and reductions) into a sink.

use super::{StridedSink, Values, with_values};
use crate::element::with_elements;
use crate::element::{Element, Elements, ElementsMut, narrow_from_f32, widen_to_f32};
use crate::ir::reduce::{MaxOp, MinOp, ProdOp, SumOp};
use crate::ir::{BinaryOp, CompareOp, ReduceFn, ReduceOp, UnaryOp};
use crate::num::Num;

#[inline]
pub(super) fn fill<T: Element>(out: &mut [T], v: f64) {
    out.fill(T::from_f64(v));
}

/// `out[at + j] = data[first + j * stride]` for `j < n`; `run` checked the positions and
/// types.
#[inline]
pub(super) fn gather(
    out: &mut Values,
    at: usize,
    data: Elements<'_>,
    first: isize,
    stride: isize,
    n: usize,
) {
    fn typed<T: Element>(out: &mut [T], data: &[T], first: isize, stride: isize) {
        let first = first as usize;
        match stride {
            0 => out.fill(data[first]),
            1 => out.copy_from_slice(&data[first..first + out.len()]),
            _ => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = data[(first as isize + j as isize * stride) as usize];
                }
            }
        }
    }
    match (out, data) {
        (Values::F32(o), Elements::F32(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::F64(o), Elements::F64(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::F16(o), Elements::F16(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::BF16(o), Elements::BF16(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::I32(o), Elements::I32(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::I64(o), Elements::I64(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::U8(o), Elements::U8(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::Bool(o), Elements::Bool(d)) => typed(&mut o[at..at + n], d, first, stride),
        _ => unreachable!("`run` checked each source's type"),
    }
}

#[inline(always)]
pub(super) fn unary(op: UnaryOp, out: &mut Values, a: Elements<'_>, n: usize) {
    match (out, a) {
        (Values::F32(o), Elements::F32(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::F64(o), Elements::F64(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::F16(o), Elements::F16(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::BF16(o), Elements::BF16(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::I32(o), Elements::I32(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        (Values::I64(o), Elements::I64(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        (Values::U8(o), Elements::U8(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        _ => unreachable!("the compiler typed the operation"),
    }
}

#[inline(always)]
pub(super) fn binary(op: BinaryOp, out: &mut Values, a: Elements<'_>, b: Elements<'_>, n: usize) {
    match (out, a, b) {
        (Values::F32(o), Elements::F32(x), Elements::F32(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::F64(o), Elements::F64(x), Elements::F64(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::F16(o), Elements::F16(x), Elements::F16(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::BF16(o), Elements::BF16(x), Elements::BF16(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::I32(o), Elements::I32(x), Elements::I32(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::I64(o), Elements::I64(x), Elements::I64(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::U8(o), Elements::U8(x), Elements::U8(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        _ => unreachable!("the compiler typed the operation"),
    }
}

/// An op ran: the compiler rejects ops outside their domain (float-only ops on integers,
/// bitwise ops on floats), and a skipped op would leave a reused register's old values in
/// place.
fn expect_ran(ran: bool) {
    assert!(ran, "an op on elements outside its domain");
}

#[inline]
pub(super) fn compare(op: CompareOp, out: &mut Values, a: Elements<'_>, b: Elements<'_>, n: usize) {
    fn typed<T: Element>(op: CompareOp, out: &mut [bool], a: &[T], b: &[T]) {
        op.apply_all(out, a, b);
    }
    let Values::Bool(o) = out else {
        unreachable!("a comparison gives bool")
    };
    let o = &mut o[..n];
    match (a, b) {
        (Elements::F32(x), Elements::F32(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::F64(x), Elements::F64(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::F16(x), Elements::F16(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::BF16(x), Elements::BF16(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::I32(x), Elements::I32(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::I64(x), Elements::I64(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::U8(x), Elements::U8(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::Bool(x), Elements::Bool(y)) => typed(op, o, &x[..n], &y[..n]),
        _ => unreachable!("the compiler typed the comparison"),
    }
}

#[inline]
pub(super) fn select(
    out: &mut Values,
    c: Elements<'_>,
    a: Elements<'_>,
    b: Elements<'_>,
    n: usize,
) {
    fn typed<T: Element>(out: &mut [T], c: Elements<'_>, a: &[T], b: &[T]) {
        fn each<C: Element, T: Element>(out: &mut [T], c: &[C], a: &[T], b: &[T]) {
            for (((o, &c), &x), &y) in out.iter_mut().zip(c).zip(a).zip(b) {
                *o = if c != C::zero() { x } else { y };
            }
        }
        with_elements!(c, v => each(out, v, a, b))
    }
    match (out, a, b) {
        (Values::F32(o), Elements::F32(x), Elements::F32(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::F64(o), Elements::F64(x), Elements::F64(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::F16(o), Elements::F16(x), Elements::F16(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::BF16(o), Elements::BF16(x), Elements::BF16(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::I32(o), Elements::I32(x), Elements::I32(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::I64(o), Elements::I64(x), Elements::I64(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::U8(o), Elements::U8(x), Elements::U8(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::Bool(o), Elements::Bool(x), Elements::Bool(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        _ => unreachable!("the compiler typed the selection"),
    }
}

#[inline]
pub(super) fn cast(out: &mut Values, a: Elements<'_>, n: usize) {
    fn typed<U: Element>(out: &mut [U], a: Elements<'_>) {
        fn each<T: Element, U: Element>(out: &mut [U], a: &[T]) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = x.cast::<U>();
            }
        }
        with_elements!(a, v => each(out, v))
    }
    // Half types to and from f32 many at a time: the same values as one by one.
    match (out, a) {
        (Values::F32(o), Elements::F16(x)) => widen_to_f32(&x[..n], &mut o[..n]),
        (Values::F32(o), Elements::BF16(x)) => widen_to_f32(&x[..n], &mut o[..n]),
        (Values::F16(o), Elements::F32(x)) => narrow_from_f32(&x[..n], &mut o[..n]),
        (Values::BF16(o), Elements::F32(x)) => narrow_from_f32(&x[..n], &mut o[..n]),
        (out, a) => with_values!(out, o => typed(&mut o[..n], a)),
    }
}

/// Writes or combines the first `n` values of `block` at `first + j * stride`.
#[inline(always)]
pub(super) fn scatter(
    sink: &mut StridedSink<'_>,
    first: isize,
    stride: isize,
    block: Elements<'_>,
    n: usize,
) {
    #[inline(always)]
    fn overwrite<T: Element>(data: &mut [T], first: isize, stride: isize, values: &[T]) {
        debug_assert!(
            stride != 0 || values.len() == 1,
            "an overwriting sink reduces nothing"
        );
        match stride {
            0 => data[first as usize] = values[values.len() - 1],
            1 => data[first as usize..first as usize + values.len()].copy_from_slice(values),
            _ => {
                for (j, &v) in values.iter().enumerate() {
                    data[(first + j as isize * stride) as usize] = v;
                }
            }
        }
    }
    #[inline(always)]
    fn combine<T: Num>(op: ReduceOp, data: &mut [T], first: isize, stride: isize, values: &[T]) {
        match op {
            ReduceOp::Sum => combine_by::<T, SumOp>(data, first, stride, values),
            ReduceOp::Prod => combine_by::<T, ProdOp>(data, first, stride, values),
            ReduceOp::Max => combine_by::<T, MaxOp>(data, first, stride, values),
            ReduceOp::Min => combine_by::<T, MinOp>(data, first, stride, values),
        }
    }
    #[inline(always)]
    fn combine_by<T: Num, R: ReduceFn<T>>(
        data: &mut [T],
        first: isize,
        stride: isize,
        values: &[T],
    ) {
        let first = first as usize;
        match stride {
            // Into one element: in 16 lanes (which vectorise and do not wait on each other),
            // then the lanes in a fixed tree: the order depends only on `values.len()`.
            0 => {
                const LANES: usize = 16;
                let mut lanes = [R::identity(); LANES];
                let chunks = values.chunks_exact(LANES);
                let rest = chunks.remainder();
                for chunk in chunks {
                    for (lane, &v) in lanes.iter_mut().zip(chunk) {
                        *lane = R::combine(*lane, v);
                    }
                }
                for (lane, &v) in lanes.iter_mut().zip(rest) {
                    *lane = R::combine(*lane, v);
                }
                let mut width = LANES;
                while width > 1 {
                    width /= 2;
                    for i in 0..width {
                        lanes[i] = R::combine(lanes[i], lanes[i + width]);
                    }
                }
                data[first] = R::combine(data[first], lanes[0]);
            }
            1 => {
                for (d, &v) in data[first..first + values.len()].iter_mut().zip(values) {
                    *d = R::combine(*d, v);
                }
            }
            _ => {
                for (j, &v) in values.iter().enumerate() {
                    let d = &mut data[(first as isize + j as isize * stride) as usize];
                    *d = R::combine(*d, v);
                }
            }
        }
    }
    macro_rules! typed {
        ($($variant:ident),*) => {
            match (&mut sink.data, block, sink.combine) {
                $(
                    (ElementsMut::$variant(d), Elements::$variant(v), None) => {
                        overwrite(d, first, stride, &v[..n])
                    }
                    (ElementsMut::$variant(d), Elements::$variant(v), Some(op)) => {
                        combine(op, d, first, stride, &v[..n])
                    }
                )*
                (ElementsMut::Bool(d), Elements::Bool(v), None) => overwrite(d, first, stride, &v[..n]),
                _ => unreachable!("`run` checked each sink's type"),
            }
        };
    }
    typed!(F32, F64, F16, BF16, I32, I64, U8)
}
