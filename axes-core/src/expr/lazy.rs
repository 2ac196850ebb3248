//! What the operators and methods return: [`Lazy`], a tree of nodes that holds no borrow
//! itself (tensors it reads are [`Borrowed`] leaves), and the lifetime of the borrows.
//!
//! Keeping every lifetime out of the tree is what keeps long expressions cheap to compile:
//! a tree with no lifetimes in its type is proved an [`Expr`] once and remembered by the
//! compiler, while a tree of `&'a Tensor` leaves is proved again, down its whole length,
//! at every operator of a chain.

use std::marker::PhantomData;
use std::ptr::NonNull;

use super::{Expr, Ir};
use crate::engine::plan::{Leaves, Plan};
use crate::protocol::Buffers;
use crate::tensor::FlatPartsList;

/// A lazy expression built by an operator or a method: its tree of nodes, which reads
/// tensors borrowed for `'t`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct T;
/// let x = Tensor::<f32, (T,)>::from_vec(T.len(2), vec![1., 2.])?;
/// let e = &x * 2.0 - 1.0;          // a `Lazy`: nothing is computed yet
/// assert_eq!(e.ir().to_string(), "sub(mul(leaf0, 2), 1)");
/// assert_eq!((&e + &e).eval()?.to_vec(), [2., 6.]);
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[must_use = "an expression computes nothing until it is evaluated, assigned or reduced"]
pub struct Lazy<'t, N> {
    node: N,
    _borrows: PhantomData<&'t ()>,
}

impl<N> Lazy<'_, N> {
    /// The expression whose tree is `node`. The caller makes `'t` no longer than every borrow
    /// its [`Borrowed`] leaves stand for (each comes from an [`IntoNode<'t>`] conversion).
    pub(crate) fn new(node: N) -> Self {
        Lazy {
            node,
            _borrows: PhantomData,
        }
    }
}

/// A leaf that reads an expression through a pointer whose borrow the [`Lazy`] around it
/// keeps (a `&N` without its lifetime in the type).
pub struct Borrowed<N>(NonNull<N>);

impl<N> Borrowed<N> {
    fn get(&self) -> &N {
        // SAFETY: built only by `IntoNode<'t>::into_node` of a reference `&'s E` with
        // `'s: 't` (pointing at what `E` reads), for a `Lazy<'t, _>`, and reachable only
        // through that `Lazy` (its field is private, and `into_node` takes a token no other
        // crate can make): while this is alive, so is the borrow, so the pointee is alive and
        // not mutated.
        unsafe { self.0.as_ref() }
    }
}

impl<N> Clone for Borrowed<N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N> Copy for Borrowed<N> {}

impl<N: std::fmt::Debug> std::fmt::Debug for Borrowed<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

// SAFETY: a shared reference to `N`: sendable and shareable when `&N` is, i.e. `N: Sync`.
unsafe impl<N: Sync> Send for Borrowed<N> {}
// SAFETY: as above.
unsafe impl<N: Sync> Sync for Borrowed<N> {}

/// Forwards every method of [`Expr`] to the expression `$inner` of `self`.
macro_rules! forward_expr {
    ($n:ident, |$s:ident| $inner:expr) => {
        type Elem = $n::Elem;
        type Axes = $n::Axes;
        type Target = $n::Target;
        const DEPTH: usize = $n::DEPTH;
        const FUSED_ONLY: bool = $n::FUSED_ONLY;
        const WEIGHTS: crate::ir::OpWeights = $n::WEIGHTS;
        type Eval<'a>
            = $n::Eval<'a>
        where
            Self: 'a;
        fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
            let $s = self;
            $inner.operands(out);
        }
        fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
            let $s = self;
            $inner.buffers(out);
        }
        fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
            let $s = self;
            $inner.flat_parts(out);
        }
        #[inline(always)]
        fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a> {
            let $s = self;
            $inner.evaluator(plan, next_leaf)
        }
        fn describe(&self, ir: &mut Ir) -> usize {
            let $s = self;
            $inner.describe(ir)
        }
        fn target(&self) -> &Self::Target {
            let $s = self;
            $inner.target()
        }
    };
}

impl<N: Expr> Expr for Lazy<'_, N> {
    forward_expr!(N, |s| s.node);
}

impl<N: Expr> Expr for Borrowed<N> {
    forward_expr!(N, |s| s.get());
}

mod private {
    /// Proof that a conversion into a node runs inside this crate: a node can outlive the
    /// borrows it stands for, so only code that wraps it in a [`super::Lazy`] may make one.
    #[derive(Clone, Copy, Debug)]
    pub struct Token;
}

pub(crate) use private::Token;

/// An operand an expression can hold for `'t`: tensors (borrowed for `'t` or owned), lazy
/// expressions and [`Scalar`](super::Scalar)s. The operators and methods that build
/// expressions take their operands through it.
pub trait IntoNode<'t>: Expr {
    /// The node it becomes in the tree (it holds no borrow; the [`Lazy`] keeps `'t`).
    type Node: Expr<Elem = Self::Elem, Axes = Self::Axes>;

    /// Converts (inside this crate only).
    #[doc(hidden)]
    fn into_node(self, _: Token) -> Self::Node;
}

/// The node operand `E` becomes in an expression that lives for `'t`.
pub type NodeOf<'t, E> = <E as IntoNode<'t>>::Node;

impl<'t, 's: 't, N: Expr> IntoNode<'t> for Lazy<'s, N> {
    type Node = N;
    fn into_node(self, _: Token) -> N {
        self.node
    }
}

impl<'t, T: crate::element::Element, A: crate::list::AxisSet> IntoNode<'t>
    for crate::tensor::Tensor<T, A>
{
    type Node = Self;
    fn into_node(self, _: Token) -> Self {
        self
    }
}

impl<'t, 's: 't, E: Expr> IntoNode<'t> for &'s E {
    type Node = Borrowed<E::Target>;
    fn into_node(self, _: Token) -> Self::Node {
        Borrowed(NonNull::from(self.target()))
    }
}

impl<'t, T: crate::element::Element> IntoNode<'t> for super::Scalar<T> {
    type Node = Self;
    fn into_node(self, _: Token) -> Self {
        self
    }
}
