//! Every run-time error, table-driven: each bad input gives the documented `Error` variant,
//! and its message names the axis or the lengths involved. Never a panic.

use axes::arena::ArenaBuilder;
use axes::autodiff::Tape;
use axes::nn::{Init, Linear, ParamsBuilder, load_checkpoint, save_checkpoint};
use axes::prelude::*;
use axes::{Device, Error, Flat};

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
#[axis(len = 3)]
struct Rgb;

type Case = (
    &'static str,
    fn() -> Result<(), Error>,
    fn(&Error) -> bool,
    &'static [&'static str],
);

fn bh(b: usize, h: usize) -> Tensor<f32, (Batch, Hidden)> {
    Tensor::zeros((Batch.len(b), Hidden.len(h))).unwrap()
}

fn hidden(h: usize) -> Tensor<f32, (Hidden,)> {
    Tensor::zeros(Hidden.len(h)).unwrap()
}

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
#[derive(Axis)]
#[axis(role = Time)]
struct Steps;

/// A 1-D convolution of an input of `channels` × `len` with a filter of `filter_channels` ×
/// `taps`, dilated by `dilation`.
fn conv_of(
    channels: usize,
    filter_channels: usize,
    len: usize,
    taps: usize,
    dilation: usize,
) -> Result<Tensor<f32, (Cols, Maps)>, Error> {
    let x = Tensor::<f32, (Gray, Cols)>::zeros((Gray.len(channels), Cols.len(len)))?;
    let lens = (Maps.len(2), Gray.len(filter_channels), Taps.len(taps));
    let w = Tensor::<f32, (Maps, Gray, Taps)>::zeros(lens)?;
    axes::spatial::Convolution::new()
        .dilation(dilation)
        .run(&x, &w)
}

/// Saves a file of one tensor, `bias`, changes its bytes with `damage`, and reads it back.
fn damaged(name: &str, damage: fn(&mut Vec<u8>)) -> Result<(), Error> {
    let path = std::env::temp_dir().join(format!("axes-errors-{name}-{}", std::process::id()));
    let mut file = axes::io::TensorFile::new();
    file.insert("bias", &hidden(4));
    file.write(&path)?;
    let mut bytes = std::fs::read(&path).unwrap();
    damage(&mut bytes);
    std::fs::write(&path, bytes).unwrap();
    let read = axes::io::TensorFile::read(&path).map(drop);
    std::fs::remove_file(&path).ok();
    read
}

/// Saves a checkpoint of SGD with momentum stepping a model of one parameter, `bias`, of 2
/// elements; makes a model whose `bias` has `len` and runs `load` on the file and it. The
/// model must be unchanged where `load` fails.
fn checkpoint_into(
    len: usize,
    load: fn(&std::path::Path, &mut axes::nn::Params<f32>) -> Result<(), Error>,
) -> Result<(), Error> {
    let model = |len: usize| {
        let mut builder = ParamsBuilder::new();
        builder.add::<(Hidden,)>("bias", Hidden.len(len), Init::Normal(1.0), 1, 1)?;
        builder.build::<f32>(len as u64)
    };
    let path = std::env::temp_dir().join(format!(
        "axes-errors-checkpoint-{len}-{}.safetensors",
        std::process::id()
    ));
    let mut saved = model(2)?;
    let mut sgd = axes::optim::Sgd::new(0.1, 0.9);
    let grad = axes::nn::Gradient::from_vec(&saved, vec![1.0, -1.0])?;
    sgd.step(&mut saved, &grad)?;
    save_checkpoint(&path, &saved, &sgd, &[])?;
    let mut params = model(len)?;
    let before = params.arena().flat().to_vec();
    let loaded = load(&path, &mut params);
    std::fs::remove_file(&path).ok();
    assert_eq!(
        params.arena().flat(),
        before,
        "a failed load changes nothing"
    );
    loaded
}

