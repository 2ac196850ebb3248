// `Bound::gradient` consumes the binding: the parameters are free to update right after
// (no `drop`), and the binding cannot be used again.
use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::{Init, Linear, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let mut builder = ParamsBuilder::new();
    let layer = Linear::<Pixel, Class>::new(&mut builder, "out", Pixel.len(2), Class.len(2), Init::Glorot)?;
    let mut params = builder.build::<f32>(0)?;
    let mut adam = Adam::new(0.1);
    let x = Tensor::<f32, (Batch, Pixel)>::zeros((Batch.len(2), Pixel.len(2)))?;
    let y = Tensor::<i64, (Batch,)>::zeros(Batch.len(2))?;
    let tape = Tape::new();
    let p = params.bind(&tape);
    let logits = layer.forward(&p, &tape.constant(x))?;
    let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)?.mean::<(Batch,)>()?;
    let grad = p.gradient(&loss.backward()?)?;
    adam.step(&mut params, &grad)?;
    let _again = p.var(&layer.weight)?;
    Ok(())
}
