//! Reductions over named axes, fused with the expression feeding them, and the functions
//! built on them: softmax, log-softmax, argmax, argmin.

use std::any::TypeId;
use std::marker::PhantomData;

use super::ExprExt;
use crate::axis::Axis;
use crate::dispatch::{Input, Output, evaluate, evaluate_all, evaluate_parts, placed, run_output};
use crate::element::{DType, Element};
use crate::engine::exec::Reduce;
use crate::engine::plan::{IterSpace, Leaves};
use crate::error::{Error, Result};
use crate::expr::{Cast, Expr, Reduced, Reducible, Scalar, select};
use crate::ir::binary;
use crate::ir::reduce::{MaxOp, MinOp, ProdOp, SumOp};
use crate::ir::{CompareOp, ReduceFn, ReduceOp};
use crate::ir::{Ir, IrNode};
use crate::layout::Layout;
use crate::list::{AxisList, AxisSet, Difference, DifferenceWith, HasAxis, MAX_RANK};
use crate::num::{Float, Num};
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
    evaluate(expr, Over::IDS, sink)
}

/// An error naming the first axis of `Over` that is empty when `op` (a maximum or a
/// minimum) has no value over nothing.
pub(crate) fn check_defined_on_empty<E: Expr, Over: AxisSet>(expr: &E, op: ReduceOp) -> Result<()> {
    if !matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return Ok(());
    }
    match lengths_of(expr, Over::IDS)?
        .iter()
        .position(|&len| len == 0)
    {
        Some(axis) => Err(Error::EmptyReduction {
            reduction: if op == ReduceOp::Max {
                "maximum"
            } else {
                "minimum"
            },
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
    evaluate_all(expr, sum_sink())
}

/// The lengths `expr` gives the axes `ids` (1 where no leaf has one), checked to agree.
fn lengths_of<E: Expr>(expr: &E, ids: &[TypeId]) -> Result<Vec<usize>> {
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    let space = IterSpace::new(E::Axes::IDS, &E::Axes::names, &[], None, &leaves)?;
    Ok(ids
        .iter()
        .map(|id| space.position(id).map_or(1, |a| space.lens()[a]))
        .collect())
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
    let (data, layout) = evaluate_parts(expr, &kept_ids, &|| kept_names.clone(), over, sink)?;
    // Put the result back in the expression's axis order, stride 0 on reduced axes.
    let full_lens = lengths_of(expr, all)?;
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

/// A reduction of `E` over `Over` into a fresh tensor.
type ReductionFn<E, Over> = fn(&E) -> Result<Tensor<<E as Expr>::Elem, Reduced<E, Over>>>;

/// Means and variances of `E` over `Over`: of f16 and bf16 computed in f32 and rounded once
/// (a sum of 1M f16 ones is past f16's largest value, their mean is 1), of other types in
/// the type itself. Chosen in constants, so that only the chosen one is compiled.
struct Moments<E, Over>(PhantomData<(E, Over)>);

impl<E: Expr, Over: AxisSet> Moments<E, Over>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    const IN_F32: bool = matches!(E::Elem::DTYPE, DType::F16 | DType::BF16);
    const MEAN: ReductionFn<E, Over> = if Self::IN_F32 {
        mean_in_f32::<E, Over>
    } else {
        mean_in_own_type::<E, Over>
    };
    const VAR: ReductionFn<E, Over> = if Self::IN_F32 {
        var_in_f32::<E, Over>
    } else {
        var_in_own_type::<E, Over>
    };
}

pub(crate) fn mean<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    (Moments::<E, Over>::MEAN)(expr)
}

fn mean_in_f32<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let mean = mean_in_own_type::<_, Over>(&Cast::<&E, f32>::new(expr))?;
    mean.cast::<E::Elem>().eval()
}

fn var_in_f32<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let var = var_in_own_type::<_, Over>(&Cast::<&E, f32>::new(expr))?;
    var.cast::<E::Elem>().eval()
}

fn mean_in_own_type<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let count: usize = lengths_of(expr, Over::IDS)?.iter().product();
    divide(&reduce::<E, Over, _>(expr, sum_sink())?, count)
}

/// Replaces non-finite shifts (an all -inf or empty slice) by 0: `m - m` is 0 exactly
/// where `m` is finite (an expression, so it runs on any device).
/// `m` with every infinite or NaN element replaced by 0 (a safe shift for a stable exp).
pub(crate) fn finite_or_zero<T: Float, A: AxisSet>(m: &Tensor<T, A>) -> Result<Tensor<T, A>> {
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
    let sums: Tensor<E::Elem, Reduced<E, Over>> =
        evaluate(&expr.binary(&m, binary::Sub).exp(), over, sum_sink())?;
    let shift: Tensor<E::Elem, Reduced<E, Over>> = evaluate(&m, over, max_sink())?;
    (&shift + sums.ln()).eval()
}

