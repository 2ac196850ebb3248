//! Total operations on axis lists: membership, concat, difference, union, intersection and
//! the elementwise output order. Each works on the internal cons form and has a tuple-level
//! trait and type alias (`Union<L, R>`, ...). None of them checks anything; the checks that
//! give readable errors are in `checks`.

use typenum::{B0, B1, Bit};

use super::{AxisList, AxisSet, Cons, Nil, ToTuple};
use crate::axis::Axis;
use crate::axis::id::IdEq;

hint_generic_bounds!(
    "cannot tell whether the axes `{Self}` include `{A}`",
    /// Whether an internal list contains axis `A` (stops at the first match).
    pub trait Has<A> {
        /// [`B1`] when `A` is in the list.
        type Out: Bit;
    }
);

impl<A> Has<A> for Nil {
    type Out = B0;
}

impl<A: Axis, H: Axis, T> Has<A> for Cons<H, T>
where
    H::Id: IdEq<A::Id>,
    <H::Id as IdEq<A::Id>>::Out: OrElseHas<T, A>,
{
    type Out = <<H::Id as IdEq<A::Id>>::Out as OrElseHas<T, A>>::Out;
}

/// After comparing one element: found at [`B1`], look in the rest `T` at [`B0`].
pub trait OrElseHas<T, A> {
    /// Whether `A` was found.
    type Out: Bit;
}

impl<T, A> OrElseHas<T, A> for B1 {
    type Out = B1;
}

impl<T: Has<A>, A> OrElseHas<T, A> for B0 {
    type Out = <T as Has<A>>::Out;
}

/// Puts `H` in front of `T` at [`B1`]; leaves `T` at [`B0`].
pub trait KeepIf<H, T> {
    /// The resulting list.
    type Out;
}

impl<H, T> KeepIf<H, T> for B1 {
    type Out = Cons<H, T>;
}

impl<H, T> KeepIf<H, T> for B0 {
    type Out = T;
}

hint_generic_bounds!(
    "cannot split the axes `{Self}` by the axes `{R}`",
    /// Internal: the axes of a list that are (`Keep = B1`) or are not (`Keep = B0`) in `R`, in
    /// the list's order.
    pub trait Filter<R, Keep> {
        /// The filtered list.
        type Out;
    }
);

impl<R, Keep> Filter<R, Keep> for Nil {
    type Out = Nil;
}

impl<H, T, R, Keep> Filter<R, Keep> for Cons<H, T>
where
    R: Has<H>,
    <R as Has<H>>::Out: Xnor<Keep>,
    T: Filter<R, Keep>,
    <<R as Has<H>>::Out as Xnor<Keep>>::Out: KeepIf<H, <T as Filter<R, Keep>>::Out>,
{
    type Out =
        <<<R as Has<H>>::Out as Xnor<Keep>>::Out as KeepIf<H, <T as Filter<R, Keep>>::Out>>::Out;
}

/// Bit equality (true when both bits agree).
pub trait Xnor<B> {
    /// [`B1`] when `Self == B`.
    type Out: Bit;
}

impl Xnor<B0> for B0 {
    type Out = B1;
}
impl Xnor<B1> for B0 {
    type Out = B0;
}
impl Xnor<B0> for B1 {
    type Out = B0;
}
impl Xnor<B1> for B1 {
    type Out = B1;
}

hint_generic_bounds!(
    "cannot append the axes `{R}` to the axes `{Self}`",
    /// Internal list concatenation.
    pub trait Append<R> {
        /// `Self` followed by `R`.
        type Out;
    }
);

impl<R> Append<R> for Nil {
    type Out = R;
}

impl<H, T: Append<R>, R> Append<R> for Cons<H, T> {
    type Out = Cons<H, <T as Append<R>>::Out>;
}

hint_generic_bounds!(
    "cannot tell whether the axes `{Self}` are all in `{R}`",
    /// Whether every axis of an internal list is in `R`.
    pub trait AllIn<R> {
        /// [`B1`] when the list is a subset of `R`.
        type Out: Bit;
    }
);

impl<R> AllIn<R> for Nil {
    type Out = B1;
}

impl<H, T, R> AllIn<R> for Cons<H, T>
where
    R: Has<H>,
    <R as Has<H>>::Out: AndThenAllIn<T, R>,
{
    type Out = <<R as Has<H>>::Out as AndThenAllIn<T, R>>::Out;
}

/// After one membership test: stop at [`B0`], test the rest at [`B1`].
pub trait AndThenAllIn<T, R> {
    /// The result of the whole test.
    type Out: Bit;
}

impl<T, R> AndThenAllIn<T, R> for B0 {
    type Out = B0;
}

impl<T: AllIn<R>, R> AndThenAllIn<T, R> for B1 {
    type Out = <T as AllIn<R>>::Out;
}

hint_generic_bounds!(
    "cannot tell whether the axes `{Self}` share an axis with `{R}`",
    /// Whether any axis of an internal list is in `R`.
    pub trait AnyIn<R> {
        /// [`B1`] when the list shares an axis with `R`.
        type Out: Bit;
    }
);

