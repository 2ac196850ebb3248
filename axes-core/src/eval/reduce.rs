//! Reductions over named axes, fused with the expression feeding them, and the functions
//! built on them: softmax, log-softmax, argmax, argmin.

use std::any::TypeId;

use super::ExprExt;
use crate::axis::Axis;
use crate::dispatch::{Work, evaluate, evaluate_parts, run_ir};
use crate::element::{DType, Element};
use crate::engine::exec::Reduce;
use crate::engine::plan::{LeafLayout, Leaves};
use crate::error::{Error, Result};
use crate::expr::{Expr, Reduced, Reducible, Scalar, select};
use crate::ir::binary;
use crate::ir::reduce::{MaxOp, MinOp, ProdOp, SumOp};
use crate::ir::{CompareOp, ReduceFn, ReduceOp};
use crate::ir::{Ir, IrNode};
use crate::layout::Layout;
use crate::list::{AxisList, AxisSet, Difference, DifferenceWith, HasAxis, MAX_RANK};
use crate::num::{Float, Num};
use crate::protocol::{Backend, BufferRef, Buffers, Device, LeafBuffer};
use crate::tensor::Tensor;

pub(crate) fn sum_sink() -> Reduce<SumOp> {
    Reduce(SumOp)
}

pub(crate) fn prod_sink() -> Reduce<ProdOp> {
    Reduce(ProdOp)
}

pub(crate) fn max_sink() -> Reduce<MaxOp> {
    Reduce(MaxOp)
}

pub(crate) fn min_sink() -> Reduce<MinOp> {
    Reduce(MinOp)
}

/// Reduces `expr` over `Over` into a fresh tensor of the remaining axes.
/// A maximum or minimum over an empty axis is an error (a sum or product of nothing is its
/// identity).
pub(crate) fn reduce<E: Expr, Over: AxisSet, Op: ReduceFn<E::Elem>>(
    expr: &E,
    sink: Reduce<Op>,
) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Axes: Reducible<Over>,
{
    check_defined_on_empty::<E, Over>(expr, Op::OP)?;
    evaluate(expr, Over::IDS, sink, Op::identity())
}

/// An error naming the first axis of `Over` that is empty when `op` (a maximum or a
/// minimum) has no value over nothing.
pub(crate) fn check_defined_on_empty<E: Expr, Over: AxisSet>(expr: &E, op: ReduceOp) -> Result<()> {
    if !matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return Ok(());
    }
    match lengths_of(expr, Over::IDS).iter().position(|&len| len == 0) {
        Some(axis) => Err(Error::EmptyReduction {
            axis: Over::names()[axis].to_string(),
        }),
        None => Ok(()),
    }
}

/// The sum of every element of `expr`.
pub(crate) fn sum_all<E: Expr>(expr: &E) -> Result<E::Elem>
where
    E::Elem: Num,
{
    let total: Tensor<E::Elem, ()> = evaluate(expr, E::Axes::IDS, sum_sink(), E::Elem::zero())?;
    Ok(total.storage().host()?[0])
}

/// The lengths `expr` gives the axes `ids` (1 where no leaf has one).
fn lengths_of<E: Expr>(expr: &E, ids: &[TypeId]) -> Vec<usize> {
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    ids.iter()
        .map(|id| {
            leaves
                .iter()
                .find_map(|leaf| {
                    let axis = leaf.ids.iter().position(|x| x == id)?;
                    Some(leaf.layout.lens()[axis])
                })
                .unwrap_or(1)
        })
        .collect()
}

/// Reduces `expr` over the axes `over` and views the result with the expression's own axes,
/// the reduced ones kept with stride 0 (a keep-dims reduction): it combines with the input
/// element-wise with no further type-level bound.
pub(crate) fn reduce_keep<E: Expr, Op: ReduceFn<E::Elem>>(
    expr: &E,
    over: &[TypeId],
    sink: Reduce<Op>,
) -> Result<Tensor<E::Elem, E::Axes>> {
    let all = E::Axes::IDS;
    let names = E::Axes::names();
    let kept: Vec<usize> = (0..E::Axes::RANK)
        .filter(|&a| !over.contains(&all[a]))
        .collect();
    let kept_ids: Vec<TypeId> = kept.iter().map(|&a| all[a]).collect();
    let kept_names: Vec<_> = kept.iter().map(|&a| names[a].clone()).collect();
    let (data, layout) = evaluate_parts(
        expr,
        &kept_ids,
        &|| kept_names.clone(),
        over,
        sink,
        Op::identity(),
    )?;
    // Put the result back in the expression's axis order, stride 0 on reduced axes.
    let full_lens = lengths_of(expr, all);
    let mut strides = [0isize; MAX_RANK];
    for (k, &a) in kept.iter().enumerate() {
        strides[a] = layout.strides()[k];
    }
    let keep = Layout::new(&full_lens, &strides[..E::Axes::RANK], 0, data.len())
        .expect("a broadcast of a fresh buffer fits it");
    Ok(Tensor::from_parts(data, keep).expect("rank and bounds checked"))
}

