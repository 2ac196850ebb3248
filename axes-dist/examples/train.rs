//! The digits MLP trained data-parallel: every rank holds the model, trains on its shard of
//! each global batch, and averages the gradient with the others after each backward pass.
//!
//! ```sh
//! cargo run --release --example train                      # one process
//! cargo build --release --example train
//! mpiexec -n 2 target/release/examples/train               # two ranks (from axes-dist/)
//! ```
//!
//! Rank 0 prints the loss and held-out accuracy per epoch, the step time and the shares of it
//! spent waiting for the slowest rank and in the gradient's all-reduce, and writes `target/dist/training.svg`; at the end every rank checks that its
//! parameters are bitwise rank 0's. Options: `--epochs N`, `--batch N` (the global batch,
//! divisible by the number of ranks), `--die-at STEP` (rank 1 exits there: how a dead rank
//! ends the job).

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use axes::autodiff::{Tape, Var, softmax_cross_entropy};
use axes::nn::{Bound, Init, Linear, Params, ParamsBuilder, minibatches};
use axes::optim::Adam;
use axes::prelude::*;
use axes_dist::Communicator;

#[derive(Axis)]
struct Sample;
#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Pixel;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

/// Pixel (64) → Hidden (256, ReLU) → Class (10).
struct Mlp {
    input: Linear<Pixel, Hidden>,
    output: Linear<Hidden, Class>,
}

impl Mlp {
    fn new(params: &mut ParamsBuilder) -> axes::Result<Self> {
        Ok(Mlp {
            input: Linear::new(params, "input", Pixel.len(64), Hidden.len(256), Init::He)?,
            output: Linear::new(
                params,
                "output",
                Hidden.len(256),
                Class.len(10),
                Init::Glorot,
            )?,
        })
    }

    fn logits(
        &self,
        p: &Bound<'_, f32>,
        x: &Var<f32, (Batch, Pixel)>,
    ) -> axes::Result<Var<f32, (Batch, Class)>> {
        let h = self.input.forward(p, x)?.relu();
        self.output.forward(p, h)?.eval()
    }
}

/// Images (pixels in [0, 1]) and labels.
struct Split {
    x: Tensor<f32, (Sample, Pixel)>,
    y: Tensor<i64, (Sample,)>,
}

/// The digits, shuffled (the same on every rank) and split 80/20.
fn load_digits() -> Result<(Split, Split), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/digits/digits.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path)?).read_to_string(&mut text)?;
    let rows: Vec<Vec<f32>> = (text.lines())
        .map(|line| line.split(',').map(|v| v.trim().parse::<f32>()).collect())
        .collect::<Result<_, _>>()?;
    let order = minibatches::<Sample>(rows.len(), rows.len(), 7)?
        .remove(0)
        .to_vec();
    let split = |indices: &[i64]| -> axes::Result<Split> {
        let pixels = (indices.iter())
            .flat_map(|&i| rows[i as usize][..64].iter().map(|p| p / 16.0))
            .collect();
        let labels = indices
            .iter()
            .map(|&i| rows[i as usize][64] as i64)
            .collect();
        let n = Sample.len(indices.len());
        Ok(Split {
            x: Tensor::from_vec((n, Pixel.len(64)), pixels)?,
            y: Tensor::from_vec(n, labels)?,
        })
    };
    let test = rows.len() / 5;
    Ok((split(&order[test..])?, split(&order[..test])?))
}

fn accuracy(model: &Mlp, params: &Params<f32>, data: &Split) -> axes::Result<f64> {
    let tape = Tape::new();
    let x = data.x.rename::<Sample, Batch>()?.axes_with_order();
    let logits = model.logits(&params.bind(&tape), &tape.constant(x))?;
    let predicted = argmax::<_, _, Class>(logits.value())?.to_vec();
    let right = predicted
        .iter()
        .zip(data.y.to_vec())
        .filter(|(p, y)| **p == *y)
        .count();
    Ok(right as f64 / predicted.len() as f64)
}

