use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn same(x: &tensor![f32; Batch, Hidden], y: &tensor![f32; Batch, Class]) -> bool {
    x == y
}

fn main() {}
