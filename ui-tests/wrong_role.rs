use axes::prelude::*;
use axes::roles::Height;

#[derive(Axis)]
#[axis(role = Height)]
struct Rows;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;

fn image_height<H: Height>() -> String {
    H::name().into_owned()
}

fn main() {
    image_height::<Rows>();
    image_height::<Cols>();
}
