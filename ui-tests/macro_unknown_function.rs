use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch,)>::zeros(Batch.len(2))?;
    let _y = tensor!([Batch] = bessel_j0(x[Batch]))?;
    Ok(())
}
