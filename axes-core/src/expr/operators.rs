//! `+ - * /` and unary `-` on tensors, expressions and scalars (on either side).

use std::ops::{Add, Div, Mul, Neg, Sub};

use half::{bf16, f16};

use super::Expr;
use super::nodes::{Binary, Cast, MapFn, Scalar, Select, Unary};
use crate::element::Element;
use crate::ir::{binary, unary};
use crate::list::{AxisSet, Broadcast, BroadcastWith};
use crate::tensor::Tensor;

/// The four arithmetic operators for one pair of operand types: `impl<G> Op<Rhs> for Lhs`,
/// whose output is the `Binary` node of `left` and `right` (built from `lhs` and `rhs`) with
/// result axes `axes`, under the bounds `where`.
macro_rules! arithmetic {
    ([$($g:tt)*] $lhs:ty, $rhs:ty => $elem:ty, $left:ty, $right:ty, $axes:ty, [$($bounds:tt)*], |$a:ident, $b:ident| $l:expr, $r:expr) => {
        arithmetic!(@op [$($g)*] Add add, $lhs, $rhs, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Sub sub, $lhs, $rhs, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Mul mul, $lhs, $rhs, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Div div, $lhs, $rhs, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
    };
    (@op [$($g:tt)*] $trait:ident $method:ident, $lhs:ty, $rhs:ty, $elem:ty, $left:ty, $right:ty, $axes:ty, [$($bounds:tt)*], |$a:ident, $b:ident| $l:expr, $r:expr) => {
        impl<$($g)*> $trait<$rhs> for $lhs
        where
            $($bounds)*
        {
            type Output = Binary<$elem, $left, $right, binary::$trait, $axes>;
            fn $method(self, rhs: $rhs) -> Self::Output {
                let ($a, $b) = (self, rhs);
                Binary::new($l, $r, binary::$trait)
            }
        }
    };
}

/// The element type `T` itself: the bound that keeps both operands of an operator of one
/// element type, with a message that says how to mix two.
#[diagnostic::on_unimplemented(
    message = "an operand of `{Self}` elements in an expression of `{T}` elements",
    label = "`{Self}` operand where `{T}` is expected",
    note = "element types never convert implicitly: cast one side, e.g. `y.cast::<{T}>()` for an `{Self}` operand `y`"
)]
pub trait SameElement<T> {}

impl<T> SameElement<T> for T {}

/// Expression op expression (of the same element type), and `-expression`; `$axes` is the
/// left operand's axes.
macro_rules! expr_operators {
    ($([$($generics:tt)*] $ty:ty => $elem:ty, $axes:ty, [$($own:tt)*];)*) => {$(
        arithmetic!(
            [$($generics)*, Rhs: Expr<Elem: SameElement<$elem>>] $ty, Rhs => $elem, $ty, Rhs,
            Broadcast<$axes, Rhs::Axes>,
            [$($own)* $axes: BroadcastWith<Rhs::Axes>, Broadcast<$axes, Rhs::Axes>: AxisSet,],
            |a, b| a, b
        );
        impl<$($generics)*> Neg for $ty {
            type Output = Unary<$elem, Self, unary::Neg>;
            fn neg(self) -> Self::Output {
                Unary::new(self, unary::Neg)
            }
        }
    )*};
}

expr_operators! {
    ['t, T: Element, A: AxisSet] &'t Tensor<T, A> => T, A, [];
    [T: Element, A: AxisSet] Tensor<T, A> => T, A, [];
    [T: Element] Scalar<T> => T, (), [];
    [T, E, Op] Unary<T, E, Op> => T, <Self as Expr>::Axes, [Self: Expr,];
    [T, L, R, Op, A] Binary<T, L, R, Op, A> => T, A, [];
    [T, C, X, Y] Select<T, C, X, Y> => T, <Self as Expr>::Axes, [Self: Expr,];
    [E, U] Cast<E, U> => U, <Self as Expr>::Axes, [Self: Expr,];
    [U, E, F] MapFn<U, E, F> => U, <Self as Expr>::Axes, [Self: Expr,];
}

/// Scalar op expression and expression op scalar, for each scalar type: the scalar has the
/// expression's element type (so a literal such as `2.0` takes it), and the result the
/// expression's axes.
macro_rules! scalar_operators {
    ($($s:ty),*) => {$(
        scalar_operators!(@ $s;
            ['t, A: AxisSet] &'t Tensor<$s, A>, A, [];
            [A: AxisSet] Tensor<$s, A>, A, [];
            [E, Op] Unary<$s, E, Op>, <Unary<$s, E, Op> as Expr>::Axes, [Unary<$s, E, Op>: Expr,];
            [L, R, Op, A] Binary<$s, L, R, Op, A>, A, [];
            [C, X, Y] Select<$s, C, X, Y>, <Select<$s, C, X, Y> as Expr>::Axes, [Select<$s, C, X, Y>: Expr,];
            [E] Cast<E, $s>, <Cast<E, $s> as Expr>::Axes, [Cast<E, $s>: Expr,];
            [E, F] MapFn<$s, E, F>, <MapFn<$s, E, F> as Expr>::Axes, [MapFn<$s, E, F>: Expr,];
        );
    )*};
    (@ $s:ty; $([$($generics:tt)*] $ty:ty, $axes:ty, [$($own:tt)*];)*) => {$(
        arithmetic!([$($generics)*] $s, $ty => $s, Scalar<$s>, $ty, $axes, [$($own)*], |a, b| Scalar(a), b);
        arithmetic!([$($generics)*] $ty, $s => $s, $ty, Scalar<$s>, $axes, [$($own)*], |a, b| a, Scalar(b));
    )*};
}

scalar_operators!(f32, f64, f16, bf16, i32, i64, u8);
