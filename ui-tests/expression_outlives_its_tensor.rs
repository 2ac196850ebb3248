// An expression borrows the tensors it reads, and an expression built on a borrowed
// expression borrows that one: neither can be dropped or moved while the expression that
// reads it is still used.
use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch,)>::zeros(Batch.len(4))?;
    let y = Tensor::<f32, (Batch,)>::zeros(Batch.len(4))?;
    let sum = (&x + &y).exp();
    drop(y);
    let _ = sum.eval()?;

    let scaled = &x * 2.0;
    let shifted = &scaled + 1.0;
    drop(scaled);
    let _ = shifted.eval()?;
    Ok(())
}
