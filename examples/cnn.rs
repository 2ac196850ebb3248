//! Trains a small convolutional network on the handwritten digits (1,797 8×8 images, 10
//! classes) and reports the held-out accuracy: `cargo run --release --example cnn`.
//!
//! Gray (1) → 3×3 convolution, 16 maps, ReLU → 3×3 convolution, 32 maps, ReLU → 2×2 max
//! pooling → Hidden (64, ReLU) → Class (10); softmax cross-entropy, AdamW with a cosine
//! learning-rate decay, images shifted by up to a pixel each epoch (the MLP's recipe,
//! `examples/train.rs`). Every layer finds the image's axes by role — the convolutions and the
//! pooling move along the axes with the roles Height and Width and contract the one with the
//! role Channel — so the images may come channels first or last. The parameters carry
//! PyTorch's names and layouts (`benches/cnn_torch.py` is the same network in PyTorch).
//! Writes `target/cnn/digits-cnn.safetensors`.
//!
//! Options: `--device NAME` (`cpu`, the default; `opencl`; `cuda[:N]`), `--epochs N`,
//! `--seed N`, `--out DIR`, `--data DIR` (the folder holding `digits/`).

#[path = "common/digits.rs"]
mod digits;

use std::path::{Path, PathBuf};
use std::time::Instant;

use axes::Device;
use axes::autodiff::{Tape, Var, softmax_cross_entropy};
use axes::nn::{Bound, Conv, Init, Linear, Params, ParamsBuilder, minibatches};
use axes::optim::{Adam, WarmupCosine};
use axes::prelude::*;
use axes::spatial::{Convolution, Pool};
use digits::{Pixel, Sample, Split, load_digits, shifted};

#[derive(Axis)]
struct Batch;
/// The images' one channel.
#[derive(Axis)]
#[axis(role = Channel)]
struct Gray;
#[derive(Axis)]
#[axis(role = Height)]
struct Rows;
#[derive(Axis)]
#[axis(role = Width)]
struct Cols;
/// The first convolution's output channels, which the second one contracts: both roles.
#[derive(Axis)]
#[axis(role = Channel, role = Channelout)]
struct Maps;
/// The second convolution's output channels.
#[derive(Axis)]
#[axis(role = Channelout)]
struct Features;
/// The filters' kernel axes.
#[derive(Axis)]
#[axis(role = Height)]
struct KRows;
#[derive(Axis)]
#[axis(role = Width)]
struct KCols;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
#[axis(len = 10)]
struct Class;

const MAPS: usize = 16;
const FEATURES: usize = 32;
const HIDDEN: usize = 64;
const BATCH: usize = 32;
const EPOCHS: usize = 30;
const LEARNING_RATE: f64 = 3e-3;
const WEIGHT_DECAY: f64 = 1e-2;

/// A batch of images, channels first.
type Images = Tensor<f32, (Batch, Gray, Rows, Cols)>;
/// The flattened maps the dense layers read, in PyTorch's `flatten` order.
type Flattened = Flat<(Features, Rows, Cols)>;

/// The network: typed layers whose parameters live in one arena.
pub(crate) struct Cnn {
    conv1: Conv<(Maps, Gray, KRows, KCols), Maps>,
    conv2: Conv<(Features, Maps, KRows, KCols), Features>,
    hidden: Linear<Flattened, Hidden>,
    output: Linear<Hidden, Class>,
}

impl Cnn {
    fn new(params: &mut ParamsBuilder) -> axes::Result<Self> {
        let same = Convolution::new().padding(1);
        let (k, l) = (KRows.len(3), KCols.len(3));
        let flat = Len::<Flattened>::new(FEATURES * 4 * 4);
        Ok(Cnn {
            conv1: Conv::new(params, "conv1", (Maps.len(MAPS), Gray.len(1), k, l), same)?,
            conv2: Conv::new(
                params,
                "conv2",
                (Features.len(FEATURES), Maps.len(MAPS), k, l),
                same,
            )?,
            hidden: Linear::new(params, "hidden", flat, Hidden.len(HIDDEN), Init::He)?,
            output: Linear::new(
                params,
                "output",
                Hidden.len(HIDDEN),
                Class.len(10),
                Init::Glorot,
            )?,
        })
    }

    /// Logits for a batch of images.
    fn logits(
        &self,
        p: &Bound<'_, f32>,
        x: &Var<f32, (Batch, Gray, Rows, Cols)>,
    ) -> axes::Result<Var<f32, (Batch, Class)>> {
        let h = self.conv1.forward(p, x)?.relu().eval()?;
        let h = self.conv2.forward(p, &h)?.relu().eval()?;
        let h = Pool::max(2).run_var(&h)?;
        let h = h.flatten::<(Features, Rows, Cols)>()?;
        let h = self.hidden.forward(p, &h)?.relu();
        self.output.forward(p, h)?.eval()
    }
}

