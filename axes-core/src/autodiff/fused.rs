//! Fused element-wise expressions of variables: [`VarExpr`] builds run-time IR over its
//! leaves, evaluates it in one pass, and runs its backward — derived from the IR — in one
//! pass as well, writing every leaf's gradient (summed over the axes it was broadcast along).

use std::any::TypeId;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use super::tape::{GradBuf, Grads, Tape, Var};
use crate::dispatch::{Input, Output, run_output, run_outputs};
use crate::engine::plan::{IterSpace, LeafLayout};
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::Reducible;
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, ReduceOp, UnaryOp};
use crate::layout::Layout;
use crate::list::{AxisSet, Broadcast, BroadcastWith, Difference, Includes};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// One input of a fused expression: a recorded variable's value, with its axes by id.
#[derive(Clone)]
struct Leaf<T> {
    node: usize,
    needs_grad: bool,
    storage: Storage<T>,
    layout: Layout,
    ids: &'static [TypeId],
    names: fn() -> Vec<Cow<'static, str>>,
}

impl<T: Float> Leaf<T> {
    /// The leaf as an input of a job over the iteration axes `ids`.
    fn input(&self, ids: &[TypeId]) -> Result<Input<'_>> {
        Input::new(
            &self.storage,
            &self.layout,
            &positions(self.ids, ids),
            ids.len(),
        )
    }
}

/// The position of each of `axes` among `ids`.
fn positions(axes: &[TypeId], ids: &[TypeId]) -> Vec<usize> {
    (axes.iter())
        .map(|a| {
            ids.iter()
                .position(|i| i == a)
                .expect("an axis of the expression")
        })
        .collect()
}

/// An element-wise expression of [`Var`]s, not yet computed: `&x * &w + &b`, `h.relu()`.
/// Its axes follow the broadcasting rules of plain expressions (`axes::doc::semantics`).
///
/// [`VarExpr::eval`] computes it in one pass and records one tape node; its backward is
/// derived from the expression's IR and also runs in one pass. Operations that are not
/// element-wise (`dot`, reductions, losses) evaluate their `VarExpr` operands first.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct H;
///
/// let tape = Tape::<f64>::new();
/// let x = tape.constant(Tensor::<f64, (B, H)>::from_vec((B.len(2), H.len(2)), vec![1., -1., 2., 0.5])?);
/// let b = tape.var(Tensor::<f64, (H,)>::from_vec(H.len(2), vec![0.5, 0.5])?);
/// let h = (&x + &b).relu();                  // one fused node, b broadcast over B
/// assert_eq!(h.ir().to_string(), "relu(add(leaf0, leaf1))");
/// let loss = h.sum::<(B, H)>()?;
/// let g = loss.backward()?.get(&b)?;         // summed over B in the same pass
/// assert_eq!(g.to_vec(), [2.0, 1.0]);
/// # Ok::<(), axes::Error>(())
/// ```
#[must_use = "a VarExpr computes nothing until it is evaluated"]
pub struct VarExpr<T: Float, A: AxisSet> {
    tape: Tape<T>,
    /// Set when operands came from different tapes; reported by `eval`.
    foreign: bool,
    ir: Ir,
    leaves: Vec<Leaf<T>>,
    _axes: PhantomData<fn() -> A>,
}

impl<T: Float, A: AxisSet> Clone for VarExpr<T, A> {
    fn clone(&self) -> Self {
        VarExpr {
            tape: self.tape.clone(),
            foreign: self.foreign,
            ir: self.ir.clone(),
            leaves: self.leaves.clone(),
            _axes: PhantomData,
        }
    }
}

/// What element-wise operations on variables accept: `&Var`, `Var` and `VarExpr`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a variable on a tape",
    label = "not a `Var` or `VarExpr`",
    note = "record a tensor on the tape first: `tape.constant(tensor)` (no gradient flows to it) or `tape.var(tensor)`"
)]
pub trait IntoVarExpr {
    /// The element type.
    type Elem: Float;
    /// The axes.
    type Axes: AxisSet;
    /// As an expression.
    fn into_var_expr(self) -> VarExpr<Self::Elem, Self::Axes>;
}

