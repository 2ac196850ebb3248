// Every axis of the keys but the key axis must be the queries' too (a batch axis, or the
// width): keys over Head with queries that lack it would give each query several score rows.
use axes::prelude::*;
use axes::Attention;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Head;
#[derive(Axis)]
struct Query;
#[derive(Axis)]
struct Key;
#[derive(Axis)]
struct Dim;

fn main() -> axes::Result<()> {
    let q = Tensor::<f32, (Batch, Query, Dim)>::ones((Batch.len(2), Query.len(8), Dim.len(16)))?;
    let k = Tensor::<f32, (Batch, Head, Key, Dim)>::ones((Batch.len(2), Head.len(2), Key.len(8), Dim.len(16)))?;
    let v = Tensor::<f32, (Batch, Key, Dim)>::ones((Batch.len(2), Key.len(8), Dim.len(16)))?;
    let _out = Attention::<Query, Key, Dim>::new().run(&q, &k, &v)?;
    Ok(())
}