impl<R> AnyIn<R> for Nil {
    type Out = B0;
}

impl<H, T, R> AnyIn<R> for Cons<H, T>
where
    R: Has<H>,
    <R as Has<H>>::Out: OrElseAnyIn<T, R>,
{
    type Out = <<R as Has<H>>::Out as OrElseAnyIn<T, R>>::Out;
}

/// After one membership test: stop at [`B1`], test the rest at [`B0`].
pub trait OrElseAnyIn<T, R> {
    /// The result of the whole test.
    type Out: Bit;
}

impl<T, R> OrElseAnyIn<T, R> for B1 {
    type Out = B1;
}

impl<T: AnyIn<R>, R> OrElseAnyIn<T, R> for B0 {
    type Out = <T as AnyIn<R>>::Out;
}

/// Chooses between two lists by a bit: `Then` at [`B1`], `Else` at [`B0`].
pub trait Choose<Then, Else> {
    /// The chosen list.
    type Out;
}

impl<Then, Else> Choose<Then, Else> for B1 {
    type Out = Then;
}

impl<Then, Else> Choose<Then, Else> for B0 {
    type Out = Else;
}

macro_rules! tuple_op {
    ($(#[$doc:meta])* $trait:ident, $alias:ident => $out:ty, where $($bound:tt)*) => {
        tuple_op!(@ $(#[$doc])* $trait, $alias, AxisSet => $out, where $($bound)*);
    };
    (@ $(#[$doc:meta])* $trait:ident, $alias:ident, $output:ident => $out:ty, where $($bound:tt)*) => {
        $(#[$doc])*
        pub trait $trait<R: AxisList>: AxisList {
            /// The resulting tuple.
            type Output: $output;
        }

        impl<L: AxisList, R: AxisList> $trait<R> for L
        where
            $($bound)*
            <$out as ToTuple>::Tuple: $output,
        {
            type Output = <$out as ToTuple>::Tuple;
        }

        $(#[$doc])*
        pub type $alias<L, R> = <L as $trait<R>>::Output;
    };
}

type LOf<L> = <L as AxisList>::List;

tuple_op!(
    /// `L`'s axes then `R`'s (a duplicate is caught where the result is used as a tensor's axes).
    ConcatWith, Concat => <LOf<L> as Append<LOf<R>>>::Out,
    where LOf<L>: Append<LOf<R>>, <LOf<L> as Append<LOf<R>>>::Out: ToTuple,
);

tuple_op!(
    /// `L`'s axes that are not in `R`, in `L`'s order.
    DifferenceWith, Difference => <LOf<L> as Filter<LOf<R>, B0>>::Out,
    where LOf<L>: Filter<LOf<R>, B0>, <LOf<L> as Filter<LOf<R>, B0>>::Out: ToTuple,
);

tuple_op!(
    /// `L`'s axes that are also in `R`, in `L`'s order.
    IntersectionWith, Intersection => <LOf<L> as Filter<LOf<R>, B1>>::Out,
    where LOf<L>: Filter<LOf<R>, B1>, <LOf<L> as Filter<LOf<R>, B1>>::Out: ToTuple,
);

type UnionList<L, R> = <LOf<L> as Append<<LOf<R> as Filter<LOf<L>, B0>>::Out>>::Out;

tuple_op!(
    /// `L`'s axes, then `R`'s axes not in `L`.
    UnionWith, Union => UnionList<L, R>,
    where
        LOf<R>: Filter<LOf<L>, B0>,
        LOf<L>: Append<<LOf<R> as Filter<LOf<L>, B0>>::Out>,
        UnionList<L, R>: ToTuple,
);

/// `R ⊆ L`.
type RInL<L, R> = <LOf<R> as AllIn<LOf<L>>>::Out;
/// `L ⊆ R`.
type LInR<L, R> = <LOf<L> as AllIn<LOf<R>>>::Out;
/// Rule 2 (right side) or rule 3, for when `R ⊄ L`.
type RightOrUnion<L, R> = <LInR<L, R> as Choose<LOf<R>, UnionList<L, R>>>::Out;
type BroadcastList<L, R> = <RInL<L, R> as Choose<LOf<L>, RightOrUnion<L, R>>>::Out;

tuple_op!(@
    /// The axes of an elementwise result (the ordering rules of `axes::doc::semantics`): with
    /// the same set, `L`'s order; when one operand's set contains the other's, that operand's
    /// order (`L` first); otherwise `L`'s axes then `R`'s axes not in `L`.
    ///
    /// (Its result is only checked to be a list here: `AxisSet` builds on this trait.)
    BroadcastWith, Broadcast, AxisList => BroadcastList<L, R>,
    where
        LOf<R>: AllIn<LOf<L>> + Filter<LOf<L>, B0>,
        LOf<L>: AllIn<LOf<R>> + Append<<LOf<R> as Filter<LOf<L>, B0>>::Out>,
        LInR<L, R>: Choose<LOf<R>, UnionList<L, R>>,
        RInL<L, R>: Choose<LOf<L>, RightOrUnion<L, R>>,
        BroadcastList<L, R>: ToTuple,
);

hint_generic_bounds!(
    "cannot transpose the axes `{Self}`",
    /// Internal: every axis replaced by its transpose (`A` ↔ `Dual<A>`).
    pub trait MapTranspose {
        /// The mapped list.
        type Out;
    }
);

impl MapTranspose for Nil {
    type Out = Nil;
}

impl<H: Axis, T: MapTranspose> MapTranspose for Cons<H, T> {
    type Out = Cons<H::Transposed, T::Out>;
}

/// Every axis `A` of the list replaced by `Dual<A>`, and every `Dual<A>` by `A`.
pub trait TransposeAxes: AxisList {
    /// The resulting tuple.
    type Output: AxisSet;
}

impl<L: AxisList> TransposeAxes for L
where
    L::List: MapTranspose,
    <L::List as MapTranspose>::Out: ToTuple,
    <<L::List as MapTranspose>::Out as ToTuple>::Tuple: AxisSet,
{
    type Output = <<L::List as MapTranspose>::Out as ToTuple>::Tuple;
}

/// Every axis `A` of `L` replaced by `Dual<A>`, and every `Dual<A>` by `A`.
pub type Transposed<L> = <L as TransposeAxes>::Output;

/// `L`'s axes not paired by `dot` with `R` in its first step (a `Dual<A>` meeting `A`).
type DualUnpaired<L, R> = Difference<L, Transposed<R>>;

/// The axes of `dot(x, y)` for `x` over `L` and `y` over `R` (the pairing rule of
/// `axes::doc::semantics`): dual pairs first (`Dual<A>` on one side with `A` on the other),
/// then every other axis both have; the result is `L`'s remaining axes then `R`'s.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::DotAxes;
/// # use std::any::TypeId;
/// #[derive(Axis)] struct A;
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct C;
/// #[derive(Axis)] struct D;
/// fn same<X: 'static, Y: 'static>() -> bool { TypeId::of::<X>() == TypeId::of::<Y>() }
/// assert!(same::<DotAxes<(A, B, C), (B, C, D)>, (A, D)>());
/// assert!(same::<DotAxes<(Dual<B>, B), (B, A)>, (B, A)>());
/// assert!(same::<DotAxes<(A, B), (Dual<B>, B)>, (A, B)>());
/// ```
///
/// Two lists that pair no axis have no `DotWith`: a `dot` that would contract nothing is a
/// compile error pointing to [`outer`](crate::outer).
pub trait DotWith<R: AxisSet>: AxisSet {
    /// The axes of the result.
    type Output: AxisSet;
}

impl<L, R> DotWith<R> for L
where
    L: AxisSet + TransposeAxes + DifferenceWith<Transposed<R>> + ContractsWith<R>,
    R: AxisSet + TransposeAxes + DifferenceWith<Transposed<L>>,
    DualUnpaired<L, R>: DifferenceWith<DualUnpaired<R, L>>,
    DualUnpaired<R, L>: DifferenceWith<DualUnpaired<L, R>>,
    Difference<DualUnpaired<L, R>, DualUnpaired<R, L>>:
        ConcatWith<Difference<DualUnpaired<R, L>, DualUnpaired<L, R>>>,
{
    type Output = Concat<
        Difference<DualUnpaired<L, R>, DualUnpaired<R, L>>,
        Difference<DualUnpaired<R, L>, DualUnpaired<L, R>>,
    >;
}

/// The axes of `dot(x, y)`.
pub type DotAxes<L, R> = <L as DotWith<R>>::Output;

/// Lists that `dot` pairs at least one axis of: an axis both have, or an axis `A` on one side
/// and `Dual<A>` on the other.
pub trait ContractsWith<R: AxisList>: AxisList {}

/// `R`'s axes and their transposes: the axes of `R` an axis of another list can pair with.
type PairableIn<R> =
    <<R as AxisList>::List as Append<<<R as AxisList>::List as MapTranspose>::Out>>::Out;

impl<L: AxisList, R: AxisList> ContractsWith<R> for L
where
    R::List: MapTranspose + Append<<R::List as MapTranspose>::Out>,
    L::List: AnyIn<PairableIn<R>>,
    <L::List as AnyIn<PairableIn<R>>>::Out: SharedAxis<L, R>,
{
}

/// Witness that `dot` of `L` and `R` contracts some axis.
#[diagnostic::on_unimplemented(
    message = "`dot` of `{L}` and `{R}` would contract no axis",
    label = "no axis here is also in `{R}`",
    note = "`dot` contracts the axes both operands have; for an outer product write `outer(&x, &y)` (for variables, `&x * &y`)"
)]
pub trait SharedAxis<L, R> {}

impl<L, R> SharedAxis<L, R> for B1 {}
