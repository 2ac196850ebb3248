// A 2-D operation finds its input's Height axis by role: an input without one is an error
// naming the role.
use axes::list::WithRole;
use axes::prelude::*;
use axes::roles::kind;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
#[axis(role = Channel)]
struct Rgb;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;

fn rows_of<A: WithRole<kind::Height>>(_image: &Tensor<f32, A>) -> usize
where
    A: AxisSet,
{
    <A as WithRole<kind::Height>>::POS
}

fn main() {
    let image = Tensor::<f32, (Batch, Rgb, Cols)>::zeros((Batch.len(1), Rgb.len(3), Cols.len(4))).unwrap();
    rows_of(&image);
}
