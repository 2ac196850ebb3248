//! Sums and products of f16 and bf16 in host memory combine in f32: the expression cast to
//! f32 is reduced, and each result rounded to the half type once. Combined in the half type a
//! long sum stalls — bf16 keeps 8 significant bits, so a running sum of ones stops at 256
//! per accumulator (65,536 bf16 ones summed to 16,384). Device kernels combine half types in
//! float already; the CPU backend's interpreter does the same (`engine::interp`).

use std::any::TypeId;

use super::{Fresh, IntoOnTheCpu, OnTheCpu};
use crate::element::{DType, Element};
use crate::engine::exec::{Combine, Reduce};
use crate::error::Result;
use crate::expr::{Cast, Expr};
use crate::ir::ReduceOp;
use crate::ir::reduce::{ProdOp, SumOp};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Whether reducing `T` with `S` combines in f32: a half type, combined by rounding.
pub(super) const fn applies<T: Element, S: Combine<T>>() -> bool {
    S::ROUNDS && matches!(T::DTYPE, DType::F16 | DType::BF16)
}

/// [`super::evaluate_parts`] in host memory for a half type: reduced in f32 where axes are
/// reduced.
pub(super) fn parts<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    fresh: Fresh<'_, S>,
) -> Result<(Storage<E::Elem>, Layout)> {
    if fresh.reduced.is_empty() {
        return (OnTheCpu::<E, S>::PARTS_IN_OWN_TYPE)(expr, fresh);
    }
    let wide = Cast::<&E, f32>::new(expr);
    let (sums, layout) = match fresh.sink.reduce_op() {
        Some(ReduceOp::Prod) => {
            (OnTheCpu::<_, Reduce<ProdOp>>::PARTS)(&wide, fresh.with_sink(Reduce(ProdOp)))?
        }
        _ => (OnTheCpu::<_, Reduce<SumOp>>::PARTS)(&wide, fresh.with_sink(Reduce(SumOp)))?,
    };
    let rounded = sums.host()?.iter().map(|&v| E::Elem::from_f64(v.into()));
    Ok((Storage::from_host_vec(rounded.collect()), layout))
}

/// [`super::evaluate_all`] in host memory for a half type: reduced in f32.
pub(super) fn all<E: Expr, S: Combine<E::Elem>>(expr: &E, sink: S) -> Result<E::Elem> {
    let wide = Cast::<&E, f32>::new(expr);
    let total = match sink.reduce_op() {
        Some(ReduceOp::Prod) => (OnTheCpu::<_, Reduce<ProdOp>>::ALL)(&wide, Reduce(ProdOp))?,
        _ => (OnTheCpu::<_, Reduce<SumOp>>::ALL)(&wide, Reduce(SumOp))?,
    };
    Ok(E::Elem::from_f64(total.into()))
}

/// [`super::evaluate_into`] in host memory for a half type: where axes are reduced, their
/// result is reduced in f32 into a fresh tensor, rounded once, then combined into `target`.
pub(super) fn into<E: Expr, A: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    target: &mut Tensor<E::Elem, A>,
    reduced: &[TypeId],
    sink: S,
) -> Result<()> {
    if reduced.is_empty() {
        return (IntoOnTheCpu::<E, A, S>::INTO_IN_OWN_TYPE)(expr, target, reduced, sink);
    }
    let fresh = Fresh {
        out: A::IDS,
        names: &A::names,
        reduced,
        sink,
    };
    let (storage, layout) = parts(expr, fresh)?;
    let part = Tensor::<E::Elem, A>::from_parts(storage, layout).expect("a fresh result fits");
    (IntoOnTheCpu::<Tensor<E::Elem, A>, A, S>::INTO_IN_OWN_TYPE)(&part, target, &[], sink)
}
