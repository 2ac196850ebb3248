//! `+ - * /` and unary `-` on tensors, expressions and scalars (on either side).

use std::ops::{Add, Div, Mul, Neg, Sub};

use half::{bf16, f16};

use super::Expr;
use super::nodes::{Binary, Cast, MapFn, Scalar, Select, Unary};
use super::ops::{binary, unary};
use crate::element::Element;
use crate::list::AxisSet;
use crate::tensor::Tensor;

/// `impl Add/Sub/Mul/Div<R: IntoExpr>` and `Neg` for an expression type.
macro_rules! expr_operators {
    ($([$($generics:tt)*] $ty:ty => $elem:ty;)*) => {$(
        impl<$($generics)*, Rhs: Expr<Elem = $elem>> Add<Rhs> for $ty {
            type Output = Binary<$elem, Self, Rhs, binary::Add>;
            fn add(self, rhs: Rhs) -> Self::Output {
                Binary::new(self, rhs, binary::Add)
            }
        }
        impl<$($generics)*, Rhs: Expr<Elem = $elem>> Sub<Rhs> for $ty {
            type Output = Binary<$elem, Self, Rhs, binary::Sub>;
            fn sub(self, rhs: Rhs) -> Self::Output {
                Binary::new(self, rhs, binary::Sub)
            }
        }
        impl<$($generics)*, Rhs: Expr<Elem = $elem>> Mul<Rhs> for $ty {
            type Output = Binary<$elem, Self, Rhs, binary::Mul>;
            fn mul(self, rhs: Rhs) -> Self::Output {
                Binary::new(self, rhs, binary::Mul)
            }
        }
        impl<$($generics)*, Rhs: Expr<Elem = $elem>> Div<Rhs> for $ty {
            type Output = Binary<$elem, Self, Rhs, binary::Div>;
            fn div(self, rhs: Rhs) -> Self::Output {
                Binary::new(self, rhs, binary::Div)
            }
        }
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

/// `scalar op expression` for each scalar type and expression type.
macro_rules! scalar_left {
    ($($s:ty),*) => {$(
        scalar_left!(@ $s;
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
        impl<$($generics)*> Add<$ty> for $s {
            type Output = Binary<$s, Scalar<$s>, $ty, binary::Add>;
            fn add(self, rhs: $ty) -> Self::Output {
                Binary::new(Scalar(self), rhs, binary::Add)
            }
        }
        impl<$($generics)*> Sub<$ty> for $s {
            type Output = Binary<$s, Scalar<$s>, $ty, binary::Sub>;
            fn sub(self, rhs: $ty) -> Self::Output {
                Binary::new(Scalar(self), rhs, binary::Sub)
            }
        }
        impl<$($generics)*> Mul<$ty> for $s {
            type Output = Binary<$s, Scalar<$s>, $ty, binary::Mul>;
            fn mul(self, rhs: $ty) -> Self::Output {
                Binary::new(Scalar(self), rhs, binary::Mul)
            }
        }
        impl<$($generics)*> Div<$ty> for $s {
            type Output = Binary<$s, Scalar<$s>, $ty, binary::Div>;
            fn div(self, rhs: $ty) -> Self::Output {
                Binary::new(Scalar(self), rhs, binary::Div)
            }
        }
    )*};
}

scalar_left!(f32, f64, f16, bf16, i32, i64, u8);

/// `expression op scalar`, where the scalar has the expression's element type.
macro_rules! scalar_right {
    ($($s:ty),*) => {$(
        scalar_right!(@ $s;
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
        impl<$($generics)*> Add<$s> for $ty {
            type Output = Binary<$s, Self, Scalar<$s>, binary::Add>;
            fn add(self, rhs: $s) -> Self::Output {
                Binary::new(self, Scalar(rhs), binary::Add)
            }
        }
        impl<$($generics)*> Sub<$s> for $ty {
            type Output = Binary<$s, Self, Scalar<$s>, binary::Sub>;
            fn sub(self, rhs: $s) -> Self::Output {
                Binary::new(self, Scalar(rhs), binary::Sub)
            }
        }
        impl<$($generics)*> Mul<$s> for $ty {
            type Output = Binary<$s, Self, Scalar<$s>, binary::Mul>;
            fn mul(self, rhs: $s) -> Self::Output {
                Binary::new(self, Scalar(rhs), binary::Mul)
            }
        }
        impl<$($generics)*> Div<$s> for $ty {
            type Output = Binary<$s, Self, Scalar<$s>, binary::Div>;
            fn div(self, rhs: $s) -> Self::Output {
                Binary::new(self, Scalar(rhs), binary::Div)
            }
        }
    )*};
}

scalar_right!(f32, f64, f16, bf16, i32, i64, u8);
