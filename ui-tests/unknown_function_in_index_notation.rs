use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn main() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch,)>::zeros(Batch.len(2))?;
    // one argument: the method `.bessel_j0()`, which expressions do not have
    let _y = tensor!([Batch] = bessel_j0(x[Batch] * 2.0) + 1.0)?;
    // two arguments: only `max`, `min` and `pow` take two
    let _z = tensor!([Batch] = hypot(x[Batch], x[Batch]))?;
    Ok(())
}
