// A 2-D filter (kernel axes with the roles Height and Width) moves along the input's Height
// and Width axes: an input without a Height axis is an error naming the role.
use axes::prelude::*;
use axes::spatial::Convolution;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
#[axis(role = Channel)]
struct Rgb;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
#[derive(Axis)]
#[axis(role = Channelout)]
struct Maps;
#[derive(Axis)]
#[axis(role = Height)]
struct KRows;
#[derive(Axis)]
#[axis(role = Width)]
struct KCols;

fn main() {
    let image = Tensor::<f32, (Batch, Rgb, Cols)>::zeros((Batch.len(1), Rgb.len(3), Cols.len(8))).unwrap();
    let filter = Tensor::<f32, (Maps, Rgb, KRows, KCols)>::zeros((Maps.len(4), Rgb.len(3), KRows.len(3), KCols.len(3))).unwrap();
    let _ = Convolution::new().run(&image, &filter);
}
