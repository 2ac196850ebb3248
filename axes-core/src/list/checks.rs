//! Checks on axis lists that give readable compile errors.
//!
//! Each check computes a type-level bit and then requires a witness trait of that bit; the
//! witness is implemented only for the passing bit and carries the axis and the list, so a
//! failing check is an unimplemented trait (E0277) whose message names both.

use typenum::{B0, B1};

use super::ops::{BroadcastWith, Has};
use super::{AxisList, Cons, Find, MAX_RANK, Nil, PositionsIn};
use crate::axis::Axis;

/// An axis list without duplicates: the axes of a tensor.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a set of axes",
    label = "not a set of distinct axes",
    note = "a tensor's axes are a tuple of at most 8 distinct axes"
)]
pub trait AxisSet:
    AxisList + BroadcastWith<Self, Output = Self> + BroadcastWith<(), Output = Self>
{
}

// The `BroadcastWith` supertraits (ordering rules 1 and 2: the same set keeps the left
// order; a scalar takes the tensor's) let generic code combine two tensors of one axis type
// `A`, or a tensor and a scalar, and get `A` back without any further bound.
impl<L> AxisSet for L
where
    L: AxisList + BroadcastWith<L, Output = L> + BroadcastWith<(), Output = L>,
    L::List: NoDuplicates<L>,
{
}

hint_generic_bounds!(
    "cannot tell whether the axes `{W}` are distinct",
    /// Internal: no axis of the list appears again later in it (`W` is the whole tuple).
    pub trait NoDuplicates<W> {}
);

impl<W> NoDuplicates<W> for Nil {}

impl<H: Axis, T: NoDuplicates<W> + Has<H>, W> NoDuplicates<W> for Cons<H, T> where
    <T as Has<H>>::Out: AppearsOnce<H, W>
{
}

/// Witness that axis `A` appears only once in `W`.
#[diagnostic::on_unimplemented(
    message = "axis `{A}` appears more than once in `{W}`",
    label = "duplicate axis `{A}`",
    note = "a tensor's axes must be distinct; to pair an axis with itself, use `Dual<{A}>` for one side"
)]
pub trait AppearsOnce<A, W> {}

impl<A, W> AppearsOnce<A, W> for B0 {}

/// A list that has axis `A`, and where.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::HasAxis;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Hidden;
/// assert_eq!(<(Batch, Hidden) as HasAxis<Hidden>>::POS, 1);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no axis `{A}`",
    label = "axis `{A}` is not among these axes"
)]
pub trait HasAxis<A>: AxisSet {
    /// The position of `A` in the list.
    const POS: usize;
}

impl<L: AxisSet, A: Axis> HasAxis<A> for L
where
    L::List: Has<A> + Find<A>,
    <L::List as Has<A>>::Out: AxisPresent<A, L>,
{
    const POS: usize = <L::List as Find<A>>::POS;
}

/// Witness that axis `A` is in `L`.
#[diagnostic::on_unimplemented(
    message = "axis `{A}` is not one of the axes `{L}`",
    label = "no axis `{A}` here",
    note = "only the axes in `{L}` can be named here"
)]
pub trait AxisPresent<A, L> {}

impl<A, L> AxisPresent<A, L> for B1 {}

/// Every axis of the list is in `R`.
#[diagnostic::on_unimplemented(
    message = "the axes `{Self}` are not all among the axes `{R}`",
    label = "not a subset of `{R}`"
)]
pub trait SubsetOf<R: AxisList>: AxisList {}

impl<L: AxisList, R: AxisList> SubsetOf<R> for L where L::List: EachIn<R, L> {}

hint_generic_bounds!(
    "cannot tell whether the axes `{W}` are all in `{R}`",
    /// Internal: each axis of the list is in `R` (`W` is the whole tuple).
    pub trait EachIn<R, W> {}
);

impl<R, W> EachIn<R, W> for Nil {}

impl<H, T: EachIn<R, W>, R: AxisList, W> EachIn<R, W> for Cons<H, T>
where
    R::List: Has<H>,
    <R::List as Has<H>>::Out: FoundIn<H, W, R>,
{
}

/// Witness that axis `A` of `W` is also in `R`.
#[diagnostic::on_unimplemented(
    message = "axis `{A}` of `{W}` is not among the axes `{R}`",
    label = "axis `{A}` is missing from `{R}`",
    note = "axes are matched by type, never by position or length"
)]
pub trait FoundIn<A, W, R> {}

impl<A, W, R> FoundIn<A, W, R> for B1 {}

/// The same set of axes as `R`, in any order (e.g. `(H, W)` and `(W, H)`).
#[diagnostic::on_unimplemented(
    message = "the axes `{Self}` are not a reordering of `{R}`",
    label = "expected the axes of `{R}` in some order"
)]
pub trait SameAxes<R: AxisList>: AxisSet {
    /// Entry `i` is the position in `Self` of `R`'s axis `i`: data in `Self`'s order is read
    /// into `R`'s order by taking entry `FROM[i]` for axis `i`.
    const FROM: [usize; MAX_RANK];
}

impl<L: AxisSet, R: AxisList> SameAxes<R> for L
where
    L::List: EachIn<R, L>,
    R::List: EachIn<L, R> + PositionsIn<L::List>,
{
    const FROM: [usize; MAX_RANK] = <R::List as PositionsIn<L::List>>::POSITIONS;
}

/// A list with as many axes as `R`, so that its axes can be renamed to `R`'s position by
/// position (`cast_axes`).
#[diagnostic::on_unimplemented(
    message = "cannot rename the axes `{Self}` to `{R}`: they differ in number",
    label = "a different number of axes than `{R}`"
)]
pub trait SameCount<R: AxisList>: AxisList {}

impl<L: AxisList, R: AxisList> SameCount<R> for L where L::List: CountEq<R::List, L, R> {}

/// Internal: two lists of equal length (`L` and `R` are the whole tuples, for the message).
#[diagnostic::on_unimplemented(
    message = "cannot rename the axes `{L}` to `{R}`: they differ in number",
    label = "a different number of axes than `{R}`",
    note = "`cast_axes` renames axes position by position, so both lists need as many axes"
)]
pub trait CountEq<Other, L, R> {}

impl<L, R> CountEq<Nil, L, R> for Nil {}

impl<H, T: CountEq<U, L, R>, G, U, L, R> CountEq<Cons<G, U>, L, R> for Cons<H, T> {}
