//! Type-level axis lists.
//!
//! Public lists are tuples of at most [`MAX_RANK`] axes: `(Batch, Hidden)`, `(Class,)`, `()`.
//! The work runs on an internal cons list ([`Cons`], [`Nil`]); every operation that can fail
//! is split into a total computation and a check, and each check surfaces as an
//! unimplemented trait whose message names the axis and the list.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes::list::{AxisList, Broadcast, Difference, Intersection, Union};
//! # use std::any::TypeId;
//! #[derive(Axis)] struct N;
//! #[derive(Axis)] struct C;
//! #[derive(Axis)] struct H;
//! #[derive(Axis)] struct W;
//!
//! fn same<X: 'static, Y: 'static>() -> bool { TypeId::of::<X>() == TypeId::of::<Y>() }
//! assert!(same::<Broadcast<(C, H, W), (N, W, H)>, (C, H, W, N)>());
//! assert!(same::<Union<(H, W), (W, N)>, (H, W, N)>());
//! assert!(same::<Difference<(N, C, H), (C,)>, (N, H)>());
//! assert!(same::<Intersection<(N, C, H), (H, N)>, (N, H)>());
//! assert_eq!(<(N, C, H) as AxisList>::RANK, 3);
//! assert_eq!(<(N, C) as AxisList>::IDS, [TypeId::of::<N>(), TypeId::of::<C>()]);
//! ```

/// An internal list trait whose failure names the public bounds: these traits hold for every
/// concrete list, so they fail only on a list the compiler cannot see, the axes of a generic
/// parameter, and the fix is a bound on that parameter.
macro_rules! hint_generic_bounds {
    ($message:tt, $($item:tt)*) => {
        #[diagnostic::on_unimplemented(
            message = $message,
            note = "these axes come from a generic parameter: state what the function does with its axes `A` by one bound (all in the prelude): `A: Reducible<Over>` (sum, mean, max_over, ...), `A: HasAxis<X>` (len_of, softmax, slice), `A: ElementwiseWith<R>` (operators with other axes), `A: Includes<R>` (the same, keeping `A`), `A: DotWith<R>` (dot), `A: DotOverWith<R, Over>` (dot_over), `A: SameAxes<O>` (axes_with_order, assign); two generic axes in one tuple need `(F, G): AxisSet`. Guide: `axes::doc::generic_code`"
        )]
        $($item)*
    };
}

mod bounds;
mod checks;
mod flat;
mod ops;
mod roles;

pub use bounds::{DotOverWith, ElementwiseWith, Includes, Reducible};
pub use checks::{AxisSet, HasAxis, SameAxes, SameCount, SubsetOf};
pub use flat::Flat;
pub use ops::{
    Broadcast, BroadcastWith, Concat, ConcatWith, Difference, DifferenceWith, DotAxes, DotWith,
    Intersection, IntersectionWith, TransposeAxes, Transposed, Union, UnionWith,
};
pub use roles::{AxisWithRole, WithRole};

pub(crate) use ops::Has;
pub(crate) use roles::CountRole;

use std::any::TypeId;
use std::borrow::Cow;
use std::marker::PhantomData;

use crate::axis::Axis;

/// The largest number of axes a tensor may have.
pub const MAX_RANK: usize = 8;

/// The empty internal list.
pub struct Nil;

/// An internal list: axis `H` followed by the list `T`.
pub struct Cons<H, T>(PhantomData<(H, T)>);

/// An internal (cons) list of axes, convertible back to the public tuple form.
pub trait List {
    /// The number of axes.
    const LEN: usize;
}

impl List for Nil {
    const LEN: usize = 0;
}

impl<H: Axis, T: List> List for Cons<H, T> {
    const LEN: usize = 1 + T::LEN;
}

/// Converts an internal list back to its tuple.
#[diagnostic::on_unimplemented(
    message = "the result would have more than 8 axes",
    label = "too many axes",
    note = "a tensor has at most 8 axes"
)]
pub trait ToTuple {
    /// The tuple with the same axes in the same order.
    type Tuple: AxisList;
}

/// A tuple of at most [`MAX_RANK`] axes, the public form of an axis list.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a list of axes",
    label = "not an axis list",
    note = "an axis list is a tuple of at most 8 axes, each with `#[derive(Axis)]`: `(Batch, Hidden)`, `(Class,)`, or `()` for a scalar"
)]
pub trait AxisList: Sized + 'static {
    /// The internal cons form of the list.
    type List: List + ToTuple<Tuple = Self>;
    /// The number of axes.
    const RANK: usize;
    /// The axis names in order, for messages.
    fn names() -> Vec<Cow<'static, str>>;
    /// The axes' `TypeId`s in order, [`AxisList::RANK`] of them.
    const IDS: &'static [TypeId];
    /// The `TypeId`s of the axes' transposes (`Dual<A>` for `A`, `A` for `Dual<A>`), in order.
    const TRANSPOSED_IDS: &'static [TypeId];
    /// The fixed lengths (`#[axis(len = N)]`) in order; `None` where an axis has none.
    const FIXED_LENS: [Option<usize>; MAX_RANK];
}