impl<T: Float, A: AxisSet> IntoVarExpr for VarExpr<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var_expr(self) -> VarExpr<T, A> {
        self
    }
}

impl<T: Float, A: AxisSet> IntoVarExpr for &Var<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var_expr(self) -> VarExpr<T, A> {
        let value = self.value();
        let value = if value.layout().is_padded() {
            value
                .contiguous()
                .unwrap_or_else(|e| panic!("writing out a padded value: {e}"))
        } else {
            value.clone()
        };
        let ids = A::IDS;
        let mut ir = Ir::default();
        ir.leaf();
        VarExpr {
            tape: self.tape().clone(),
            foreign: false,
            ir,
            leaves: vec![Leaf {
                node: self.id(),
                needs_grad: self.needs_grad(),
                storage: value.storage().clone(),
                layout: *value.layout(),
                ids,
                names: A::names,
            }],
            _axes: PhantomData,
        }
    }
}

impl<T: Float, A: AxisSet> IntoVarExpr for Var<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var_expr(self) -> VarExpr<T, A> {
        (&self).into_var_expr()
    }
}

/// What operations that are not element-wise accept: `&Var`, `Var`, or a `VarExpr` (which is
/// evaluated first).
pub trait IntoVar {
    /// The element type.
    type Elem: Float;
    /// The axes.
    type Axes: AxisSet;
    /// As a recorded variable.
    fn into_var(self) -> Result<Var<Self::Elem, Self::Axes>>;
}

impl<T: Float, A: AxisSet> IntoVar for VarExpr<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var(self) -> Result<Var<T, A>> {
        self.eval()
    }
}

impl<T: Float, A: AxisSet> IntoVar for &Var<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var(self) -> Result<Var<T, A>> {
        Ok(self.clone())
    }
}

impl<T: Float, A: AxisSet> IntoVar for Var<T, A> {
    type Elem = T;
    type Axes = A;
    fn into_var(self) -> Result<Var<T, A>> {
        Ok(self)
    }
}

impl<T: Float, A: AxisSet> VarExpr<T, A> {
    /// The expression as run-time IR (leaves numbered in order of first use).
    pub fn ir(&self) -> &Ir {
        &self.ir
    }

    fn root(&self) -> usize {
        self.ir.nodes.len() - 1
    }

    fn unary(mut self, op: UnaryOp) -> Self {
        let root = self.root();
        self.ir.push(IrNode::Unary(op, root));
        self
    }

    pub(crate) fn with_scalar(mut self, op: BinaryOp, scalar: f64, scalar_left: bool) -> Self {
        let root = self.root();
        let s = self.ir.push(IrNode::Scalar(scalar));
        let (a, b) = if scalar_left { (s, root) } else { (root, s) };
        self.ir.push(IrNode::Binary(op, a, b));
        self
    }

    /// `self op other`, leaves shared by both sides kept once.
    fn binary<B: AxisSet, O: AxisSet>(self, other: VarExpr<T, B>, op: BinaryOp) -> VarExpr<T, O> {
        self.combine(other, |ir, left, right| {
            ir.push(IrNode::Binary(op, left, right))
        })
    }

    /// `self` and `other` combined by the nodes `build` appends to their joint IR (given the
    /// two roots; the last node it pushes is the result).
    fn combine<B: AxisSet, O: AxisSet>(
        self,
        other: VarExpr<T, B>,
        build: impl FnOnce(&mut Ir, usize, usize) -> usize,
    ) -> VarExpr<T, O> {
        let foreign = self.foreign || other.foreign || !self.tape.same_as(&other.tape);
        let mut leaves = self.leaves;
        let map: Vec<usize> = other
            .leaves
            .into_iter()
            .map(
                |leaf| match leaves.iter().position(|l| l.node == leaf.node) {
                    Some(k) => k,
                    None => {
                        leaves.push(leaf);
                        leaves.len() - 1
                    }
                },
            )
            .collect();
        let mut ir = self.ir;
        let left = ir.nodes.len() - 1;
        let right = ir.splice(&other.ir, &map);
        build(&mut ir, left, right);
        VarExpr {
            tape: self.tape,
            foreign,
            ir,
            leaves,
            _axes: PhantomData,
        }
    }

