//! One nameable bound per operation, for generic code over axes: a function generic in its
//! axes `A` states what it does with them by one of these traits (all in the prelude), and
//! the compiler checks the rest where the function is called with concrete axes.
//!
//! | operation | bound on the axes `A` |
//! |---|---|
//! | `x.sum::<Over>()`, `mean`, `max_over`, `var`, ... (and `x - &mean` after them) | `A: Reducible<Over>` |
//! | `x.len_of::<X>()`, `x.softmax::<X>()`, `argmax`, `x.slice::<X>(..)` | `A: HasAxis<X>` |
//! | `&x + &y`, `&x * &y` with `y` over `R` | `A: ElementwiseWith<R>` |
//! | the same, keeping the axes `A` (every axis of `R` is in `A`) | `A: Includes<R>` |
//! | `dot(&x, &y)` with `y` over `R` | `A: DotWith<R>` |
//! | `dot_over::<Over, _, _, _>(&x, &y)` | `A: DotOverWith<R, Over>` |
//! | `x.axes_with_order::<O>()`, `z.assign(expr)` | `A: SameAxes<O>` |
//!
//! Two tensors of the same axes `A`, or a tensor and a scalar, combine with no bound beyond
//! `A: AxisSet`. The `axes` crate's guide `doc::generic_code` writes a generic layer norm with
//! them.

use super::ops::{BroadcastWith, Difference, DifferenceWith, UnionWith};
use super::{AxisList, AxisSet, SubsetOf};

/// Axes that can be reduced over `Over` (every axis of `Over` is one of them). Generic code
/// may also combine the reduced result with them element-wise and keep the axes `A`
/// (`x - &x.mean::<Over>()?` has the axes `A`).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// fn centered<A: Reducible<(F,)>, F: Axis>(x: &Tensor<f64, A>) -> axes::Result<Tensor<f64, A>> {
///     let mean = x.mean::<(F,)>()?;
///     (x - &mean).eval()
/// }
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Feature;
/// let x = Tensor::<f64, (Batch, Feature)>::from_vec((Batch.len(1), Feature.len(3)), vec![1., 2., 6.])?;
/// assert_eq!(centered::<_, Feature>(&x)?.to_vec(), [-2., -1., 3.]);
/// # Ok::<(), axes::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "cannot reduce the axes `{Self}` over `{Over}`",
    label = "`{Over}` is not a subset of these axes",
    note = "in generic code over axes `A`, bound `A: Reducible<{Over}>`"
)]
pub trait Reducible<Over: AxisSet>:
    AxisSet + DifferenceWith<Over> + BroadcastWith<Difference<Self, Over>, Output = Self>
{
}

impl<A, Over> Reducible<Over> for A
where
    A: AxisSet + DifferenceWith<Over> + BroadcastWith<Difference<A, Over>, Output = A>,
    Over: AxisSet + SubsetOf<A>,
{
}

/// Axes that include every axis of `R`, so that combining them element-wise with a tensor
/// over `R` keeps them (`x * &gain` for a `gain` over `R` has `x`'s axes).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// fn scaled<A: Includes<(F,)>, F: Axis>(x: &Tensor<f32, A>, gain: &Tensor<f32, (F,)>) -> axes::Result<Tensor<f32, A>> {
///     (x * gain).eval()
/// }
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Feature;
/// let x = Tensor::<f32, (Batch, Feature)>::ones((Batch.len(2), Feature.len(2)))?;
/// let gain = Tensor::<f32, (Feature,)>::from_vec(Feature.len(2), vec![2., 3.])?;
/// assert_eq!(scaled(&x, &gain)?.to_vec(), [2., 3., 2., 3.]);
/// # Ok::<(), axes::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the axes `{Self}` do not include all of `{R}`",
    note = "in generic code over axes `A`, bound `A: Includes<{R}>`"
)]
pub trait Includes<R: AxisSet>: AxisSet + BroadcastWith<R, Output = Self> {}

impl<A, R> Includes<R> for A
where
    A: AxisSet + BroadcastWith<R, Output = A>,
    R: AxisSet + SubsetOf<A>,
{
}

/// Axes that combine element-wise with `R` (the operators, comparisons, `select`): the
/// result has the axes `Broadcast<Self, R>`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::Broadcast;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Feature;
/// fn plus_bias<A: ElementwiseWith<(Feature,)>>(
///     x: &Tensor<f32, A>,
///     bias: &Tensor<f32, (Feature,)>,
/// ) -> axes::Result<Tensor<f32, Broadcast<A, (Feature,)>>> {
///     (x + bias).eval()
/// }
/// let x = Tensor::<f32, (Batch, Feature)>::zeros((Batch.len(2), Feature.len(2)))?;
/// let b = Tensor::<f32, (Feature,)>::from_vec(Feature.len(2), vec![1., 2.])?;
/// let y: Tensor<f32, (Batch, Feature)> = plus_bias(&x, &b)?;
/// assert_eq!(y.to_vec(), [1., 2., 1., 2.]);
/// # Ok::<(), axes::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the axes `{Self}` and `{R}` do not combine element-wise",
    note = "in generic code over axes `A`, bound `A: ElementwiseWith<{R}>`"
)]
pub trait ElementwiseWith<R: AxisList>: AxisSet + BroadcastWith<R, Output: AxisSet> {}

impl<A, R: AxisList> ElementwiseWith<R> for A where A: AxisSet + BroadcastWith<R, Output: AxisSet> {}

/// Axes that `dot_over::<Over>` contracts with `R`: `Over` is in both; the result has
/// `Self`'s other axes, then `R`'s other axes not in `Self`.
#[diagnostic::on_unimplemented(
    message = "cannot contract the axes `{Self}` with `{R}` over `{Over}`",
    note = "`{Over}` must be among both operands' axes; in generic code over axes `A`, bound `A: DotOverWith<{R}, {Over}>`"
)]
pub trait DotOverWith<R: AxisSet, Over: AxisSet>: AxisSet {
    /// The axes of the result.
    type Output: AxisSet;
}

impl<L, R, Over> DotOverWith<R, Over> for L
where
    Over: AxisSet + SubsetOf<L> + SubsetOf<R>,
    L: AxisSet + DifferenceWith<Over>,
    R: AxisSet + DifferenceWith<Over>,
    Difference<L, Over>: UnionWith<Difference<R, Over>>,
{
    type Output = super::ops::Union<Difference<L, Over>, Difference<R, Over>>;
}
