use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Time;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch,)>::zeros(Batch.len(2))?;
    let _y = x.slice::<Time>(0..1, 1)?;
    Ok(())
}
