// A plain tensor in an expression of variables: record it on the tape first.
use axes::autodiff::Tape;
use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn main() -> axes::Result<()> {
    let tape = Tape::<f32>::new();
    let x = tape.var(Tensor::<f32, (Batch,)>::zeros(Batch.len(2))?);
    let bias = Tensor::<f32, (Batch,)>::ones(Batch.len(2))?;
    let _y = &x + &bias;
    Ok(())
}
