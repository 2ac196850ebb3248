//! [`ExprExt`]: the methods every expression has.

use super::reduce;
use crate::dispatch::{self, evaluate};
use crate::element::Element;
use crate::engine::exec::Assign;
use crate::error::Result;
use crate::expr::{
    Binary, BinaryOf, Cast, Clamp, Expr, MapFn, Operand, Powf, Powi, Reduced, Reducible, Scalar,
    Select, Unary,
};
use crate::ir::{BinaryFn, ReduceOp, UnaryFn, binary, unary};
use crate::list::{AxisSet, Broadcast, ElementwiseWith, SameAxes};
use crate::num::{Float, Num};
use crate::protocol::Device;
use crate::tensor::Tensor;

/// One element-wise method of [`ExprExt`] per row of the op table that has a method.
macro_rules! expr_unary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        $($attr)*
        fn $method(self) -> Unary<Self::Elem, Self, unary::$op>
        where
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
        fn $method<R: Operand<Self::Elem>>(
            self,
            other: R,
        ) -> BinaryOf<<binary::$op as BinaryFn<Self::Elem>>::Out, Self, R::Expr, binary::$op>
        where
            Self::Elem: $domain,
            Self::Axes: ElementwiseWith<<R::Expr as Expr>::Axes>,
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
    fn unary<Op: UnaryFn<Self::Elem>>(self, op: Op) -> Unary<Op::Out, Self, Op> {
        Unary::new(self, op)
    }

    /// Applies a binary operator with `other`.
    fn binary<R: Operand<Self::Elem>, Op: BinaryFn<Self::Elem>>(
        self,
        other: R,
        op: Op,
    ) -> BinaryOf<Op::Out, Self, R::Expr, Op>
    where
        Self::Axes: ElementwiseWith<<R::Expr as Expr>::Axes>,
    {
        Binary::new(self, other.into_operand(), op)
    }

    crate::for_each_unary_op!(crate::unary_method_rows, expr_unary_method);

    /// xⁿ
    fn powi(self, n: i32) -> Unary<Self::Elem, Self, Powi>
    where
        Self::Elem: Num,
    {
        self.unary(Powi(n))
    }
    /// min(max(x, low), high)
    fn clamp(self, low: Self::Elem, high: Self::Elem) -> Unary<Self::Elem, Self, Clamp<Self::Elem>>
    where
        Self::Elem: Num,
    {
        self.unary(Clamp(low, high))
    }
    /// x^p
    fn powf(self, p: Self::Elem) -> Unary<Self::Elem, Self, Powf<Self::Elem>>
    where
        Self::Elem: Float,
    {
        self.unary(Powf(p))
    }

    crate::for_each_binary_op!(crate::binary_method_rows, expr_binary_method);
    crate::for_each_compare_op!(crate::compare_method_rows, expr_binary_method);

    /// `self * b + c`
    #[allow(clippy::type_complexity)]
    fn mul_add<B: Operand<Self::Elem>, C: Operand<Self::Elem>>(
        self,
        b: B,
        c: C,
    ) -> BinaryOf<Self::Elem, BinaryOf<Self::Elem, Self, B::Expr, binary::Mul>, C::Expr, binary::Add>
    where
        Self::Elem: Num,
        Self::Axes: ElementwiseWith<<B::Expr as Expr>::Axes>,
        Broadcast<Self::Axes, <B::Expr as Expr>::Axes>: ElementwiseWith<<C::Expr as Expr>::Axes>,
    {
        Binary::new(
            Binary::new(self, b.into_operand(), binary::Mul),
            c.into_operand(),
            binary::Add,
        )
    }
    /// Converts every element to `U` ([`Element::cast`]: floats to integers truncate and
    /// saturate, NaN gives 0, as Rust's `as`).
    fn cast<U: Element>(self) -> Cast<Self, U> {
        Cast::new(self)
    }
    /// Applies a closure to every element (CPU only; it cannot run on other devices).
    fn map<U: Element, F: Fn(Self::Elem) -> U + Sync>(self, f: F) -> MapFn<U, Self, F> {
        MapFn::new(self, f)
    }

    /// Evaluates into a new tensor with the expression's axes, in one pass.
    fn eval(self) -> Result<Tensor<Self::Elem, Self::Axes>> {
        evaluate(&self, &[], Assign, Self::Elem::zero())
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
        evaluate(&self, &[], Assign, Self::Elem::zero())
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
impl<T, E, Op> ExprExt for Unary<T, E, Op> where Self: Expr {}
impl<T, L, R, Op, A> ExprExt for Binary<T, L, R, Op, A> where Self: Expr {}
impl<T, C, A, B> ExprExt for Select<T, C, A, B> where Self: Expr {}
impl<E, U> ExprExt for Cast<E, U> where Self: Expr {}
impl<U, E, F> ExprExt for MapFn<U, E, F> where Self: Expr {}
impl<T: Element> ExprExt for Scalar<T> {}
