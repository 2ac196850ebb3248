use axes::prelude::*;

#[derive(Axis)]
struct Batch(usize);

fn main() {}
