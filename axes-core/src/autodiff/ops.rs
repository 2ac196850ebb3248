//! Operations on variables that are not element-wise: reductions, contractions, the
//! softmax cross-entropy loss.

use std::any::TypeId;

use super::fused::{IntoVar, IntoVarExpr};
use super::tape::{GradBuf, Var};
use crate::axis::Axis;
use crate::contract::{self, DotGrads, DotOverAxes, dot_grads, dot_over_grads};
use crate::dispatch::{
    Input, Output, common_device, gather_axes, index_range, out_of_range, placed, run_output,
    run_outputs, scattered, unpadded,
};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::eval::finite_or_zero;
use crate::expr::Reducible;
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, ReduceOp, UnaryOp};
use crate::layout::Layout;
use crate::list::{
    AxisSet, Difference, DifferenceWith, DotAxes, DotOverWith, DotWith, HasAxis, UnionWith,
};
use crate::num::Float;
use crate::protocol::Device;
use crate::tensor::{Gathered, IndexElement, Tensor};

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The sum over the axes `Over` (a fused reduction, see [`super::VarExpr::sum`]).
    pub fn sum<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        self.into_var_expr().sum::<Over>()
    }

    /// The mean over the axes `Over`.
    pub fn mean<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        self.into_var_expr().mean::<Over>()
    }

    /// `ln Σ e^x` over the axes `Over`, computed stably (shifted by the maximum over `Over`, a
    /// constant to the gradient, which cancels); its gradient is the softmax over `Over`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Class;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (Batch, Class)>::from_vec((Batch.len(1), Class.len(2)), vec![1000., 1000.])?);
    /// let lse = x.logsumexp::<(Class,)>()?;
    /// assert!((lse.value().to_vec()[0] - (1000. + 2f64.ln())).abs() < 1e-9);
    /// let dx: Tensor<f64, (Batch, Class)> = lse.sum::<(Batch,)>()?.backward()?.get(&x)?;
    /// assert_eq!(dx.to_vec(), [0.5, 0.5]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn logsumexp<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        let shift = finite_or_zero(&self.value().max_over::<Over>()?)?;
        let shift = self.tape().constant(shift);
        ((self - &shift).exp().sum::<Over>()?.ln() + &shift).eval()
    }

    /// The softmax along the axis `X`: `e^x / Σ e^x`, computed stably; differentiable.
    pub fn softmax<X: Axis>(&self) -> Result<Var<T, A>>
    where
        A: Reducible<(X,)>,
    {
        let lse = self.logsumexp::<(X,)>()?;
        (self - &lse).exp().eval()
    }

    /// The log-softmax along the axis `X`: `x - ln Σ e^x`, computed stably; differentiable.
    pub fn log_softmax<X: Axis>(&self) -> Result<Var<T, A>>
    where
        A: Reducible<(X,)>,
    {
        let lse = self.logsumexp::<(X,)>()?;
        (self - &lse).eval()
    }

    /// The maximum over the axes `Over` (an empty axis is an error). The gradient goes to the
    /// elements equal to the maximum, shared evenly among ties (as PyTorch's `amax`).
    pub fn max_over<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        let x = self.value().clone();
        let value = x.max_over::<Over>()?;
        let max = value.clone();
        Ok(self.record_unary(value, move |dz| {
            let at_max = (&x).equal(&max).cast::<T>().eval()?;
            let ties = at_max.sum::<Over>()?;
            (&at_max * &dz / &ties).eval()
        }))
    }
}

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The elements picked along the axis `X` by integer `indices` (as [`Tensor::gather`]): an
    /// embedding lookup is a `(Vocab, Dim)` table gathered along Vocab by token ids. The
    /// gradient adds each picked position's gradient back to where it was picked from, in a
    /// fixed order on every device (a row picked twice gets the sum); an index out of range is
    /// an error naming it.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::{self, Tape};
    /// #[derive(Axis)] struct Vocab;
    /// #[derive(Axis)] struct Dim;
    /// #[derive(Axis)] struct Token;
    /// let tape = Tape::<f64>::new();
    /// let table = tape.var(Tensor::<f64, (Vocab, Dim)>::from_vec((Vocab.len(3), Dim.len(2)), vec![0., 1., 10., 11., 20., 21.])?);
    /// let ids = Tensor::<i64, (Token,)>::from_vec(Token.len(3), vec![2, 0, 2])?;
    /// let rows: autodiff::Var<f64, (Dim, Token)> = table.gather::<Vocab, _, _>(&ids)?;
    /// assert_eq!(rows.value().to_vec_in::<(Token, Dim)>(), [20., 21., 0., 1., 20., 21.]);
    /// let grad = rows.sum::<(Dim, Token)>()?.backward()?.get(&table)?;
    /// assert_eq!(grad.to_vec(), [1., 1., 0., 0., 2., 2.]); // row 2 was picked twice
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn gather<X, I, Ix>(&self, indices: &Tensor<Ix, I>) -> Result<Var<T, Gathered<A, X, I>>>
    where
        X: Axis,
        I: AxisSet,
        Ix: IndexElement,
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: UnionWith<I>,
    {
        let value = self.value().gather::<X, I, Ix>(indices)?;
        let indices = unpadded(indices)?;
        let lens = self.value().lens().to_vec();
        Ok(self.record_unary(value, move |dz| {
            let dz = unpadded(&dz)?;
            let (storage, layout) = scattered(
                (dz.storage(), dz.layout()),
                (indices.storage(), indices.layout()),
                &gather_axes::<A, X, I>(),
                &lens,
            )?;
            Ok(Tensor::from_parts(storage, layout).expect("a job's result fits its layout"))
        }))
    }
}

