// An embedding is looked up by integer token ids, never by floats.
use axes::autodiff::Tape;
use axes::nn::{Embedding, Init, ParamsBuilder};
use axes::prelude::*;

#[derive(Axis)]
struct Vocab;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Token;

fn main() -> axes::Result<()> {
    let mut builder = ParamsBuilder::new();
    let embed = Embedding::new(&mut builder, "tokens", Vocab.len(10), Hidden.len(4), Init::Normal(0.02))?;
    let params = builder.build::<f32>(0)?;
    let ids = Tensor::<f32, (Token,)>::zeros(Token.len(3))?;
    let tape = Tape::new();
    let _x = embed.forward(&params.bind(&tape), &ids)?;
    Ok(())
}
