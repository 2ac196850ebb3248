// A Linear<In, Out> layer applies only to inputs that have its `In` axis.
use axes::autodiff::Tape;
use axes::nn::{Init, Linear, ParamsBuilder};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let mut builder = ParamsBuilder::new();
    let layer = Linear::<Hidden, Class>::new(&mut builder, "out", Hidden.len(4), Class.len(3), Init::He)?;
    let params = builder.build::<f32>(0)?;
    let tape = Tape::new();
    let x = tape.constant(Tensor::<f32, (Batch, Pixel)>::ones((Batch.len(2), Pixel.len(4)))?);
    let _logits = layer.forward(&params.bind(&tape), &x)?;
    Ok(())
}