/// `dot(x, y)` of variables: contracts the axes they pair (as [`crate::dot`]); its backward
/// is two contractions, each over the axes the forward one kept.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::{self, Tape};
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct I;
/// #[derive(Axis)] struct O;
///
/// let tape = Tape::<f64>::new();
/// let x = tape.constant(Tensor::<f64, (B, I)>::ones((B.len(2), I.len(3)))?);
/// let w = tape.var(Tensor::<f64, (I, O)>::ones((I.len(3), O.len(4)))?);
/// let y: autodiff::Var<f64, (B, O)> = autodiff::dot(&x, &w)?;
/// let grads = y.sum::<(B, O)>()?.backward()?;
/// let gw: Tensor<f64, (I, O)> = grads.get(&w)?; // the gradient has w's axes
/// assert!(gw.to_vec().iter().all(|&g| g == 2.0));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn dot<T, L, R, X, Y>(x: X, y: Y) -> Result<Var<T, DotAxes<L, R>>>
where
    T: Float,
    L: AxisSet + DotWith<R>,
    R: AxisSet,
    X: IntoVar<Elem = T, Axes = L>,
    Y: IntoVar<Elem = T, Axes = R>,
{
    record_contraction(x.into_var()?, y.into_var()?, contract::dot, dot_grads)
}

/// A contraction of two variables of one tape, `forward(x, y)`, recorded with the backward
/// `backward(x, y, dz, (x needs a gradient, y needs one))`.
fn record_contraction<T, L, R, O>(
    x: Var<T, L>,
    y: Var<T, R>,
    forward: impl FnOnce(&Tensor<T, L>, &Tensor<T, R>) -> Result<Tensor<T, O>>,
    backward: impl Fn(
        &Tensor<T, L>,
        &Tensor<T, R>,
        &Tensor<T, O>,
        (bool, bool),
    ) -> Result<DotGrads<T, L, R>>
    + 'static,
) -> Result<Var<T, O>>
where
    T: Float,
    L: AxisSet,
    R: AxisSet,
    O: AxisSet,
{
    if !x.tape().same_as(y.tape()) {
        return Err(Error::Unsupported {
            what: "combining variables of different tapes".into(),
        });
    }
    let value = forward(x.value(), y.value())?;
    let (xv, yv) = (x.value().clone(), y.value().clone());
    let (xid, yid) = (x.id(), y.id());
    let (x_needs, y_needs) = (x.needs_grad(), y.needs_grad());
    Ok(x.tape()
        .record(value, x_needs || y_needs, move |grads, id| {
            let Some(dz) = grads.tensor::<O>(id) else {
                return Ok(());
            };
            let (dx, dy) = backward(&xv, &yv, &dz, (x_needs, y_needs))?;
            if let Some(dx) = dx {
                grads.accumulate(xid, dx)?;
            }
            if let Some(dy) = dy {
                grads.accumulate(yid, dy)?;
            }
            Ok(())
        }))
}

