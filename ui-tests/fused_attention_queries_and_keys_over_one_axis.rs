// Fused attention pairs each query position with each key position, so the sequence axis must
// be two axes: queries over Query, keys over Key. Naming one axis for both is a compile error
// at the call, naming the axis.
use axes::prelude::*;
use axes::Attention;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Token;
#[derive(Axis)]
struct Dim;

fn main() -> axes::Result<()> {
    let lens = (Batch.len(2), Token.len(8), Dim.len(16));
    let q = Tensor::<f32, (Batch, Token, Dim)>::ones(lens)?;
    let k = Tensor::<f32, (Batch, Token, Dim)>::ones(lens)?;
    let v = Tensor::<f32, (Batch, Token, Dim)>::ones(lens)?;
    let _out = Attention::<Token, Token, Dim>::causal().run(&q, &k, &v)?;
    Ok(())
}
