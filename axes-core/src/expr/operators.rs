//! `+ - * /` and unary `-` on tensors, expressions and scalars (on either side).

use std::ops::{Add, Div, Mul, Neg, Sub};

use half::{bf16, f16};

use super::Expr;
use super::nodes::{Binary, Cast, MapFn, Scalar, Select, Unary};
use crate::element::Element;
use crate::ir::{binary, unary};
use crate::list::AxisSet;
use crate::tensor::Tensor;

/// The four arithmetic operators for one pair of operand types: `impl<G> Op<Rhs> for Lhs`,
/// whose output is the `Binary` node of `left` and `right` (built from `lhs` and `rhs`).
macro_rules! arithmetic {
    ([$($g:tt)*] $lhs:ty, $rhs:ty => $elem:ty, $left:ty, $right:ty, |$a:ident, $b:ident| $l:expr, $r:expr) => {
        arithmetic!(@op [$($g)*] Add add, $lhs, $rhs, $elem, $left, $right, |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Sub sub, $lhs, $rhs, $elem, $left, $right, |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Mul mul, $lhs, $rhs, $elem, $left, $right, |$a, $b| $l, $r);
        arithmetic!(@op [$($g)*] Div div, $lhs, $rhs, $elem, $left, $right, |$a, $b| $l, $r);
    };
    (@op [$($g:tt)*] $trait:ident $method:ident, $lhs:ty, $rhs:ty, $elem:ty, $left:ty, $right:ty, |$a:ident, $b:ident| $l:expr, $r:expr) => {
        impl<$($g)*> $trait<$rhs> for $lhs {
            type Output = Binary<$elem, $left, $right, binary::$trait>;
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

/// Expression op expression (of the same element type), and `-expression`.
macro_rules! expr_operators {
    ($([$($generics:tt)*] $ty:ty => $elem:ty;)*) => {$(
        arithmetic!([$($generics)*, Rhs: Expr<Elem: SameElement<$elem>>] $ty, Rhs => $elem, $ty, Rhs, |a, b| a, b);
        impl<$($generics)*> Neg for $ty {
            type Output = Unary<$elem, Self, unary::Neg>;
            fn neg(self) -> Self::Output {
                Unary::new(self, unary::Neg)
            }
        }
    )*};
}

expr_operators! {
    ['t, T: Element, A: AxisSet] &'t Tensor<T, A> => T;
    [T: Element, A: AxisSet] Tensor<T, A> => T;
    [T: Element] Scalar<T> => T;
    [T, E, Op] Unary<T, E, Op> => T;
    [T, L, R, Op] Binary<T, L, R, Op> => T;
    [T, C, X, Y] Select<T, C, X, Y> => T;
    [E, U] Cast<E, U> => U;
    [U, E, F] MapFn<U, E, F> => U;
}

/// Scalar op expression and expression op scalar, for each scalar type: the scalar has the
/// expression's element type (so a literal such as `2.0` takes it).
macro_rules! scalar_operators {
    ($($s:ty),*) => {$(
        scalar_operators!(@ $s;
            ['t, A: AxisSet] &'t Tensor<$s, A>;
            [A: AxisSet] Tensor<$s, A>;
            [E, Op] Unary<$s, E, Op>;
            [L, R, Op] Binary<$s, L, R, Op>;
            [C, X, Y] Select<$s, C, X, Y>;
            [E] Cast<E, $s>;
            [E, F] MapFn<$s, E, F>;
        );
    )*};
    (@ $s:ty; $([$($generics:tt)*] $ty:ty;)*) => {$(
        arithmetic!([$($generics)*] $s, $ty => $s, Scalar<$s>, $ty, |a, b| Scalar(a), b);
        arithmetic!([$($generics)*] $ty, $s => $s, $ty, Scalar<$s>, |a, b| a, Scalar(b));
    )*};
}

scalar_operators!(f32, f64, f16, bf16, i32, i64, u8);
