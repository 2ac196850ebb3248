use axes::prelude::*;

#[derive(Axis)]
struct Hidden;

fn takes(_w: &Tensor<f32, (Dual<Dual<Hidden>>, Hidden)>) {}

fn main() {}
