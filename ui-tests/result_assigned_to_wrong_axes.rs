use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn transpose(x: &tensor![f32; Batch, Hidden]) -> tensor![f32; Class, Batch] {
    x.axes_with_order()
}

fn main() {}