macro_rules! tuple_lists {
    ($(($($axis:ident)*) => $cons:ty;)*) => {$(
        impl<$($axis: Axis),*> AxisList for ($($axis,)*) {
            type List = $cons;
            const RANK: usize = <$cons as List>::LEN;
            fn names() -> Vec<Cow<'static, str>> {
                vec![$($axis::name()),*]
            }
            const IDS: &'static [TypeId] = &[$(TypeId::of::<$axis>()),*];
            const TRANSPOSED_IDS: &'static [TypeId] = &[$(TypeId::of::<$axis::Transposed>()),*];
            const FIXED_LENS: [Option<usize>; MAX_RANK] = pad_to_max_rank(&[$($axis::FIXED_LEN),*]);
        }

        impl<$($axis: Axis),*> ToTuple for $cons {
            type Tuple = ($($axis,)*);
        }
    )*};
}

tuple_lists! {
    () => Nil;
    (A) => Cons<A, Nil>;
    (A B) => Cons<A, Cons<B, Nil>>;
    (A B C) => Cons<A, Cons<B, Cons<C, Nil>>>;
    (A B C D) => Cons<A, Cons<B, Cons<C, Cons<D, Nil>>>>;
    (A B C D E) => Cons<A, Cons<B, Cons<C, Cons<D, Cons<E, Nil>>>>>;
    (A B C D E F) => Cons<A, Cons<B, Cons<C, Cons<D, Cons<E, Cons<F, Nil>>>>>>;
    (A B C D E F G) => Cons<A, Cons<B, Cons<C, Cons<D, Cons<E, Cons<F, Cons<G, Nil>>>>>>>;
    (A B C D E F G H) => Cons<A, Cons<B, Cons<C, Cons<D, Cons<E, Cons<F, Cons<G, Cons<H, Nil>>>>>>>>;
}

const fn pad_to_max_rank(given: &[Option<usize>]) -> [Option<usize>; MAX_RANK] {
    let mut out = [None; MAX_RANK];
    let mut i = 0;
    while i < given.len() {
        out[i] = given[i];
        i += 1;
    }
    out
}

hint_generic_bounds!(
    "cannot find the axis `{A}` in the axes `{Self}`",
    /// Position of axis `A` in an internal list (the list's length when `A` is absent).
    pub trait Find<A> {
        /// The zero-based position.
        const POS: usize;
    }
);

impl<A> Find<A> for Nil {
    const POS: usize = 0;
}

impl<A: Axis, H: Axis, T: Find<A>> Find<A> for Cons<H, T>
where
    H::Id: crate::axis::id::IdEq<A::Id>,
{
    const POS: usize = if <<H::Id as crate::axis::id::IdEq<A::Id>>::Out as typenum::Bit>::BOOL {
        0
    } else {
        1 + <T as Find<A>>::POS
    };
}

hint_generic_bounds!(
    "cannot place the axes `{Self}` in the axes `{M}`",
    /// For each axis of an internal list, its position in another list `M`.
    pub trait PositionsIn<M> {
        /// Entry `i` is the position in `M` of this list's axis `i`; unused entries are 0.
        const POSITIONS: [usize; MAX_RANK];
    }
);

impl<M> PositionsIn<M> for Nil {
    const POSITIONS: [usize; MAX_RANK] = [0; MAX_RANK];
}

impl<H, T: PositionsIn<M>, M: Find<H>> PositionsIn<M> for Cons<H, T> {
    const POSITIONS: [usize; MAX_RANK] = prepend(<M as Find<H>>::POS, T::POSITIONS);
}

const fn prepend(first: usize, rest: [usize; MAX_RANK]) -> [usize; MAX_RANK] {
    let mut out = [0; MAX_RANK];
    out[0] = first;
    let mut i = 1;
    while i < MAX_RANK {
        out[i] = rest[i - 1];
        i += 1;
    }
    out
}

/// For each axis of `L`, its position in `M`, or `M::RANK` where `M` lacks it; computed at
/// run time from the axes' `TypeId`s, so generic code needs no bound beyond [`AxisList`].
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct A;
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct C;
/// let p = axes::list::find_positions::<(C, B), (A, C)>();
/// assert_eq!(&p[..2], &[1, 2]);
/// ```
pub fn find_positions<L: AxisList, M: AxisList>() -> [usize; MAX_RANK] {
    let mut out = [0; MAX_RANK];
    for (slot, id) in out.iter_mut().zip(L::IDS) {
        *slot = (M::IDS.iter()).position(|t| t == id).unwrap_or(M::RANK);
    }
    out
}

/// For each axis of `L`, its position in `M` (both tuples). With `L: SameAxes<M>` this is the
/// permutation that reorders `M`'s data into `L`'s order.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct A;
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct C;
/// let p = axes::list::positions_in::<(C, A), (A, B, C)>();
/// assert_eq!(&p[..2], &[2, 0]);
/// ```
pub const fn positions_in<L, M>() -> [usize; MAX_RANK]
where
    L: AxisList,
    M: AxisList,
    L::List: PositionsIn<M::List>,
{
    <L::List as PositionsIn<M::List>>::POSITIONS
}