/// Divides every element of `t` by `count`.
fn divide<T: Num, A: AxisSet>(t: &Tensor<T, A>, count: usize) -> Result<Tensor<T, A>> {
    t.binary(Scalar(T::from_i64(count as i64)), binary::Div)
        .eval()
}

pub(crate) fn mean<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Num,
    E::Axes: Reducible<Over>,
{
    let count: usize = lengths_of(expr, Over::IDS).iter().product();
    divide(&reduce::<E, Over, _>(expr, sum_sink())?, count)
}

/// Replaces non-finite shifts (an all -inf or empty slice) by 0: `m - m` is 0 exactly
/// where `m` is finite (an expression, so it runs on any device).
fn finite_or_zero<T: Float, A: AxisSet>(m: &Tensor<T, A>) -> Result<Tensor<T, A>> {
    let finite = m.binary(m, binary::Sub).equal(Scalar(T::zero()));
    select(finite, m, Scalar(T::zero())).eval()
}

pub(crate) fn logsumexp<E: Expr, Over: AxisSet>(
    expr: &E,
) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let over = Over::IDS;
    let m = finite_or_zero(&reduce_keep(expr, over, max_sink())?)?;
    let sums: Tensor<E::Elem, Reduced<E, Over>> = evaluate(
        &expr.binary(&m, binary::Sub).exp(),
        over,
        sum_sink(),
        E::Elem::zero(),
    )?;
    let shift: Tensor<E::Elem, Reduced<E, Over>> =
        evaluate(&m, over, max_sink(), E::Elem::lowest())?;
    (&shift + sums.ln()).eval()
}

pub(crate) fn var<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let over = Over::IDS;
    let count: usize = lengths_of(expr, over).iter().product();
    let sums = reduce_keep(expr, over, sum_sink())?;
    let mean = divide(&sums, count)?;
    let squares: Tensor<E::Elem, Reduced<E, Over>> = evaluate(
        &expr.binary(&mean, binary::Sub).square(),
        over,
        sum_sink(),
        E::Elem::zero(),
    )?;
    divide(&squares, count)
}

/// Softmax over axis `Over`: e^x / Σ e^x along `Over`, shifted by the maximum so it never
/// overflows. Generic over any axis list that has `Over`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Class;
/// let logits = Tensor::<f64, (Batch, Class)>::from_vec((Batch.len(1), Class.len(3)), vec![1000., 1000., 1000.])?;
/// let p = softmax::<_, _, Class>(&logits)?;
/// assert!(p.to_vec().iter().all(|&v| (v - 1.0 / 3.0).abs() < 1e-12));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn softmax<T: Float, A: AxisSet + HasAxis<Over>, Over: Axis>(
    x: &Tensor<T, A>,
) -> Result<Tensor<T, A>> {
    let over = [TypeId::of::<Over>()];
    let m = finite_or_zero(&reduce_keep(&x, &over, max_sink())?)?;
    let sums = reduce_keep(&(x - &m).exp(), &over, sum_sink())?;
    ((x - &m).exp() / &sums).eval()
}

/// Log-softmax over axis `Over`: x - ln Σ e^x along `Over`, computed stably.
pub fn log_softmax<T: Float, A: AxisSet + HasAxis<Over>, Over: Axis>(
    x: &Tensor<T, A>,
) -> Result<Tensor<T, A>> {
    let over = [TypeId::of::<Over>()];
    let m = finite_or_zero(&reduce_keep(&x, &over, max_sink())?)?;
    let sums = reduce_keep(&(x - &m).exp(), &over, sum_sink())?;
    (x - &m - sums.ln()).eval()
}

/// The position of the largest element along axis `X` (the first one on ties; the first NaN
/// if there is one). An empty axis is an error.
pub fn argmax<T: Num, A, X>(x: &Tensor<T, A>) -> Result<Tensor<i64, Difference<A, (X,)>>>
where
    X: Axis,
    A: AxisSet + HasAxis<X> + DifferenceWith<(X,)>,
{
    arg_best(x, true)
}

