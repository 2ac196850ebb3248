use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn classes(x: &tensor![f32; Batch, Hidden]) -> usize {
    x.len_of::<Class>()
}

fn main() {}