/// `dot_over::<Over>(x, y)` of variables: contracts only the axes `Over`, every other axis
/// both have is a batch axis, kept once (as [`crate::dot_over`]); attention scores contract
/// the head dimension and keep Batch and Head. Its backward is two contractions with the
/// same batch axes.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::{self, Tape};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Query;
/// #[derive(Axis)] struct Key;
/// #[derive(Axis)] struct Dim;
///
/// let tape = Tape::<f64>::new();
/// let q = tape.var(Tensor::<f64, (Batch, Query, Dim)>::ones((Batch.len(2), Query.len(3), Dim.len(4)))?);
/// let k = tape.var(Tensor::<f64, (Batch, Key, Dim)>::ones((Batch.len(2), Key.len(5), Dim.len(4)))?);
/// let scores: autodiff::Var<f64, (Batch, Query, Key)> = autodiff::dot_over::<(Dim,), _, _, _, _, _>(&q, &k)?;
/// assert!(scores.value().to_vec().iter().all(|&s| s == 4.0));
/// let grads = scores.sum::<(Batch, Query, Key)>()?.backward()?;
/// let dq: Tensor<f64, (Batch, Query, Dim)> = grads.get(&q)?;
/// assert!(dq.to_vec().iter().all(|&g| g == 5.0)); // one per key
/// # Ok::<(), axes::Error>(())
/// ```
pub fn dot_over<Over, T, L, R, X, Y>(x: X, y: Y) -> Result<Var<T, DotOverAxes<L, R, Over>>>
where
    Over: AxisSet,
    T: Float,
    L: DotOverWith<R, Over>,
    R: AxisSet,
    X: IntoVar<Elem = T, Axes = L>,
    Y: IntoVar<Elem = T, Axes = R>,
{
    record_contraction(
        x.into_var()?,
        y.into_var()?,
        contract::dot_over::<Over, _, _, _>,
        dot_over_grads::<_, _, _, Over>,
    )
}

