//! `+ - * / %` and unary `-` on tensors, expressions and scalars (on either side).

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use half::{bf16, f16};

use super::Expr;
use super::lazy::{IntoNode, Lazy, NodeOf, Token};
use super::nodes::{Binary, Scalar, Unary};
use crate::element::Element;
use crate::ir::{binary, unary};
use crate::list::{AxisSet, Broadcast, BroadcastWith};
use crate::tensor::Tensor;

/// The five arithmetic operators for one pair of operand types: `impl<G> Op<Rhs> for Lhs`,
/// whose output is the expression (living for `$lt`) of the `Binary` node of `left` and
/// `right` (built from `lhs` and `rhs`) with result axes `axes`, under the bounds `where`.
macro_rules! arithmetic {
    ([$($g:tt)*] $lhs:ty, $rhs:ty => $lt:lifetime, $elem:ty, $left:ty, $right:ty, $axes:ty, [$($bounds:tt)*], |$a:ident, $b:ident| $l:expr, $r:expr) => {
        arithmetic!(@op [$($g)*] Add add, $lhs, $rhs, $lt, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Sub sub, $lhs, $rhs, $lt, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Mul mul, $lhs, $rhs, $lt, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Div div, $lhs, $rhs, $lt, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Rem rem, $lhs, $rhs, $lt, $elem, $left, $right, $axes, [$($bounds)*], |$a, $b| $l, $r);
    };
    (@op [$($g:tt)*] $trait:ident $method:ident, $lhs:ty, $rhs:ty, $lt:lifetime, $elem:ty, $left:ty, $right:ty, $axes:ty, [$($bounds:tt)*], |$a:ident, $b:ident| $l:expr, $r:expr) => {
        impl<$($g)*> $trait<$rhs> for $lhs
        where
            $($bounds)*
        {
            type Output = Lazy<$lt, Binary<$elem, $left, $right, binary::$trait, $axes>>;
            fn $method(self, rhs: $rhs) -> Self::Output {
                let ($a, $b) = (self, rhs);
                Lazy::new(Binary::new($l, $r, binary::$trait))
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

/// Expression op expression (of the same element type), and `-expression`, for a left
/// operand that borrows for `'t` (`$axes` is its axes): the right operand is any operand that
/// lives for `'t`.
macro_rules! borrowing_operators {
    ($([$($generics:tt)*] $ty:ty => $elem:ty, $axes:ty;)*) => {$(
        arithmetic!(
            [$($generics)*, Rhs: IntoNode<'t, Elem: SameElement<$elem>>] $ty, Rhs
                => 't, $elem, NodeOf<'t, $ty>, Rhs::Node, Broadcast<$axes, Rhs::Axes>,
            [$axes: BroadcastWith<Rhs::Axes>, Broadcast<$axes, Rhs::Axes>: AxisSet,],
            |a, b| a.into_node(Token), b.into_node(Token)
        );
        impl<$($generics)*> Neg for $ty {
            type Output = Lazy<'t, Unary<$elem, NodeOf<'t, $ty>, unary::Neg>>;
            fn neg(self) -> Self::Output {
                Lazy::new(Unary::new(self.into_node(Token), unary::Neg))
            }
        }
    )*};
}

borrowing_operators! {
    ['t, T: Element, A: AxisSet] &'t Tensor<T, A> => T, A;
    ['t, N: Expr] Lazy<'t, N> => N::Elem, N::Axes;
    ['t, 'u, N: Expr] &'t Lazy<'u, N> => N::Elem, N::Axes;
}

/// Expression op expression, and `-expression`, for a left operand that borrows nothing
/// (an owned tensor, a `Scalar`): one impl per kind of right operand, whose borrow (or none:
/// `'static`) the result keeps.
macro_rules! owned_operators {
    ($([$($generics:tt)*] $ty:ty => $elem:ty, $axes:ty;)*) => {$(
        owned_operators!(@rhs [$($generics)*] $ty => $elem, $axes; ['t, E: Expr] &'t E => 't);
        owned_operators!(@rhs [$($generics)*] $ty => $elem, $axes; ['t, N: Expr] Lazy<'t, N> => 't);
        owned_operators!(@rhs [$($generics)*] $ty => $elem, $axes; [U: Element, B: AxisSet] Tensor<U, B> => 'static);
        owned_operators!(@rhs [$($generics)*] $ty => $elem, $axes; [U: Element] Scalar<U> => 'static);
        impl<$($generics)*> Neg for $ty {
            type Output = Lazy<'static, Unary<$elem, Self, unary::Neg>>;
            fn neg(self) -> Self::Output {
                Lazy::new(Unary::new(self, unary::Neg))
            }
        }
    )*};
    (@rhs [$($generics:tt)*] $ty:ty => $elem:ty, $axes:ty; [$($rg:tt)*] $rhs:ty => $lt:lifetime) => {
        arithmetic!(
            [$($rg)*, $($generics)*] $ty, $rhs
                => $lt, $elem, $ty, NodeOf<$lt, $rhs>, Broadcast<$axes, <$rhs as Expr>::Axes>,
            [
                $rhs: IntoNode<$lt, Elem: SameElement<$elem>>,
                $axes: BroadcastWith<<$rhs as Expr>::Axes>,
                Broadcast<$axes, <$rhs as Expr>::Axes>: AxisSet,
            ],
            |a, b| a, b.into_node(Token)
        );
    };
}

owned_operators! {
    [T: Element, A: AxisSet] Tensor<T, A> => T, A;
    [T: Element] Scalar<T> => T, ();
}

/// Scalar op expression and expression op scalar, for each scalar type: the scalar has the
/// expression's element type (so a literal such as `2.0` takes it), and the result the
/// expression's axes.
macro_rules! scalar_operators {
    ($($s:ty),*) => {$(
        scalar_operators!(@ $s;
            ['t, A: AxisSet] &'t Tensor<$s, A> => 't, A;
            [A: AxisSet] Tensor<$s, A> => 'static, A;
            ['t, N: Expr<Elem = $s>] Lazy<'t, N> => 't, N::Axes;
            ['t, 'u, N: Expr<Elem = $s>] &'t Lazy<'u, N> => 't, N::Axes;
        );
    )*};
    (@ $s:ty; $([$($generics:tt)*] $ty:ty => $lt:lifetime, $axes:ty;)*) => {$(
        arithmetic!([$($generics)*] $s, $ty => $lt, $s, Scalar<$s>, NodeOf<$lt, $ty>, $axes, [],
            |a, b| Scalar(a), b.into_node(Token));
        arithmetic!([$($generics)*] $ty, $s => $lt, $s, NodeOf<$lt, $ty>, Scalar<$s>, $axes, [],
            |a, b| a.into_node(Token), Scalar(b));
    )*};
}

scalar_operators!(f32, f64, f16, bf16, i32, i64, u8);
