//! Axes as types: the [`Axis`] trait, [`Dual`] axes, roles, and named lengths and indices.
//!
//! An axis is a unit struct with `#[derive(Axis)]`. Two axes are the same axis only when they
//! are the same type; equal lengths never make axes match.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//!
//! #[derive(Axis)]
//! struct Batch;
//! #[derive(Axis)]
//! #[axis(len = 3, role = Channel)]
//! struct Rgb;
//!
//! assert_eq!(Batch::name(), "Batch");
//! assert_eq!(Rgb::FIXED_LEN, Some(3));
//! assert_eq!(<Dual<Batch>>::name(), "Dual<Batch>");
//! ```

pub mod id;

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// An axis: a type that names one dimension of a tensor.
///
/// Derive it with `#[derive(Axis)]` on a unit struct; the derive gives the axis a type-level
/// id (see [`id`]) so that axis lists can be checked and combined at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an axis",
    label = "not an axis",
    note = "an axis is a unit struct with `#[derive(Axis)]`, e.g. `#[derive(Axis)] struct Batch;`"
)]
pub trait Axis: 'static {
    /// The type-level id (hex digits of a hash; see [`id`]). Equal to itself: so generic
    /// code over one axis `F` can use `(F,)` as a set of axes.
    #[doc(hidden)]
    type Id: id::IdEq<Self::Id, Out = typenum::B1>;
    /// The axis `transpose` maps this one to: `Dual<A>` for `A`, and `A` for `Dual<A>`.
    type Transposed: Axis;
    /// The built-in roles the axis has (`#[axis(role = Height)]`), as type-level bits, so that
    /// an axis list can be searched for the axis of a role ([`crate::list::WithRole`]).
    type Roles: roles::RoleSet;
    /// The length every tensor must give this axis, if it was fixed with `#[axis(len = N)]`.
    const FIXED_LEN: Option<usize>;
    /// The axis name as the user wrote it, for messages and `Display`.
    fn name() -> Cow<'static, str>;

    /// A position along this axis, for named indexing: `Batch.at(3)`.
    fn at(self, index: usize) -> At<Self>
    where
        Self: Sized,
    {
        At::new(index)
    }

    /// A length for this axis, for building tensors: `Batch.len(32)`.
    fn len(self, length: usize) -> Len<Self>
    where
        Self: Sized,
    {
        Len::new(length)
    }
}

/// Marks an axis declared with `#[derive(Axis)]` (not a [`Dual`]): only these have duals.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is already a dual axis, so `Dual<{Self}>` is not an axis",
    label = "`Dual` of a `Dual`",
    note = "the dual of `Dual<A>` is `A` itself: write `A`"
)]
pub trait PrimalAxis: Axis {}

/// The dual ("anti-star") of axis `A`: a distinct axis with `A`'s length.
///
/// A square weight is `(Dual<Hidden>, Hidden)`; `dot` pairs a `Dual<A>` on one side with `A`
/// on the other first. `Dual<Dual<A>>` is not an axis.
pub struct Dual<A>(PhantomData<fn() -> A>);

impl<A: PrimalAxis> Dual<A> {
    /// The dual axis as a value, for `Dual::<A>::new().at(i)` and the like.
    pub const fn new() -> Self {
        Dual(PhantomData)
    }
}

impl<A: PrimalAxis> Default for Dual<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A> Clone for Dual<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for Dual<A> {}

impl<A: PrimalAxis> fmt::Debug for Dual<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Self::name())
    }
}

impl<A: PrimalAxis> Axis for Dual<A> {
    type Id = id::DualId<A::Id>;
    type Transposed = A;
    type Roles = roles::NoRoles;
    const FIXED_LEN: Option<usize> = A::FIXED_LEN;
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("Dual<{}>", A::name()))
    }
}

/// A position along axis `A`; make one with `A.at(i)` or `At::<A>::new(i)`.
pub struct At<A>(usize, PhantomData<fn() -> A>);

impl<A> At<A> {
    /// The position `index` along `A`.
    pub const fn new(index: usize) -> Self {
        At(index, PhantomData)
    }
    /// The position as a number.
    pub const fn get(&self) -> usize {
        self.0
    }
}

/// A length for axis `A`; make one with `A.len(n)` or `Len::<A>::new(n)`.
pub struct Len<A>(usize, PhantomData<fn() -> A>);

impl<A> Len<A> {
    /// The length `length` for `A`.
    pub const fn new(length: usize) -> Self {
        Len(length, PhantomData)
    }
    /// The length as a number.
    pub const fn get(&self) -> usize {
        self.0
    }
}

macro_rules! copy_debug {
    ($($name:ident => $what:literal),*) => {$(
        impl<A> Clone for $name<A> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<A> Copy for $name<A> {}
        impl<A: Axis> fmt::Debug for $name<A> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!("{}", $what, "{}"), A::name(), self.0)
            }
        }
    )*};
}

copy_debug!(At => "@", Len => "=");