#[test]
fn every_bad_input_gives_its_error() {
    let cases: Vec<Case> = vec![
        (
            "elementwise length mismatch",
            || (&bh(2, 3) + &hidden(4)).eval().map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "3", "4"],
        ),
        (
            "reduction length mismatch",
            || (&bh(2, 3) * &hidden(4)).sum_all().map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "3", "4"],
        ),
        (
            "assign into other lengths",
            || bh(2, 2).assign(bh(2, 3)),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "2", "3"],
        ),
        (
            "dot length mismatch",
            || dot(&bh(2, 3), &hidden(5)).map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "3", "5"],
        ),
        (
            "concat other lengths",
            || Tensor::concat::<Batch>(&[&bh(1, 3), &bh(1, 4)]).map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "3", "4"],
        ),
        (
            "stack other lengths",
            || Tensor::stack::<Batch>(&[&hidden(3), &hidden(4)]).map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "3", "4"],
        ),
        (
            "gather other lengths",
            || {
                let idx = Tensor::<i64, (Batch,)>::zeros(Batch.len(5)).unwrap();
                bh(2, 3).gather::<Hidden, _, _>(&idx).map(drop)
            },
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Batch", "2", "5"],
        ),
        (
            "arena set other lengths",
            || {
                let mut b = ArenaBuilder::new();
                let slot = b.add::<(Hidden,), f32>(Hidden.len(3)).unwrap();
                b.build(0.0f32).set(&slot, &hidden(2))
            },
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Hidden", "2", "3"],
        ),
        (
            "wrong element count",
            || {
                Tensor::<f32, (Batch, Hidden)>::from_vec(
                    (Batch.len(2), Hidden.len(3)),
                    vec![0.0; 5],
                )
                .map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::ElementCount {
                        expected: 6,
                        got: 5,
                        ..
                    }
                )
            },
            &["Batch=2", "Hidden=3", "5", "6"],
        ),
        (
            "get out of range",
            || bh(2, 3).get((Batch.at(2), Hidden.at(0))).map(drop),
            |e| matches!(e, Error::IndexOutOfRange { .. }),
            &["Batch", "2"],
        ),
        (
            "set out of range",
            || bh(2, 3).set((Batch.at(0), Hidden.at(9)), 1.0),
            |e| {
                matches!(
                    e,
                    Error::IndexOutOfRange {
                        index: 9,
                        len: 3,
                        ..
                    }
                )
            },
            &["Hidden", "9", "3"],
        ),
        (
            "index out of range",
            || bh(2, 3).index(Hidden.at(3)).map(drop),
            |e| matches!(e, Error::IndexOutOfRange { .. }),
            &["Hidden", "3"],
        ),
        (
            "slice past the end",
            || bh(2, 3).slice::<Hidden>(1..5, 1).map(drop),
            |e| matches!(e, Error::RangeOutOfBounds { .. }),
            &["Hidden", "1..5", "3"],
        ),
        (
            "slice start after end",
            || {
                bh(2, 3)
                    .slice::<Batch>(
                        (std::ops::Bound::Included(2), std::ops::Bound::Excluded(1)),
                        1,
                    )
                    .map(drop)
            },
            |e| matches!(e, Error::RangeOutOfBounds { .. }),
            &["Batch", "2..1"],
        ),
        (
            "zero step",
            || bh(2, 3).slice::<Batch>(.., 0).map(drop),
            |e| matches!(e, Error::ZeroStep { .. }),
            &["Batch"],
        ),
        (
            "fixed length",
            || Tensor::<u8, (Batch, Rgb)>::zeros((Batch.len(1), Rgb.len(4))).map(drop),
            |e| {
                matches!(
                    e,
                    Error::FixedLength {
                        fixed: 3,
                        got: 4,
                        ..
                    }
                )
            },
            &["Rgb", "3", "4"],
        ),
        (
            "fixed length through cast_axes",
            || {
                Tensor::<u8, (Batch,)>::zeros(Batch.len(5))
                    .unwrap()
                    .cast_axes::<(Rgb,)>()
                    .map(drop)
            },
            |e| matches!(e, Error::FixedLength { .. }),
            &["Rgb", "3", "5"],
        ),
        (
            "fixed length through broadcast",
            || hidden(2).broadcast::<(Rgb, Hidden)>(Rgb.len(2)).map(drop),
            |e| matches!(e, Error::FixedLength { .. }),
            &["Rgb", "3", "2"],
        ),
        (
            "element count overflows usize",
            || {
                Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(usize::MAX / 2), Hidden.len(3)))
                    .map(drop)
            },
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["Batch=", "Hidden=3"],
        ),
        (
            "byte count overflows isize",
            || Tensor::<f64, (Batch,)>::zeros(Batch.len(usize::MAX / 8)).map(drop),
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["Batch="],
        ),
        (
            "padding overflows",
            || bh(2, 3).pad::<Hidden>(usize::MAX, 1).map(drop),
            |e| matches!(e, Error::SizeOverflow { .. }),
            &["Hidden"],
        ),
        (
            "empty random range",
            || Tensor::<f32, (Batch,)>::random_uniform(Batch.len(2), 1.0, 1.0, 0).map(drop),
            |e| matches!(e, Error::InvalidRange { .. }),
            &["[1, 1)"],
        ),
        (
            "NaN random bound",
            || Tensor::<f32, (Batch,)>::random_uniform(Batch.len(2), f32::NAN, 1.0, 0).map(drop),
            |e| matches!(e, Error::InvalidRange { .. }),
            &["NaN"],
        ),
        (
            "unflatten without parts",
            || {
                Tensor::<f32, (Flat<(Batch, Hidden)>,)>::zeros(Len::<Flat<(Batch, Hidden)>>::new(6))
                    .unwrap()
                    .unflatten::<(Batch, Hidden)>()
                    .map(drop)
            },
            |e| matches!(e, Error::UnknownFlatParts { .. }),
            &["Flat<(Batch, Hidden)>"],
        ),
        (
            "unflatten after a slice",
            || {
                let f = bh(2, 3).flatten::<(Batch, Hidden)>().unwrap();
                f.slice::<Flat<(Batch, Hidden)>>(0..4, 1)
                    .unwrap()
                    .unflatten::<(Batch, Hidden)>()
                    .map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::FlatLengthMismatch {
                        len: 4,
                        product: 6,
                        ..
                    }
                )
            },
            &["Flat<(Batch, Hidden)>", "4", "Batch=2, Hidden=3", "6"],
        ),
        (
            "concat of nothing",
            || Tensor::<f32, (Batch, Hidden)>::concat::<Batch>(&[]).map(drop),
            |e| matches!(e, Error::NothingToJoin { .. }),
            &["Batch"],
        ),
        (
            "split lengths",
            || bh(2, 5).split::<Hidden>(&[2, 2]).map(drop),
            |e| matches!(e, Error::SplitLengths { len: 5, .. }),
            &["Hidden", "5", "[2, 2]"],
        ),
        (
            "negative gather index",
            || {
                let idx = Tensor::<i32, (Batch,)>::from_vec(Batch.len(2), vec![0, -1]).unwrap();
                bh(2, 3).gather::<Hidden, _, _>(&idx).map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::GatherIndex {
                        index: -1,
                        len: 3,
                        ..
                    }
                )
            },
            &["Hidden", "-1", "3"],
        ),
        (
            "gather index too large",
            || {
                let idx = Tensor::<u8, (Batch,)>::from_vec(Batch.len(2), vec![3, 0]).unwrap();
                bh(2, 3).gather::<Hidden, _, _>(&idx).map(drop)
            },
            |e| matches!(e, Error::GatherIndex { index: 3, .. }),
            &["Hidden", "3"],
        ),
        (
            "ndarray view of a padded tensor",
            || {
                bh(2, 3)
                    .pad::<Batch>(1, 0)
                    .unwrap()
                    .as_ndarray::<(Batch, Hidden)>()
                    .map(drop)
            },
            |e| matches!(e, Error::Padded { .. }),
            &["Batch=3", "Hidden=3"],
        ),
        (
            "array of another rank",
            || {
                Tensor::<f32, (Batch, Hidden)>::from_ndarray(ndarray::Array1::<f32>::zeros(3))
                    .map(drop)
            },
            |e| {
                matches!(
                    e,
                    Error::RankMismatch {
                        expected: 2,
                        got: 1,
                        ..
                    }
                )
            },
            &["(Batch, Hidden)", "1", "2"],
        ),
        (
            "max over an empty axis",
            || bh(2, 0).max_over::<(Hidden,)>().map(drop),
            |e| matches!(e, Error::EmptyReduction { .. }),
            &["Hidden", "length 0"],
        ),
        (
            "argmax over an empty axis",
            || argmax::<_, _, Hidden>(&bh(2, 0)).map(drop),
            |e| matches!(e, Error::EmptyReduction { .. }),
            &["Hidden"],
        ),
        (
            "a device named wrongly",
            || axes::device("gpu:0").map(drop),
            |e| matches!(e, Error::DeviceUnavailable { .. }),
            &["`gpu:0`", "expected cpu"],
        ),
        (
            "an absent device",
            || axes::device("cuda:99").map(drop),
            |e| matches!(e, Error::DeviceUnavailable { .. }),
            &["`cuda:99`"],
        ),
        (
            "parameters and data on different devices",
            || {
                // The CPU backend as a device of its own: parameters there, data in host memory.
                let device = Device::Backend(&axes::backends::cpu::CPU_BACKEND);
                let mut builder = ParamsBuilder::new();
                let layer = Linear::<Hidden, Rgb>::new(
                    &mut builder,
                    "layer",
                    Hidden.len(3),
                    Rgb.len(3),
                    Init::Glorot,
                )?;
                let params = builder.build::<f32>(0)?.to(&device)?;
                let tape = Tape::new();
                let p = params.bind(&tape);
                layer
                    .forward(&p, &tape.constant(bh(2, 3)))?
                    .eval()
                    .map(drop)
            },
            |e| matches!(e, Error::DeviceMismatch { .. }),
            &["different devices", "cpu"],
        ),
        (
            "an optimizer setting out of range",
            || {
                let mut builder = ParamsBuilder::new();
                builder.add::<(Hidden,)>("bias", Hidden.len(2), Init::Zeros, 2, 2)?;
                let mut params = builder.build::<f32>(0)?;
                let grad = axes::nn::Gradient::from_vec(&params, vec![1.0; 2])?;
                let mut adam = axes::optim::Adam::new(1e-3);
                adam.beta2 = 1.0;
                adam.step(&mut params, &grad)
            },
            |e| matches!(e, Error::InvalidSetting { .. }),
            &["`Adam::beta2`", "1", "[0, 1)"],
        ),
        (
            "a non-finite gradient, checked",
            || {
                let mut builder = ParamsBuilder::new();
                builder.add::<(Hidden,)>("bias", Hidden.len(2), Init::Zeros, 2, 2)?;
                let mut params = builder.build::<f32>(0)?;
                let grad = axes::nn::Gradient::from_vec(&params, vec![1.0, f32::NAN])?;
                axes::optim::Sgd::new(0.1, 0.0)
                    .checking_finite()
                    .step(&mut params, &grad)
            },
            |e| matches!(e, Error::NonFinite { .. }),
            &["`bias`", "NaN"],
        ),
        (
            "one optimizer stepped with two models of the same layout",
            || {
                let model = || {
                    let mut builder = ParamsBuilder::new();
                    builder.add::<(Hidden,)>("bias", Hidden.len(2), Init::Zeros, 2, 2)?;
                    builder.build::<f32>(0)
                };
                let (mut first, mut second) = (model()?, model()?);
                let mut adam = axes::optim::Adam::new(0.1);
                let grad = axes::nn::Gradient::from_vec(&first, vec![1.0, 1.0])?;
                adam.step(&mut first, &grad)?;
                let grad = axes::nn::Gradient::from_vec(&second, vec![1.0, 1.0])?;
                adam.step(&mut second, &grad)
            },
            |e| matches!(e, Error::OptimizerMismatch { .. }),
            &[
                "`Adam`",
                "model #",
                "(2 elements: `bias`)",
                "an optimizer of its own",
            ],
        ),
        (
            "a sequence past a model's context",
            || {
                use axes::nn::transformer::{Batch, Gpt, GptConfig, Token};
                let config = GptConfig {
                    vocab: 3,
                    context: 2,
                    hidden: 4,
                    heads: 1,
                    head_dim: 4,
                    inner: 4,
                    layers: 1,
                };
                let mut builder = ParamsBuilder::new();
                let model = Gpt::new(&mut builder, "gpt", &config)?;
                let ids = Tensor::<i64, (Batch, Token)>::zeros((Batch.len(1), Token.len(3)))?;
                model.infer(&builder.build::<f32>(0)?, &ids).map(drop)
            },
            |e| matches!(e, Error::ContextExceeded { .. }),
            &["`Token`", "3", "context of 2"],
        ),
        (
            "a view of a larger buffer swapped in",
            || {
                let slot = axes::memory::Swappable::new(bh(2, 3));
                slot.swap(bh(4, 3).slice::<Batch>(0..2, 1)?).map(drop)
            },
            |e| matches!(e, Error::ViewOfLargerBuffer { .. }),
            &["Batch=2", "Hidden=3", "12", "6", ".contiguous()"],
        ),
        (
            "a parameter named as the file format's metadata",
            || {
                let mut builder = ParamsBuilder::new();
                builder
                    .add::<(Hidden,)>("__metadata__", Hidden.len(2), Init::Zeros, 2, 2)
                    .map(drop)
            },
            |e| matches!(e, Error::ParameterMismatch { .. }),
            &["`__metadata__`", "reserved"],
        ),
        (
            "a misspelt name given to stored_as",
            || {
                let mut builder = ParamsBuilder::new();
                Linear::<Hidden, Rgb>::new(
                    &mut builder,
                    "fc1",
                    Hidden.len(2),
                    Rgb.len(3),
                    Init::He,
                )?;
                let mut params = builder.build::<f32>(0)?;
                let path = std::env::temp_dir().join(format!(
                    "axes-errors-stored-as-{}.safetensors",
                    std::process::id()
                ));
                params.save(&path)?;
                let options = axes::nn::Load::new().stored_as::<(Rgb, Hidden)>("fc1.weigth");
                let loaded = params.load_with(&path, &options);
                std::fs::remove_file(&path).ok();
                loaded
            },
            |e| matches!(e, Error::ParameterMismatch { .. }),
            &["`fc1.weigth`", "stored_as", "no parameter"],
        ),
        (
            "a flipped bit in a saved file",
            || damaged("flipped", |bytes| *bytes.last_mut().unwrap() ^= 0x10),
            |e| matches!(e, Error::Io { .. }),
            &["flipped", "`bias`", "damaged"],
        ),
        (
            "a checkpoint of another optimizer's state",
            || {
                checkpoint_into(2, |path, params| {
                    let mut adam = axes::optim::Adam::new(0.1);
                    load_checkpoint(path, params, &mut adam).map(drop)
                })
            },
            |e| matches!(e, Error::ParameterMismatch { .. }),
            &["`adam.step`", "the state of `sgd`"],
        ),
        (
            "a checkpoint of another model",
            || {
                checkpoint_into(3, |path, params| {
                    let mut sgd = axes::optim::Sgd::new(0.1, 0.9);
                    load_checkpoint(path, params, &mut sgd).map(drop)
                })
            },
            |e| matches!(e, Error::ParameterMismatch { .. }),
            &["`bias`", "[2]", "[3]"],
        ),
        (
            "a filter over other channel lengths",
            || conv_of(3, 2, 8, 3, 1).map(drop),
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Gray", "3", "2"],
        ),
        (
            "a window longer than its padded axis",
            || conv_of(1, 1, 4, 3, 2).map(drop),
            |e| matches!(e, Error::WindowDoesNotFit { .. }),
            &["Cols", "length 4", "window of 3", "dilation 2"],
        ),
        (
            "a filter with an axis of no use",
            || {
                let x = Tensor::<f32, (Gray, Cols)>::zeros((Gray.len(1), Cols.len(4)))?;
                let lens = (Maps.len(2), Gray.len(1), Taps.len(3), Hidden.len(2));
                let w = Tensor::<f32, (Maps, Gray, Taps, Hidden)>::zeros(lens)?;
                axes::spatial::Convolution::new().run(&x, &w).map(drop)
            },
            |e| matches!(e, Error::Unsupported { .. }),
            &["(Maps, Gray, Taps, Hidden)", "`Hidden`"],
        ),
        (
            "a grouped filter of another number of groups",
            || {
                let x = Tensor::<f32, (Batch, Gray, Cols)>::zeros((
                    Batch.len(2),
                    Gray.len(1),
                    Cols.len(4),
                ))?;
                let lens = (Batch.len(3), Maps.len(2), Gray.len(1), Taps.len(3));
                let w = Tensor::<f32, (Batch, Maps, Gray, Taps)>::zeros(lens)?;
                axes::spatial::Convolution::new().run(&x, &w).map(drop)
            },
            |e| matches!(e, Error::LengthMismatch { .. }),
            &["Batch", "2", "3"],
        ),
        (
            "a convolution layer over a grouped filter",
            || {
                let mut builder = ParamsBuilder::new();
                let lens = (Batch.len(2), Maps.len(2), Gray.len(1), Taps.len(3));
                let conv = axes::nn::Conv::<(Batch, Maps, Gray, Taps), Maps>::new(
                    &mut builder,
                    "conv",
                    lens,
                    axes::spatial::Convolution::new(),
                )?;
                let params = builder.build::<f32>(0)?;
                let x = Tensor::<f32, (Batch, Gray, Cols)>::zeros((
                    Batch.len(2),
                    Gray.len(1),
                    Cols.len(4),
                ))?;
                conv.infer(&params, &x).map(drop)
            },
            |e| matches!(e, Error::Unsupported { .. }),
            &["`nn::Conv`", "`Batch`", "spatial::Convolution"],
        ),
        (
            "a sequence longer than its time axis",
            || {
                let mut builder = ParamsBuilder::new();
                let gru = axes::nn::Gru::new(&mut builder, "gru", Hidden.len(2), Taps.len(3))?;
                let params = builder.build::<f32>(0)?;
                let tape = Tape::new();
                let x = Tensor::<f32, (Batch, Steps, Hidden)>::zeros((
                    Batch.len(2),
                    Steps.len(4),
                    Hidden.len(2),
                ))?;
                gru.forward_padded(&params.bind(&tape), &tape.constant(x), &[4, 5])
                    .map(drop)
            },
            |e| matches!(e, Error::Unsupported { .. }),
            &["[4, 5]", "`Steps`", "4 steps", "`Batch`"],
        ),
        (
            "a pooling stride of 0",
            || {
                let x = Tensor::<f32, (Batch, Cols)>::zeros((Batch.len(1), Cols.len(4)))?;
                axes::spatial::Pool::max(2).stride(0).run(&x).map(drop)
            },
            |e| matches!(e, Error::WindowDoesNotFit { .. }),
            &["Cols", "stride 0"],
        ),
        (
            "a truncated saved file",
            || damaged("truncated", |bytes| bytes.truncate(bytes.len() - 3)),
            |e| matches!(e, Error::Io { .. }),
            &["truncated"],
        ),
    ];
    assert!(cases.len() >= 33, "{} cases", cases.len());
    for (name, run, variant, words) in cases {
        let error = match std::panic::catch_unwind(run) {
            Ok(Ok(())) => panic!("{name}: no error"),
            Ok(Err(error)) => error,
            Err(_) => panic!("{name}: panicked instead of returning an error"),
        };
        assert!(variant(&error), "{name}: unexpected variant {error:?}");
        let message = error.to_string();
        for word in words {
            assert!(
                message.contains(word),
                "{name}: message {message:?} does not name {word:?}"
            );
        }
    }
}