/// The images of `indices` (gathered in host memory) as 8×8 one-channel images, and their
/// labels, on `device`.
fn batch(
    data: &Split,
    indices: &Tensor<i64, (Batch,)>,
    device: &Device,
) -> axes::Result<(Images, Tensor<i64, (Batch,)>)> {
    let pixels = data.x.gather::<Sample, _, _>(indices)?;
    let n = indices.len_of::<Batch>();
    let lens = (Batch.len(n), Gray.len(1), Rows.len(8), Cols.len(8));
    let images = Tensor::from_vec(lens, pixels.to_vec_in::<(Batch, Pixel)>())?;
    Ok((
        images.to(device)?,
        data.y.gather::<Sample, _, _>(indices)?.to(device)?,
    ))
}

/// The fraction of `data` the network classifies correctly.
fn accuracy(model: &Cnn, params: &Params<f32>, data: &Split) -> axes::Result<f64> {
    let n = data.y.len_of::<Sample>();
    let all = Tensor::<i64, (Batch,)>::arange(Batch.len(n))?;
    let (x, y) = batch(data, &all, &params.device())?;
    let tape = Tape::new();
    let logits = model.logits(&params.bind(&tape), &tape.constant(x))?;
    let predicted = argmax::<_, _, Class>(logits.value())?;
    let correct = (predicted.to_vec().iter().zip(y.to_vec()))
        .filter(|(p, y)| **p == *y)
        .count();
    Ok(correct as f64 / n as f64)
}

struct Options {
    device: Device,
    epochs: usize,
    seed: u64,
    out: PathBuf,
    data: PathBuf,
}

fn options() -> Result<Options, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut options = Options {
        device: Device::Cpu,
        epochs: EPOCHS,
        seed: 7,
        out: root.join("target/cnn"),
        data: root.join("data"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--device" => {
                options.device = axes::device(&value()?).map_err(|e| format!("--device: {e}"))?;
            }
            "--epochs" => {
                options.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?;
                if options.epochs == 0 {
                    return Err("--epochs must be at least 1".into());
                }
            }
            "--seed" => options.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--out" => options.out = PathBuf::from(value()?),
            "--data" => options.data = PathBuf::from(value()?),
            "--help" | "-h" => {
                return Err(
                    "usage: cnn [--device cpu|opencl|cuda[:N]] [--epochs N] [--seed N] [--out DIR] [--data DIR]".into(),
                );
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(options)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    std::fs::create_dir_all(&options.out)?;
    let (train, test) = load_digits(&options.data, options.seed)?;
    let train_count = train.y.len_of::<Sample>();
    println!(
        "digits: {train_count} training and {} held-out images, {} threads",
        test.y.len_of::<Sample>(),
        axes::threads()
    );
    let mut builder = ParamsBuilder::new();
    let model = Cnn::new(&mut builder)?;
    let mut params = builder.build::<f32>(options.seed)?.to(&options.device)?;
    println!(
        "model: Gray(1) -> conv 3x3 Maps({MAPS}) -> conv 3x3 Features({FEATURES}) -> max pool 2 \
         -> Hidden({HIDDEN}) -> Class(10), {} parameters, on {}",
        params.count(),
        options.device
    );
    let total_steps = options.epochs * train_count.div_ceil(BATCH);
    let mut adam = Adam::new(LEARNING_RATE)
        .with_weight_decay(WEIGHT_DECAY)
        .with_schedule(WarmupCosine::new(LEARNING_RATE, 0.0, 0, total_steps)?);
    let started = Instant::now();
    let mut test_accuracy = 0.0;
    for epoch in 1..=options.epochs {
        let epoch_data = shifted(&train, options.seed * 1000 + epoch as u64)?;
        let batches = minibatches::<Batch>(train_count, BATCH, options.seed + epoch as u64)?;
        let count = batches.len();
        let mut loss_sum = 0.0;
        for indices in batches {
            let (x, y) = batch(&epoch_data, &indices, &options.device)?;
            let (loss, grad) = {
                let tape = Tape::new();
                let p = params.bind(&tape);
                let logits = model.logits(&p, &tape.constant(x))?;
                let loss =
                    softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)?.mean::<(Batch,)>()?;
                let grad = p.gradient(&loss.backward()?)?;
                (loss.value().clone(), grad)
            };
            adam.step(&mut params, &grad)?;
            loss_sum += f64::from(loss.try_to_vec()?[0]);
        }
        test_accuracy = accuracy(&model, &params, &test)?;
        println!(
            "epoch {epoch:>3}: loss {:.4}  test {:.2}%",
            loss_sum / count as f64,
            100.0 * test_accuracy
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "trained {} epochs in {seconds:.2} s ({:.3} s an epoch) on {}; test accuracy {:.2}%",
        options.epochs,
        seconds / options.epochs as f64,
        options.device,
        100.0 * test_accuracy
    );
    let weights = options.out.join("digits-cnn.safetensors");
    params.save(&weights)?;
    println!("wrote {}", weights.display());
    Ok(())
}
