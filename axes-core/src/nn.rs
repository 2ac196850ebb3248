//! Building blocks for training: parameters in one arena ([`Params`]), typed layers
//! ([`Linear`], [`Square`]), weight initialisation, activations and minibatches.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes::autodiff::{softmax_cross_entropy, Tape};
//! use axes::nn::{Init, Linear, ParamsBuilder};
//! use axes::optim::Adam;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Pixel;
//! #[derive(Axis)] struct Class;
//!
//! let mut builder = ParamsBuilder::new();
//! let layer = Linear::<Pixel, Class>::new(&mut builder, "out", Pixel.len(4), Class.len(3), Init::Glorot)?;
//! let mut params = builder.build::<f32>(7)?;
//! let mut adam = Adam::new(0.1);
//! let x = Tensor::<f32, (Batch, Pixel)>::random_uniform((Batch.len(8), Pixel.len(4)), -1.0, 1.0, 1)?;
//! let labels = Tensor::<i64, (Batch,)>::from_fn(Batch.len(8), |i| (i.of::<Batch>() % 3) as i64)?;
//! let mut losses = Vec::new();
//! for _ in 0..20 {
//!     let tape = Tape::new();
//!     let p = params.bind(&tape);
//!     let logits = layer.forward(&p, &tape.constant(x.clone()))?;
//!     let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &labels)?.mean::<(Batch,)>()?;
//!     losses.push(loss.value().to_vec()[0]);
//!     let grads = p.gradient(&loss.backward()?)?; // backward releases the tape's views
//!     adam.step(&mut params, &grads)?;       // one job over the whole arena
//! }
//! assert!(losses[19] < losses[0]);
//! # Ok::<(), axes::Error>(())
//! ```

mod checkpoint;
mod conv;
mod data;
mod dropout;
mod embedding;
mod layers;
mod masks;
mod norm;
pub(crate) mod params;
pub mod recurrent;
mod serialize;
pub mod transformer;

pub use checkpoint::{load_checkpoint, save_checkpoint};
pub use conv::Conv;
pub use data::{Prefetch, minibatches};
pub use dropout::{Dropout, Mode};
pub use embedding::Embedding;
pub use layers::{Linear, Square};
pub use masks::causal_mask;
pub use norm::{LayerNorm, RmsNorm};
pub use params::{Bound, Gradient, Init, Params, ParamsBuilder};
pub use recurrent::{Gru, GruGate};
pub use serialize::Load;