    /// The lengths of `A`'s axes, as the leaves give them (checked to agree).
    fn lens(&self) -> Result<Vec<usize>> {
        let leaves: Vec<LeafLayout<'_>> = (self.leaves.iter())
            .map(|leaf| LeafLayout {
                ids: leaf.ids,
                layout: &leaf.layout,
                names: leaf.names,
            })
            .collect();
        Ok(IterSpace::new(A::IDS, &A::names, &[], None, &leaves)?
            .lens()
            .to_vec())
    }

    /// Computes the expression in one pass and records it on the tape.
    pub fn eval(self) -> Result<Var<T, A>> {
        self.record::<A>()
    }

    /// The sum over the axes `Over`, fused with the expression (no temporary); its backward
    /// is one pass too (the upstream gradient read with stride 0 along `Over`).
    pub fn sum<Over: AxisSet>(self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        self.record()
    }

    /// The mean over the axes `Over`, fused like [`VarExpr::sum`]. An empty axis is
    /// [`Error::EmptyReduction`] (a tensor's mean over one is NaN): a loss over no elements
    /// is a mistake to report, not a value to train on.
    pub fn mean<Over: AxisSet>(self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        let lens = self.lens()?;
        let (ids, over) = (A::IDS, Over::IDS);
        let over_axes = (0..A::RANK).filter(|&j| over.contains(&ids[j]));
        if let Some(empty) = over_axes.clone().find(|&j| lens[j] == 0) {
            return Err(Error::EmptyReduction {
                reduction: "mean",
                axis: A::names()[empty].to_string(),
            });
        }
        let count: usize = over_axes.map(|j| lens[j]).product();
        self.with_scalar(BinaryOp::Mul, 1.0 / count as f64, false)
            .record()
    }

    /// Evaluates the expression over `A` into a result with the axes `O` (`A`, or a subset:
    /// the other axes are summed) and records it.
    fn record<O: AxisSet>(self) -> Result<Var<T, O>> {
        if self.foreign {
            return Err(Error::Unsupported {
                what: "combining variables of different tapes".into(),
            });
        }
        let lens = self.lens()?;
        let ids = A::IDS.to_vec();
        let out_ids = O::IDS.to_vec();
        let inputs = (self.leaves.iter())
            .map(|l| l.input(&ids))
            .collect::<Result<Vec<_>>>()?;
        let output = Output::new(self.root(), positions(&out_ids, &ids), ReduceOp::Sum);
        let (storage, layout) = run_output(&self.ir, &lens, &inputs, output)?;
        drop(inputs);
        let value = Tensor::from_parts(storage, layout).expect("a job's result fits its layout");
        let needs_grad = self.leaves.iter().any(|l| l.needs_grad);
        let (ir, leaves) = (self.ir, self.leaves);
        Ok(self.tape.record(value, needs_grad, move |grads, id| {
            backward(&ir, &leaves, &ids, &out_ids, &lens, grads, id)
        }))
    }
}

