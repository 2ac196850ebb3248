//! Building, evaluating and assigning expressions: the [`ExprExt`] methods, [`IntoExpr`],
//! and `Tensor::assign`.

use std::any::TypeId;
use std::borrow::Cow;

use half::{bf16, f16};

use super::nodes::{Binary, Cast, MapFn, Scalar, Select, Unary};
use super::ops::{Clamp, Powf, Powi};
use super::{Expr, reduce};
use crate::dispatch;
use crate::element::Element;
use crate::engine::exec::{self, Assign, Sink};
use crate::engine::plan::{Destination, Leaves, Plan};
use crate::error::{Error, Result};
use crate::ir::{BinaryFn, ReduceOp, UnaryFn, binary, unary};
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::num::{Float, Num};
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::Tensor;

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
        ) -> Binary<<binary::$op as BinaryFn<Self::Elem>>::Out, Self, R::Expr, binary::$op>
        where
            Self::Elem: $domain,
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
    ) -> Binary<Op::Out, Self, R::Expr, Op> {
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
    ) -> Binary<Self::Elem, Binary<Self::Elem, Self, B::Expr, binary::Mul>, C::Expr, binary::Add>
    where
        Self::Elem: Num,
    {
        Binary::new(
            Binary::new(self, b.into_operand(), binary::Mul),
            c.into_operand(),
            binary::Add,
        )
    }
    /// Converts every element to `U` ([`Element::cast`]).
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
    ) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        dispatch::run_on(&self, device, Over::IDS, kind)
    }

    /// Sums over the axes `Over` on `device` ([`ExprExt::reduce_on`] with `Sum`).
    fn sum_on<Over: AxisSet>(
        self,
        device: &Device,
    ) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
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

    /// The sum of every element, in one pass with no temporary.
    fn sum_all(self) -> Result<Self::Elem>
    where
        Self::Elem: Num,
    {
        reduce::sum_all(&self)
    }

    /// Sums over the axes `Over` (each one of the expression's).
    fn sum<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::sum_sink())
    }

    /// The product over the axes `Over`.
    fn prod<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::prod_sink())
    }

    /// The largest element over the axes `Over` (NaN if any is NaN; the lowest value of the
    /// type, -inf for floats, over an empty axis).
    fn max_over<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::max_sink())
    }

    /// The smallest element over the axes `Over` (NaN if any is NaN).
    fn min_over<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::reduce::<Self, Over, _>(&self, reduce::min_sink())
    }

    /// The mean over the axes `Over` (NaN for floats over an empty axis; integer means
    /// truncate).
    fn mean<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Num,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::mean::<Self, Over>(&self)
    }

    /// ln Σ e^x over the axes `Over`, computed stably (shifted by the maximum).
    fn logsumexp<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::logsumexp::<Self, Over>(&self)
    }

    /// The (population) variance over the axes `Over`: the mean squared deviation.
    fn var<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: reduce::Reducible<Over>,
    {
        reduce::var::<Self, Over>(&self)
    }

    /// The (population) standard deviation over the axes `Over`.
    fn std<Over: AxisSet>(self) -> Result<Tensor<Self::Elem, reduce::Reduced<Self, Over>>>
    where
        Self::Elem: Float,
        Self::Axes: reduce::Reducible<Over>,
    {
        let var = reduce::var::<Self, Over>(&self)?;
        var.sqrt().eval()
    }
}

// Every expression but an owned tensor: `x.sum::<..>()` on a `Tensor` must find the
// inherent methods that borrow it (see `tensor_methods`), not consume it.
impl<E: Expr> ExprExt for &E {}
impl<T, E, Op> ExprExt for Unary<T, E, Op> where Self: Expr {}
impl<T, L, R, Op> ExprExt for Binary<T, L, R, Op> where Self: Expr {}
impl<T, C, A, B> ExprExt for Select<T, C, A, B> where Self: Expr {}
impl<E, U> ExprExt for Cast<E, U> where Self: Expr {}
impl<U, E, F> ExprExt for MapFn<U, E, F> where Self: Expr {}
impl<T: Element> ExprExt for Scalar<T> {}

