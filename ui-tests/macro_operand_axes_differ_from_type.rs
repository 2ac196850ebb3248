use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(2), Hidden.len(3)))?;
    let _y = tensor!([Batch, Class] = x[Batch, Class] * 2.0)?;
    Ok(())
}
