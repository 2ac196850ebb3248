//! What can be an operand: expressions and scalars ([`IntoExpr`], [`Operand`]), and
//! [`select`].

use half::{bf16, f16};

use super::Expr;
use super::lazy::{IntoNode, Lazy, NodeOf, Token};
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

/// An operand of element type `T` in an expression that lives for `'t`: an expression of
/// `T` ([`IntoNode`]), or a `T` scalar. The element type is a parameter of the trait (not
/// only of its expression), so that a literal such as `2.0` takes the element type of the
/// other operand.
pub trait Operand<'t, T: Element> {
    /// The node it becomes.
    type Node: Expr<Elem = T>;
    /// Converts (inside this crate only).
    #[doc(hidden)]
    fn into_operand(self, _: Token) -> Self::Node;
}

impl<'t, T: Element, E: IntoNode<'t, Elem = T>> Operand<'t, T> for E {
    type Node = E::Node;
    #[inline]
    fn into_operand(self, token: Token) -> E::Node {
        self.into_node(token)
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl<'t> Operand<'t, $t> for $t {
            type Node = Scalar<$t>;
            #[inline]
            fn into_operand(self, _: Token) -> Scalar<$t> {
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
#[allow(clippy::type_complexity)]
pub fn select<'t, C, A, B>(
    cond: C,
    a: A,
    b: B,
) -> Lazy<
    't,
    Select<
        <A::Expr as Expr>::Elem,
        NodeOf<'t, C::Expr>,
        NodeOf<'t, A::Expr>,
        <B as Operand<'t, <A::Expr as Expr>::Elem>>::Node,
    >,
>
where
    C: IntoExpr<Expr: IntoNode<'t, Elem = bool>>,
    A: IntoExpr<Expr: IntoNode<'t>>,
    B: Operand<'t, <A::Expr as Expr>::Elem>,
{
    Lazy::new(Select::new(
        cond.into_expr().into_node(Token),
        a.into_expr().into_node(Token),
        b.into_operand(Token),
    ))
}
