use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn main() -> axes::Result<()> {
    let x = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![1, 2])?;
    let _mean = x.mean::<(Batch,)>()?;
    Ok(())
}