pub(crate) fn var<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    (Moments::<E, Over>::VAR)(expr)
}

fn var_in_own_type<E: Expr, Over: AxisSet>(expr: &E) -> Result<Tensor<E::Elem, Reduced<E, Over>>>
where
    E::Elem: Float,
    E::Axes: Reducible<Over>,
{
    let over = Over::IDS;
    let count: usize = lengths_of(expr, over)?.iter().product();
    let sums = reduce_keep(expr, over, sum_sink())?;
    let mean = divide(&sums, count)?;
    let squares: Tensor<E::Elem, Reduced<E, Over>> =
        evaluate(&expr.binary(&mean, binary::Sub).square(), over, sum_sink())?;
    divide(&squares, count)
}

impl<T: Float, A: AxisSet> Tensor<T, A> {
    /// The softmax along the axis `X`: `e^x / Σ e^x`, shifted by the maximum so it never
    /// overflows. Called as on a variable ([`Var::softmax`](crate::autodiff::Var::softmax)).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Class;
    /// let logits = Tensor::<f64, (Batch, Class)>::from_vec((Batch.len(1), Class.len(3)), vec![1000., 1000., 1000.])?;
    /// let p = logits.softmax::<Class>()?;
    /// assert!(p.to_vec().iter().all(|&v| (v - 1.0 / 3.0).abs() < 1e-12));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn softmax<X: Axis>(&self) -> Result<Tensor<T, A>>
    where
        A: HasAxis<X>,
    {
        let over = [TypeId::of::<X>()];
        let m = finite_or_zero(&reduce_keep(&self, &over, max_sink())?)?;
        let sums = reduce_keep(&(self - &m).exp(), &over, sum_sink())?;
        ((self - &m).exp() / &sums).eval()
    }

    /// The log-softmax along the axis `X`: `x - ln Σ e^x`, computed stably.
    pub fn log_softmax<X: Axis>(&self) -> Result<Tensor<T, A>>
    where
        A: HasAxis<X>,
    {
        let over = [TypeId::of::<X>()];
        let m = finite_or_zero(&reduce_keep(&self, &over, max_sink())?)?;
        let sums = reduce_keep(&(self - &m).exp(), &over, sum_sink())?;
        (self - &m - sums.ln()).eval()
    }
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

/// [`argmax`] (`maximum`) or [`argmin`] as one job on `x`'s device: the best value along
/// `X` (kept with stride 0), then the smallest position whose element equals it or is NaN
/// (a NaN makes the best NaN, which equals nothing, so the first NaN wins).
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
            reduction: if maximum { "argmax" } else { "argmin" },
            axis: X::name().into_owned(),
        });
    }
    let x = if x.layout().is_padded() {
        x.contiguous()?
    } else {
        x.clone()
    };
    let over = [TypeId::of::<X>()];
    let best = if maximum {
        reduce_keep(&x, &over, max_sink())?
    } else {
        reduce_keep(&x, &over, min_sink())?
    };
    // The positions along X, 0..len, as a leaf over X alone.
    let positions = placed((0..len as i64).collect(), x.device())?;
    let mut ir = Ir::default();
    let (value, best_value, position) = (ir.leaf(), ir.leaf(), ir.leaf());
    let is_best = ir.push(IrNode::Compare(CompareOp::Equal, value, best_value));
    let is_number = ir.push(IrNode::Compare(CompareOp::Equal, value, value));
    let past_end = ir.push(IrNode::Scalar(len as f64));
    let nan_or_end = ir.push(IrNode::Select(is_number, past_end, position));
    let root = ir.push(IrNode::Select(is_best, position, nan_or_end));
    let axes: Vec<usize> = (0..A::RANK).collect();
    let inputs = [
        Input::new(x.storage(), x.layout(), &axes, A::RANK)?,
        Input::new(best.storage(), best.layout(), &axes, A::RANK)?,
        Input::new(&positions, &Layout::row_major(&[len]), &[axis], A::RANK)?,
    ];
    let kept = axes.iter().copied().filter(|&a| a != axis).collect();
    let output = Output::new(root, kept, ReduceOp::Min);
    let (storage, layout) = run_output::<i64>(&ir, x.lens(), &inputs, output)?;
    Ok(Tensor::from_parts(storage, layout).expect("a fresh result fits"))
}