/// Documented values rather than errors: NaN and infinity through every reduction.
#[test]
fn nan_and_infinity_through_every_reduction() {
    let with_nan =
        Tensor::<f64, (Hidden,)>::from_vec(Hidden.len(3), vec![1.0, f64::NAN, 2.0]).unwrap();
    for (name, value) in [
        ("sum", with_nan.sum::<(Hidden,)>().unwrap().to_vec()[0]),
        ("prod", with_nan.prod::<(Hidden,)>().unwrap().to_vec()[0]),
        ("max", with_nan.max_over::<(Hidden,)>().unwrap().to_vec()[0]),
        ("min", with_nan.min_over::<(Hidden,)>().unwrap().to_vec()[0]),
        ("mean", with_nan.mean::<(Hidden,)>().unwrap().to_vec()[0]),
        (
            "logsumexp",
            with_nan.logsumexp::<(Hidden,)>().unwrap().to_vec()[0],
        ),
        ("var", with_nan.var::<(Hidden,)>().unwrap().to_vec()[0]),
        ("std", with_nan.std::<(Hidden,)>().unwrap().to_vec()[0]),
    ] {
        assert!(
            value.is_nan(),
            "{name} of data with a NaN is NaN, got {value}"
        );
    }
    assert_eq!(
        argmax::<_, _, Hidden>(&with_nan).unwrap().to_vec(),
        [1],
        "argmax points at the first NaN"
    );
    let inf = Tensor::<f64, (Hidden,)>::from_vec(Hidden.len(2), vec![f64::INFINITY, 1.0]).unwrap();
    assert_eq!(
        inf.max_over::<(Hidden,)>().unwrap().to_vec(),
        [f64::INFINITY]
    );
    assert_eq!(inf.sum::<(Hidden,)>().unwrap().to_vec(), [f64::INFINITY]);
    assert_eq!(
        inf.logsumexp::<(Hidden,)>().unwrap().to_vec(),
        [f64::INFINITY]
    );
    let empty = hidden(0);
    assert_eq!(
        empty.sum::<(Hidden,)>().unwrap().to_vec(),
        [0.0],
        "the sum of nothing is 0"
    );
    assert_eq!(
        empty.prod::<(Hidden,)>().unwrap().to_vec(),
        [1.0],
        "the product of nothing is 1"
    );
    // The max and min of nothing have no value (as for argmax, and in PyTorch).
    for err in [
        empty.max_over::<(Hidden,)>().unwrap_err(),
        empty.min_over::<(Hidden,)>().unwrap_err(),
        bh(3, 0).max_over::<(Hidden,)>().unwrap_err(),
        bh(0, 3).cast::<i32>().min_over::<(Batch,)>().unwrap_err(),
    ] {
        assert!(matches!(err, Error::EmptyReduction { .. }), "{err}");
    }
    assert_eq!(
        bh(0, 3).max_over::<(Hidden,)>().unwrap().lens(),
        [0],
        "an empty kept axis is no empty reduction"
    );
    assert!(
        empty.mean::<(Hidden,)>().unwrap().to_vec()[0].is_nan(),
        "the mean of nothing is NaN"
    );
}

