//! A character-level GPT trained on the King James Bible (`data/kjv/`):
//! `cargo run --release --example gpt`.
//!
//! 4 blocks of 4 heads, 128 wide, a context of 128 characters by default (828k parameters), AdamW with
//! a warmup and a cosine decay, gradients clipped to norm 1. A progress bar shows the train
//! loss; every `--eval-every` steps the validation loss (bits per character, on fixed
//! batches of the last 10% of the text, by the tape-free forward). At the end it writes
//! `target/gpt/curves.csv`, `target/gpt/curves.svg` (both curves, and PyTorch's where
//! `benches/gpt_torch.py` wrote them beside) and `target/gpt/gpt.safetensors`, and samples
//! text from a prompt (temperature 0.8, top-k 10). The windows of text each step trains on
//! are drawn by SplitMix64 from `--seed`, as `benches/gpt_torch.py` draws them, on another
//! thread one step ahead, and swapped in under views built once (`memory::Swappable`). On a
//! device, the last line gives the launches of one training step; everywhere, the most bytes
//! the device's tensors held at once during one (`Device::counters`).
//!
//! Options: `--steps N` (800), `--batch N` (32), `--context N` (128), `--lr X` (the peak
//! learning rate, 3e-3; the cosine ends at a tenth of it), `--seed N`, `--eval-every N`,
//! `--device cpu|opencl|cuda[:N]`, `--out DIR`, `--data DIR` (the folder holding `kjv/`; the
//! repository's `data/` by default), `--record` (on a device, the step is recorded once and
//! replayed: `axes::record::Recorded`; a CUDA graph on CUDA), `--sample N` (the characters
//! sampled at the end, 300), `--checkpoint-every N` (every N steps, a checkpoint of the
//! parameters, AdamW's state, the step and the curves so far: `DIR/checkpoint-{step}.safetensors`),
//! `--resume PATH` (goes on from a checkpoint, with the options it was written with: the
//! same batches, rates and bits as a run that never stopped) and `--precision f32|bf16|f16`
//! (mixed precision: the forward and backward passes in bf16 or f16 over a copy of the f32
//! weights AdamW updates, `Params::bind_as`; f16 under a dynamic loss scale, `LossScale`,
//! whose value the checkpoints keep and the validation lines print; the validation runs the
//! f32 weights), `--tf32` (f32 products may round their operands to TF32 where the device
//! can, `Device::allow_tf32`: cuBLAS on CUDA; the first line says whether it does).

use std::cell::RefCell;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use axes::autodiff::Tape;
use axes::memory::Swappable;
use axes::nn::transformer::{Batch, Gpt, GptConfig, Token, Vocab};
use axes::nn::{Gradient, Params, ParamsBuilder, Prefetch, load_checkpoint, save_checkpoint};
use axes::optim::{Adam, LossScale, WarmupCosine, clip_grad_norm};
use axes::prelude::*;
use axes::record::Recorded;
use axes::{Device, Float};
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Options {
    steps: usize,
    context: usize,
    lr: f64,
    batch: usize,
    seed: u64,
    eval_every: usize,
    device: Device,
    out: PathBuf,
    data: PathBuf,
    /// Record the step once and replay it (`--record`).
    record: bool,
    /// The characters sampled at the end.
    sample: usize,
    /// Save a checkpoint every this many steps.
    checkpoint_every: Option<usize>,
    /// The checkpoint to go on from.
    resume: Option<PathBuf>,
    /// The type of the forward and backward passes.
    precision: Precision,
    /// Let f32 products round their operands to TF32 where the device can (`--tf32`).
    tf32: bool,
}

/// The type the forward and backward passes run in, over f32 master weights.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Precision {
    F32,
    Bf16,
    /// Under a loss scale.
    F16,
}

