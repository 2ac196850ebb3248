use axes::prelude::*;

#[derive(Axis)]
struct Row;
#[derive(Axis)]
struct Col;
#[derive(Axis)]
struct Depth;

fn main() -> axes::Result<()> {
    let _t = Tensor::<i64, (Row, Col)>::from_fn((Row.len(2), Col.len(2)), |ix| ix.of::<Depth>() as i64)?;
    Ok(())
}
