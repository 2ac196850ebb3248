use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct In;
#[derive(Axis)]
struct Out;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, In)>::zeros((Batch.len(2), In.len(3)))?;
    let w = Tensor::<f32, (In, Out)>::zeros((In.len(3), Out.len(4)))?;
    // Batch is not an axis of w: it cannot be contracted
    let _y = dot_over::<(Batch,), _, _, _>(&x, &w)?;
    Ok(())
}
