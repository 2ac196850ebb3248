//! Trains a typed MLP on the handwritten digits (1,797 8×8 images, 10 classes) and reports
//! the held-out accuracy: `cargo run --release --example train`.
//!
//! Pixel (64) → Hidden (256, ReLU) → Hidden (square layer `(Dual<Hidden>, Hidden)`, ReLU)
//! → Class (10), softmax cross-entropy, AdamW with a cosine learning-rate decay, images
//! shifted by up to a pixel each epoch. Writes `target/train/training.svg` and
//! `target/train/training.csv` (loss and accuracy per epoch) and
//! `target/train/digits-mlp.safetensors` (the weights, with axis names), then reloads the
//! weights into a fresh model and checks the accuracy again.
//!
//! Options: `--device NAME` (`cpu`, the default; `opencl` or `opencl:0`; `cuda` or `cuda:N`:
//! the parameters, every batch, the forward and backward passes and Adam live there),
//! `--epochs N`, `--seed N`, `--out DIR`, `--data DIR` (the folder holding `digits/`; the
//! repository's `data/` by default), `--record` (on a device, each batch size's step is
//! recorded once and replayed: `axes::record::Recorded`), `--sgd` (SGD with momentum 0.9
//! instead of AdamW, under the same cosine decay), `--checkpoint-every N` (every N
//! epochs, a checkpoint of the parameters, the optimizer's state, the epoch and the history so far:
//! `DIR/checkpoint-{epoch}.safetensors`) and `--resume PATH` (goes on from a checkpoint, with
//! the options it was written with: each epoch's batches and shifts follow from the seed and
//! the epoch, so the run is the one that never stopped, bit for bit).

#[path = "common/digits.rs"]
mod digits;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;

use axes::Device;
use axes::autodiff::{Tape, Var, softmax_cross_entropy};
use axes::io::TensorFile;
use axes::nn::Gradient;
use axes::nn::{
    Bound, Init, Linear, Params, ParamsBuilder, Prefetch, Square, load_checkpoint, minibatches,
    save_checkpoint,
};
use axes::optim::{Adam, OptimizerState, Sgd, WarmupCosine};
use axes::prelude::*;
use axes::record::Recorded;
use digits::{Pixel, Sample, Split, load_digits, shifted};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
#[axis(len = 10)]
struct Class;

const HIDDEN: usize = 256;
const BATCH: usize = 32;
const EPOCHS: usize = 100;
/// Adam's peak learning rate, decayed to 0 along a cosine over the run.
const LEARNING_RATE: f64 = 5e-3;
/// AdamW's decoupled weight decay.
const WEIGHT_DECAY: f64 = 1e-2;
/// SGD's peak learning rate (`--sgd`), decayed as Adam's, and its momentum.
const SGD_LEARNING_RATE: f64 = 5e-2;
const SGD_MOMENTUM: f64 = 0.9;

/// The optimizer the run trains with: AdamW, or SGD with momentum (`--sgd`).
enum Optimizer {
    AdamW(Adam<f32>),
    Sgd(Sgd<f32>),
}

impl Optimizer {
    /// The optimizer `sgd` chooses, its rate decayed to 0 along a cosine over `total_steps`.
    fn new(sgd: bool, total_steps: usize) -> axes::Result<Optimizer> {
        Ok(match sgd {
            false => Optimizer::AdamW(
                Adam::new(LEARNING_RATE)
                    .with_weight_decay(WEIGHT_DECAY)
                    .with_schedule(WarmupCosine::new(LEARNING_RATE, 0.0, 0, total_steps)?),
            ),
            true => Optimizer::Sgd(
                Sgd::new(SGD_LEARNING_RATE, SGD_MOMENTUM).with_schedule(WarmupCosine::new(
                    SGD_LEARNING_RATE,
                    0.0,
                    0,
                    total_steps,
                )?),
            ),
        })
    }

    fn step(&mut self, params: &mut Params<f32>, grad: &Gradient<f32>) -> axes::Result<()> {
        match self {
            Optimizer::AdamW(adam) => adam.step(params, grad),
            Optimizer::Sgd(sgd) => sgd.step(params, grad),
        }
    }
}

/// Either optimizer's state, as that optimizer saves it.
impl OptimizerState<f32> for Optimizer {
    fn save_state(&self, params: &Params<f32>, file: &mut TensorFile) -> axes::Result<()> {
        match self {
            Optimizer::AdamW(adam) => adam.save_state(params, file),
            Optimizer::Sgd(sgd) => sgd.save_state(params, file),
        }
    }

