//! The axis of a list with a built-in role ([`WithRole`]): counted and found on the internal
//! cons list by each axis's role bits, so that no axis, or two, is a compile error naming the
//! role and the list.

use std::ops::Add;

use typenum::{B0, B1, Bit, U0, UInt, UTerm, Unsigned};

use super::{AxisList, Cons, Nil};
use crate::axis::Axis;
use crate::axis::roles::RoleKind;

/// The one axis of the list with the role `R` (a type of [`crate::roles::kind`]), whatever its
/// place in the list: a convolution finds its input's `Height` axis so, and an input with no
/// `Height` axis, or two, is a compile error naming the role.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::WithRole;
/// use axes::roles::kind;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Channel)] struct Rgb;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
///
/// fn channels<A: WithRole<kind::Channel>>() -> String {
///     <A as WithRole<kind::Channel>>::Axis::name().into_owned()
/// }
/// assert_eq!(channels::<(Batch, Rows, Rgb)>(), "Rgb");
/// assert_eq!(<(Rgb, Rows) as WithRole<kind::Height>>::POS, 1);
/// ```
#[diagnostic::on_unimplemented(
    message = "cannot tell which axis of `{Self}` has the role `{R}`",
    note = "these axes come from a generic parameter: bound it by `WithRole<{R}>`"
)]
pub trait WithRole<R>: AxisList {
    /// The axis with the role.
    type Axis: Axis;
    /// Its position in the list.
    const POS: usize;
}

impl<R: RoleKind, L: AxisList> WithRole<R> for L
where
    L::List: CountRole<R> + FirstWithRole<R>,
    <L::List as CountRole<R>>::Count: SomeAxisWithRole<R, L> + AtMostOneAxisWithRole<R, L>,
    <L::List as FirstWithRole<R>>::Found: Axis,
{
    type Axis = <L::List as FirstWithRole<R>>::Found;
    const POS: usize = <L::List as FirstWithRole<R>>::POS;
}

/// The one axis of the list `L` with the role `R` (a type of [`crate::roles::kind`]).
pub type AxisWithRole<L, R> = <L as WithRole<R>>::Axis;

/// Internal: how many axes of the list have the role `R`.
pub trait CountRole<R> {
    /// The count.
    type Count: Unsigned;
}

impl<R> CountRole<R> for Nil {
    type Count = U0;
}

impl<R: RoleKind, H: Axis, T: CountRole<R>> CountRole<R> for Cons<H, T>
where
    T::Count: Add<R::In<H::Roles>, Output: Unsigned>,
{
    type Count = <T::Count as Add<R::In<H::Roles>>>::Output;
}

/// Internal: the first axis of the list with the role `R`, and its position.
pub trait FirstWithRole<R> {
    /// The axis (a stand-in where there is none).
    type Found;
    /// Its position.
    const POS: usize;
}

// Where there is none, an axis that stands in (the checks reject the list): the error then
// names the role alone.
impl<R> FirstWithRole<R> for Nil {
    type Found = crate::list::Flat<()>;
    const POS: usize = 0;
}

impl<R: RoleKind, H: Axis, T> FirstWithRole<R> for Cons<H, T>
where
    R::In<H::Roles>: FirstOrRest<H, T, R>,
{
    type Found = <R::In<H::Roles> as FirstOrRest<H, T, R>>::Found;
    const POS: usize = <R::In<H::Roles> as FirstOrRest<H, T, R>>::POS;
}

/// Internal: after looking at axis `H`, it at [`B1`]; the first of the rest `T` at [`B0`].
pub trait FirstOrRest<H, T, R> {
    /// The axis.
    type Found;
    /// Its position, counted from `H`.
    const POS: usize;
}

impl<H, T, R> FirstOrRest<H, T, R> for B1 {
    type Found = H;
    const POS: usize = 0;
}

impl<H, T: FirstWithRole<R>, R> FirstOrRest<H, T, R> for B0 {
    type Found = T::Found;
    const POS: usize = 1 + T::POS;
}

/// Witness that the axes `L` have an axis with the role `R`.
#[diagnostic::on_unimplemented(
    message = "the axes `{L}` have no axis with the role `{R}`",
    label = "no axis with the role `{R}` here",
    note = "an axis gets a role where it is declared: `#[axis(role = Height)]`, say"
)]
pub trait SomeAxisWithRole<R, L> {}

impl<R, L, U: Unsigned, B: Bit> SomeAxisWithRole<R, L> for UInt<U, B> {}

/// Witness that the axes `L` have at most one axis with the role `R`.
#[diagnostic::on_unimplemented(
    message = "the axes `{L}` have more than one axis with the role `{R}`",
    label = "two axes with the role `{R}`",
    note = "an operation that finds an axis by its role needs exactly one axis with it"
)]
pub trait AtMostOneAxisWithRole<R, L> {}

impl<R, L> AtMostOneAxisWithRole<R, L> for UTerm {}

impl<R, L> AtMostOneAxisWithRole<R, L> for UInt<UTerm, B1> {}
