use axes::prelude::*;

#[derive(Axis)]
#[axis(lenght = 3)]
struct Rgb;

fn main() {}
