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
    let c = Tensor::<f32, (Out,)>::zeros(Out.len(4))?;
    // would add c once per In position: the sum must be written explicitly
    let _z = tensor!([Batch, Out] = x[Batch, In] * w[In, Out] + c[Out])?;
    Ok(())
}