    fn load_state(&mut self, params: &Params<f32>, file: &TensorFile) -> axes::Result<()> {
        match self {
            Optimizer::AdamW(adam) => adam.load_state(params, file),
            Optimizer::Sgd(sgd) => sgd.load_state(params, file),
        }
    }
}

/// The model: typed layers whose parameters live in one arena.
struct Mlp {
    input: Linear<Pixel, Hidden>,
    middle: Square<Hidden>,
    output: Linear<Hidden, Class>,
}

impl Mlp {
    fn new(params: &mut ParamsBuilder) -> axes::Result<Self> {
        Ok(Mlp {
            input: Linear::new(params, "input", Pixel.len(64), Hidden.len(HIDDEN), Init::He)?,
            middle: Square::new(params, "middle", Hidden.len(HIDDEN), Init::He)?,
            output: Linear::new(
                params,
                "output",
                Hidden.len(HIDDEN),
                Class.len(10),
                Init::Glorot,
            )?,
        })
    }

    /// Logits for a batch of images. Each layer's bias and activation fuse into one pass.
    fn logits(
        &self,
        p: &Bound<'_, f32>,
        x: &Var<f32, (Pixel, Batch)>,
    ) -> axes::Result<Var<f32, (Batch, Class)>> {
        let h = self.input.forward(p, x)?.relu();
        let h = self.middle.forward(p, h)?.relu();
        self.output.forward(p, h)?.eval()
    }
}

/// A batch of images and their labels.
type Images = Tensor<f32, (Pixel, Batch)>;
type Labels = Tensor<i64, (Batch,)>;

/// A training step on a batch: the loss.
type Step<'a> =
    Box<dyn FnMut(&mut Params<f32>, &(Images, Labels)) -> axes::Result<Tensor<f32, ()>> + 'a>;

/// The images of `indices` as a batch (a gather along `Sample`, in host memory), on `device`.
fn batch(
    data: &Split,
    indices: &Tensor<i64, (Batch,)>,
    device: &Device,
) -> axes::Result<(Images, Labels)> {
    Ok((
        data.x.gather::<Sample, _, _>(indices)?.to(device)?,
        data.y.gather::<Sample, _, _>(indices)?.to(device)?,
    ))
}

/// The fraction of `data` the model classifies correctly.
fn accuracy(model: &Mlp, params: &Params<f32>, data: &Split) -> axes::Result<f64> {
    let n = data.y.len_of::<Sample>();
    let all = Tensor::<i64, (Batch,)>::arange(Batch.len(n))?;
    let (x, y) = batch(data, &all, &params.device())?;
    let tape = Tape::new();
    let logits = model.logits(&params.bind(&tape), &tape.constant(x))?;
    let predicted = argmax::<_, _, Class>(logits.value())?;
    let correct = predicted
        .to_vec()
        .iter()
        .zip(y.to_vec())
        .filter(|(p, y)| **p == *y)
        .count();
    Ok(correct as f64 / n as f64)
}

struct Options {
    device: Device,
    epochs: usize,
    seed: u64,
    out: PathBuf,
    /// The folder holding `digits/`.
    data: PathBuf,
    /// Make each batch on another thread while the step before runs (`--no-prefetch`: in
    /// the loop).
    prefetch: bool,
    /// Record each batch size's step once and replay it (`--record`).
    record: bool,
    /// Train with SGD instead of AdamW (`--sgd`).
    sgd: bool,
    /// Save a checkpoint every this many epochs.
    checkpoint_every: Option<usize>,
    /// The checkpoint to go on from.
    resume: Option<PathBuf>,
}

