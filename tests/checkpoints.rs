//! Checkpoints from and for other tools: PyTorch-written safetensors files (f32 and bf16,
//! made by `tests/data/torch_checkpoint.py`) loaded into a typed model, strict loading,
//! narrowing casts, single tensors, and a file for PyTorch to read (`.ci/run` reads it with
//! `safetensors.torch.load_file`).

use axes::io::TensorFile;
use axes::nn::{Init, Linear, Load, Params, ParamsBuilder};
use axes::prelude::*;
use half::bf16;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("axes-checkpoints-{}-{name}", std::process::id()))
}

/// PyTorch's `nn.Sequential(Linear(4, 8), Tanh(), Linear(8, 3))`, typed: its parameter
/// names are the `state_dict`'s.
struct Mlp {
    first: Linear<Pixel, Hidden>,
    second: Linear<Hidden, Class>,
}

fn mlp<T: axes::Float>() -> (Mlp, Params<T>) {
    let mut builder = ParamsBuilder::new();
    let first = Linear::new(&mut builder, "0", Pixel.len(4), Hidden.len(8), Init::He).unwrap();
    let second = Linear::new(&mut builder, "2", Hidden.len(8), Class.len(3), Init::He).unwrap();
    (Mlp { first, second }, builder.build::<T>(1).unwrap())
}

/// PyTorch stores each `nn.Linear` weight as (out, in); the file has the batch too.
fn torch_layout() -> Load {
    Load::new()
        .partial()
        .stored_as::<(Hidden, Pixel)>("0.weight")
        .stored_as::<(Class, Hidden)>("2.weight")
}

fn forward(
    model: &Mlp,
    params: &Params<f32>,
    x: &Tensor<f32, (Batch, Pixel)>,
) -> Tensor<f32, (Batch, Class)> {
    let w1 = params.tensor(&model.first.weight).unwrap();
    let b1 = params.tensor(&model.first.bias).unwrap();
    let w2 = params.tensor(&model.second.weight).unwrap();
    let b2 = params.tensor(&model.second.bias).unwrap();
    let h = (dot(x, &w1).unwrap() + &b1).tanh().eval().unwrap();
    (dot(&h, &w2).unwrap() + &b2).eval().unwrap()
}

fn assert_close(
    got: &Tensor<f32, (Batch, Class)>,
    expected: &Tensor<f32, (Batch, Class)>,
    tolerance: f32,
) {
    for (g, e) in got.to_vec().iter().zip(expected.to_vec()) {
        assert!(
            (g - e).abs() <= tolerance * e.abs().max(1.0),
            "{got:?}\n!=\n{expected:?}"
        );
    }
}

#[test]
fn a_pytorch_checkpoint_loads_into_a_typed_model() {
    for (file, tolerance) in [
        ("torch_mlp_f32.safetensors", 1e-5),
        ("torch_mlp_bf16.safetensors", 1e-5),
    ] {
        let path = data(file);
        let (model, mut params) = mlp::<f32>();
        params.load_with(&path, &torch_layout()).unwrap();
        let tensors = TensorFile::read(&path).unwrap();
        let x: Tensor<f32, (Batch, Pixel)> = tensors.get("input").unwrap();
        let y: Tensor<f32, (Batch, Class)> = tensors.get("output").unwrap();
        assert_eq!(y.lens(), [5, 3]);
        assert_close(&forward(&model, &params, &x), &y, tolerance);
        // a weight read on its own, in PyTorch's (out, in) order, is the parameter
        let w1: Tensor<f32, (Pixel, Hidden)> = tensors
            .get_stored_as::<_, _, (Hidden, Pixel)>("0.weight")
            .unwrap();
        assert_eq!(w1, params.tensor(&model.first.weight).unwrap());
    }
    // bf16 weights into a bf16 model: the same values as in the f32 model
    let path = data("torch_mlp_bf16.safetensors");
    let (narrow_model, mut narrow) = mlp::<bf16>();
    narrow.load_with(&path, &torch_layout()).unwrap();
    let (wide_model, mut wide) = mlp::<f32>();
    wide.load_with(&path, &torch_layout()).unwrap();
    let narrow = narrow.tensor(&narrow_model.second.weight).unwrap().to_vec();
    let wide = wide.tensor(&wide_model.second.weight).unwrap().to_vec();
    assert!(narrow.iter().zip(&wide).all(|(n, w)| n.to_f32() == *w));
}

#[test]
fn loading_is_strict_unless_asked() {
    let path = data("torch_mlp_f32.safetensors");
    let (_, mut params) = mlp::<f32>();
    // the file's extra tensors are an error by default, naming one
    let err = params
        .load_with(
            &path,
            &Load::new()
                .stored_as::<(Hidden, Pixel)>("0.weight")
                .stored_as::<(Class, Hidden)>("2.weight"),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("parameter `input`: in ") && err.contains("partial"),
        "{err}"
    );
    // without the stored order, PyTorch's (out, in) weight has the wrong lengths
    let err = params
        .load_with(&path, &Load::new().partial())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`0.weight`: saved with lengths [8, 4] for (Pixel, Hidden), the model has [4, 8]"
        ),
        "{err}"
    );
    // a stored order that is not the parameter's axes
    let err = params
        .load_with(
            &path,
            &Load::new()
                .partial()
                .stored_as::<(Class, Pixel)>("0.weight"),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stored with the axes (Class, Pixel), wanted (Pixel, Hidden)"),
        "{err}"
    );
    // a model parameter the file lacks
    let mut builder = ParamsBuilder::new();
    Linear::<Pixel, Hidden>::new(
        &mut builder,
        "encoder",
        Pixel.len(4),
        Hidden.len(8),
        Init::He,
    )
    .unwrap();
    let err = builder
        .build::<f32>(0)
        .unwrap()
        .load_with(&path, &Load::new().partial())
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("parameter `encoder.weight`: not in"),
        "{err}"
    );
}

