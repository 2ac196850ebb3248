//! `axes::spatial` and `axes::nn::Gru` against PyTorch on the same inputs and weights:
//! convolutions in 1, 2 and 3 dimensions with strides, padding and dilation, max and average
//! pooling with padding, and a GRU over a sequence (`tests/data/torch_layers.safetensors`,
//! written by `tests/data/layers_torch.py`), to a relative error of 1e-5 in f32.

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
        .join("tests/data/torch_layers.safetensors");
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

#[derive(Axis)]
#[axis(role = Time)]
struct Step;
#[derive(Axis)]
struct Feature;
#[derive(Axis)]
struct State;
/// PyTorch's stacked gate rows (3·hidden), and the columns of a weight.
#[derive(Axis)]
struct GateRows;
#[derive(Axis)]
struct Cols;

#[test]
fn a_gru_matches_pytorch() {
    use axes::autodiff::Tape;
    use axes::nn::{Gru, GruGate, ParamsBuilder};
    let f = file();
    let mut builder = ParamsBuilder::new();
    let gru = Gru::new(&mut builder, "gru", Feature.len(3), State.len(4)).unwrap();
    let mut params = builder.build::<f32>(0).unwrap();
    // PyTorch's (3·hidden, …) rows are the gates in order: (GruGate, State, …) row-major.
    let matrix = |name: &str| f.get::<f32, (GateRows, Cols)>(name).unwrap().to_vec();
    let vector = |name: &str| f.get::<f32, (GateRows,)>(name).unwrap().to_vec();
    let (g, h) = (GruGate.len(3), State.len(4));
    let arena = params.arena_mut();
    let w_ih: Tensor<f32, (GruGate, State, Feature)> =
        Tensor::from_vec((g, h, Feature.len(3)), matrix("gru.weight_ih_l0")).unwrap();
    arena.set(&gru.weight_ih, &w_ih).unwrap();
    let w_hh: Tensor<f32, (GruGate, State, Dual<State>)> = Tensor::from_vec(
        (g, h, Len::<Dual<State>>::new(4)),
        matrix("gru.weight_hh_l0"),
    )
    .unwrap();
    arena.set(&gru.weight_hh, &w_hh).unwrap();
    for (slot, name) in [
        (&gru.bias_ih, "gru.bias_ih_l0"),
        (&gru.bias_hh, "gru.bias_hh_l0"),
    ] {
        let bias: Tensor<f32, (GruGate, State)> = Tensor::from_vec((g, h), vector(name)).unwrap();
        arena.set(slot, &bias).unwrap();
    }
    // PyTorch's input is (time, batch, features).
    let x: Tensor<f32, (Step, Batch, Feature)> = f.get("gru.input").unwrap();
    let x = x.axes_with_order::<(Batch, Step, Feature)>();
    let tape = Tape::new();
    let (states, last) = gru.forward(&params.bind(&tape), &tape.constant(x)).unwrap();
    let want: Tensor<f32, (Step, Batch, State)> = f.get("gru.output").unwrap();
    let error = relative_error(
        &states.value().to_vec_in::<(Step, Batch, State)>(),
        &want.to_vec(),
    );
    assert!(error <= 1e-5, "GRU states off PyTorch's by {error:e}");
    let want: Tensor<f32, (Batch, State)> = f.get("gru.last").unwrap();
    let error = relative_error(&last.value().to_vec(), &want.to_vec());
    assert!(error <= 1e-5, "GRU last state off PyTorch's by {error:e}");
}
