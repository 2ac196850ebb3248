use axes::prelude::*;

#[derive(Axis)]
struct Batch;

fn takes(_x: &Tensor<String, (Batch,)>) {}

fn main() {}
