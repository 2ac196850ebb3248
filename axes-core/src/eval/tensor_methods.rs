//! The element-wise operations and reductions of [`ExprExt`] as inherent methods of
//! [`Tensor`] that borrow it (`x.exp()`, `x.sum::<(Batch,)>()`), so that using them does not
//! move the tensor into the expression.

use super::ExprExt;
use crate::element::Element;
use crate::error::Result;
use crate::expr::{Borrowed, Cast, Lazy, Reduced, Reducible, Unary};
use crate::ir::unary;
use crate::list::AxisSet;
use crate::num::{Float, Int, Num};
use crate::tensor::Tensor;

/// One borrowing method per row of the op table that has a method.
macro_rules! tensor_unary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        impl<T: $domain, A: AxisSet> Tensor<T, A> {
            $($attr)*
            ///
            /// An expression borrowing the tensor, element-wise.
            pub fn $method(&self) -> Lazy<'_, Unary<T, Borrowed<Self>, unary::$op>> {
                ExprExt::$method(self)
            }
        }
    };
}

crate::ir::ops::for_each_unary_op!(crate::ir::ops::unary_method_rows, tensor_unary_method);

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident $(where T: $float:ident)?;)*) => {
        impl<T: Num, A: AxisSet> Tensor<T, A> {$(
            $(#[$doc])*
            pub fn $name<Over: AxisSet>(&self) -> Result<Tensor<T, Reduced<&Self, Over>>>
            where
                A: Reducible<Over>,
                $(T: $float,)?
            {
                ExprExt::$name::<Over>(self)
            }
        )*}
    };
}

// The float-only ones bound `T: Float` on the method, not the impl, so that calling one on
// integers names the bound (and its message: cast to a float type first).
reductions! {
    /// The sum over the axes `Over` ([`ExprExt::sum`]; integer sums wrap, as in NumPy and
    /// PyTorch).
    sum;
    /// The product over the axes `Over`.
    prod;
    /// The largest element over the axes `Over` (NaN if any is NaN).
    max_over;
    /// The smallest element over the axes `Over` (NaN if any is NaN).
    min_over;
    /// The mean over the axes `Over` (floats only: cast integers first).
    mean where T: Float;
    /// ln Σ e^x over the axes `Over`, computed stably.
    logsumexp where T: Float;
    /// The population variance over the axes `Over`.
    var where T: Float;
    /// The population standard deviation over the axes `Over`.
    std where T: Float;
}

impl<T: Num, A: AxisSet> Tensor<T, A> {
    /// The sum of every element.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<i32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1, 2, 3, 4])?;
    /// assert_eq!(x.sum_all()?, 10);
    /// assert_eq!(x.sum::<(Row,)>()?.to_vec(), [4, 6]);
    /// assert_eq!(x.max_over::<(Col,)>()?.to_vec(), [2, 4]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn sum_all(&self) -> Result<T> {
        ExprExt::sum_all(self)
    }
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The elements converted to `U` (an expression; [`Element::cast`]).
    pub fn cast<U: Element>(&self) -> Lazy<'_, Cast<Borrowed<Self>, U>> {
        ExprExt::cast::<U>(self)
    }
}