impl Options {
    /// The options a run's batches and rates follow: a checkpoint records them, and a run
    /// resumed from it must have the same.
    fn run_defining(&self) -> String {
        let sgd = if self.sgd { " --sgd" } else { "" };
        format!("--epochs {} --seed {}{sgd}", self.epochs, self.seed)
    }
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        device: Device::Cpu,
        epochs: EPOCHS,
        seed: 7,
        out: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/train"),
        data: Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        prefetch: true,
        record: false,
        sgd: false,
        checkpoint_every: None,
        resume: None,
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
            "--no-prefetch" => options.prefetch = false,
            "--record" => options.record = true,
            "--sgd" => options.sgd = true,
            "--checkpoint-every" => {
                let every: usize = value()?
                    .parse()
                    .map_err(|e| format!("--checkpoint-every: {e}"))?;
                options.checkpoint_every = Some(every.max(1));
            }
            "--resume" => options.resume = Some(PathBuf::from(value()?)),
            "--help" | "-h" => {
                return Err(
                    "usage: train [--device cpu|opencl|cuda[:N]] [--epochs N] [--seed N] [--out DIR] [--data DIR] [--no-prefetch] [--record] [--sgd] [--checkpoint-every N] [--resume PATH]".into(),
                );
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(options)
}

/// How often the progress bar shows the running loss (each read waits for the device).
const SHOW_EVERY: usize = 16;

/// The cost of a training step on its device: the first step (which compiles the kernels it
/// launches) apart from the rest, launches and reads back to the host per step, and the
/// most device memory one step held.
#[derive(Default)]
struct StepReport {
    first: Option<f64>,
    steps: usize,
    seconds: f64,
    launches: u64,
    reads: u64,
    peak_bytes: u64,
}

impl StepReport {
    /// Marks the start of a step.
    fn start(&self, device: &Device) -> Instant {
        device.reset_peak();
        Instant::now()
    }

    /// Marks the end of a step. The first waits for the device, so that its time (kernel
    /// compilation included) is whole; later steps are timed by epoch ([`Self::epoch`]).
    fn finish(&mut self, device: &Device, started: Instant) -> axes::Result<()> {
        if self.first.is_none() {
            device.synchronize()?;
            self.first = Some(started.elapsed().as_secs_f64());
        }
        if let Some(now) = device.counters() {
            self.peak_bytes = self.peak_bytes.max(now.peak_bytes);
        }
        Ok(())
    }

    /// Adds an epoch's `steps` steps, which took `seconds` (up to the read of its loss,
    /// which waits for the device), `launches` launches and `reads` reads.
    fn epoch(&mut self, steps: usize, seconds: f64, (launches, reads): (u64, u64)) {
        self.steps += steps;
        self.seconds += seconds;
        self.launches += launches;
        self.reads += reads;
    }

    fn print(&self, device: &Device) {
        let first = self.first.unwrap_or(0.0);
        let later = (self.seconds - first) / (self.steps.max(2) - 1) as f64;
        let compiles = if device.is_host() {
            ""
        } else {
            " (compiles its kernels or loads them from disk)"
        };
        print!(
            "step time: first {:.1} ms{compiles}, later {:.2} ms on average",
            1e3 * first,
            1e3 * later,
        );
        if device.is_host() {
            println!();
        } else {
            println!(
                "; {:.1} launches and {:.3} reads to the host a step (the loss every {SHOW_EVERY} \
                 steps); peak device memory {:.2} MB in a step",
                self.launches as f64 / self.steps.max(1) as f64,
                self.reads as f64 / self.steps.max(1) as f64,
                self.peak_bytes as f64 / 1e6
            );
        }
    }
}

/// Per-epoch history for the plot.
#[derive(Default)]
struct History {
    loss: Vec<f64>,
    train_accuracy: Vec<f64>,
    test_accuracy: Vec<f64>,
}

impl History {
    /// `epoch,loss,train_accuracy,test_accuracy` lines, each number as the shortest text that
    /// reads back as the same bits.
    fn csv(&self) -> String {
        let mut out = String::from("epoch,loss,train_accuracy,test_accuracy\n");
        for (e, loss) in self.loss.iter().enumerate() {
            let (train, test) = (self.train_accuracy[e], self.test_accuracy[e]);
            out += &format!("{},{loss},{train},{test}\n", e + 1);
        }
        out
    }

    /// The history [`History::csv`] wrote.
    fn parse(text: &str) -> Result<History, Box<dyn std::error::Error>> {
        let mut history = History::default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split(',').collect();
            let [_, loss, train, test] = fields[..] else {
                return Err(format!("a history line `{line}` has not 4 fields").into());
            };
            history.loss.push(loss.parse()?);
            history.train_accuracy.push(train.parse()?);
            history.test_accuracy.push(test.parse()?);
        }
        Ok(history)
    }
}

