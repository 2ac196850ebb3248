//! A decoder-only transformer (GPT) from typed parts: [`MultiHeadAttention`] with its own
//! `Query` and `Key` axes, a pre-norm [`Block`], and the [`Gpt`] model, each with a forward
//! on a tape and a tape-free [`infer`](Gpt::infer).
//!
//! The model's axes are declared here, so every product in it is checked: the attention
//! scores contract only [`HeadDim`] (`dot_over`) and keep [`Batch`] and [`Head`]; the mask
//! has exactly the axes ([`Query`], [`Key`]); the softmax runs along [`Key`].
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes::autodiff::Tape;
//! use axes::nn::ParamsBuilder;
//! use axes::nn::transformer::{Batch, Gpt, GptConfig, Token, Vocab};
//! let config = GptConfig { vocab: 11, context: 8, hidden: 16, heads: 2, head_dim: 8, inner: 32, layers: 2 };
//! let mut builder = ParamsBuilder::new();
//! let model = Gpt::new(&mut builder, "gpt", &config)?;
//! let params = builder.build::<f32>(1)?;
//! let ids = Tensor::<i64, (Batch, Token)>::from_fn((Batch.len(3), Token.len(5)), |i| (i.of::<Token>() * 2) as i64)?;
//! let tape = Tape::new();
//! let logits = model.forward(&params.bind(&tape), &ids)?; // Var<f32, (Batch, Token, Vocab)>
//! assert_eq!(logits.value().len_of::<Vocab>(), 11);
//! let loss = model.loss(&params.bind(&Tape::new()), &ids, &ids)?;
//! assert!((loss.value().to_vec()[0] - 11f32.ln()).abs() < 0.1); // near uniform at the start
//! let inferred = model.infer(&params, &ids)?;            // no tape: the same logits
//! let taped = logits.value().to_vec();
//! assert!(inferred.to_vec().iter().zip(&taped).all(|(a, b)| (a - b).abs() < 1e-5));
//! # Ok::<(), axes::Error>(())
//! ```

mod attention;
mod gpt;

pub use attention::{MultiHeadAttention, Projection};
pub use gpt::{Block, Gpt, GptConfig};

use axes_macros::Axis;

/// The examples of a batch.
#[derive(Axis)]
pub struct Batch;
/// The positions of a sequence of tokens.
#[derive(Axis)]
pub struct Token;
/// The model's width: the residual stream of each token.
#[derive(Axis)]
pub struct Hidden;
/// The attention heads.
#[derive(Axis)]
pub struct Head;
/// The width of one attention head.
#[derive(Axis)]
pub struct HeadDim;
/// The position a token attends from (the `Token` axis renamed).
#[derive(Axis)]
pub struct Query;
/// The position a token attends to (the `Token` axis renamed).
#[derive(Axis)]
pub struct Key;
/// The hidden width of a block's MLP.
#[derive(Axis)]
pub struct Inner;
/// The token ids.
#[derive(Axis)]
pub struct Vocab;

/// The residual stream's axes.
pub type Stream = (Batch, Token, Hidden);

/// The attention scores' axes.
pub type Scores = (Batch, Head, Query, Key);
