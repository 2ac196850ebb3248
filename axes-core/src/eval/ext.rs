//! [`ExprExt`]: the methods every expression has.

use super::reduce;
use crate::dispatch::{self, evaluate};
use crate::element::Element;
use crate::engine::exec::Assign;
use crate::error::Result;
use crate::expr::{
    Binary, BinaryOf, Cast, Clamp, Expr, IntoNode, Lazy, MapFn, MapWith, NodeOf, Operand, Powf,
    Powi, Reduced, Reducible, Scalar, Token, Unary,
};
use crate::ir::{BinaryFn, ReduceOp, UnaryFn, binary, unary};
use crate::list::{AxisSet, Broadcast, ElementwiseWith, SameAxes};
use crate::num::{Float, Int, Num};
use crate::protocol::Device;
use crate::tensor::Tensor;

/// One element-wise method of [`ExprExt`] per row of the op table that has a method.
macro_rules! expr_unary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        $($attr)*
        fn $method<'t>(self) -> Lazy<'t, Unary<Self::Elem, NodeOf<'t, Self>, unary::$op>>
        where
            Self: IntoNode<'t>,
            Self::Elem: $domain,
        {
            self.unary(unary::$op)
        }
    };
}

/// One method of [`ExprExt`] per binary op or comparison with a method.
macro_rules! expr_binary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        $($attr)*
        #[allow(clippy::type_complexity)]
        fn $method<'t, R: Operand<'t, Self::Elem>>(
            self,
            other: R,
        ) -> Lazy<'t, BinaryOf<<binary::$op as BinaryFn<Self::Elem>>::Out, NodeOf<'t, Self>, R::Node, binary::$op>>
        where
            Self: IntoNode<'t>,
            Self::Elem: $domain,
            Self::Axes: ElementwiseWith<<R::Node as Expr>::Axes>,
        {
            self.binary(other, binary::$op)
        }
    };
}

