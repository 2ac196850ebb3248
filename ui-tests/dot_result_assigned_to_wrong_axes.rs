use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct In;
#[derive(Axis)]
struct Out;

fn logits(x: &tensor![f32; Batch, In], w: &tensor![f32; In, Out]) -> axes::Result<tensor![f32; Batch, In]> {
    dot(x, w)
}

fn main() {}