#[test]
fn narrowing_casts_that_overflow_are_errors() {
    let path = temp_path("wide.safetensors");
    let big = Tensor::<f64, (Batch,)>::from_vec(Batch.len(2), vec![1.0, 1e300]).unwrap();
    big.save(&path).unwrap();
    let err = Tensor::<f32, (Batch,)>::load(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the f64 value 1e300 overflows f32"), "{err}");
    let in_range = Tensor::<f64, (Batch,)>::from_vec(Batch.len(2), vec![1.0, 70000.0]).unwrap();
    in_range.save(&path).unwrap();
    assert_eq!(
        Tensor::<f32, (Batch,)>::load(&path).unwrap().to_vec(),
        [1.0, 70000.0]
    );
    let err = Tensor::<half::f16, (Batch,)>::load(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("overflows f16"), "{err}");
    // infinities and NaN stay what they are
    let odd =
        Tensor::<f64, (Batch,)>::from_vec(Batch.len(2), vec![f64::INFINITY, f64::NAN]).unwrap();
    odd.save(&path).unwrap();
    let back = Tensor::<f32, (Batch,)>::load(&path).unwrap().to_vec();
    assert!(back[0] == f32::INFINITY && back[1].is_nan());
    // integers load only as their own type
    let ids = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![3, i64::MAX]).unwrap();
    ids.save(&path).unwrap();
    assert_eq!(Tensor::<i64, (Batch,)>::load(&path).unwrap(), ids);
    let err = Tensor::<f32, (Batch,)>::load(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("stored as i64, asked for f32"), "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn single_tensors_and_maps_of_named_tensors_round_trip() {
    let path = temp_path("map.safetensors");
    let x = Tensor::<f32, (Batch, Pixel)>::from_fn((Batch.len(2), Pixel.len(3)), |ix| {
        (ix.of::<Batch>() * 3 + ix.of::<Pixel>()) as f32
    })
    .unwrap();
    // a transposed view is stored in its axis order
    let xt = x.axes_with_order::<(Pixel, Batch)>();
    let labels = Tensor::<u8, (Batch,)>::from_vec(Batch.len(2), vec![1, 0]).unwrap();
    let mut file = TensorFile::new();
    file.insert("x", &x);
    file.insert("xt", &xt);
    file.insert("labels", &labels);
    file.write(&path).unwrap();
    let read = TensorFile::read(&path).unwrap();
    assert_eq!(read.names().collect::<Vec<_>>(), ["labels", "x", "xt"]);
    assert_eq!(read.get::<f32, (Batch, Pixel)>("x").unwrap(), x);
    assert_eq!(read.get::<f32, (Batch, Pixel)>("xt").unwrap(), x);
    assert_eq!(read.get::<u8, (Batch,)>("labels").unwrap(), labels);
    // the file records the axes: others are an error naming both
    let err = read
        .get::<f32, (Batch, Class)>("x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stored with the axes (Batch, Pixel), wanted (Batch, Class)"),
        "{err}"
    );
    let err = read
        .get_stored_as::<f32, (Batch, Pixel), (Pixel, Batch)>("x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("records the axes (Batch, Pixel), not (Pixel, Batch)"),
        "{err}"
    );
    let err = Tensor::<f32, (Batch, Pixel)>::load(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds 3 tensors"), "{err}");
    // one tensor alone, in bf16
    let h = x.cast::<bf16>().eval().unwrap();
    h.save(&path).unwrap();
    assert_eq!(Tensor::<bf16, (Batch, Pixel)>::load(&path).unwrap(), h);
    assert_eq!(Tensor::<f32, (Pixel, Batch)>::load(&path).unwrap(), xt);
    std::fs::remove_file(&path).unwrap();
}

/// Writes `axes-for-pytorch.safetensors` into Cargo's temporary folder for this package
/// (`target/tmp`): `.ci/run` then reads it with `safetensors.torch.load_file` and checks the
/// element types, shapes and values this test wrote.
#[test]
fn writes_a_file_for_pytorch() {
    let (_, mut params) = mlp::<f32>();
    params
        .load_with(data("torch_mlp_f32.safetensors"), &torch_layout())
        .unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    params
        .save(dir.join("axes-params-for-pytorch.safetensors"))
        .unwrap();
    let x = Tensor::<f32, (Batch, Pixel)>::from_fn((Batch.len(2), Pixel.len(3)), |ix| {
        (ix.of::<Batch>() * 3 + ix.of::<Pixel>()) as f32
    })
    .unwrap();
    let mut file = TensorFile::new();
    file.insert("x", &x);
    file.insert("x_bf16", &x.cast::<bf16>().eval().unwrap());
    file.insert(
        "x_f64_transposed",
        &x.cast::<f64>()
            .eval()
            .unwrap()
            .axes_with_order::<(Pixel, Batch)>(),
    );
    file.insert(
        "ids",
        &Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![7, -1]).unwrap(),
    );
    file.write(dir.join("axes-for-pytorch.safetensors"))
        .unwrap();
}
