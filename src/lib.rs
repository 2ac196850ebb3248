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
//! # Training a model
//! Parameters live in one arena ([`nn::Params`]), layers ([`nn::Linear`]) record on a
//! [`autodiff::Tape`] (one per step; a tape stays on the thread that made it), and an
//! optimizer ([`optim::Adam`]) updates the whole arena in one pass. Minibatches are index
//! tensors ([`nn::minibatches`]) that [`Tensor::gather`] turns into batches.
//!
//! ```
//! use axes::autodiff::{Tape, softmax_cross_entropy};
//! use axes::nn::{Init, Linear, ParamsBuilder, minibatches};
//! use axes::optim::Adam;
//! use axes::prelude::*;
//!
//! #[derive(Axis)] struct Sample;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Feature;
//! #[derive(Axis)] struct Class;
//!
//! // 64 points, class 1 where the first feature is positive
//! let x = Tensor::<f32, (Sample, Feature)>::random_uniform((Sample.len(64), Feature.len(2)), -1.0, 1.0, 3)?;
//! let y = Tensor::<i64, (Sample,)>::from_fn(Sample.len(64), |i| {
//!     i64::from(x.get((Sample.at(i.of::<Sample>()), Feature.at(0))).unwrap() > 0.0)
//! })?;
//! let mut builder = ParamsBuilder::new();
//! let layer = Linear::<Feature, Class>::new(&mut builder, "out", Feature.len(2), Class.len(2), Init::Glorot)?;
//! let mut params = builder.build::<f32>(0)?;
//! let mut adam = Adam::new(0.1);
//! for epoch in 0..20 {
//!     for indices in minibatches::<Batch>(64, 16, epoch)? {
//!         let (xb, yb) = (x.gather::<Sample, _, _>(&indices)?, y.gather::<Sample, _, _>(&indices)?);
//!         let tape = Tape::new();
//!         let p = params.bind(&tape);
//!         let logits = layer.forward(&p, &tape.constant(xb))?;
//!         let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &yb)?.mean::<(Batch,)>()?;
//!         let grad = p.gradient(&loss.backward()?)?; // backward releases the tape's views
//!         adam.step(&mut params, &grad)?;            // one job over the whole arena
//!     }
//! }
//! // Save, reload into a model declared again, and predict.
//! let path = std::env::temp_dir().join("axes-front-page.safetensors");
//! params.save(&path)?;
//! let mut builder = ParamsBuilder::new();
//! let again = Linear::<Feature, Class>::new(&mut builder, "out", Feature.len(2), Class.len(2), Init::Glorot)?;
//! let mut loaded = builder.build::<f32>(1)?;
//! loaded.load(&path)?;
//! let tape = Tape::new();
//! let logits = again.forward(&loaded.bind(&tape), &tape.constant(x.clone()))?.eval()?;
//! let predicted = argmax::<_, _, Class>(logits.value())?;
//! let correct = predicted.to_vec().iter().zip(y.to_vec()).filter(|(p, y)| **p == *y).count();
//! assert!(correct >= 60, "{correct} of 64");
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! The pieces:
//! - [`Axis`] (derive it), [`Dual`], [`roles`]: axes as types;
//! - [`list`]: type-level axis lists (union, difference, broadcast order, checks);
//! - [`Tensor`]: a typed [`Layout`] over a shared [`Storage`];
//! - [`expr`] and [`eval`]: lazy expressions and running them; [`dot`] and [`dot_over`] for
//!   contractions, [`outer`] for outer products;
//! - [`autodiff`], [`nn`], [`optim`]: gradients, parameters and layers, optimizers;
//! - [`io`]: tensors and checkpoints in safetensors files, PyTorch's included
//!   ([`nn::Params::load_with`] loads a PyTorch `state_dict` into a typed model);
//! - [`device`] and [`backends`]: a [`Device`] by name (`"cpu"`, `"opencl:0"`, `"cuda:0"`);
//!   tensors and parameters moved there with `to` compute and train there;
//! - [`Error`]: every run-time failure, naming the axis and the lengths.
//!
//! Guides: [`doc::semantics`] (what every operation means: axis identity, broadcasting,
//! `dot`, reductions, views, element types, assignment, errors, devices),
//! [`doc::axes_for_numpy_users`] (NumPy idioms and their `axes` forms),
//! [`doc::generic_code`] (functions generic over axes) and [`doc::adding_an_op`] (for
//! contributors: one row of the op table and the files that follow it).

pub mod doc;

pub use axes_backends::device;
pub use axes_core::*;
pub use axes_macros::{Axis, tensor};

/// The device backends: OpenCL (cargo feature `opencl`) and CUDA (`cuda`), both on by
/// default and loaded at run time. Pick a device by name with [`device`]:
///
/// ```
/// let cpu = axes::device("cpu")?;
/// assert_eq!(cpu, axes::Device::Cpu);
/// // a name no backend serves is an error that names it, never a panic
/// assert!(axes::device("tpu:0").unwrap_err().to_string().contains("tpu:0"));
/// # Ok::<(), axes::Error>(())
/// ```
pub use axes_backends as backends;

#[doc(hidden)]
pub use axes_core::__private;

/// The README's example, compiled and run as a doc-test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
