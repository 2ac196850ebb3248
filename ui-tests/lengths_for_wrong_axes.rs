use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let _x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(2), Class.len(3)))?;
    Ok(())
}