/// Roles: traits an axis may implement (`#[axis(role = Height)]`) so that generic code, such
/// as a convolution, can find its axes by bound — or by search: the built-in roles are also
/// type-level bits of the axis ([`Axis::Roles`]), and [`crate::list::WithRole`] finds the one
/// axis of a list with a role (a compile error naming the role where there is none, or two).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::AxisWithRole;
/// use axes::roles::{Height, kind};
///
/// #[derive(Axis)]
/// #[axis(role = Height)]
/// struct Rows;
/// #[derive(Axis)]
/// #[axis(role = Width)]
/// struct Cols;
/// #[derive(Axis)]
/// struct Batch;
///
/// fn height_name<H: Height>() -> String {
///     H::name().into_owned()
/// }
/// assert_eq!(height_name::<Rows>(), "Rows");
/// // The axis of a list with a role, whatever the list's order.
/// assert_eq!(<AxisWithRole<(Batch, Cols, Rows), kind::Height>>::name(), "Rows");
/// assert_eq!(<AxisWithRole<(Rows, Batch, Cols), kind::Width>>::name(), "Cols");
/// ```
pub mod roles {
    use std::marker::PhantomData;

    use typenum::{B0, B1, Bit};

    use super::Axis;

    /// The built-in roles of an axis as type-level bits ([`B1`] where it has the role), in
    /// the order of [`RoleSet`]'s items; `#[derive(Axis)]` writes it.
    #[allow(clippy::type_complexity)]
    pub struct RoleBits<Batch, Channel, Channelout, Height, Width, Depth, Time, Feature>(
        PhantomData<(
            Batch,
            Channel,
            Channelout,
            Height,
            Width,
            Depth,
            Time,
            Feature,
        )>,
    );

    /// The roles of an axis that has none of the built-in ones.
    pub type NoRoles = RoleBits<B0, B0, B0, B0, B0, B0, B0, B0>;

    /// Which built-in roles an axis has: one bit per role, [`B1`] where it has it.
    pub trait RoleSet {
        /// [`Batch`].
        type Batch: Bit;
        /// [`Channel`].
        type Channel: Bit;
        /// [`Channelout`].
        type Channelout: Bit;
        /// [`Height`].
        type Height: Bit;
        /// [`Width`].
        type Width: Bit;
        /// [`Depth`].
        type Depth: Bit;
        /// [`Time`].
        type Time: Bit;
        /// [`Feature`].
        type Feature: Bit;
    }

    impl<Ba: Bit, Ch: Bit, Co: Bit, He: Bit, Wi: Bit, De: Bit, Ti: Bit, Fe: Bit> RoleSet
        for RoleBits<Ba, Ch, Co, He, Wi, De, Ti, Fe>
    {
        type Batch = Ba;
        type Channel = Ch;
        type Channelout = Co;
        type Height = He;
        type Width = Wi;
        type Depth = De;
        type Time = Ti;
        type Feature = Fe;
    }

    /// A built-in role as a type, to search an axis list for it
    /// ([`crate::list::WithRole`]): one of the types in [`kind`].
    pub trait RoleKind: 'static {
        /// Whether an axis of the roles `S` has this one.
        type In<S: RoleSet>: Bit;
    }

    /// The built-in roles as types, one per role trait of the same name.
    pub mod kind {
        macro_rules! kinds {
            ($($role:ident,)*) => {$(
                #[doc = concat!("The role [`", stringify!($role), "`](super::", stringify!($role), "), to search for.")]
                pub struct $role;

                impl super::RoleKind for $role {
                    type In<S: super::RoleSet> = S::$role;
                }
            )*};
        }

        kinds!(
            Batch, Channel, Channelout, Height, Width, Depth, Time, Feature,
        );
    }

    // Each role trait holds only for an axis whose role bit is set: the derive sets both.
    macro_rules! roles {
        ($($role:ident: $what:literal, $message:literal, $label:literal, $note:literal;)*) => {$(
            #[doc = concat!("The role of ", $what, ".")]
            #[diagnostic::on_unimplemented(message = $message, label = $label, note = $note)]
            pub trait $role: Axis<Roles: RoleSet<$role = B1>> {}
        )*};
    }

    roles! {
        Batch: "a batch axis (independent examples)",
            "axis `{Self}` does not have the role `Batch`",
            "not a `Batch` axis",
            "give an axis a role where it is declared: `#[axis(role = Batch)]`";
        Channel: "a channel or feature-map axis",
            "axis `{Self}` does not have the role `Channel`",
            "not a `Channel` axis",
            "give an axis a role where it is declared: `#[axis(role = Channel)]`";
        Channelout: "a filter's output-channel axis (a convolution's result has it in place of the input's channels)",
            "axis `{Self}` does not have the role `Channelout`",
            "not a `Channelout` axis",
            "give an axis a role where it is declared: `#[axis(role = Channelout)]`";
        Height: "an image height axis",
            "axis `{Self}` does not have the role `Height`",
            "not a `Height` axis",
            "give an axis a role where it is declared: `#[axis(role = Height)]`";
        Width: "an image width axis",
            "axis `{Self}` does not have the role `Width`",
            "not a `Width` axis",
            "give an axis a role where it is declared: `#[axis(role = Width)]`";
        Depth: "a volume depth axis",
            "axis `{Self}` does not have the role `Depth`",
            "not a `Depth` axis",
            "give an axis a role where it is declared: `#[axis(role = Depth)]`";
        Time: "a time or sequence axis",
            "axis `{Self}` does not have the role `Time`",
            "not a `Time` axis",
            "give an axis a role where it is declared: `#[axis(role = Time)]`";
        Feature: "a feature axis",
            "axis `{Self}` does not have the role `Feature`",
            "not a `Feature` axis",
            "give an axis a role where it is declared: `#[axis(role = Feature)]`";
    }
}
