// A mask added to fused attention's scores must be over the scores' axes (Batch, Query, Key):
// one over Token would broadcast the scores to a new axis.
use axes::prelude::*;
use axes::Attention;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Token;
#[derive(Axis)]
struct Query;
#[derive(Axis)]
struct Key;
#[derive(Axis)]
struct Dim;

fn main() -> axes::Result<()> {
    let q = Tensor::<f32, (Batch, Query, Dim)>::ones((Batch.len(2), Query.len(8), Dim.len(16)))?;
    let k = Tensor::<f32, (Batch, Key, Dim)>::ones((Batch.len(2), Key.len(8), Dim.len(16)))?;
    let v = Tensor::<f32, (Batch, Key, Dim)>::ones((Batch.len(2), Key.len(8), Dim.len(16)))?;
    let mask = Tensor::<f32, (Token, Key)>::zeros((Token.len(8), Key.len(8)))?;
    let _out = Attention::<Query, Key, Dim>::new().run_masked(&q, &k, &v, &mask)?;
    Ok(())
}