/// The backward pass of a fused node `id` with IR `ir` over `leaves`, in one pass: one job
/// whose results are the gradients of the leaves that need one, each summed over the axes
/// that leaf lacks and added to what earlier steps accumulated for it.
fn backward<T: Float>(
    ir: &Ir,
    leaves: &[Leaf<T>],
    ids: &[TypeId],
    out_ids: &[TypeId],
    lens: &[usize],
    grads: &mut Grads<T>,
    id: usize,
) -> Result<()> {
    let Some(upstream) = grads.buf(id) else {
        return Ok(());
    };
    let mut ir = ir.clone();
    let root = ir.nodes.len() - 1;
    let seed = ir.push(IrNode::Leaf(leaves.len()));
    let adjoints = derive(&mut ir, root, seed, leaves.len())?;
    let wanted: Vec<(usize, usize)> = (0..leaves.len())
        .filter(|&k| leaves[k].needs_grad)
        .filter_map(|k| adjoints[k].map(|node| (k, node)))
        .collect();
    // A leaf whose gradient is the upstream one itself, over the same axes (in any order)
    // and with nothing to add it to (the gradient of `x` in `x + b`), is a view of the
    // upstream buffer instead of a copy; gradients are copied on write, so one accumulated
    // onto later is copied then.
    let shareable = upstream.layout.is_injective() && !upstream.layout.is_padded();
    let (passed, computed): (Vec<_>, Vec<_>) = wanted.iter().partition(|&&(k, node)| {
        node == seed
            && shareable
            && leaves[k].ids.len() == out_ids.len()
            && leaves[k].ids.iter().all(|a| out_ids.contains(a))
            && !grads.has(leaves[k].node)
    });
    for (k, _) in passed {
        let order = positions(leaves[k].ids, out_ids);
        let view = GradBuf {
            storage: upstream.storage.clone(),
            layout: upstream.layout.permuted(&order),
        };
        grads.put(leaves[k].node, view);
    }
    if computed.is_empty() {
        return Ok(());
    }
    let mut inputs = (leaves.iter())
        .map(|l| l.input(ids))
        .collect::<Result<Vec<_>>>()?;
    // The upstream gradient has the node's result axes: read with stride 0 along the axes
    // the node summed.
    let upstream_axes = positions(out_ids, ids);
    inputs.push(Input::new(
        &upstream.storage,
        &upstream.layout,
        &upstream_axes,
        ids.len(),
    )?);
    let outputs = (computed.iter())
        .map(|&(k, node)| {
            let kept = positions(leaves[k].ids, ids);
            let start = grads.take_for_accumulate(leaves[k].node)?;
            Ok(Output::new(node, kept, ReduceOp::Sum).onto(start))
        })
        .collect::<Result<Vec<_>>>()?;
    let results = run_outputs(&ir, lens, &inputs, outputs)?;
    for ((storage, layout), &(k, _)) in results.into_iter().zip(&computed) {
        grads.put(leaves[k].node, GradBuf { storage, layout });
    }
    Ok(())
}

/// Appends to `ir` the adjoint of every node reachable from `root`, `seed` being the
/// adjoint of `root`; returns the adjoint node of each leaf (`None` where none flows). Each
/// op's rule is its row of the op table ([`UnaryOp::derivative`], [`BinaryOp::derivative`]).
fn derive(ir: &mut Ir, root: usize, seed: usize, leaves: usize) -> Result<Vec<Option<usize>>> {
    let mut adjoint: Vec<Option<usize>> = vec![None; root + 1];
    adjoint[root] = Some(seed);
    let mut leaf_adjoint: Vec<Option<usize>> = vec![None; leaves];
    fn add_to(ir: &mut Ir, slot: &mut Option<usize>, term: usize) {
        *slot = Some(match *slot {
            None => term,
            Some(old) => ir.push(IrNode::Binary(BinaryOp::Add, old, term)),
        });
    }
    for i in (0..=root).rev() {
        let Some(g) = adjoint[i] else { continue };
        let terms: [(usize, Option<usize>); 3] = match ir.nodes[i] {
            IrNode::Leaf(k) => {
                add_to(ir, &mut leaf_adjoint[k], g);
                continue;
            }
            IrNode::Scalar(_) | IrNode::Compare(..) => continue,
            IrNode::Unary(op, x) => [(x, op.derivative(ir, x, i, g)), (0, None), (0, None)],
            IrNode::Binary(op, a, b) => {
                let [da, db] = op.derivative(ir, a, b, i, g);
                [(a, da), (b, db), (0, None)]
            }
            IrNode::Select(c, a, b) => {
                let zero = ir.push(IrNode::Scalar(0.0));
                let da = ir.push(IrNode::Select(c, g, zero));
                let db = ir.push(IrNode::Select(c, zero, g));
                [(a, Some(da)), (b, Some(db)), (0, None)]
            }
            IrNode::Cast(..) => {
                return Err(Error::Unsupported {
                    what: "the gradient of `cast`".into(),
                });
            }
            IrNode::Map(_) => {
                return Err(Error::Unsupported {
                    what: "the gradient of `map`".into(),
                });
            }
        };
        for (input, term) in terms {
            if let Some(term) = term {
                add_to(ir, &mut adjoint[input], term);
            }
        }
    }
    Ok(leaf_adjoint)
}

