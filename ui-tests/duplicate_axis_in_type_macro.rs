use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;

fn takes(_x: &tensor![f32; Batch, Hidden, Batch]) {}

fn main() {}
