//! Reverse-mode automatic differentiation with typed gradients.
//!
//! Record a computation on a [`Tape`] with [`Var`]s; [`Var::backward`] on a scalar result
//! gives [`Grads`], whose [`Grads::get`] returns a tensor with exactly the variable's axes.
//!
//! - Element-wise operations build a [`VarExpr`]: run-time IR over the variables it reads.
//!   It is computed in one pass, recorded as one node, and its backward — derived from the
//!   IR — is one pass that writes every input's gradient, summed over the axes the input was
//!   broadcast along. `relu(x·w + b)` is two nodes (the contraction, then the fused rest),
//!   not one node and one temporary per operator.
//! - Reductions ([`VarExpr::sum`], [`VarExpr::mean`]) fuse with the expression they reduce;
//!   their backward reads the upstream gradient with stride 0 along the reduced axes.
//! - [`dot`]'s backward is two contractions over the right axes (`Dual<A>` pairs included).
//! - [`softmax_cross_entropy`] over a named class axis with integer labels.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes::autodiff::{self, Tape};
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct In;
//! #[derive(Axis)] struct Out;
//!
//! let tape = Tape::<f32>::new();
//! let x = tape.constant(Tensor::<f32, (Batch, In)>::ones((Batch.len(4), In.len(3)))?);
//! let w = tape.var(Tensor::<f32, (In, Out)>::full((In.len(3), Out.len(2)), 0.5)?);
//! let b = tape.var(Tensor::<f32, (Out,)>::zeros(Out.len(2))?);
//! let h = (autodiff::dot(&x, &w)? + &b).tanh();         // fused: add + tanh
//! let loss = h.mean::<(Batch, Out)>()?;
//! let grads = loss.backward()?;
//! let gw: Tensor<f32, (In, Out)> = grads.get(&w)?;       // typed: w's axes
//! let gb: Tensor<f32, (Out,)> = grads.get(&b)?;
//! assert_eq!(gw.lens(), [3, 2]);
//! assert!(gb.to_vec()[0] > 0.0);
//! # Ok::<(), axes::Error>(())
//! ```

mod attention;
mod fused;
mod join;
mod norm;
mod ops;
mod spatial;
mod tape;
mod views;

pub use fused::{IntoVar, IntoVarExpr, VarExpr};
pub use ops::{dot, dot_over, softmax_cross_entropy};
pub use tape::{Grads, Tape, Var};

pub(crate) use norm::{normalised, normalised_tensor};
