//! Functions generic over their axes, each stating what it does with them by the one public
//! bound of its operation (`doc::generic_code` lists them), called with concrete axes.

use axes::contract::DotOverAxes;
use axes::list::{Broadcast, DotAxes};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Feature;
#[derive(Axis)]
struct Hidden;

type Weights = (Feature, Hidden);
type Logits<A> = Tensor<f32, DotAxes<A, Weights>>;
type Scores<A> = Tensor<f32, DotOverAxes<A, (Batch, Feature), (Feature,)>>;

fn feature_sums<A: Reducible<(Feature,)>>(x: &Tensor<f32, A>) -> axes::Result<Tensor<f32, A>> {
    let sums = x.sum::<(Feature,)>()?;
    let peak = x.max_over::<(Feature,)>()?;
    (x * 0.0 + &sums - &peak + &peak).eval()
}

fn layer<A: DotWith<Weights>>(
    x: &Tensor<f32, A>,
    w: &Tensor<f32, Weights>,
) -> axes::Result<Logits<A>> {
    dot(x, w)
}

fn plus_bias<A: ElementwiseWith<(Feature,)>>(
    x: &Tensor<f32, A>,
    bias: &Tensor<f32, (Feature,)>,
) -> axes::Result<Tensor<f32, Broadcast<A, (Feature,)>>> {
    (x + bias).eval()
}

fn features<A: HasAxis<Feature>>(x: &Tensor<f32, A>) -> usize {
    x.len_of::<Feature>()
}

fn probabilities<X: Axis, A: HasAxis<X>>(x: &Tensor<f32, A>) -> axes::Result<Tensor<f32, A>> {
    x.softmax::<X>()
}

fn scores<A: DotOverWith<(Batch, Feature), (Feature,)>>(
    x: &Tensor<f32, A>,
    y: &Tensor<f32, (Batch, Feature)>,
) -> axes::Result<Scores<A>> {
    dot_over::<(Feature,), _, _, _>(x, y)
}

fn feature_major<A: SameAxes<(Feature, Batch)>>(
    x: &Tensor<f32, A>,
) -> Tensor<f32, (Feature, Batch)> {
    x.axes_with_order()
}

/// Generic in the normalised axis too: `(F,)` is a set of axes for any one axis `F`.
fn centered<F: Axis, A: Reducible<(F,)> + Includes<(F,)>>(
    x: &Tensor<f32, A>,
    gain: &Tensor<f32, (F,)>,
) -> axes::Result<Tensor<f32, A>> {
    let mean = x.mean::<(F,)>()?;
    ((x - &mean) * gain).eval()
}

#[test]
fn generic_functions_run_on_concrete_axes() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Feature)>::from_vec(
        (Batch.len(2), Feature.len(3)),
        vec![1., 2., 3., 4., 5., 6.],
    )?;
    assert_eq!(feature_sums(&x)?.to_vec(), [6., 6., 6., 15., 15., 15.]);
    let w = Tensor::<f32, Weights>::ones((Feature.len(3), Hidden.len(2)))?;
    let y: Tensor<f32, (Batch, Hidden)> = layer(&x, &w)?;
    assert_eq!(y.to_vec(), [6., 6., 15., 15.]);
    let b = Tensor::<f32, (Feature,)>::from_vec(Feature.len(3), vec![10., 20., 30.])?;
    let z: Tensor<f32, (Batch, Feature)> = plus_bias(&x, &b)?;
    assert_eq!(z.to_vec(), [11., 22., 33., 14., 25., 36.]);
    let per_hidden: Tensor<f32, (Hidden, Feature)> =
        plus_bias(&w.axes_with_order::<(Hidden, Feature)>(), &b)?;
    assert_eq!(per_hidden.to_vec(), [11., 21., 31., 11., 21., 31.]);
    assert_eq!(features(&x), 3);
    let p = probabilities::<Feature, _>(&x)?;
    assert!(
        p.sum::<(Feature,)>()?
            .to_vec()
            .iter()
            .all(|s| (s - 1.0).abs() < 1e-6)
    );
    let s: Tensor<f32, (Batch,)> = scores(&x, &x)?;
    assert_eq!(s.to_vec(), [14., 77.]);
    assert_eq!(feature_major(&x).to_vec(), [1., 4., 2., 5., 3., 6.]);
    let gain = Tensor::<f32, (Feature,)>::from_vec(Feature.len(3), vec![1., 0., 2.])?;
    assert_eq!(centered(&x, &gain)?.to_vec(), [-1., 0., 2., -1., 0., 2.]);
    Ok(())
}
