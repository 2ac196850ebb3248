//! `axes::spatial` against PyTorch on the same inputs and weights: convolutions in 1, 2 and 3
//! dimensions with strides, padding and dilation, max and average pooling with padding
//! (`tests/data/torch_spatial.safetensors`, written by `tests/data/spatial_torch.py`), to a
//! relative error of 1e-5 in f32.

use axes::io::TensorFile;
use axes::prelude::*;
use axes::spatial::{Convolution, Pool, SpatialRole};

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
#[axis(role = Channel)]
struct Chan;
#[derive(Axis)]
#[axis(role = Depth)]
struct Dep;
#[derive(Axis)]
#[axis(role = Height)]
struct Row;
#[derive(Axis)]
#[axis(role = Width)]
struct Col;
#[derive(Axis)]
#[axis(role = Channelout)]
struct Maps;
#[derive(Axis)]
#[axis(role = Depth)]
struct KDep;
#[derive(Axis)]
#[axis(role = Height)]
struct KRow;
#[derive(Axis)]
#[axis(role = Width)]
struct KCol;

fn file() -> TensorFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch_spatial.safetensors");
    TensorFile::read(path).unwrap()
}

/// The largest of |ours − PyTorch's| / (1 + |PyTorch's|).
fn relative_error(ours: &[f32], torch: &[f32]) -> f64 {
    assert_eq!(ours.len(), torch.len());
    (ours.iter().zip(torch))
        .map(|(&a, &b)| f64::from((a - b).abs()) / (1.0 + f64::from(b.abs())))
        .fold(0.0, f64::max)
}

#[test]
fn convolutions_match_pytorch() {
    let f = file();
    // conv2d: stride (2, 1), padding (1, 2), dilation (1, 2), with a bias.
    let x: Tensor<f32, (Batch, Chan, Row, Col)> = f.get("conv2d.input").unwrap();
    let w: Tensor<f32, (Maps, Chan, KRow, KCol)> = f.get("conv2d.weight").unwrap();
    let b: Tensor<f32, (Maps,)> = f.get("conv2d.bias").unwrap();
    let want: Tensor<f32, (Batch, Maps, Row, Col)> = f.get("conv2d.output").unwrap();
    let conv = Convolution::new()
        .stride_along(SpatialRole::Height, 2)
        .padding_along(SpatialRole::Height, 1)
        .padding_along(SpatialRole::Width, 2)
        .dilation_along(SpatialRole::Width, 2);
    let y = (&conv.run(&x, &w).unwrap() + &b).eval().unwrap();
    let error = relative_error(&y.to_vec_in::<(Batch, Maps, Row, Col)>(), &want.to_vec());
    assert!(error <= 1e-5, "conv2d off PyTorch's by {error:e}");
    // The same input channels last gives the same numbers.
    let last = x
        .axes_with_order::<(Row, Col, Chan, Batch)>()
        .contiguous()
        .unwrap();
    let y_last = (&conv.run(&last, &w).unwrap() + &b).eval().unwrap();
    assert_eq!(
        y_last.to_vec_in::<(Batch, Maps, Row, Col)>(),
        y.to_vec_in::<(Batch, Maps, Row, Col)>()
    );

    // conv1d: stride 2, padding 1, dilation 2.
    let x: Tensor<f32, (Batch, Chan, Col)> = f.get("conv1d.input").unwrap();
    let w: Tensor<f32, (Maps, Chan, KCol)> = f.get("conv1d.weight").unwrap();
    let b: Tensor<f32, (Maps,)> = f.get("conv1d.bias").unwrap();
    let want: Tensor<f32, (Batch, Maps, Col)> = f.get("conv1d.output").unwrap();
    let conv = Convolution::new().stride(2).padding(1).dilation(2);
    let y = (&conv.run(&x, &w).unwrap() + &b).eval().unwrap();
    let error = relative_error(&y.to_vec_in::<(Batch, Maps, Col)>(), &want.to_vec());
    assert!(error <= 1e-5, "conv1d off PyTorch's by {error:e}");

    // conv3d: padding (1, 0, 1).
    let x: Tensor<f32, (Batch, Chan, Dep, Row, Col)> = f.get("conv3d.input").unwrap();
    let w: Tensor<f32, (Maps, Chan, KDep, KRow, KCol)> = f.get("conv3d.weight").unwrap();
    let b: Tensor<f32, (Maps,)> = f.get("conv3d.bias").unwrap();
    let want: Tensor<f32, (Batch, Maps, Dep, Row, Col)> = f.get("conv3d.output").unwrap();
    let conv = Convolution::new()
        .padding_along(SpatialRole::Depth, 1)
        .padding_along(SpatialRole::Width, 1);
    let y = (&conv.run(&x, &w).unwrap() + &b).eval().unwrap();
    let error = relative_error(
        &y.to_vec_in::<(Batch, Maps, Dep, Row, Col)>(),
        &want.to_vec(),
    );
    assert!(error <= 1e-5, "conv3d off PyTorch's by {error:e}");
}

#[test]
fn poolings_match_pytorch() {
    let f = file();
    let x: Tensor<f32, (Batch, Chan, Row, Col)> = f.get("pool.input").unwrap();
    for (name, pool) in [
        ("max_pool", Pool::max(3).stride(2).padding(1)),
        ("avg_pool", Pool::mean(2).stride(2).padding(1)),
    ] {
        let want: Tensor<f32, (Batch, Chan, Row, Col)> = f.get(&format!("{name}.output")).unwrap();
        let y = pool.run(&x).unwrap();
        let error = relative_error(&y.to_vec(), &want.to_vec());
        assert!(error <= 1e-5, "{name} off PyTorch's by {error:e}");
    }
}
