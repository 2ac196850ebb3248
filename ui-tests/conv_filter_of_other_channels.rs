// A filter is over its input's Channel axis: one over another Channel axis is an error naming
// both.
use axes::prelude::*;
use axes::spatial::Convolution;

#[derive(Axis)]
#[axis(role = Channel)]
struct Rgb;
#[derive(Axis)]
#[axis(role = Channel)]
struct Gray;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
#[derive(Axis)]
#[axis(role = Channelout)]
struct Maps;
#[derive(Axis)]
#[axis(role = Width)]
struct Taps;

fn main() {
    let image = Tensor::<f32, (Rgb, Cols)>::zeros((Rgb.len(3), Cols.len(8))).unwrap();
    let filter = Tensor::<f32, (Maps, Gray, Taps)>::zeros((Maps.len(4), Gray.len(1), Taps.len(3))).unwrap();
    let _ = Convolution::new().run(&image, &filter);
}
