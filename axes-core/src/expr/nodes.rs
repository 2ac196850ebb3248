//! The nodes of an expression tree and their chunk evaluators.

use std::marker::PhantomData;
use std::ops::Range;

use super::Expr;
use crate::element::Element;
use crate::engine::exec::ChunkEval;
use crate::engine::plan::{Leaves, Plan};
use crate::ir::{BinaryFn, Ir, IrNode, OpWeights, UnaryFn};
use crate::list::{AxisSet, Broadcast, BroadcastWith};
use crate::protocol::Buffers;
use crate::tensor::FlatPartsList;

/// The larger of two depths (`Ord::max` is not callable in constants).
const fn deeper(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// A constant: an expression with no axes.
#[derive(Clone, Copy, Debug)]
pub struct Scalar<T>(pub T);

/// The evaluator of a [`Scalar`].
pub struct ScalarEval<T>(T);

// SAFETY: `at` reads no memory.
unsafe impl<T: Element> ChunkEval for ScalarEval<T> {
    type Out = T;
    #[inline(always)]
    fn load(&mut self, _: &[usize], _: usize, _: usize) {}
    #[inline(always)]
    unsafe fn at(&self, _: usize) -> T {
        self.0
    }
}

impl<T: Element> Expr for Scalar<T> {
    type Elem = T;
    type Axes = ();
    type Target = Self;
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = ScalarEval<T>
    where
        Self: 'a;
    fn operands<'a>(&'a self, _: &mut Leaves<'a>) {}
    fn buffers<'a>(&'a self, _: &mut Buffers<'a>) {}
    #[inline(always)]
    fn evaluator(&self, _: &Plan, _: &mut usize) -> ScalarEval<T> {
        ScalarEval(self.0)
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        ir.push(IrNode::Scalar(self.0.to_f64()))
    }
}

/// An element-wise function of one expression, with result element type `T`.
#[derive(Clone, Copy, Debug)]
pub struct Unary<T, E, Op> {
    pub(crate) inner: E,
    pub(crate) op: Op,
    _out: PhantomData<fn() -> T>,
}

impl<T, E, Op> Unary<T, E, Op> {
    pub(crate) fn new(inner: E, op: Op) -> Self {
        Unary {
            inner,
            op,
            _out: PhantomData,
        }
    }
}

/// The evaluator of a [`Unary`] node.
pub struct UnaryEval<E, Op> {
    inner: E,
    op: Op,
}

// SAFETY: forwards to the inner evaluator with the same index.
unsafe impl<E: ChunkEval, Op: UnaryFn<E::Out>> ChunkEval for UnaryEval<E, Op> {
    type Out = Op::Out;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.inner.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.inner.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.inner.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> Op::Out {
        // SAFETY: same contract as ours.
        self.op.apply(unsafe { self.inner.at(i) })
    }
}

impl<T: Element, E: Expr, Op: UnaryFn<E::Elem, Out = T>> Expr for Unary<T, E, Op> {
    type Elem = T;
    type Axes = E::Axes;
    type Target = Self;
    const DEPTH: usize = E::DEPTH + 1;
    const FUSED_ONLY: bool = E::FUSED_ONLY;
    const WEIGHTS: OpWeights = E::WEIGHTS.plus(Op::WEIGHT);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = UnaryEval<E::Eval<'a>, Op>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.inner.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.inner.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.inner.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        UnaryEval {
            inner: self.inner.evaluator(plan, next_leaf),
            op: self.op,
        }
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        let a = self.inner.describe(ir);
        self.op.describe(ir, a)
    }
}

/// An element-wise function of two expressions, with result element type `T` and result axes
/// `A`: those of the elementwise ordering rules ([`Broadcast`]), worked out once where the node
/// is built ([`BinaryOf`]), so that a long expression's type never asks the compiler to work
/// out its inner nodes' axes again.
#[derive(Clone, Copy, Debug)]
pub struct Binary<T, L, R, Op, A> {
    pub(crate) left: L,
    pub(crate) right: R,
    pub(crate) op: Op,
    _out: PhantomData<fn() -> (T, A)>,
}