struct Options {
    epochs: usize,
    batch: usize,
    die_at: Option<usize>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        epochs: 20,
        batch: 64,
        die_at: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || -> Result<usize, String> {
            let value = args.next().ok_or(format!("{arg} needs a value"))?;
            value.parse().map_err(|e| format!("{arg}: {e}"))
        };
        match arg.as_str() {
            "--epochs" => options.epochs = number()?.max(1),
            "--batch" => options.batch = number()?.max(1),
            "--die-at" => options.die_at = Some(number()?),
            other => {
                return Err(format!(
                    "unknown argument `{other}`: train [--epochs N] [--batch N] [--die-at STEP]"
                ));
            }
        }
    }
    Ok(options)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let comm = Communicator::from_launcher()?;
    let (train, test) = load_digits()?;
    let mut builder = ParamsBuilder::new();
    let model = Mlp::new(&mut builder)?;
    let mut params = builder.build::<f32>(comm.rank() as u64)?;
    comm.check_same_params(&params)?;
    comm.broadcast_params(&mut params)?; // every rank starts from rank 0's values
    let mut adam = Adam::new(2e-3);
    let samples = train.y.len_of::<Sample>();
    let mut history = Vec::new();
    let (mut step, mut stepping) = (0, Duration::ZERO);
    let (mut waiting, mut reducing) = (Duration::ZERO, Duration::ZERO);
    for epoch in 0..options.epochs {
        // The same global batches on every rank (same seed); each takes its shard.
        let batches = minibatches::<Batch>(samples, options.batch, epoch as u64)?;
        let mut loss_sum = 0.0;
        for indices in batches
            .iter()
            .filter(|b| b.len_of::<Batch>() == options.batch)
        {
            if options.die_at == Some(step) && comm.rank() == 1 {
                eprintln!("rank 1: exiting at step {step} (--die-at)");
                std::process::exit(3);
            }
            let started = Instant::now();
            let mine = comm.shard::<Batch, _, _>(indices)?;
            let (x, y) = (
                train.x.gather::<Sample, _, _>(&mine)?.axes_with_order(),
                train.y.gather::<Sample, _, _>(&mine)?,
            );
            let tape = Tape::new();
            let p = params.bind(&tape);
            let logits = model.logits(&p, &tape.constant(x))?;
            let loss =
                softmax_cross_entropy::<Class, _, _, _, _>(&logits, &y)?.mean::<(Batch,)>()?;
            let grad = p.gradient(&loss.backward()?)?;
            // Timed apart: waiting for the slowest rank, then the all-reduce itself.
            let before = Instant::now();
            comm.barrier();
            let reached = Instant::now();
            let grad = comm.average_gradient(&params, grad)?;
            (waiting, reducing) = (waiting + (reached - before), reducing + reached.elapsed());
            adam.step(&mut params, &grad)?;
            stepping += started.elapsed();
            loss_sum += f64::from(loss.value().to_vec()[0]);
            step += 1;
        }
        let loss = loss_sum / (samples / options.batch) as f64;
        let held_out = accuracy(&model, &params, &test)?;
        history.push((loss, held_out));
        if comm.is_root() {
            println!(
                "epoch {:>3}: loss {loss:.4} (rank 0's shards), held-out accuracy {:.1}%",
                epoch + 1,
                held_out * 100.0
            );
        }
    }
    // Every rank ends with rank 0's parameters, bit for bit.
    let flat = params.arena().flat().to_vec();
    let mine = Tensor::<f32, (Sample,)>::from_vec(Sample.len(flat.len()), flat.clone())?;
    let rank0 = comm.broadcast(&mine, 0)?.to_vec();
    let same = rank0
        .iter()
        .zip(&flat)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!(
        "rank {}: parameters {} rank 0's",
        comm.rank(),
        if same { "identical to" } else { "DIFFER from" }
    );
    if comm.is_root() {
        let per_step = stepping.as_secs_f64() / step as f64;
        let share = |d: Duration| 100.0 * d.as_secs_f64() / stepping.as_secs_f64();
        println!(
            "{} rank(s), global batch {}: {step} steps, {:.3} ms per step; of it, waiting for \
             the slowest rank {:.1}%, the gradient's all-reduce {:.1}%",
            comm.size(),
            options.batch,
            per_step * 1e3,
            share(waiting),
            share(reducing)
        );
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/dist");
        std::fs::create_dir_all(&dir)?;
        plot(&history, &dir.join("training.svg"))?;
        println!("wrote {}", dir.join("training.svg").display());
    }
    if !same {
        return Err("the ranks' parameters differ".into());
    }
    Ok(())
}

/// The loss and the held-out accuracy per epoch, side by side.
fn plot(history: &[(f64, f64)], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (900, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(450);
    let epochs = history.len().max(2) as f64;
    let top = history.iter().map(|h| h.0).fold(0.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .caption("training loss", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1.0..epochs, 0.0..top)?;
    chart.configure_mesh().x_desc("epoch").draw()?;
    chart.draw_series(LineSeries::new(
        history
            .iter()
            .enumerate()
            .map(|(e, h)| (e as f64 + 1.0, h.0)),
        &BLUE,
    ))?;
    let mut chart = ChartBuilder::on(&right)
        .caption("held-out accuracy", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1.0..epochs, 0.0..1.0)?;
    chart.configure_mesh().x_desc("epoch").draw()?;
    chart.draw_series(LineSeries::new(
        history
            .iter()
            .enumerate()
            .map(|(e, h)| (e as f64 + 1.0, h.1)),
        &GREEN,
    ))?;
    root.present()?;
    Ok(())
}