/// The element-wise methods shared by `VarExpr`, `Var` and `&Var`: one per row of the op
/// table that has a method, but for the integer ones (variables hold floats).
macro_rules! var_unary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] Int) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        impl<T: Float, A: AxisSet> VarExpr<T, A> {
            $($attr)*
            pub fn $method(self) -> VarExpr<T, A> {
                self.unary(UnaryOp::$op)
            }
        }
        impl<T: Float, A: AxisSet> Var<T, A> {
            $($attr)*
            pub fn $method(&self) -> VarExpr<T, A> {
                self.into_var_expr().unary(UnaryOp::$op)
            }
        }
    };
}

crate::ir::ops::for_each_unary_op!(crate::ir::ops::unary_method_rows, var_unary_method);

/// The binary element-wise methods of `VarExpr`, one per row of the op table that has a
/// method.
macro_rules! var_binary_method {
    ([$($attr:tt)*] $op:ident [] $domain:ident) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] Int) => {};
    ([$($attr:tt)*] $op:ident [$method:ident] $domain:ident) => {
        impl<T: Float, A: AxisSet> VarExpr<T, A> {
            $($attr)*
            pub fn $method<R: IntoVarExpr<Elem = T>>(
                self,
                other: R,
            ) -> VarExpr<T, Broadcast<A, R::Axes>>
            where
                A: BroadcastWith<R::Axes>,
                Broadcast<A, R::Axes>: AxisSet,
            {
                self.binary(other.into_var_expr(), BinaryOp::$op)
            }
        }
    };
}

crate::ir::ops::for_each_binary_op!(crate::ir::ops::binary_method_rows, var_binary_method);

impl<T: Float, A: AxisSet> VarExpr<T, A> {
    /// The tape the expression's variables are recorded on.
    pub fn tape(&self) -> &Tape<T> {
        &self.tape
    }

    /// `self ^ exponent` for a constant exponent.
    pub fn powf(self, exponent: f64) -> VarExpr<T, A> {
        self.with_scalar(BinaryOp::Pow, exponent, false)
    }

    /// `value` where `mask` is true, else the expression (PyTorch's `masked_fill`): no
    /// gradient flows through the filled elements. The mask has any of the expression's axes
    /// and broadcasts over the rest; a mask over another axis is a compile error.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// #[derive(Axis)] struct Query;
    /// #[derive(Axis)] struct Key;
    /// let tape = Tape::<f64>::new();
    /// let scores = tape.var(Tensor::<f64, (Query, Key)>::ones((Query.len(2), Key.len(2)))?);
    /// let later = Tensor::<bool, (Query, Key)>::from_fn((Query.len(2), Key.len(2)), |i| i.of::<Key>() > i.of::<Query>())?;
    /// let masked = scores.expr().masked_fill(&later, f64::NEG_INFINITY)?.eval()?;
    /// assert_eq!(masked.value().to_vec(), [1., f64::NEG_INFINITY, 1., 1.]);
    /// let grad = masked.softmax::<Key>()?.sum::<(Query, Key)>()?.backward()?.get(&scores)?;
    /// assert!(grad.to_vec().iter().all(|g| g.abs() < 1e-12)); // softmax rows sum to 1
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn masked_fill<M: AxisSet>(
        self,
        mask: &Tensor<bool, M>,
        value: f64,
    ) -> Result<VarExpr<T, A>>
    where
        A: Includes<M>,
    {
        let mask = self.tape.constant(mask.cast::<T>().eval()?).into_var_expr();
        Ok(self.combine(mask, |ir, x, mask| {
            let zero = ir.push(IrNode::Scalar(0.0));
            let set = ir.push(IrNode::Compare(CompareOp::NotEqual, mask, zero));
            let value = ir.push(IrNode::Scalar(value));
            ir.push(IrNode::Select(set, value, x))
        }))
    }
}

