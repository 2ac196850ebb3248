//! Named lengths and named indices: tuples of [`Len`] or [`At`] values in any axis order.
//!
//! `(Hidden.len(64), Batch.len(32))` and `(Batch.at(3), Hidden.at(7))` name every number by
//! its axis, so two axes of equal length can never be swapped by position.

use std::marker::PhantomData;

use crate::axis::{At, Axis, Len};
use crate::list::{AxisList, HasAxis, MAX_RANK};

/// A tuple of [`Len`] values: the lengths of a tensor's axes, named, in any order.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tuple of named lengths",
    label = "expected lengths such as `(Batch.len(32), Hidden.len(64))`",
    note = "name each length by its axis: `Batch.len(32)` or `Len::<Batch>::new(32)`"
)]
pub trait NamedLengths {
    /// The axes named, in the order written.
    type Axes: AxisList;
    /// The lengths, in the order written.
    fn values(&self) -> [usize; MAX_RANK];
}

/// A tuple of [`At`] values: a position on every axis of a tensor, named, in any order.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a named index",
    label = "expected an index such as `(Batch.at(3), Hidden.at(7))`",
    note = "name each position by its axis: `Batch.at(3)` or `At::<Batch>::new(3)`"
)]
pub trait NamedIndex {
    /// The axes named, in the order written.
    type Axes: AxisList;
    /// The positions, in the order written.
    fn values(&self) -> [usize; MAX_RANK];
}

macro_rules! named_tuples {
    ($(($($axis:ident $i:tt)*);)*) => {$(
        impl<$($axis: Axis),*> NamedLengths for ($(Len<$axis>,)*) {
            type Axes = ($($axis,)*);
            #[allow(unused_mut)]
            fn values(&self) -> [usize; MAX_RANK] {
                let mut out = [0; MAX_RANK];
                $(out[$i] = self.$i.get();)*
                out
            }
        }

        impl<$($axis: Axis),*> NamedIndex for ($(At<$axis>,)*) {
            type Axes = ($($axis,)*);
            #[allow(unused_mut)]
            fn values(&self) -> [usize; MAX_RANK] {
                let mut out = [0; MAX_RANK];
                $(out[$i] = self.$i.get();)*
                out
            }
        }
    )*};
}

named_tuples! {
    ();
    (A 0);
    (A 0 B 1);
    (A 0 B 1 C 2);
    (A 0 B 1 C 2 D 3);
    (A 0 B 1 C 2 D 3 E 4);
    (A 0 B 1 C 2 D 3 E 4 F 5);
    (A 0 B 1 C 2 D 3 E 4 F 5 G 6);
    (A 0 B 1 C 2 D 3 E 4 F 5 G 6 H 7);
}

impl<A: Axis> NamedLengths for Len<A> {
    type Axes = (A,);
    fn values(&self) -> [usize; MAX_RANK] {
        let mut out = [0; MAX_RANK];
        out[0] = self.get();
        out
    }
}

impl<A: Axis> NamedIndex for At<A> {
    type Axes = (A,);
    fn values(&self) -> [usize; MAX_RANK] {
        let mut out = [0; MAX_RANK];
        out[0] = self.get();
        out
    }
}

/// A position on every axis of `L`, read by axis name; given to the closure of
/// [`Tensor::from_fn`](crate::Tensor::from_fn).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Row;
/// #[derive(Axis)] struct Col;
/// let t = Tensor::<i32, (Row, Col)>::from_fn((Row.len(2), Col.len(3)), |ix| {
///     (10 * ix.of::<Row>() + ix.of::<Col>()) as i32
/// })?;
/// assert_eq!(t.to_vec(), [0, 1, 2, 10, 11, 12]);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Coords<L> {
    at: [usize; MAX_RANK],
    _axes: PhantomData<fn() -> L>,
}

impl<L: AxisList> Coords<L> {
    pub(crate) fn new(at: [usize; MAX_RANK]) -> Self {
        Coords {
            at,
            _axes: PhantomData,
        }
    }

    /// The position along axis `X`.
    pub fn of<X: Axis>(&self) -> usize
    where
        L: HasAxis<X>,
    {
        self.at[<L as HasAxis<X>>::POS]
    }

    /// The positions in the order of `L`.
    pub fn as_slice(&self) -> &[usize] {
        &self.at[..L::RANK]
    }
}
