// A convolution finds one axis per role: an input with two Width axes is an error naming the
// role.
use axes::prelude::*;
use axes::spatial::Convolution;

#[derive(Axis)]
#[axis(role = Channel)]
struct Rgb;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
#[derive(Axis)]
#[axis(role = Width)]
struct Time;
#[derive(Axis)]
#[axis(role = Channelout)]
struct Maps;
#[derive(Axis)]
#[axis(role = Width)]
struct Taps;

fn main() {
    let signal = Tensor::<f32, (Rgb, Cols, Time)>::zeros((Rgb.len(3), Cols.len(8), Time.len(5))).unwrap();
    let filter = Tensor::<f32, (Maps, Rgb, Taps)>::zeros((Maps.len(4), Rgb.len(3), Taps.len(3))).unwrap();
    let _ = Convolution::new().run(&signal, &filter);
}