impl<T: Float, A: AxisSet> Var<T, A> {
    /// As an element-wise expression (for chaining).
    pub fn expr(&self) -> VarExpr<T, A> {
        self.into_var_expr()
    }
}

/// `+ - * / %` between `VarExpr`, `Var` and `&Var`, and with scalars on either side.
macro_rules! var_operators {
    ($([$($g:tt)*] $ty:ty;)*) => {$(
        var_operators!(@op [$($g)*] $ty; Add add Add);
        var_operators!(@op [$($g)*] $ty; Sub sub Sub);
        var_operators!(@op [$($g)*] $ty; Mul mul Mul);
        var_operators!(@op [$($g)*] $ty; Div div Div);
        var_operators!(@op [$($g)*] $ty; Rem rem Rem);
        impl<$($g)*> Neg for $ty {
            type Output = VarExpr<T, A>;
            fn neg(self) -> VarExpr<T, A> {
                self.into_var_expr().unary(UnaryOp::Neg)
            }
        }
    )*};
    (@op [$($g:tt)*] $ty:ty; $trait:ident $method:ident $op:ident) => {
        impl<$($g)*, R: IntoVarExpr<Elem = T>> $trait<R> for $ty
        where
            A: BroadcastWith<R::Axes>,
            Broadcast<A, R::Axes>: AxisSet,
        {
            type Output = VarExpr<T, Broadcast<A, R::Axes>>;
            fn $method(self, rhs: R) -> Self::Output {
                self.into_var_expr().binary(rhs.into_var_expr(), BinaryOp::$op)
            }
        }
    };
}

/// Scalar op expression and expression op scalar; the scalar has the element type.
macro_rules! var_scalar_operators {
    ($s:ty; $([$($g:tt)*] $ty:ty;)*) => {$(
        var_scalar_operators!(@op [$($g)*] $ty, $s; Add add Add);
        var_scalar_operators!(@op [$($g)*] $ty, $s; Sub sub Sub);
        var_scalar_operators!(@op [$($g)*] $ty, $s; Mul mul Mul);
        var_scalar_operators!(@op [$($g)*] $ty, $s; Div div Div);
        var_scalar_operators!(@op [$($g)*] $ty, $s; Rem rem Rem);
    )*};
    (@op [$($g:tt)*] $ty:ty, $s:ty; $trait:ident $method:ident $op:ident) => {
        impl<$($g)*> $trait<$s> for $ty {
            type Output = VarExpr<$s, A>;
            fn $method(self, rhs: $s) -> VarExpr<$s, A> {
                self.into_var_expr().with_scalar(BinaryOp::$op, crate::element::Element::to_f64(rhs), false)
            }
        }
        impl<$($g)*> $trait<$ty> for $s {
            type Output = VarExpr<$s, A>;
            fn $method(self, rhs: $ty) -> VarExpr<$s, A> {
                rhs.into_var_expr().with_scalar(BinaryOp::$op, crate::element::Element::to_f64(self), true)
            }
        }
    };
}

var_operators! {
    [T: Float, A: AxisSet] VarExpr<T, A>;
    ['v, T: Float, A: AxisSet] &'v Var<T, A>;
    [T: Float, A: AxisSet] Var<T, A>;
}

var_scalar_operators! { f32;
    [A: AxisSet] VarExpr<f32, A>;
    ['v, A: AxisSet] &'v Var<f32, A>;
    [A: AxisSet] Var<f32, A>;
}

var_scalar_operators! { f64;
    [A: AxisSet] VarExpr<f64, A>;
    ['v, A: AxisSet] &'v Var<f64, A>;
    [A: AxisSet] Var<f64, A>;
}

var_scalar_operators! { half::f16;
    [A: AxisSet] VarExpr<half::f16, A>;
    ['v, A: AxisSet] &'v Var<half::f16, A>;
    [A: AxisSet] Var<half::f16, A>;
}

var_scalar_operators! { half::bf16;
    [A: AxisSet] VarExpr<half::bf16, A>;
    ['v, A: AxisSet] &'v Var<half::bf16, A>;
    [A: AxisSet] Var<half::bf16, A>;
}
