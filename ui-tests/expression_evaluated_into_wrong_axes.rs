use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(2), Hidden.len(3)))?;
    let b = Tensor::<f32, (Hidden,)>::zeros(Hidden.len(3))?;
    // summing over Batch by accident is exactly what the types forbid
    let _y = (&x + &b).eval_in::<(Hidden,)>()?;
    Ok(())
}
