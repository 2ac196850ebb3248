// Attention scores pair each query position with each key position: the sequence axis must
// be two axes, Query and Key. With queries and keys both over Token, `dot_over` keeps Token as
// a batch axis (each position scored only against itself), and a typed result catches it.
// Contracting Query with Key is no contraction at all: `dot_over` names the missing axis.
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Head;
#[derive(Axis)]
struct Token;
#[derive(Axis)]
struct Query;
#[derive(Axis)]
struct Key;
#[derive(Axis)]
struct Dim;

fn main() -> axes::Result<()> {
    let lens = (Batch.len(2), Head.len(4), Token.len(8), Dim.len(16));
    let q = Tensor::<f32, (Batch, Head, Token, Dim)>::ones(lens)?;
    let k = Tensor::<f32, (Batch, Head, Token, Dim)>::ones(lens)?;
    let _scores: Tensor<f32, (Batch, Head, Query, Key)> = dot_over::<(Dim,), _, _, _>(&q, &k)?;
    let q = q.rename::<Token, Query>()?;
    let k = k.rename::<Token, Key>()?;
    let _scores = dot_over::<(Query,), _, _, _>(&q, &k)?;
    Ok(())
}