/// A tensor can be used inside `catch_unwind` and after it: it is `UnwindSafe` and
/// `RefUnwindSafe`, and a caught panic leaves it as it was.
#[test]
fn tensors_survive_a_caught_panic() {
    let x = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(3), vec![1., 2., 3.]).unwrap();
    let caught = std::panic::catch_unwind(|| {
        let _sum = x.sum_all().unwrap();
        panic!("after a sum")
    });
    assert!(caught.is_err());
    assert_eq!(x.sum_all().unwrap(), 6.0);
}

/// Integer division by zero is an error wherever it happens (as in PyTorch); dividing by
/// integers that are not zero, and float division by zero, are not.
#[test]
fn integer_division_by_zero_is_an_error() {
    let n = 50_000; // enough elements for several tasks on more than one thread
    let x = Tensor::<i32, (Batch, Hidden)>::from_fn((Batch.len(n), Hidden.len(3)), |ix| {
        ix.of::<Batch>() as i32 - 7
    })
    .unwrap();
    let nonzero = Tensor::<i32, (Hidden,)>::from_vec(Hidden.len(3), vec![2, -3, 5]).unwrap();
    let with_zero = Tensor::<i32, (Hidden,)>::from_vec(Hidden.len(3), vec![2, 0, 5]).unwrap();
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        let q = (&x / &nonzero).eval().unwrap();
        assert_eq!(q.get((Batch.at(0), Hidden.at(1))).unwrap(), 2); // -7 / -3
        assert!(matches!(
            (&x / &with_zero).eval(),
            Err(Error::DivisionByZero)
        ));
        assert!(matches!((&x / 0).eval(), Err(Error::DivisionByZero)));
        // inside a larger expression, a reduction, an assignment, and after a cast
        assert!(matches!(
            ((&x / &with_zero) + 1).sum::<(Hidden,)>(),
            Err(Error::DivisionByZero)
        ));
        assert!(matches!(
            (&x / &with_zero).cast::<f32>().eval(),
            Err(Error::DivisionByZero)
        ));
        let mut z = Tensor::<i32, (Batch, Hidden)>::zeros((Batch.len(n), Hidden.len(3))).unwrap();
        assert!(matches!(
            z.assign(&x / &with_zero),
            Err(Error::DivisionByZero)
        ));
        z.assign(&x / &nonzero).unwrap();
        assert_eq!(z, q);
        // one zero divisor among many, on whichever thread has it
        let mostly = Tensor::<i64, (Batch,)>::from_fn(Batch.len(n), |ix| {
            if ix.of::<Batch>() == n - 2 {
                0
            } else {
                1 + ix.of::<Batch>() as i64
            }
        })
        .unwrap();
        assert!(matches!(
            (mostly.cast::<i64>() * 3 / &mostly).eval(),
            Err(Error::DivisionByZero)
        ));
        let bytes = Tensor::<u8, (Batch,)>::full(Batch.len(4), 0).unwrap();
        assert!(matches!(
            (&bytes / &bytes).eval(),
            Err(Error::DivisionByZero)
        ));
        // dense operands of one axis order, small: the flat path, summed and assigned
        assert!(matches!(
            (&mostly / &mostly).sum_all(),
            Err(Error::DivisionByZero)
        ));
        let mut few = Tensor::<u8, (Batch,)>::zeros(Batch.len(4)).unwrap();
        assert!(matches!(
            few.assign(&bytes / &bytes),
            Err(Error::DivisionByZero)
        ));
    }
    axes::set_threads(2).unwrap();
    // floats: ±inf and NaN, as in PyTorch
    let f = (&x.cast::<f32>().eval().unwrap() / 0.0).eval().unwrap();
    assert_eq!(
        f.get((Batch.at(0), Hidden.at(0))).unwrap(),
        f32::NEG_INFINITY
    );
    assert!(f.get((Batch.at(7), Hidden.at(0))).unwrap().is_nan());
}
