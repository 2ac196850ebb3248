//! # axes: typed, named-axis tensors
//!
//! Every axis is a distinct Rust type, so summing the batch axis instead of the feature axis,
//! or swapping two axes of equal length, is a compile error instead of a silent bug.
//!
//! ```
//! use axes::prelude::*;
//!
//! #[derive(Axis)]
//! struct Batch;
//! #[derive(Axis)]
//! struct Hidden;
//!
//! let x: tensor![f32; Batch, Hidden] =
//!     Tensor::from_fn((Batch.len(2), Hidden.len(3)), |ix| (ix.of::<Batch>() * 3 + ix.of::<Hidden>()) as f32)?;
//! // Axis order carries no meaning: a transposed view equals the original.
//! assert_eq!(x, x.axes_with_order::<(Hidden, Batch)>());
//! assert_eq!(x.get((Hidden.at(1), Batch.at(1)))?, 4.0);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! The pieces:
//! - [`Axis`] (derive it), [`Dual`], [`roles`]: axes as types;
//! - [`list`]: type-level axis lists (union, difference, broadcast order, checks);
//! - [`Tensor`]: a typed [`Layout`] over a shared [`Storage`];
//! - [`Error`]: every run-time failure, naming the axis and the lengths.
//! - [`doc::axes_for_numpy_users`]: NumPy idioms and their `axes` forms.

pub mod doc;

pub use axes_core::*;
pub use axes_macros::{Axis, tensor};

#[doc(hidden)]
pub use axes_core::__private;

/// The README's example, compiled and run as a doc-test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