/// The position of the smallest element along axis `X` (the first one on ties; the first
/// NaN if there is one). An empty axis is an error.
pub fn argmin<T: Num, A, X>(x: &Tensor<T, A>) -> Result<Tensor<i64, Difference<A, (X,)>>>
where
    X: Axis,
    A: AxisSet + HasAxis<X> + DifferenceWith<(X,)>,
{
    arg_best(x, false)
}

/// [`argmax`] (`maximum`) or [`argmin`] on `backend`, where `x` is, as expressions: the best
/// value along `X` kept with stride 0, then the smallest position whose element equals it or
/// is NaN (a NaN makes the best NaN, which equals nothing, so the first NaN wins).
fn arg_best_on<T: Num, A, X>(
    x: &Tensor<T, A>,
    backend: &'static dyn Backend,
    maximum: bool,
) -> Result<Tensor<i64, Difference<A, (X,)>>>
where
    X: Axis,
    A: AxisSet + HasAxis<X> + DifferenceWith<(X,)>,
{
    let over = [TypeId::of::<X>()];
    let best = if maximum {
        reduce_keep(x, &over, max_sink())?
    } else {
        reduce_keep(x, &over, min_sink())?
    };
    let len = x.lens()[<A as HasAxis<X>>::POS];
    // The positions along X, 0..len, as a leaf over X alone.
    let steps: Vec<i64> = (0..len as i64).collect();
    let positions = backend.upload(crate::protocol::as_bytes(&steps))?;
    let (position_ids, position_layout) = ([TypeId::of::<X>()], Layout::row_major(&[len]));
    let mut ir = Ir::default();
    let (value, best_value, position) = (ir.leaf(), ir.leaf(), ir.leaf());
    let is_best = ir.push(IrNode::Compare(CompareOp::Equal, value, best_value));
    let is_number = ir.push(IrNode::Compare(CompareOp::Equal, value, value));
    let past_end = ir.push(IrNode::Scalar(len as f64));
    let nan_or_end = ir.push(IrNode::Select(is_number, past_end, position));
    ir.push(IrNode::Select(is_best, position, nan_or_end));
    let (mut layouts, mut buffers) = (Leaves::new(), Buffers::new());
    x.operands(&mut layouts);
    x.buffers(&mut buffers);
    best.operands(&mut layouts);
    best.buffers(&mut buffers);
    layouts.push(LeafLayout {
        ids: &position_ids,
        layout: &position_layout,
        names: || vec![X::name()],
    });
    buffers.push(LeafBuffer {
        dtype: DType::I64,
        data: BufferRef::Device(backend, &positions),
    });
    type Kept<A, X> = Difference<A, (X,)>;
    let ids = Kept::<A, X>::IDS;
    let work = Work {
        kept: ids,
        names: &Kept::<A, X>::names,
        reduced: &over,
        reduce: ReduceOp::Min,
        dest: None,
    };
    let (storage, layout) = run_ir::<i64>(ir, &layouts, &buffers, backend, &work)?;
    Ok(Tensor::from_parts(storage, layout).expect("a fresh result fits"))
}

fn arg_best<T: Num, A, X>(
    x: &Tensor<T, A>,
    maximum: bool,
) -> Result<Tensor<i64, Difference<A, (X,)>>>
where
    X: Axis,
    A: AxisSet + HasAxis<X> + DifferenceWith<(X,)>,
{
    let axis = <A as HasAxis<X>>::POS;
    let len = x.lens()[axis];
    if len == 0 {
        return Err(Error::EmptyReduction {
            axis: X::name().into_owned(),
        });
    }
    if let Device::Accelerator(backend) = x.device() {
        return arg_best_on::<T, A, X>(x, backend, maximum);
    }
    let better: fn(T, T) -> bool = if maximum {
        |candidate, best| candidate > best
    } else {
        |candidate, best| candidate < best
    };
    let is_nan = |v: T| v.partial_cmp(&v).is_none();
    let mut lens = x.lens().to_vec();
    lens.remove(axis);
    let out = Tensor::<i64, Difference<A, (X,)>>::from_index_fn(&lens, |index| {
        let mut full = [0usize; MAX_RANK];
        let mut k = 0;
        for (a, slot) in full.iter_mut().enumerate().take(A::RANK) {
            if a != axis {
                *slot = index[k];
                k += 1;
            }
        }
        let mut best_at = 0;
        full[axis] = 0;
        let mut best = x.element_at(&full[..A::RANK]);
        for i in 1..len {
            if is_nan(best) {
                break;
            }
            full[axis] = i;
            let v = x.element_at(&full[..A::RANK]);
            if is_nan(v) || better(v, best) {
                best = v;
                best_at = i;
            }
        }
        best_at as i64
    });
    Ok(out)
}
