use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(2), Hidden.len(3)))?;
    let mut logits = Tensor::<f32, (Batch, Class)>::zeros((Batch.len(2), Class.len(3)))?;
    logits.assign(&x * 2.0)?;
    Ok(())
}
