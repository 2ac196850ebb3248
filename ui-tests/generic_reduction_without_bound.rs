use axes::prelude::*;

#[derive(Axis)]
struct Feature;

// The bound the sum needs is `A: Reducible<(Feature,)>`; the error's note names it.
fn feature_sums<A: AxisSet>(x: Tensor<f32, A>) -> axes::Result<()> {
    let _sums = x.sum::<(Feature,)>()?;
    Ok(())
}

fn main() {}
