// A layer norm normalises along its axis: an input without that axis is a compile error.
use axes::autodiff::Tape;
use axes::nn::{LayerNorm, ParamsBuilder};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Token;
#[derive(Axis)]
struct Hidden;

fn main() -> axes::Result<()> {
    let mut builder = ParamsBuilder::new();
    let norm = LayerNorm::new(&mut builder, "norm", Hidden.len(4), 1e-5)?;
    let params = builder.build::<f32>(0)?;
    let tape = Tape::new();
    let x = tape.constant(Tensor::<f32, (Batch, Token)>::ones((Batch.len(2), Token.len(3)))?);
    let _y = norm.forward(&params.bind(&tape), &x)?;
    Ok(())
}
