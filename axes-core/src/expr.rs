//! Lazy expressions (r-tensors): `&x + &y`, `x.exp()`, `(&x - &y).square().sum_all()` build a
//! typed tree that computes nothing until it is evaluated ([`ExprExt::eval`]), assigned
//! ([`Tensor::assign`](crate::Tensor::assign)) or reduced ([`ExprExt::sum`]). Evaluation runs the
//! whole tree as one loop nest ([`crate::engine`]): no temporaries.
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

mod eval;
mod leaf;
mod nodes;
mod operators;
mod ops;
mod reduce;
mod tensor_methods;

pub(crate) use eval::evaluate_parts;
pub use eval::{ExprExt, IntoExpr, Operand, select, sum_in};
pub use leaf::LeafEval;
pub use nodes::{Binary, Cast, MapFn, Scalar, Select, Unary};
pub use ops::{Clamp, Powf, Powi};
pub use reduce::{Reduced, Reducible, argmax, argmin, log_softmax, softmax};

use crate::element::Element;
use crate::engine::exec::ChunkEval;
use crate::engine::plan::{Leaves, Plan};
use crate::ir::Ir;
use crate::list::AxisSet;
use crate::protocol::Buffers;

/// A lazy expression over named axes.
///
/// Implemented by tensors (`&Tensor`, `Tensor`: leaves), scalars ([`Scalar`]) and the nodes
/// the operators build. Its methods are in three groups: element-wise operations that build
/// bigger expressions (`exp`, `max`, ...), evaluation (`eval`, `eval_in`), and reductions
/// (`sum`, `max_over`, ...), which evaluate.
#[must_use = "an expression computes nothing until it is evaluated, assigned or reduced"]
pub trait Expr: Sized + Sync {
    /// The element type of the result.
    type Elem: Element;
    /// The axes of the result.
    type Axes: AxisSet;
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
