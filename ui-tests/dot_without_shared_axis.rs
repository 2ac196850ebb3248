use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Feature;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Feature)>::zeros((Batch.len(2), Feature.len(3)))?;
    let w = Tensor::<f32, (Hidden, Class)>::zeros((Hidden.len(3), Class.len(4)))?;
    let _y = dot(&x, &w)?;
    Ok(())
}
