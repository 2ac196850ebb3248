// A mask added to attention scores must be over the scores' axes (Batch, Head, Query, Key):
// one over Token would broadcast the scores to a new axis.
use axes::autodiff::Tape;
use axes::nn::transformer::{Batch, Head, HeadDim, Hidden, Key, MultiHeadAttention, Stream, Token};
use axes::nn::{Init, ParamsBuilder};
use axes::prelude::*;

fn main() -> axes::Result<()> {
    let mut builder = ParamsBuilder::new();
    let attention = MultiHeadAttention::new(&mut builder, "attention", Hidden.len(8), Head.len(2), HeadDim.len(4), Init::Normal(0.02))?;
    let params = builder.build::<f32>(0)?;
    let tape = Tape::new();
    let x = tape.constant(Tensor::<f32, Stream>::ones((Batch.len(2), Token.len(5), Hidden.len(8)))?);
    let mask = Tensor::<f32, (Token, Key)>::zeros((Token.len(5), Key.len(5)))?;
    let _out = attention.forward_masked(&params.bind(&tape), &x, &mask)?;
    Ok(())
}