/// The [`Binary`] node of `op` on `L` and `R`, with its result axes.
pub type BinaryOf<T, L, R, Op> =
    Binary<T, L, R, Op, Broadcast<<L as Expr>::Axes, <R as Expr>::Axes>>;

impl<T, L, R, Op, A> Binary<T, L, R, Op, A> {
    /// The node of `op` on `left` and `right`. The caller names `A`, which must be
    /// `Broadcast<L::Axes, R::Axes>` (the same set of axes, and the same order, as the types
    /// the operators and `ExprExt` methods give).
    pub(crate) fn new(left: L, right: R, op: Op) -> Self {
        Binary {
            left,
            right,
            op,
            _out: PhantomData,
        }
    }
}

/// The evaluator of a [`Binary`] node.
pub struct BinaryEval<L, R, Op> {
    left: L,
    right: R,
    op: Op,
}

// SAFETY: forwards to both evaluators with the same index.
unsafe impl<L: ChunkEval, R: ChunkEval<Out = L::Out>, Op: BinaryFn<L::Out>> ChunkEval
    for BinaryEval<L, R, Op>
{
    type Out = Op::Out;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.left.load(outer, start, n);
        self.right.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.left.prepare_tile(outer, rows.clone(), start, n);
        self.right.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.left.prefetch(outer, start, n);
        self.right.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> Op::Out {
        // SAFETY: same contract as ours.
        unsafe { self.op.apply(self.left.at(i), self.right.at(i)) }
    }
}

impl<T, L, R, Op, A> Expr for Binary<T, L, R, Op, A>
where
    T: Element,
    L: Expr,
    R: Expr<Elem = L::Elem>,
    A: AxisSet,
    Op: BinaryFn<L::Elem, Out = T>,
{
    type Elem = T;
    type Axes = A;
    type Target = Self;
    const DEPTH: usize = deeper(L::DEPTH, R::DEPTH) + 1;
    const FUSED_ONLY: bool = L::FUSED_ONLY || R::FUSED_ONLY;
    const WEIGHTS: OpWeights = L::WEIGHTS.plus(R::WEIGHTS).plus(Op::WEIGHT);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = BinaryEval<L::Eval<'a>, R::Eval<'a>, Op>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.left.operands(out);
        self.right.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.left.buffers(out);
        self.right.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.left.flat_parts(out);
        self.right.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        let left = self.left.evaluator(plan, next_leaf);
        BinaryEval {
            left,
            right: self.right.evaluator(plan, next_leaf),
            op: self.op,
        }
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        let a = self.left.describe(ir);
        let b = self.right.describe(ir);
        self.op.describe(ir, a, b)
    }
}

/// `select(cond, a, b)`: `a` where `cond` is true, else `b`.
#[derive(Clone, Copy, Debug)]
pub struct Select<T, C, A, B> {
    pub(crate) cond: C,
    pub(crate) a: A,
    pub(crate) b: B,
    _out: PhantomData<fn() -> T>,
}

impl<T, C, A, B> Select<T, C, A, B> {
    pub(crate) fn new(cond: C, a: A, b: B) -> Self {
        Select {
            cond,
            a,
            b,
            _out: PhantomData,
        }
    }
}

/// The evaluator of a [`Select`] node.
pub struct SelectEval<C, A, B> {
    cond: C,
    a: A,
    b: B,
}

// SAFETY: forwards to the three evaluators with the same index.
unsafe impl<C: ChunkEval<Out = bool>, A: ChunkEval, B: ChunkEval<Out = A::Out>> ChunkEval
    for SelectEval<C, A, B>
{
    type Out = A::Out;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.cond.load(outer, start, n);
        self.a.load(outer, start, n);
        self.b.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.cond.prepare_tile(outer, rows.clone(), start, n);
        self.a.prepare_tile(outer, rows.clone(), start, n);
        self.b.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.cond.prefetch(outer, start, n);
        self.a.prefetch(outer, start, n);
        self.b.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> A::Out {
        // SAFETY: same contract as ours; both sides are read so the loop stays branch-free.
        let (c, a, b) = unsafe { (self.cond.at(i), self.a.at(i), self.b.at(i)) };
        if c { a } else { b }
    }
}

