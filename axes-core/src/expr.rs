//! Lazy expressions (r-tensors): `&x + &y`, `x.exp()`, `(&x - &y).square().sum_all()` build a
//! typed tree that computes nothing until it is evaluated
//! ([`ExprExt::eval`](crate::ExprExt::eval)), assigned
//! ([`Tensor::assign`](crate::Tensor::assign)) or reduced
//! ([`ExprExt::sum`](crate::ExprExt::sum)). This module builds them; [`crate::eval`] runs them,
//! the whole tree as one loop nest: no temporaries.
//!
//! Every operator and method returns a [`Lazy`]: the tree of nodes, whose type holds no
//! lifetime (a borrowed tensor is a [`Borrowed`] leaf), and the lifetime `'t` of the tensors
//! it borrows. A tree type with no lifetime in it is proved an expression once by the
//! compiler; that keeps long expressions cheap to build. On the CPU a tree runs as one loop
//! nest compiled for it, or, deeper than
//! [`MAX_FUSED_DEPTH`](crate::dispatch::MAX_FUSED_DEPTH), on the IR interpreter (whose code
//! does not grow with the tree).
//!
//! The result axes of a binary operation follow the elementwise ordering rules
//! ([`crate::list::Broadcast`]); every axis two operands share must have one length, else
//! evaluation returns [`Error::LengthMismatch`](crate::Error::LengthMismatch).
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! let x = Tensor::<f32, (Batch, Hidden)>::from_fn((Batch.len(2), Hidden.len(3)), |ix| ix.of::<Hidden>() as f32)?;
//! let b = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(3), vec![1., 1., 1.])?;
//! let y = (&x * 2.0 + &b).eval()?;          // (Batch, Hidden): b broadcasts over Batch
//! assert_eq!(y.to_vec(), [1., 3., 5., 1., 3., 5.]);
//! let l2 = (&x - &y).square().sum_all()?;   // one pass, no temporary
//! assert_eq!(l2, 2.0 * (1.0 + 4.0 + 9.0));
//! # Ok::<(), axes::Error>(())
//! ```

mod lazy;
mod leaf;
mod nodes;
mod operand;
mod operators;
mod ops;

pub use crate::list::Reducible;
pub(crate) use lazy::Token;
pub use lazy::{Borrowed, IntoNode, Lazy, NodeOf};
pub use nodes::{Binary, BinaryOf, Cast, MapFn, MapWith, Scalar, Select, Unary};
pub use operand::{IntoExpr, Operand, select};
pub use operators::SameElement;
pub use ops::{Clamp, Powf, Powi};

use crate::element::Element;
use crate::engine::exec::ChunkEval;
use crate::engine::plan::{Leaves, Plan};
use crate::ir::{Ir, OpWeights};
use crate::list::{AxisSet, Difference};
use crate::protocol::Buffers;
use crate::tensor::FlatPartsList;

/// Keeps [`Expr`] implemented only here.
mod sealed {
    use super::{Binary, Borrowed, Cast, Lazy, MapFn, MapWith, Scalar, Select, Unary};
    use crate::element::Element;
    use crate::list::AxisSet;
    use crate::tensor::Tensor;

    #[allow(unreachable_pub)] // public in a private module: the sealed-trait pattern
    pub trait Sealed {}

    impl<T: Element, A: AxisSet> Sealed for Tensor<T, A> {}
    impl<E: Sealed> Sealed for &E {}
    impl<T> Sealed for Scalar<T> {}
    impl<N> Sealed for Lazy<'_, N> {}
    impl<N> Sealed for Borrowed<N> {}
    impl<T, E, Op> Sealed for Unary<T, E, Op> {}
    impl<T, L, R, Op, A> Sealed for Binary<T, L, R, Op, A> {}
    impl<T, C, A, B> Sealed for Select<T, C, A, B> {}
    impl<E, U> Sealed for Cast<E, U> {}
    impl<U, E, F> Sealed for MapFn<U, E, F> {}
    impl<U, L, R, F, A> Sealed for MapWith<U, L, R, F, A> {}
}

/// The axes left after reducing expression `E` over `Over`.
pub type Reduced<E, Over> = Difference<<E as Expr>::Axes, Over>;

/// A lazy expression over named axes.
///
/// Implemented by tensors (`&Tensor`, `Tensor`: leaves), scalars ([`Scalar`]), the lazy
/// expressions the operators and methods return ([`Lazy`]) and the nodes inside them. Its
/// methods are in three groups: element-wise operations that build
/// bigger expressions (`exp`, `max`, ...), evaluation (`eval`, `eval_in`), and reductions
/// (`sum`, `max_over`, ...), which evaluate.
///
/// Sealed: the expressions are this module's nodes, scalars and tensors; the hidden methods
/// belong to the CPU engine and are not API.
#[must_use = "an expression computes nothing until it is evaluated, assigned or reduced"]
pub trait Expr: Sized + Sync + sealed::Sealed {
    /// The element type of the result.
    type Elem: Element;
    /// The axes of the result.
    type Axes: AxisSet;
    /// The depth of the expression's tree (a tensor or a scalar: 0): the CPU runs trees
    /// deeper than [`MAX_FUSED_DEPTH`](crate::dispatch::MAX_FUSED_DEPTH) on its IR
    /// interpreter rather than as a loop nest compiled for the tree.
    #[doc(hidden)]
    const DEPTH: usize = 0;
    /// Whether the expression runs only as a compiled loop nest (a [`MapFn`] or [`MapWith`]
    /// closure has no run-time description).
    #[doc(hidden)]
    const FUSED_ONLY: bool = false;
    /// The element-wise ops the expression computes per element, by kind (a tensor or a
    /// scalar: none): what the CPU's cost model weighs a thread split by.
    #[doc(hidden)]
    const WEIGHTS: OpWeights = OpWeights::NONE;
    /// What a reference to this expression points a [`Borrowed`] leaf at: the expression
    /// itself, or for a reference or a [`Lazy`], what it holds (a node with no lifetime).
    #[doc(hidden)]
    type Target: Expr<Elem = Self::Elem, Axes = Self::Axes>;
    /// The per-thread evaluator.
    #[doc(hidden)]
    type Eval<'a>: ChunkEval<Out = Self::Elem>
    where
        Self: 'a;

    /// Lists the leaves' layouts, in a fixed order (the order `evaluator` consumes them).
    #[doc(hidden)]
    fn operands<'a>(&'a self, out: &mut Leaves<'a>);

    /// Lists the leaves' elements (as bytes) and element types, in `operands` order.
    #[doc(hidden)]
    fn buffers<'a>(&'a self, out: &mut Buffers<'a>);

    /// An evaluator for `plan`; `next_leaf` counts leaves in `operands` order.
    #[doc(hidden)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> Self::Eval<'a>;

    /// Lists the part lengths of the `Flat` axes of the leaves (carried into results).
    #[doc(hidden)]
    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        let _ = out;
    }

    /// See [`Expr::Target`].
    #[doc(hidden)]
    fn target(&self) -> &Self::Target;

    /// Appends this expression's run-time description to `ir` and returns its node.
    fn describe(&self, ir: &mut Ir) -> usize;

    /// The run-time description of the whole expression (plain data: an op list).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct T;
    /// let x = Tensor::<f32, (T,)>::zeros(T.len(3))?;
    /// assert_eq!((&x * 2.0).exp().ir().to_string(), "exp(mul(leaf0, 2))");
    /// # Ok::<(), axes::Error>(())
    /// ```
    fn ir(&self) -> Ir {
        let mut ir = Ir::default();
        self.describe(&mut ir);
        ir
    }
}
