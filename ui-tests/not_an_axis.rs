use axes::prelude::*;

#[derive(Axis)]
struct Batch;
struct Hidden;

fn takes(_x: &Tensor<f32, (Batch, Hidden)>) {}

fn main() {}