impl<T, C, A, B> Expr for Select<T, C, A, B>
where
    T: Element,
    C: Expr<Elem = bool>,
    A: Expr<Elem = T>,
    B: Expr<Elem = A::Elem>,
    C::Axes: BroadcastWith<A::Axes>,
    Broadcast<C::Axes, A::Axes>: BroadcastWith<B::Axes>,
    Broadcast<Broadcast<C::Axes, A::Axes>, B::Axes>: AxisSet,
{
    type Elem = A::Elem;
    type Axes = Broadcast<Broadcast<C::Axes, A::Axes>, B::Axes>;
    type Target = Self;
    const DEPTH: usize = deeper(C::DEPTH, deeper(A::DEPTH, B::DEPTH)) + 1;
    const FUSED_ONLY: bool = C::FUSED_ONLY || A::FUSED_ONLY || B::FUSED_ONLY;
    const WEIGHTS: OpWeights = C::WEIGHTS
        .plus(A::WEIGHTS)
        .plus(B::WEIGHTS)
        .plus(OpWeights::SIMPLE);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = SelectEval<C::Eval<'a>, A::Eval<'a>, B::Eval<'a>>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.cond.operands(out);
        self.a.operands(out);
        self.b.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.cond.buffers(out);
        self.a.buffers(out);
        self.b.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.cond.flat_parts(out);
        self.a.flat_parts(out);
        self.b.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        let cond = self.cond.evaluator(plan, next_leaf);
        let a = self.a.evaluator(plan, next_leaf);
        SelectEval {
            cond,
            a,
            b: self.b.evaluator(plan, next_leaf),
        }
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        let c = self.cond.describe(ir);
        let a = self.a.describe(ir);
        let b = self.b.describe(ir);
        ir.push(IrNode::Select(c, a, b))
    }
}

/// A conversion to element type `U` ([`Element::cast`]).
#[derive(Clone, Copy, Debug)]
pub struct Cast<E, U> {
    pub(crate) inner: E,
    _to: PhantomData<fn() -> U>,
}

impl<E, U> Cast<E, U> {
    pub(crate) fn new(inner: E) -> Self {
        Cast {
            inner,
            _to: PhantomData,
        }
    }
}

/// The evaluator of a [`Cast`] node.
pub struct CastEval<E, U>(E, PhantomData<fn() -> U>);

// SAFETY: forwards to the inner evaluator with the same index.
unsafe impl<E: ChunkEval, U: Element> ChunkEval for CastEval<E, U> {
    type Out = U;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.0.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.0.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.0.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> U {
        // SAFETY: same contract as ours.
        unsafe { self.0.at(i) }.cast()
    }
}

impl<E: Expr, U: Element> Expr for Cast<E, U> {
    type Elem = U;
    type Axes = E::Axes;
    type Target = Self;
    const DEPTH: usize = E::DEPTH + 1;
    const FUSED_ONLY: bool = E::FUSED_ONLY;
    const WEIGHTS: OpWeights = E::WEIGHTS.plus(OpWeights::SIMPLE);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = CastEval<E::Eval<'a>, U>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.inner.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.inner.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.inner.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        CastEval(self.inner.evaluator(plan, next_leaf), PhantomData)
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        let a = self.inner.describe(ir);
        ir.push(IrNode::Cast(U::DTYPE, a))
    }
}

/// A user closure applied to every element (CPU only).
#[derive(Clone, Copy, Debug)]
pub struct MapFn<U, E, F> {
    pub(crate) inner: E,
    pub(crate) f: F,
    _out: PhantomData<fn() -> U>,
}

impl<U, E, F> MapFn<U, E, F> {
    pub(crate) fn new(inner: E, f: F) -> Self {
        MapFn {
            inner,
            f,
            _out: PhantomData,
        }
    }
}

/// The evaluator of a [`MapFn`] node.
pub struct MapEval<'f, E, F>(E, &'f F);

// SAFETY: forwards to the inner evaluator with the same index.
unsafe impl<E: ChunkEval, U: Element, F: Fn(E::Out) -> U> ChunkEval for MapEval<'_, E, F> {
    type Out = U;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.0.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.0.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.0.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> U {
        // SAFETY: same contract as ours.
        (self.1)(unsafe { self.0.at(i) })
    }
}

