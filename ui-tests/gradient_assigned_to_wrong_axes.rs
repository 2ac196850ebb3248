// The gradient of a variable has exactly the variable's axes.
use axes::autodiff::{Tape, dot};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct In;
#[derive(Axis)]
struct Out;

fn main() -> axes::Result<()> {
    let tape = Tape::<f32>::new();
    let x = tape.constant(Tensor::<f32, (Batch, In)>::ones((Batch.len(2), In.len(3)))?);
    let w = tape.var(Tensor::<f32, (In, Out)>::ones((In.len(3), Out.len(4)))?);
    let grads = dot(&x, &w)?.sum::<(Batch, Out)>()?.backward()?;
    let _dw: Tensor<f32, (Batch, Out)> = grads.get(&w)?;
    Ok(())
}
