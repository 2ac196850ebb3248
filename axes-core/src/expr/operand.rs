//! What can be an operand: expressions and scalars ([`IntoExpr`], [`Operand`]), and
//! [`select`].

use half::{bf16, f16};

use super::Expr;
use super::nodes::{Scalar, Select};
use crate::element::Element;

/// Anything usable as an operand: an expression, or a scalar (which has no axes).
pub trait IntoExpr {
    /// The expression.
    type Expr: Expr;
    /// Converts.
    fn into_expr(self) -> Self::Expr;
}

impl<E: Expr> IntoExpr for E {
    type Expr = E;
    #[inline]
    fn into_expr(self) -> E {
        self
    }
}

macro_rules! scalar_into_expr {
    ($($t:ty),*) => {$(
        impl IntoExpr for $t {
            type Expr = Scalar<$t>;
            #[inline]
            fn into_expr(self) -> Scalar<$t> {
                Scalar(self)
            }
        }
    )*};
}

scalar_into_expr!(f32, f64, f16, bf16, i32, i64, u8, bool);

/// An operand of element type `T`: an expression of `T`, or a `T` scalar. The element type
/// is a parameter of the trait (not only of its expression), so a literal such as `2.0`
/// takes the element type of the other operand.
pub trait Operand<T: Element> {
    /// The expression.
    type Expr: Expr<Elem = T>;
    /// Converts.
    fn into_operand(self) -> Self::Expr;
}

impl<T: Element, E: Expr<Elem = T>> Operand<T> for E {
    type Expr = E;
    #[inline]
    fn into_operand(self) -> E {
        self
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl Operand<$t> for $t {
            type Expr = Scalar<$t>;
            #[inline]
            fn into_operand(self) -> Scalar<$t> {
                Scalar(self)
            }
        }
    )*};
}

scalar_operand!(f32, f64, f16, bf16, i32, i64, u8, bool);

/// `a` where `cond` is true, else `b`, element-wise with broadcasting.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct T;
/// let x = Tensor::<f32, (T,)>::from_vec(T.len(3), vec![-1., 0., 2.])?;
/// let y = select((&x).greater(0.0), &x, 0.0).eval()?;
/// assert_eq!(y.to_vec(), [0., 0., 2.]);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn select<C, A, B>(
    cond: C,
    a: A,
    b: B,
) -> Select<<A::Expr as Expr>::Elem, C::Expr, A::Expr, B::Expr>
where
    C: IntoExpr,
    A: IntoExpr,
    B: Operand<<A::Expr as Expr>::Elem>,
{
    Select::new(cond.into_expr(), a.into_expr(), b.into_operand())
}