/// The per-example softmax cross-entropy of `logits` over the class axis `C` with integer
/// `labels` (one per example, in `0..len(C)`): `logsumexp(logits) - logits[label]`, computed
/// stably (shifted by the maximum). The result has the logits' other axes.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::{softmax_cross_entropy, Tape};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Class;
///
/// let tape = Tape::<f64>::new();
/// let logits = tape.var(Tensor::<f64, (Batch, Class)>::zeros((Batch.len(2), Class.len(4)))?);
/// let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![3, 0])?;
/// let loss = softmax_cross_entropy::<Class, _, _, _, _>(&logits, &labels)?;
/// assert!((loss.value().to_vec()[0] - 4f64.ln()).abs() < 1e-12);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn softmax_cross_entropy<C, T, A, X, Ix>(
    logits: X,
    labels: &Tensor<Ix, Difference<A, (C,)>>,
) -> Result<Var<T, Difference<A, (C,)>>>
where
    C: Axis,
    T: Float,
    A: AxisSet + HasAxis<C> + DifferenceWith<(C,)>,
    X: IntoVar<Elem = T, Axes = A>,
    Ix: IndexElement,
{
    let logits = logits.into_var()?;
    let x = &unpadded(logits.value())?;
    let labels = &unpadded(labels)?;
    let rank = A::RANK;
    let class = (A::IDS.iter())
        .position(|&id| id == TypeId::of::<C>())
        .expect("HasAxis<C>");
    let rest: Vec<usize> = (0..rank).filter(|&a| a != class).collect();
    let rest_lens: Vec<usize> = rest.iter().map(|&a| x.lens()[a]).collect();
    let classes = x.lens()[class];
    for (p, &a) in rest.iter().enumerate() {
        if labels.lens()[p] != x.lens()[a] {
            return Err(Error::LengthMismatch {
                axis: A::names()[a].to_string(),
                left: x.lens()[a],
                right: labels.lens()[p],
            });
        }
    }
    let device = common_device([x.device(), labels.device()])?.unwrap_or(Device::Cpu);
    check_labels::<C, Ix>(labels, classes)?;
    // The class index along C, as a buffer on the logits' device.
    let mut iota = crate::storage::with_capacity(classes)?;
    iota.extend((0..classes).map(|c| T::from_f64(c as f64)));
    let iota = placed(iota, device)?;
    let iota_layout = Layout::row_major(&[classes]);
    let all: Vec<usize> = (0..rank).collect();
    let lens = x.lens().to_vec();
    // The shift: the maximum over C.
    let mut ir = Ir::default();
    let logit = ir.leaf();
    let max = Output::<T>::new(logit, rest.clone(), ReduceOp::Max);
    let x_in = || Input::new(x.storage(), x.layout(), &all, rank);
    let (max, max_layout) = run_output(&ir, &lens, &[x_in()?], max)?;
    // The sum of exp(x - max) and the label's logit, in one pass.
    let mut ir = Ir::default();
    let (logit, shift) = (ir.leaf(), ir.leaf());
    let is_label = label_test(&mut ir, T::DTYPE);
    let shifted = ir.push(IrNode::Binary(BinaryOp::Sub, logit, shift));
    let exp = ir.push(IrNode::Unary(UnaryOp::Exp, shifted));
    let zero = ir.push(IrNode::Scalar(0.0));
    let picked = ir.push(IrNode::Select(is_label, logit, zero));
    let over_c = |root| Output::<T>::new(root, rest.clone(), ReduceOp::Sum);
    let inputs = [
        x_in()?,
        Input::new(&max, &max_layout, &rest, rank)?,
        Input::new(labels.storage(), labels.layout(), &rest, rank)?,
        Input::new(&iota, &iota_layout, &[class], rank)?,
    ];
    let mut sums = run_outputs(&ir, &lens, &inputs, vec![over_c(exp), over_c(picked)])?;
    let (picked, picked_layout) = sums.pop().expect("two results");
    let (total, total_layout) = sums.pop().expect("two results");
    // logsumexp = max + ln(total); the loss is logsumexp - logits[label].
    let mut ir = Ir::default();
    let (shift, total_leaf, picked_leaf) = (ir.leaf(), ir.leaf(), ir.leaf());
    let ln = ir.push(IrNode::Unary(UnaryOp::Ln, total_leaf));
    let lse = ir.push(IrNode::Binary(BinaryOp::Add, shift, ln));
    let loss = ir.push(IrNode::Binary(BinaryOp::Sub, lse, picked_leaf));
    let own: Vec<usize> = (0..rest.len()).collect();
    let elementwise = |root| Output::<T>::new(root, own.clone(), ReduceOp::Sum);
    let inputs = [
        Input::new(&max, &max_layout, &own, own.len())?,
        Input::new(&total, &total_layout, &own, own.len())?,
        Input::new(&picked, &picked_layout, &own, own.len())?,
    ];
    let mut results = run_outputs(
        &ir,
        &rest_lens,
        &inputs,
        vec![elementwise(lse), elementwise(loss)],
    )?;
    drop(inputs);
    let (loss, loss_layout) = results.pop().expect("two results");
    let lse = results.pop().expect("two results");
    let value = Tensor::from_parts(loss, loss_layout).expect("a job's result fits its layout");
    let (x, labels) = (x.clone(), labels.clone());
    let xid = logits.id();
    Ok(logits
        .tape()
        .record(value, logits.needs_grad(), move |grads, id| {
            let Some(upstream) = grads.buf(id) else {
                return Ok(());
            };
            // d logits = (exp(x - logsumexp) - one_hot) * upstream, in one pass.
            let mut ir = Ir::default();
            let (logit, lse_leaf) = (ir.leaf(), ir.leaf());
            let is_label = label_test(&mut ir, T::DTYPE);
            let up = ir.leaf();
            let shifted = ir.push(IrNode::Binary(BinaryOp::Sub, logit, lse_leaf));
            let softmax = ir.push(IrNode::Unary(UnaryOp::Exp, shifted));
            let (one, zero) = (ir.push(IrNode::Scalar(1.0)), ir.push(IrNode::Scalar(0.0)));
            let one_hot = ir.push(IrNode::Select(is_label, one, zero));
            let diff = ir.push(IrNode::Binary(BinaryOp::Sub, softmax, one_hot));
            let root = ir.push(IrNode::Binary(BinaryOp::Mul, diff, up));
            let inputs = [
                Input::new(x.storage(), x.layout(), &all, rank)?,
                Input::new(&lse.0, &lse.1, &rest, rank)?,
                Input::new(labels.storage(), labels.layout(), &rest, rank)?,
                Input::new(&iota, &iota_layout, &[class], rank)?,
                Input::new(&upstream.storage, &upstream.layout, &rest, rank)?,
            ];
            let output =
                Output::new(root, all.clone(), ReduceOp::Sum).onto(grads.take_for_accumulate(xid)?);
            let (storage, layout) = run_output(&ir, &lens, &inputs, output)?;
            grads.put(xid, GradBuf { storage, layout });
            Ok(())
        }))
}

/// Appends to `ir` (whose leaves 0 and 1 are taken) the test `label == class`, compared as
/// `dtype` (the logits' type; labels are checked to be below the class count first): leaf 2
/// is the label, leaf 3 the class index along C.
fn label_test(ir: &mut Ir, dtype: DType) -> usize {
    let (label, index) = (ir.leaf(), ir.leaf());
    let label = ir.push(IrNode::Cast(dtype, label));
    ir.push(IrNode::Compare(CompareOp::Equal, label, index))
}

/// An error naming the first label outside `0..classes` (see [`index_range`]).
fn check_labels<C: Axis, Ix: IndexElement>(
    labels: &Tensor<Ix, impl AxisSet>,
    classes: usize,
) -> Result<()> {
    let range = index_range((labels.storage(), labels.layout()))?;
    match out_of_range(range, classes) {
        Some(label) => Err(Error::LabelOutOfRange {
            axis: C::name().to_string(),
            label,
            len: classes,
        }),
        None => Ok(()),
    }
}