impl<E: Expr, U: Element, F: Fn(E::Elem) -> U + Sync> Expr for MapFn<U, E, F> {
    type Elem = U;
    type Axes = E::Axes;
    type Target = Self;
    const DEPTH: usize = E::DEPTH + 1;
    const FUSED_ONLY: bool = true;
    // A closure could cost anything: counted as a transcendental function.
    const WEIGHTS: OpWeights = E::WEIGHTS.plus(OpWeights::TRANSCENDENTAL);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = MapEval<'a, E::Eval<'a>, F>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.inner.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.inner.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.inner.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        MapEval(self.inner.evaluator(plan, next_leaf), &self.f)
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        let a = self.inner.describe(ir);
        ir.push(IrNode::Map(a))
    }
}

/// A user closure of two arguments applied to every element pair (CPU only), the operands
/// broadcast by axis identity as for the arithmetic operators (result axes `A`).
#[derive(Clone, Copy, Debug)]
pub struct MapWith<U, L, R, F, A> {
    pub(crate) left: L,
    pub(crate) right: R,
    pub(crate) f: F,
    _out: PhantomData<fn() -> (U, A)>,
}

impl<U, L, R, F, A> MapWith<U, L, R, F, A> {
    /// The node of `f` on `left` and `right`; the caller names `A`, which must be
    /// `Broadcast<L::Axes, R::Axes>` (as for [`Binary::new`]).
    pub(crate) fn new(left: L, right: R, f: F) -> Self {
        MapWith {
            left,
            right,
            f,
            _out: PhantomData,
        }
    }
}

/// The evaluator of a [`MapWith`] node.
pub struct MapWithEval<'f, L, R, F> {
    left: L,
    right: R,
    f: &'f F,
}

// SAFETY: forwards to both evaluators with the same index.
unsafe impl<L, R, U, F> ChunkEval for MapWithEval<'_, L, R, F>
where
    L: ChunkEval,
    R: ChunkEval,
    U: Element,
    F: Fn(L::Out, R::Out) -> U,
{
    type Out = U;
    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        self.left.load(outer, start, n);
        self.right.load(outer, start, n);
    }
    #[inline(always)]
    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        self.left.prepare_tile(outer, rows.clone(), start, n);
        self.right.prepare_tile(outer, rows, start, n);
    }
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        self.left.prefetch(outer, start, n);
        self.right.prefetch(outer, start, n);
    }
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> U {
        // SAFETY: same contract as ours.
        unsafe { (self.f)(self.left.at(i), self.right.at(i)) }
    }
}

impl<U, L, R, F, A> Expr for MapWith<U, L, R, F, A>
where
    U: Element,
    L: Expr,
    R: Expr,
    F: Fn(L::Elem, R::Elem) -> U + Sync,
    A: AxisSet,
{
    type Elem = U;
    type Axes = A;
    type Target = Self;
    const DEPTH: usize = deeper(L::DEPTH, R::DEPTH) + 1;
    const FUSED_ONLY: bool = true;
    // A closure could cost anything: counted as a transcendental function.
    const WEIGHTS: OpWeights = L::WEIGHTS.plus(R::WEIGHTS).plus(OpWeights::TRANSCENDENTAL);
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = MapWithEval<'a, L::Eval<'a>, R::Eval<'a>, F>
    where
        Self: 'a;
    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        self.left.operands(out);
        self.right.operands(out);
    }
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        self.left.buffers(out);
        self.right.buffers(out);
    }
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        self.left.flat_parts(out);
        self.right.flat_parts(out);
    }
    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
        let left = self.left.evaluator(plan, next_leaf);
        MapWithEval {
            left,
            right: self.right.evaluator(plan, next_leaf),
            f: &self.f,
        }
    }
    fn describe(&self, ir: &mut Ir) -> usize {
        // The closure has no IR: a device refuses the `Map` node (every leaf is still
        // described, so the leaves keep their numbers).
        let a = self.left.describe(ir);
        self.right.describe(ir);
        ir.push(IrNode::Map(a))
    }
}