impl Options {
    /// The options a run's batches and rates follow: a checkpoint records them, and a run
    /// resumed from it must have the same.
    fn run_defining(&self) -> String {
        format!(
            "--steps {} --batch {} --context {} --lr {} --seed {}{}{}",
            self.steps,
            self.batch,
            self.context,
            self.lr,
            self.seed,
            match self.precision {
                Precision::F32 => "",
                Precision::Bf16 => " --precision bf16",
                Precision::F16 => " --precision f16",
            },
            if self.tf32 { " --tf32" } else { "" }
        )
    }
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        steps: 800,
        context: 128,
        lr: 3e-3,
        batch: 32,
        seed: 1,
        eval_every: 50,
        device: Device::Cpu,
        out: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/gpt"),
        data: Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        record: false,
        sample: 300,
        checkpoint_every: None,
        resume: None,
        precision: Precision::F32,
        tf32: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{arg}: {e}"));
        match arg.as_str() {
            "--steps" => options.steps = number(value()?)?.max(1),
            "--batch" => options.batch = number(value()?)?.max(1),
            "--context" => options.context = number(value()?)?.max(1),
            "--lr" => options.lr = value()?.parse::<f64>().map_err(|e| format!("{arg}: {e}"))?,
            "--seed" => options.seed = number(value()?)? as u64,
            "--eval-every" => options.eval_every = number(value()?)?.max(1),
            "--device" => {
                options.device = axes::device(&value()?).map_err(|e| format!("--device: {e}"))?
            }
            "--out" => options.out = PathBuf::from(value()?),
            "--data" => options.data = PathBuf::from(value()?),
            "--record" => options.record = true,
            "--tf32" => options.tf32 = true,
            "--sample" => options.sample = number(value()?)?,
            "--checkpoint-every" => options.checkpoint_every = Some(number(value()?)?.max(1)),
            "--resume" => options.resume = Some(PathBuf::from(value()?)),
            "--precision" => {
                options.precision = match value()?.as_str() {
                    "f32" => Precision::F32,
                    "bf16" => Precision::Bf16,
                    "f16" => Precision::F16,
                    other => return Err(format!("--precision: `{other}` is not f32, bf16 or f16")),
                }
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`: gpt [--steps N] [--batch N] [--context N] [--lr X] \
                     [--seed N] [--eval-every N] [--device cpu|opencl|cuda[:N]] [--out DIR] \
                     [--data DIR] [--record] [--sample N] [--checkpoint-every N] [--resume PATH] \
                     [--precision f32|bf16|f16] [--tf32]"
                ));
            }
        }
    }
    Ok(options)
}

/// The text as ids into its sorted characters.
struct Text {
    chars: Vec<char>,
    ids: Vec<i64>,
}

fn load_text(data: &Path) -> Result<Text, Box<dyn std::error::Error>> {
    let path = data.join("kjv/kjv.txt.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path)?).read_to_string(&mut text)?;
    let mut chars: Vec<char> = text.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    let ids = text
        .chars()
        .map(|c| chars.binary_search(&c).expect("a character of the text") as i64)
        .collect();
    Ok(Text { chars, ids })
}

/// Token ids and the ids that follow them.
type Pair = (Tensor<i64, (Batch, Token)>, Tensor<i64, (Batch, Token)>);

/// A training step on a batch: the loss.
type Step<'a> = Box<dyn FnMut(&mut Params<f32>, &Pair) -> axes::Result<Tensor<f32, ()>> + 'a>;

/// SplitMix64: the generator that picks the windows, simple enough that
/// `benches/gpt_torch.py` draws the same ones.
struct SplitMix(u64);

impl SplitMix {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The generator seeded with `seed` after `draws` draws: its state advances by a constant
    /// per draw, so a resumed run jumps to where the run it resumes stopped.
    fn after(seed: u64, draws: u64) -> SplitMix {
        SplitMix(seed.wrapping_add(draws.wrapping_mul(Self::GAMMA)))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `batch` windows of `context + 1` ids of `ids` starting at positions drawn from `rng`: each
/// row's first `context` ids are the inputs, its last `context` the targets.
fn windows(
    ids: &[i64],
    (batch, context): (usize, usize),
    rng: &mut SplitMix,
    device: &Device,
) -> axes::Result<Tensor<i64, (Batch, Token)>> {
    let positions = (ids.len() - context - 1) as u64;
    let starts: Vec<usize> = (0..batch)
        .map(|_| (rng.next() % positions) as usize)
        .collect();
    let rows = (starts.iter())
        .flat_map(|&s| ids[s..s + context + 1].iter().copied())
        .collect();
    Tensor::from_vec((Batch.len(batch), Token.len(context + 1)), rows)?.to(device)
}

/// The inputs and targets of `windows`: views, no copy.
fn inputs_and_targets(windows: &Tensor<i64, (Batch, Token)>) -> axes::Result<Pair> {
    let context = windows.len_of::<Token>() - 1;
    Ok((
        windows.slice::<Token>(..context, 1)?,
        windows.slice::<Token>(1.., 1)?,
    ))
}

/// The mean loss over `batches` in bits per character, by the tape-free forward.
fn bits_per_char(
    model: &Gpt,
    params: &axes::nn::Params<f32>,
    batches: &[Pair],
) -> axes::Result<f64> {
    let mut total = 0.0;
    for (ids, targets) in batches {
        let logits = model.infer(params, ids)?;
        let log_p = logits.log_softmax::<Vocab>()?;
        let picked = log_p.gather::<Vocab, _, _>(targets)?;
        total -= f64::from(picked.mean::<(Batch, Token)>()?.to_vec()[0]);
    }
    Ok(total / batches.len() as f64 / std::f64::consts::LN_2)
}

/// `count` characters continuing `prompt`, each drawn from the softmax of the last position's
/// logits at `temperature` among the `top_k` likeliest.
fn sample(
    model: &Gpt,
    params: &axes::nn::Params<f32>,
    text: &Text,
    prompt: &str,
    (count, context): (usize, usize),
    rng: &mut ChaCha8Rng,
) -> Result<String, Box<dyn std::error::Error>> {
    let (temperature, top_k) = (0.8, 10);
    let mut ids: Vec<i64> = (prompt.chars())
        .map(|c| text.chars.binary_search(&c).map(|i| i as i64))
        .collect::<Result<_, _>>()
        .map_err(|_| "the prompt has a character the text lacks")?;
    let vocab = text.chars.len();
    for _ in 0..count {
        let window = &ids[ids.len().saturating_sub(context)..];
        let input = Tensor::<i64, (Batch, Token)>::from_vec(
            (Batch.len(1), Token.len(window.len())),
            window.to_vec(),
        )?
        .to(&params.device())?;
        let logits = model
            .infer(params, &input)?
            .to_vec_in::<(Batch, Token, Vocab)>();
        let last = &logits[logits.len() - vocab..];
        let mut order: Vec<usize> = (0..vocab).collect();
        order.sort_by(|&a, &b| last[b].total_cmp(&last[a]));
        let top = &order[..top_k];
        let weights: Vec<f64> = (top.iter())
            .map(|&i| (f64::from(last[i] - last[top[0]]) / temperature).exp())
            .collect();
        let mut pick = rng.random::<f64>() * weights.iter().sum::<f64>();
        let mut chosen = top[top_k - 1];
        for (&i, &w) in top.iter().zip(&weights) {
            if pick < w {
                chosen = i;
                break;
            }
            pick -= w;
        }
        ids.push(chosen as i64);
    }
    Ok(ids.iter().map(|&i| text.chars[i as usize]).collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let text = load_text(&options.data)?;
    let split = text.ids.len() * 9 / 10;
    let (train, valid) = (&text.ids[..split], &text.ids[split..]);
    let config = GptConfig {
        vocab: text.chars.len(),
        context: options.context,
        hidden: 128,
        heads: 4,
        head_dim: 32,
        inner: 512,
        layers: 4,
    };
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config)?;
    let mut params = builder.build::<f32>(options.seed)?.to(&options.device)?;
    let tf32 = options.tf32 && options.device.allow_tf32(true);
    println!(
        "{} characters ({} distinct), {} parameters, {} steps of {} × {} on {}{}{}",
        text.ids.len(),
        text.chars.len(),
        params.count(),
        options.steps,
        options.batch,
        options.context,
        options.device,
        match options.precision {
            Precision::F32 => "",
            Precision::Bf16 => " in bf16 (f32 master weights)",
            Precision::F16 => " in f16 (f32 master weights, a loss scale)",
        },
        match (options.tf32, tf32) {
            (false, _) => "",
            (true, true) => ", f32 products in TF32",
            (true, false) => ", f32 products in f32 (this device has no TF32)",
        }
    );
    let mut eval_rng = SplitMix(1000);
    let eval_batches: Vec<Pair> = (0..4)
        .map(|_| {
            inputs_and_targets(&windows(
                valid,
                (options.batch, options.context),
                &mut eval_rng,
                &options.device,
            )?)
        })
        .collect::<axes::Result<_>>()?;
    // A tenth of the steps of warmup, and at least one step of the cosine after it.
    let warmup = (options.steps / 10)
        .max(1)
        .min(options.steps.saturating_sub(1));
    let schedule = WarmupCosine::new(options.lr, options.lr / 10.0, warmup, options.steps)?;
    // Shared by the step and the checkpoints, which save its state between steps.
    let adam = RefCell::new(
        Adam::new(options.lr)
            .with_weight_decay(0.01)
            .with_schedule(schedule),
    );
    // f16's loss scale, which the checkpoints keep too.
    let loss_scale = RefCell::new(LossScale::new());
    // A resumed run loads the parameters, AdamW's state, the loss scale and the curves, and
    // goes on from the step after the checkpoint's.
    let (mut train_curve, mut valid_curve) = (Vec::new(), Vec::new());
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
        start = field("step")?.parse()?;
        (train_curve, valid_curve) = parse_curves(field("curves")?)?;
        load_checkpoint(path, &mut params, &mut *adam.borrow_mut())?;
        if options.precision == Precision::F16 {
            let state = parse_loss_scale(field("loss_scale")?)?;
            loss_scale.replace(LossScale::new().resumed(state));
        }
        println!("resumed from {} after step {start}", path.display());
    }
    // One training step: forward, loss, backward (the tape dropped before the update, which
    // writes the parameters in place), clipping, AdamW; the loss comes back.
    let take_step = |params: &mut Params<f32>, pair: &Pair| {
        let (loss, grad) = match options.precision {
            Precision::F32 => loss_and_gradient::<f32>(&model, params, pair, None)?,
            Precision::Bf16 => {
                let (loss, grad) = loss_and_gradient::<bf16>(&model, params, pair, None)?;
                (loss.cast::<f32>().eval()?, grad)
            }
            Precision::F16 => {
                let scale = Some(&mut *loss_scale.borrow_mut());
                let (loss, grad) = loss_and_gradient::<f16>(&model, params, pair, scale)?;
                (loss.cast::<f32>().eval()?, grad)
            }
        };
        let (grad, _) = clip_grad_norm(params, grad, 1.0)?;
        adam.borrow_mut().step(params, &grad)?;
        Ok(loss)
    };
    let mut take_step: Step<'_> = if options.record {
        let mut recorded = Recorded::new(&options.device, take_step);
        Box::new(move |params, batch| recorded.run(params, batch))
    } else {
        Box::new(take_step)
    };
    let bar = ProgressBar::new((options.steps - start) as u64).with_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})")?
            .progress_chars("=> "),
    );
    // Double buffering: the next step's windows are drawn (and copied to the device) on
    // another thread while this step runs, then swapped in under the two views, built once.
    // Each step draws `batch` windows: a resumed run's generator starts after the draws of the
    // steps before it.
    let shape = (options.batch, options.context);
    let mut rng = SplitMix::after(options.seed, (start * options.batch) as u64);
    let slot = Swappable::new(windows(train, shape, &mut rng, &options.device)?);
    let inputs = slot.view(|w| w.slice::<Token>(..options.context, 1))?;
    let targets = slot.view(|w| w.slice::<Token>(1.., 1))?;
    let (train, device) = (train.to_vec(), options.device);
    let mut next = Prefetch::new(start + 1..options.steps, move |_| {
        windows(&train, shape, &mut rng, &device)
    });
    let started = Instant::now();
    // Launches of the training steps (not of the validation), on a device that counts them.
    let launches = || {
        let device = (!options.device.is_host()).then_some(&options.device);
        device.and_then(Device::counters).map(|c| c.launches)
    };
    let mut step_launches = 0;
    // The most bytes held at once during a training step (not a validation).
    let peak = || options.device.counters().map_or(0, |c| c.peak_bytes);
    let mut step_peak = 0;
    // The first step (which compiles the kernels it launches, where they are not on disk
    // yet) and the later ones, without the validation.
    let (mut first_step, mut later_steps) = (0.0, 0.0);
    for step in start..options.steps {
        let step_started = Instant::now();
        if step > start {
            let made = next.next().ok_or("the window thread stopped early")??;
            slot.swap(made)?;
        }
        let launched = launches();
        options.device.reset_peak();
        let loss: Tensor<f32, ()> = take_step(&mut params, &(inputs.get(), targets.get()))?;
        let bits = f64::from(loss.to_vec()[0]) / std::f64::consts::LN_2;
        match step - start {
            0 => first_step = step_started.elapsed().as_secs_f64(),
            _ => later_steps += step_started.elapsed().as_secs_f64(),
        }
        step_launches += launches().zip(launched).map_or(0, |(now, then)| now - then);
        step_peak = step_peak.max(peak());
        train_curve.push((step + 1, bits));
        if (step + 1) % options.eval_every == 0 || step + 1 == options.steps {
            let valid_bits = bits_per_char(&model, &params, &eval_batches)?;
            valid_curve.push((step + 1, valid_bits));
            let mut line = format!(
                "step {:>5}: train {bits:.3} bits/char, validation {valid_bits:.3}",
                step + 1
            );
            if options.precision == Precision::F16 {
                let (scale, _) = loss_scale.borrow().state()?;
                line += &format!(", loss scale {scale}");
            }
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
        }
        if let Some(every) = options.checkpoint_every
            && (step + 1) % every == 0
        {
            std::fs::create_dir_all(&options.out)?;
            let path = (options.out).join(format!("checkpoint-{}.safetensors", step + 1));
            let (scale, clean) = loss_scale.borrow().state()?;
            let metadata = [
                ("step", &(step + 1).to_string()),
                ("options", &options.run_defining()),
                ("curves", &curves_csv(&train_curve, &valid_curve)),
                ("loss_scale", &format!("{scale} {clean}")),
            ];
            let metadata = metadata.map(|(key, value)| (key, value.as_str()));
            save_checkpoint(&path, &params, &*adam.borrow(), &metadata)?;
        }
        bar.set_message(format!("train {bits:.3} bits/char"));
        bar.inc(1);
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish();
    let last = valid_curve.last().map_or(f64::NAN, |v| v.1);
    let trained = (options.steps - start).max(1);
    println!(
        "trained {} steps in {seconds:.0} s ({:.0} ms per step{}, at most {:.0} MB held): \
         validation {last:.3} bits/char",
        options.steps - start,
        1e3 * seconds / trained as f64,
        match launches() {
            Some(_) => format!(", {} launches", step_launches / trained as u64),
            None => String::new(),
        },
        step_peak as f64 / 1e6
    );
    println!(
        "first step {:.0} ms{}, later steps {:.1} ms on average (validation not counted)",
        1e3 * first_step,
        if options.device.is_host() {
            ""
        } else {
            " (compiles its kernels or loads them from disk)"
        },
        1e3 * later_steps / (trained.max(2) - 1) as f64
    );
    std::fs::create_dir_all(&options.out)?;
    write_curves(&train_curve, &valid_curve, &options.out.join("curves.csv"))?;
    // PyTorch's curves, where `benches/gpt_torch.py` wrote them, in the same plot.
    let torch = read_curves(&options.out.join("torch_curves.csv")).ok();
    plot(
        &train_curve,
        &valid_curve,
        torch.as_ref(),
        &options.out.join("curves.svg"),
    )?;
    params.save(options.out.join("gpt.safetensors"))?;
    println!("wrote {}", options.out.display());
    if options.sample == 0 {
        return Ok(());
    }
    let prompt = "And God said";
    let mut sampler = ChaCha8Rng::seed_from_u64(options.seed);
    let text_out = sample(
        &model,
        &params,
        &text,
        prompt,
        (options.sample, options.context),
        &mut sampler,
    )?;
    println!("\n{text_out}");
    Ok(())
}

/// The loss and the gradient of the f32 weights on a batch: forward and backward in `H` over
/// the weights' working copy (the weights themselves where `H` is f32), the backward pass
/// under `scale` where there is one.
fn loss_and_gradient<H: Float<Wide = f32>>(
    model: &Gpt,
    params: &Params<f32>,
    (inputs, targets): &Pair,
    scale: Option<&mut LossScale>,
) -> axes::Result<(Tensor<H, ()>, Gradient<f32>)> {
    let tape = Tape::<H>::new();
    let p = params.bind_as::<H>(&tape)?;
    let loss = model.loss(&p, inputs, targets)?;
    let grad = match scale {
        Some(scale) => {
            let scaled = p.gradient(&scale.backward(&loss)?)?;
            scale.unscale(&scaled)?
        }
        None => p.gradient(&loss.backward()?)?.widened()?,
    };
    Ok((loss.value().clone(), grad))
}

/// A loss scale as a checkpoint keeps it: the scale and the clean steps, `32768 12`.
fn parse_loss_scale(text: &str) -> Result<(f64, usize), Box<dyn std::error::Error>> {
    let (scale, clean) = text.split_once(' ').ok_or("a loss scale is two numbers")?;
    Ok((scale.parse()?, clean.parse()?))
}

/// Points of a curve: steps and bits per character.
type Curve = Vec<(usize, f64)>;

/// `kind,step,bits` lines (`train` or `validation`), the format `benches/gpt_torch.py` writes;
/// each number as the shortest text that reads back as the same bits.
fn curves_csv(train: &[(usize, f64)], valid: &[(usize, f64)]) -> String {
    let mut out = String::from("kind,step,bits\n");
    for (kind, curve) in [("train", train), ("validation", valid)] {
        for (step, bits) in curve {
            out += &format!("{kind},{step},{bits}\n");
        }
    }
    out
}

/// The curves in `path`.
fn write_curves(
    train: &[(usize, f64)],
    valid: &[(usize, f64)],
    path: &Path,
) -> std::io::Result<()> {
    std::fs::write(path, curves_csv(train, valid))
}

/// The curves of a file [`write_curves`] (or `benches/gpt_torch.py`) wrote.
fn read_curves(path: &Path) -> Result<(Curve, Curve), Box<dyn std::error::Error>> {
    parse_curves(&std::fs::read_to_string(path)?)
}

/// The curves of the text [`curves_csv`] makes.
fn parse_curves(text: &str) -> Result<(Curve, Curve), Box<dyn std::error::Error>> {
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let [kind, step, bits] = fields[..] else {
            return Err(format!("a curve's line `{line}` is not `kind,step,bits`").into());
        };
        let point = (step.parse()?, bits.parse()?);
        match kind {
            "train" => train.push(point),
            _ => valid.push(point),
        }
    }
    Ok((train, valid))
}

/// The train and validation curves (bits per character against steps), with PyTorch's
/// dashed where given.
fn plot(
    train: &[(usize, f64)],
    valid: &[(usize, f64)],
    torch: Option<&(Curve, Curve)>,
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let steps = train.len().max(2) as f64;
    let top = train.iter().chain(valid).map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let (torch_train, torch_valid) = torch.map_or((&[][..], &[][..]), |(t, v)| (&t[..], &v[..]));
    let mut chart = ChartBuilder::on(&root)
        .caption("loss (bits per character)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1.0..steps, 0.0..top)?;
    chart.configure_mesh().x_desc("step").draw()?;
    for (points, color, name) in [(train, BLUE, "train"), (valid, RED, "validation")] {
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|&(s, b)| (s as f64, b)),
                &color,
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    for (points, color, name) in [
        (torch_train, BLUE.mix(0.4), "PyTorch train"),
        (torch_valid, RED.mix(0.4), "PyTorch validation"),
    ] {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(DashedLineSeries::new(
                points.iter().map(|&(s, b)| (s as f64, b)),
                6,
                4,
                color.stroke_width(1),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart.configure_series_labels().border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