/// Runs `expr` into a fresh row-major tensor with axes `O` (the expression's axes, in any
/// order), reducing over `reduced` with `sink`; `init` is the destination's starting value.
/// Runs on the device the leaves are on (host memory: the CPU engine).
pub(crate) fn evaluate<E: Expr, O: AxisSet, S: Sink<E::Elem>>(
    expr: &E,
    reduced: &[TypeId],
    sink: S,
    init: E::Elem,
) -> Result<Tensor<E::Elem, O>> {
    let (storage, layout) = evaluate_parts(expr, O::IDS, &O::names, reduced, sink, init)?;
    Tensor::<E::Elem, O>::checked_shape(layout.lens())?;
    Ok(Tensor::from_parts(storage, layout).expect("a fresh row-major layout fits its buffer"))
}

/// [`evaluate`] for the result axes `out` (type ids) named by `names`: the fresh buffer and
/// its row-major layout.
pub(crate) fn evaluate_parts<E: Expr, S: Sink<E::Elem>>(
    expr: &E,
    out: &[TypeId],
    names: &dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &[TypeId],
    sink: S,
    init: E::Elem,
) -> Result<(Storage<E::Elem>, Layout)> {
    if let Some(Device::Accelerator(backend)) = dispatch::expr_device(expr, None)? {
        let kind = sink.device_kind().unwrap_or(ReduceOp::Sum);
        return dispatch::run_expr(expr, backend, out, names, reduced, kind, None);
    }
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    let mut layout = Layout::row_major(&[]);
    let mut plan = Plan::empty();
    plan.build(
        out,
        names,
        reduced,
        Destination::Fresh(&mut layout),
        &leaves,
    )?;
    let count = layout.element_count().ok_or_else(|| Error::SizeOverflow {
        lengths: format!("{:?}", layout.lens()),
    })?;
    let mut data = vec![init; count];
    let make = || {
        let mut next = 0;
        expr.evaluator(&plan, &mut next)
    };
    exec::run(&plan, &mut data, sink, &make);
    Ok((Storage::new(data), layout))
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// Evaluates `expr` into this tensor (a marshalling assignment: elements are converted
    /// to `T` with [`Element::cast`]). The expression's axes must be this tensor's, in any
    /// order; every length must match. Storage shared with other tensors is copied first
    /// (copy-on-write), so an expression that reads this tensor's own elements is computed
    /// from their old values.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<f32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1., 2., 3., 4.])?;
    /// let mut y = Tensor::<f64, (Col, Row)>::zeros((Row.len(2), Col.len(2)))?;
    /// y.assign(&x * 2.0)?;
    /// assert_eq!(y.to_vec(), [2., 6., 4., 8.]);
    /// // x + its transpose, into x itself
    /// let mut z = x.clone();
    /// z.assign(&x + x.axes_with_order::<(Col, Row)>().cast_axes::<(Row, Col)>()?)?;
    /// assert_eq!(z.to_vec(), [2., 5., 5., 8.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn assign<E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        <E::Expr as Expr>::Axes: SameAxes<A>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        self.run_into(&expr, Assign)
    }

    /// Adds `expr` summed over the axes `Over` to this tensor, in one pass with no
    /// temporary: the Cortex rule `db[Class] += dy[Batch, Class]` (elements are converted to
    /// `T`). The expression's axes other than `Over` must be this tensor's.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Class;
    /// let dy = Tensor::<f32, (Batch, Class)>::from_vec((Batch.len(2), Class.len(2)), vec![1., 2., 3., 4.])?;
    /// let mut db = Tensor::<f32, (Class,)>::ones(Class.len(2))?;
    /// db.add_sum::<(Batch,), _>(&dy)?;
    /// assert_eq!(db.to_vec(), [5., 7.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn add_sum<Over: AxisSet, E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        T: Num,
        <E::Expr as Expr>::Axes: reduce::Reducible<Over>,
        reduce::Reduced<E::Expr, Over>: SameAxes<A>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        self.run_reducing(&expr, Over::IDS, reduce::sum_sink())
    }

    /// Sets this tensor to `expr` summed over the axes `Over`, in one pass over the
    /// expression (see [`Tensor::add_sum`]).
    pub fn assign_sum<Over: AxisSet, E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        T: Num,
        <E::Expr as Expr>::Axes: reduce::Reducible<Over>,
        reduce::Reduced<E::Expr, Over>: SameAxes<A>,
    {
        self.fill(T::zero())?;
        self.add_sum::<Over, E>(expr)
    }

    /// Sets every element to `value` (on the tensor's device).
    pub fn fill(&mut self, value: T) -> Result<()> {
        if let Device::Accelerator(backend) = self.device() {
            let count = self.element_count();
            let memory = backend.upload(crate::protocol::as_bytes(&vec![value; count]))?;
            let storage = dispatch::device_storage(backend, memory, count)?;
            self.replace_parts(storage, Layout::row_major(self.lens()));
            return Ok(());
        }
        if !self.layout().is_injective() {
            *self = self.contiguous();
        }
        let layout = *self.layout();
        let data = self.storage_mut().make_mut();
        for pos in layout.positions().flatten() {
            data[pos] = value;
        }
        Ok(())
    }

    /// Evaluates `expr` and combines it into this tensor with `sink`.
    pub(crate) fn run_into<E: Expr<Elem = T>, S: Sink<T>>(
        &mut self,
        expr: &E,
        sink: S,
    ) -> Result<()>
    where
        E::Axes: SameAxes<A>,
    {
        self.run_reducing(expr, &[], sink)
    }

    /// Evaluates `expr`, reducing over `reduced`, and combines it into this tensor.
    fn run_reducing<E: Expr<Elem = T>, S: Sink<T>>(
        &mut self,
        expr: &E,
        reduced: &[TypeId],
        sink: S,
    ) -> Result<()> {
        if let Some(Device::Accelerator(backend)) =
            dispatch::expr_device(expr, Some(self.device()))?
        {
            return self.run_on_device(expr, reduced, sink, backend);
        }
        if !self.layout().is_injective() {
            *self = self.contiguous();
        }
        let mut leaves = Leaves::new();
        expr.operands(&mut leaves);
        let mut plan = Plan::empty();
        plan.build(
            A::IDS,
            &A::names,
            reduced,
            Destination::Existing(self.layout()),
            &leaves,
        )?;
        let data = self.storage_mut().make_mut();
        let make = || {
            let mut next = 0;
            expr.evaluator(&plan, &mut next)
        };
        exec::run(&plan, data, sink, &make);
        Ok(())
    }

    /// [`Tensor::run_reducing`] on a device: the result goes into a fresh device buffer that
    /// replaces this tensor's (the copy-on-write of host tensors, done by the device).
    fn run_on_device<E: Expr<Elem = T>, S: Sink<T>>(
        &mut self,
        expr: &E,
        reduced: &[TypeId],
        sink: S,
        backend: &'static dyn crate::protocol::Backend,
    ) -> Result<()> {
        let kind = sink.device_kind();
        let (storage, layout) = dispatch::run_expr(
            expr,
            backend,
            A::IDS,
            &A::names,
            reduced,
            kind.unwrap_or(ReduceOp::Sum),
            Some(self.lens()),
        )?;
        let (storage, layout) = match kind {
            Some(kind) if S::REDUCES => {
                let fresh = Tensor::<T, A>::new_unchecked(storage, layout);
                let mine = self.to(&Device::Accelerator(backend))?;
                dispatch::combine(&mine, &fresh, backend, kind)?
            }
            _ => (storage, layout),
        };
        self.replace_parts(storage, layout);
        Ok(())
    }
}

/// `expr` summed over the axes `Over`, into a new tensor laid out in the axis order `O` (the
/// remaining axes in any order), in one pass.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
/// let x = Tensor::<f32, (Batch, In)>::ones((Batch.len(2), In.len(3)))?;
/// let w = Tensor::<f32, (In, Out)>::ones((In.len(3), Out.len(4)))?;
/// let z: Tensor<f32, (Out, Batch)> = axes::expr::sum_in::<(Out, Batch), (In,), _>(&x * &w)?;
/// assert!(z.to_vec().iter().all(|&v| v == 3.0));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn sum_in<O, Over, E>(expr: E) -> Result<Tensor<<E::Expr as Expr>::Elem, O>>
where
    O: AxisSet,
    Over: AxisSet,
    E: IntoExpr,
    <E::Expr as Expr>::Elem: Num,
    <E::Expr as Expr>::Axes: reduce::Reducible<Over>,
    reduce::Reduced<E::Expr, Over>: SameAxes<O>,
{
    evaluate(
        &expr.into_expr(),
        Over::IDS,
        reduce::sum_sink(),
        <E::Expr as Expr>::Elem::zero(),
    )
}
