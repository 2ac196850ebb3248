// Two axes of one role leave an operation that finds its axis by role nothing to choose:
// an error naming the role.
use axes::list::WithRole;
use axes::prelude::*;
use axes::roles::kind;

#[derive(Axis)]
#[axis(role = Height)]
struct Rows;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
#[derive(Axis)]
#[axis(role = Width)]
struct MoreCols;

fn columns_of<A: WithRole<kind::Width>>(_image: &Tensor<f32, A>) -> usize
where
    A: AxisSet,
{
    <A as WithRole<kind::Width>>::POS
}

fn main() {
    let image = Tensor::<f32, (Rows, Cols, MoreCols)>::zeros((Rows.len(2), Cols.len(3), MoreCols.len(4))).unwrap();
    columns_of(&image);
}