/// The methods every expression has: element-wise operations, evaluation and reductions.
/// Tensors have them as inherent methods that borrow the tensor; an owned tensor is an
/// expression (it can be an operand) but does not implement this trait, so that calling
/// one of these methods on it never consumes it.
pub trait ExprExt: Expr {
    /// Applies a unary operator.
    fn unary<'t, Op: UnaryFn<Self::Elem>>(
        self,
        op: Op,
    ) -> Lazy<'t, Unary<Op::Out, NodeOf<'t, Self>, Op>>
    where
        Self: IntoNode<'t>,
    {
        Lazy::new(Unary::new(self.into_node(Token), op))
    }

    /// Applies a binary operator with `other`.
    #[allow(clippy::type_complexity)]
    fn binary<'t, R: Operand<'t, Self::Elem>, Op: BinaryFn<Self::Elem>>(
        self,
        other: R,
        op: Op,
    ) -> Lazy<'t, BinaryOf<Op::Out, NodeOf<'t, Self>, R::Node, Op>>
    where
        Self: IntoNode<'t>,
        Self::Axes: ElementwiseWith<<R::Node as Expr>::Axes>,
    {
        Lazy::new(Binary::new(
            self.into_node(Token),
            other.into_operand(Token),
            op,
        ))
    }

    crate::ir::ops::for_each_unary_op!(crate::ir::ops::unary_method_rows, expr_unary_method);

    /// xⁿ
    fn powi<'t>(self, n: i32) -> Lazy<'t, Unary<Self::Elem, NodeOf<'t, Self>, Powi>>
    where
        Self: IntoNode<'t>,
        Self::Elem: Num,
    {
        self.unary(Powi(n))
    }
    /// min(max(x, low), high)
    #[allow(clippy::type_complexity)]
    fn clamp<'t>(
        self,
        low: Self::Elem,
        high: Self::Elem,
    ) -> Lazy<'t, Unary<Self::Elem, NodeOf<'t, Self>, Clamp<Self::Elem>>>
    where
        Self: IntoNode<'t>,
        Self::Elem: Num,
    {
        self.unary(Clamp(low, high))
    }
    /// x^p
    #[allow(clippy::type_complexity)]
    fn powf<'t>(
        self,
        p: Self::Elem,
    ) -> Lazy<'t, Unary<Self::Elem, NodeOf<'t, Self>, Powf<Self::Elem>>>
    where
        Self: IntoNode<'t>,
        Self::Elem: Float,
    {
        self.unary(Powf(p))
    }

    crate::ir::ops::for_each_binary_op!(crate::ir::ops::binary_method_rows, expr_binary_method);
    crate::ir::ops::for_each_compare_op!(crate::ir::ops::compare_method_rows, expr_binary_method);

    /// `self * b + c`
    #[allow(clippy::type_complexity)]
    fn mul_add<'t, B: Operand<'t, Self::Elem>, C: Operand<'t, Self::Elem>>(
        self,
        b: B,
        c: C,
    ) -> Lazy<
        't,
        BinaryOf<
            Self::Elem,
            BinaryOf<Self::Elem, NodeOf<'t, Self>, B::Node, binary::Mul>,
            C::Node,
            binary::Add,
        >,
    >
    where
        Self: IntoNode<'t>,
        Self::Elem: Num,
        Self::Axes: ElementwiseWith<<B::Node as Expr>::Axes>,
        Broadcast<Self::Axes, <B::Node as Expr>::Axes>: ElementwiseWith<<C::Node as Expr>::Axes>,
    {
        Lazy::new(Binary::new(
            Binary::new(self.into_node(Token), b.into_operand(Token), binary::Mul),
            c.into_operand(Token),
            binary::Add,
        ))
    }
    /// Converts every element to `U` ([`Element::cast`]: floats to integers truncate and
    /// saturate, NaN gives 0, as Rust's `as`).
    fn cast<'t, U: Element>(self) -> Lazy<'t, Cast<NodeOf<'t, Self>, U>>
    where
        Self: IntoNode<'t>,
    {
        Lazy::new(Cast::new(self.into_node(Token)))
    }
    /// Applies a closure to every element (CPU only; it cannot run on other devices).
    fn map<'t, U: Element, F: Fn(Self::Elem) -> U + Sync>(
        self,
        f: F,
    ) -> Lazy<'t, MapFn<U, NodeOf<'t, Self>, F>>
    where
        Self: IntoNode<'t>,
    {
        Lazy::new(MapFn::new(self.into_node(Token), f))
    }
    /// Applies a closure to every pair of elements of this expression and `other`, broadcast
    /// by axis identity as for `+` (CPU only; it cannot run on other devices). The element
    /// types may differ.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<f32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1., 2., 3., 4.])?;
    /// let n = Tensor::<i32, (Col,)>::from_vec(Col.len(2), vec![2, 3])?;
    /// let y = x.map_with(&n, |x, n| x.powi(n)).eval()?;
    /// assert_eq!(y.to_vec(), [1., 8., 9., 64.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    fn map_with<'t, R, U, F>(
        self,
        other: R,
        f: F,
    ) -> Lazy<'t, MapWith<U, NodeOf<'t, Self>, R::Node, F, Broadcast<Self::Axes, R::Axes>>>
    where
        Self: IntoNode<'t>,
        R: IntoNode<'t>,
        U: Element,
        F: Fn(Self::Elem, R::Elem) -> U + Sync,
        Self::Axes: ElementwiseWith<R::Axes>,
    {
        Lazy::new(MapWith::new(
            self.into_node(Token),
            other.into_node(Token),
            f,
        ))
    }

    /// Evaluates into a new tensor with the expression's axes, in one pass.
    fn eval(self) -> Result<Tensor<Self::Elem, Self::Axes>> {
        evaluate(&self, &[], Assign)
    }

    /// Evaluates on `device` for one call (one generated kernel) into a new tensor in host
    /// memory: leaves in host memory are copied there for the job (those already there are
    /// read in place). Tensors kept on a device need no `_on`: `eval` runs where they are.
    fn eval_on(self, device: &Device) -> Result<Tensor<Self::Elem, Self::Axes>> {
        dispatch::run_on(&self, device, &[], ReduceOp::Sum)
    }

    /// Combines over the axes `Over` on `device` by `kind` (sum, product, max or min: a tree
    /// reduction per result element).
    fn reduce_on<Over: AxisSet>(
        self,
        device: &Device,
        kind: ReduceOp,
    ) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        reduce::check_defined_on_empty::<Self, Over>(&self, kind)?;
        dispatch::run_on(&self, device, Over::IDS, kind)
    }

    /// Sums over the axes `Over` on `device` ([`ExprExt::reduce_on`] with `Sum`).
    fn sum_on<Over: AxisSet>(
        self,
        device: &Device,
    ) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        self.reduce_on::<Over>(device, ReduceOp::Sum)
    }

    /// Evaluates into a new tensor laid out in the axis order `O` (any order of the
    /// expression's axes).
    fn eval_in<O: AxisSet>(self) -> Result<Tensor<Self::Elem, O>>
    where
        Self::Axes: SameAxes<O>,
    {
        evaluate(&self, &[], Assign)
    }

    /// The sum of every element, in one pass with no temporary (integer sums wrap on
    /// overflow, as in NumPy and PyTorch).
    fn sum_all(self) -> Result<Self::Elem>
    where
        Self::Elem: Num,
    {
        reduce::sum_all(&self)
    }

    /// Sums over the axes `Over` (each one of the expression's; integer sums wrap on
    /// overflow, as in NumPy and PyTorch).
    fn sum<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::sum_sink())
    }

    /// The product over the axes `Over`.
    fn prod<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::prod_sink())
    }

    /// The largest element over the axes `Over` (NaN if any is NaN; an empty axis is
    /// [`Error::EmptyReduction`](crate::Error::EmptyReduction), as for [`argmax`](crate::argmax)).
    fn max_over<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::max_sink())
    }

    /// The smallest element over the axes `Over` (NaN if any is NaN; an empty axis is
    /// [`Error::EmptyReduction`](crate::Error::EmptyReduction)).
    fn min_over<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::min_sink())
    }

    /// The mean over the axes `Over` (NaN over an empty axis). Floats only: an integer
    /// mean would truncate, so cast first (`.cast::<f32>()`).
    fn mean<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: Reducible<Over>,
    {
        reduce::mean::<Self, Over>(&self)
    }

    /// ln Σ e^x over the axes `Over`, computed stably (shifted by the maximum).
    fn logsumexp<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: Reducible<Over>,
    {
        reduce::logsumexp::<Self, Over>(&self)
    }

    /// The (population) variance over the axes `Over`: the mean squared deviation.
    fn var<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: Reducible<Over>,
    {
        reduce::var::<Self, Over>(&self)
    }

    /// The (population) standard deviation over the axes `Over`.
    fn std<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: Reducible<Over>,
    {
        let var = reduce::var::<Self, Over>(&self)?;
        var.sqrt().eval()
    }
}

// Every expression but an owned tensor: `x.sum::<..>()` on a `Tensor` must find the
// inherent methods that borrow it (see `tensor_methods`), not consume it.
impl<E: Expr> ExprExt for &E {}
impl<N: Expr> ExprExt for Lazy<'_, N> {}
impl<T: Element> ExprExt for Scalar<T> {}