fn plot(history: &History, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(500);
    let epochs = history.loss.len() as f64;
    let max_loss = history
        .loss
        .iter()
        .cloned()
        .fold(f64::MIN_POSITIVE, f64::max)
        * 1.2;
    let min_loss = history.loss.iter().cloned().fold(max_loss, f64::min) * 0.8;
    let mut chart = ChartBuilder::on(&left)
        .caption(
            "training loss (cross-entropy, log scale)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(1.0..epochs, (min_loss..max_loss).log_scale())?;
    chart.configure_mesh().x_desc("epoch").draw()?;
    chart
        .draw_series(LineSeries::new(
            history
                .loss
                .iter()
                .enumerate()
                .map(|(e, &l)| (e as f64 + 1.0, l)),
            &BLUE,
        ))?
        .label("train loss")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
    chart.configure_series_labels().border_style(BLACK).draw()?;
    let low = history
        .train_accuracy
        .iter()
        .chain(&history.test_accuracy)
        .cloned()
        .fold(1.0, f64::min);
    let mut chart = ChartBuilder::on(&right)
        .caption("accuracy", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1.0..epochs, (low - 0.02).max(0.0)..1.0)?;
    chart.configure_mesh().x_desc("epoch").draw()?;
    for (values, color, name) in [
        (&history.train_accuracy, RED, "train"),
        (&history.test_accuracy, GREEN, "test (held out)"),
    ] {
        chart
            .draw_series(LineSeries::new(
                values.iter().enumerate().map(|(e, &a)| (e as f64 + 1.0, a)),
                &color,
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
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
    let model = Mlp::new(&mut builder)?;
    let mut params = builder.build::<f32>(options.seed)?.to(&options.device)?;
    println!(
        "model: Pixel(64) -> Hidden({HIDDEN}) -> Hidden({HIDDEN}) -> Class(10), {} parameters in one arena, on {}",
        params.count(),
        options.device
    );
    let total_steps = options.epochs * train_count.div_ceil(BATCH);
    // Shared by the step and the checkpoints, which save its state between epochs.
    let optimizer = RefCell::new(Optimizer::new(options.sgd, total_steps)?);
    // A resumed run loads the parameters, the optimizer's state and the history, and goes on from
    // the epoch after the checkpoint's.
    let mut history = History::default();
    let mut start = 0;
    if let Some(path) = &options.resume {
        let saved = axes::io::TensorFile::read(path)?;
        let field = |key: &str| {
            saved.user_metadata().get(key).ok_or_else(|| {
                format!(
                    "--resume: {} has no `{key}`: it is not a checkpoint of this example",
                    path.display()
                )
            })
        };
        if *field("options")? != options.run_defining() {
            return Err(format!(
                "--resume: {} was written by a run with `{}`, and this one has `{}`",
                path.display(),
                field("options")?,
                options.run_defining()
            )
            .into());
        }
        start = field("epoch")?.parse()?;
        history = History::parse(field("history")?)?;
        load_checkpoint(path, &mut params, &mut *optimizer.borrow_mut())?;
        println!("resumed from {} after epoch {start}", path.display());
    }
    // One training step: forward, loss, backward (the tape dropped before the update, which
    // writes the parameters in place), the optimizer; the loss comes back.
    let take_step = |params: &mut Params<f32>, (x, y): &(Images, Labels)| {
        let (loss, grad) = {
            let tape = Tape::new();
            let p = params.bind(&tape);
            let logits = model.logits(&p, &tape.constant(x.clone()))?;
            let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, y)?.mean::<(Batch,)>()?;
            let grad = p.gradient(&loss.backward()?)?;
            (loss.value().clone(), grad)
        };
        optimizer.borrow_mut().step(params, &grad)?;
        Ok(loss)
    };
    let mut take_step: Step<'_> = if options.record {
        let mut recorded = Recorded::new(&options.device, take_step);
        Box::new(move |params, batch| recorded.run(params, batch))
    } else {
        Box::new(take_step)
    };
    let mut steps = StepReport::default();
    let style = ProgressStyle::with_template("epoch {prefix:>3} [{bar:30}] {pos}/{len} {msg}")?
        .progress_chars("=> ");
    let started = Instant::now();
    for epoch in start + 1..=options.epochs {
        let batches = minibatches::<Batch>(train_count, BATCH, options.seed + epoch as u64)?;
        let count = batches.len();
        let epoch_data = shifted(&train, options.seed * 1000 + epoch as u64)?;
        // Each batch is gathered (and copied to the device) on another thread while the step
        // before it runs, or here in the loop.
        let device = options.device;
        let make = move |indices: Tensor<i64, (Batch,)>| batch(&epoch_data, &indices, &device);
        let made: Box<dyn Iterator<Item = axes::Result<(Images, Labels)>>> = if options.prefetch {
            Box::new(Prefetch::new(batches, make))
        } else {
            Box::new(batches.into_iter().map(make))
        };
        let bar = ProgressBar::new(count as u64)
            .with_style(style.clone())
            .with_prefix(epoch.to_string());
        // The losses are summed where they are computed; the host reads the sum (and waits
        // for the device) only every `SHOW_EVERY` steps and at the end of the epoch.
        let mut loss_sum: Option<Tensor<f32, ()>> = None;
        let epoch_started = Instant::now();
        let counted = || {
            options
                .device
                .counters()
                .map_or((0, 0), |c| (c.launches, c.reads))
        };
        let (launches, reads) = counted();
        for (step, made) in made.enumerate() {
            let before = steps.start(&options.device);
            let loss: Tensor<f32, ()> = take_step(&mut params, &made?)?;
            loss_sum = Some(match loss_sum {
                None => loss,
                Some(sum) => (&sum + &loss).eval()?,
            });
            steps.finish(&options.device, before)?;
            if step % SHOW_EVERY == SHOW_EVERY - 1
                && let Some(sum) = &loss_sum
            {
                let mean = sum.try_to_vec()?[0] / (step + 1) as f32;
                bar.set_message(format!("loss {mean:.4}"));
            }
            bar.inc(1);
        }
        let loss =
            loss_sum.map_or(Ok(0.0), |sum| sum.try_to_vec().map(|v| v[0] as f64))? / count as f64;
        steps.epoch(
            count,
            epoch_started.elapsed().as_secs_f64(),
            (counted().0 - launches, counted().1 - reads),
        );
        let train_accuracy = accuracy(&model, &params, &train)?;
        let test_accuracy = accuracy(&model, &params, &test)?;
        let summary = format!(
            "loss {loss:.4}  train {:.2}%  test {:.2}%",
            100.0 * train_accuracy,
            100.0 * test_accuracy
        );
        if bar.is_hidden() {
            println!("epoch {epoch:>3}: {summary}");
        }
        bar.finish_with_message(summary);
        history.loss.push(loss);
        history.train_accuracy.push(train_accuracy);
        history.test_accuracy.push(test_accuracy);
        if let Some(every) = options.checkpoint_every
            && epoch % every == 0
        {
            let path = (options.out).join(format!("checkpoint-{epoch}.safetensors"));
            let metadata = [
                ("epoch", &epoch.to_string()),
                ("options", &options.run_defining()),
                ("history", &history.csv()),
            ];
            let metadata = metadata.map(|(key, value)| (key, value.as_str()));
            save_checkpoint(&path, &params, &*optimizer.borrow(), &metadata)?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let test_accuracy = *history.test_accuracy.last().ok_or("no epoch trained")?;
    println!(
        "trained {} epochs in {seconds:.2} s ({:.3} s an epoch) on {}; test accuracy {:.2}%",
        options.epochs - start,
        seconds / (options.epochs - start).max(1) as f64,
        options.device,
        100.0 * test_accuracy
    );
    steps.print(&options.device);

    let weights = options.out.join("digits-mlp.safetensors");
    params.save(&weights)?;
    let figure = options.out.join("training.svg");
    plot(&history, &figure)?;
    let table = options.out.join("training.csv");
    std::fs::write(&table, history.csv())?;
    println!(
        "wrote {}, {} and {}",
        weights.display(),
        figure.display(),
        table.display()
    );

    // A fresh model (other random weights), loaded from the file, must agree exactly.
    let mut builder = ParamsBuilder::new();
    let reloaded_model = Mlp::new(&mut builder)?;
    let mut reloaded = builder.build::<f32>(options.seed + 1)?;
    reloaded.load(&weights)?;
    let reloaded_accuracy = accuracy(&reloaded_model, &reloaded, &test)?;
    println!(
        "reloaded weights: test accuracy {:.2}%",
        100.0 * reloaded_accuracy
    );
    if reloaded_accuracy != test_accuracy {
        return Err("the reloaded weights give a different accuracy".into());
    }
    Ok(())
}
