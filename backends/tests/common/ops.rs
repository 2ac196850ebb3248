//! The library's own operations on tensors that live on a device agree with the same
//! operations on the CPU (whose engine is itself tested against plain references): every
//! element-wise op, reduction, assignment, view and contraction, over random lengths and
//! permuted, reversed, sliced and broadcast inputs, in f32, f64, i32 and bool. The same code
//! runs on the CPU and on the device: only where the inputs live differs.

use axes::nn::transformer::{Batch, Token};
use axes::prelude::*;
use axes::{Device, ExprExt, dot_on};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
pub struct B;
#[derive(Axis)]
pub struct I;
#[derive(Axis)]
pub struct J;
#[derive(Axis)]
pub struct Class;

/// Seeds of the random shapes each test runs.
const SEEDS: std::ops::Range<u64> = 0..4;

/// `device` and `cpu` hold the same values, within `tolerance` (relative, plus absolute).
pub fn agree<T: Element + Into<f64>, A: AxisSet>(
    what: &str,
    cpu: &Tensor<T, A>,
    device: &Tensor<T, A>,
    tolerance: f64,
) {
    assert_eq!(cpu.lens(), device.lens(), "{what}: lengths");
    for (i, (c, d)) in cpu.to_vec().into_iter().zip(device.to_vec()).enumerate() {
        let (c, d): (f64, f64) = (c.into(), d.into());
        let ok =
            (c.is_nan() && d.is_nan()) || c == d || (c - d).abs() <= tolerance * (1.0 + c.abs());
        assert!(ok, "{what}: element {i}: CPU {c}, device {d}");
    }
}

/// The inputs of one seed: a signed matrix stored (I, B) and used as (B, I) (a permuted
/// view), a positive one reversed along B (a negative stride), and a vector over I; random
/// lengths.
pub struct Inputs {
    pub x: Tensor<f32, (B, I)>,
    pub p: Tensor<f32, (B, I)>,
    pub y: Tensor<f32, (I,)>,
}

impl Inputs {
    pub fn new(seed: u64) -> Inputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (nb, ni) = (rng.random_range(1..40), rng.random_range(1..40));
        let mut draw = |count: usize, low: f32, high: f32| -> Vec<f32> {
            (0..count)
                .map(|_| {
                    let v: f32 = rng.random_range(low..high);
                    if v.abs() < 0.1 { v + 0.25 } else { v }
                })
                .collect()
        };
        let x = Tensor::<f32, (I, B)>::from_vec((I.len(ni), B.len(nb)), draw(ni * nb, -2.0, 2.0));
        let p = Tensor::<f32, (B, I)>::from_vec((B.len(nb), I.len(ni)), draw(ni * nb, 0.25, 3.0));
        let y = Tensor::<f32, (I,)>::from_vec(I.len(ni), draw(ni, -2.0, 2.0));
        let (x, p, y) = (x.unwrap(), p.unwrap(), y.unwrap());
        Inputs {
            x: x.axes_with_order(),
            p: p.slice::<B>(.., -1).unwrap(),
            y,
        }
    }

    /// The same tensors (same views) on `device`.
    pub fn to(&self, device: &Device) -> Inputs {
        let inputs = Inputs {
            x: self.x.to(device).unwrap(),
            p: self.p.to(device).unwrap(),
            y: self.y.to(device).unwrap(),
        };
        assert_eq!(inputs.x.device(), *device);
        inputs
    }
}

/// Evaluates `$e` over the inputs on the CPU and on `$device` (binding `$x`, `$p`, `$y` to
/// each side's tensors), checks the device result stays there, and compares.
macro_rules! on_both {
    ($device:expr, $cpu:expr, $dev:expr, $name:expr, $tol:expr, |$x:ident, $p:ident, $y:ident| $e:expr) => {{
        let cpu = {
            #[allow(unused_variables)]
            let ($x, $p, $y) = (&$cpu.x, &$cpu.p, &$cpu.y);
            $e
        };
        let dev = {
            #[allow(unused_variables)]
            let ($x, $p, $y) = (&$dev.x, &$dev.p, &$dev.y);
            $e
        };
        assert_eq!(
            dev.device(),
            *$device,
            "{}: the result stays on the device",
            $name
        );
        agree($name, &cpu, &dev.to(&Device::Cpu).unwrap(), $tol);
    }};
}

pub fn every_elementwise_op(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        macro_rules! check {
            ($name:literal, |$x:ident, $p:ident, $y:ident| $e:expr) => {
                on_both!(device, cpu, dev, $name, 2e-6, |$x, $p, $y| $e
                    .eval()
                    .unwrap())
            };
        }
        check!("neg", |x, p, y| -x);
        check!("abs", |x, p, y| x.abs());
        check!("square", |x, p, y| x.square());
        check!("signum", |x, p, y| x.signum());
        check!("relu", |x, p, y| x.relu());
        check!("exp", |x, p, y| x.exp());
        check!("ln", |x, p, y| p.ln());
        check!("sqrt", |x, p, y| p.sqrt());
        check!("rsqrt", |x, p, y| p.rsqrt());
        check!("tanh", |x, p, y| x.tanh());
        check!("sigmoid", |x, p, y| x.sigmoid());
        check!("sin", |x, p, y| x.sin());
        check!("cos", |x, p, y| x.cos());
        check!("recip", |x, p, y| x.recip());
        check!("floor", |x, p, y| x.floor());
        check!("ceil", |x, p, y| x.ceil());
        check!("gelu", |x, p, y| x.gelu());
        check!("gelu_derivative", |x, p, y| x.gelu_derivative());
        check!("silu", |x, p, y| x.silu());
        check!("softplus", |x, p, y| x.softplus());
        check!("powi", |x, p, y| x.powi(3));
        check!("powf", |x, p, y| p.powf(1.5));
        check!("clamp", |x, p, y| x.clamp(-0.5, 0.75));
        // Binary ops with y broadcast along B, scalars on both sides.
        check!("add", |x, p, y| x + y);
        check!("sub", |x, p, y| x - y);
        check!("mul", |x, p, y| x * y);
        check!("div", |x, p, y| x / p);
        check!("max", |x, p, y| x.max(y));
        check!("min", |x, p, y| x.min(y));
        check!("pow", |x, p, y| p.pow(x));
        check!("scalars", |x, p, y| 2.0 * x - 1.5);
        check!("mul_add", |x, p, y| x.mul_add(y, p));
        check!("select", |x, p, y| select(x.less(y), x, p));
        check!("fused", |x, p, y| ((x * 2.0 + y).tanh() * p - x.exp())
            .abs());
        // Comparisons (bool results), casts, f64 and i32.
        let as_u8 = |t: Tensor<bool, (B, I)>| t.cast::<u8>().eval().unwrap();
        on_both!(device, cpu, dev, "less", 0.0, |x, p, y| as_u8(
            x.less(y).eval().unwrap()
        ));
        on_both!(device, cpu, dev, "greater_equal", 0.0, |x, p, y| as_u8(
            x.greater_equal(p).eval().unwrap()
        ));
        on_both!(device, cpu, dev, "equal", 0.0, |x, p, y| as_u8(
            x.equal(x).eval().unwrap()
        ));
        on_both!(device, cpu, dev, "f64 tanh·exp", 1e-13, |x, p, y| {
            let xd: Tensor<f64, (B, I)> = x.cast::<f64>().eval().unwrap();
            (xd.tanh() * xd.exp() + y.cast::<f64>()).eval().unwrap()
        });
        on_both!(device, cpu, dev, "i32 arithmetic", 0.0, |x, p, y| {
            let xi: Tensor<i32, (B, I)> = (x * 10.0).cast::<i32>().eval().unwrap();
            let yi: Tensor<i32, (I,)> = (y * 10.0).cast::<i32>().eval().unwrap();
            ((&xi * 3 - &yi).abs() + &xi / &yi).eval().unwrap()
        });
    }
}

pub fn reductions(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        let tol = 1e-5;
        macro_rules! check {
            ($name:literal, |$x:ident, $p:ident, $y:ident| $e:expr) => {
                on_both!(device, cpu, dev, $name, tol, |$x, $p, $y| $e.unwrap())
            };
        }
        check!("sum over B", |x, p, y| ((x * y + p).sin() + 1.5)
            .sum::<(B,)>());
        check!("sum over I", |x, p, y| ((x * y + p).sin() + 1.5)
            .sum::<(I,)>());
        check!("sum over all", |x, p, y| (x * p).sum::<(I, B)>());
        check!("max over B", |x, p, y| (x - y).max_over::<(B,)>());
        check!("min over I", |x, p, y| (x * p).min_over::<(I,)>());
        check!("prod over I", |x, p, y| (p * 0.1).exp().prod::<(I,)>());
        check!("mean over B", |x, p, y| x.mean::<(B,)>());
        check!("var over I", |x, p, y| x.var::<(I,)>());
        check!("std over B", |x, p, y| p.std::<(B,)>());
        check!("logsumexp over I", |x, p, y| x.logsumexp::<(I,)>());
        check!("softmax over I", |x, p, y| x.softmax::<I>());
        check!("log_softmax over B", |x, p, y| p.log_softmax::<B>());
        // Positions as f64, for `agree`.
        let position = |t: Tensor<i64, (B,)>| t.cast::<f64>().eval().unwrap();
        on_both!(device, cpu, dev, "argmax over I", 0.0, |x, p, y| position(
            argmax::<_, _, I>(x).unwrap()
        ));
        let position = |t: Tensor<i64, (I,)>| t.cast::<f64>().eval().unwrap();
        on_both!(device, cpu, dev, "argmin over B", 0.0, |x, p, y| position(
            argmin::<_, _, B>(p).unwrap()
        ));
        let total = |x: &Tensor<f32, (B, I)>| (x * x).sum_all().unwrap();
        let (c, d) = (total(&cpu.x), total(&dev.x));
        assert!(
            (c - d).abs() <= 1e-5 * (1.0 + c.abs()),
            "sum_all: {c} vs {d}"
        );
    }
}

pub fn assignments(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        on_both!(device, cpu, dev, "assign", 1e-6, |x, p, y| {
            // A destination in another axis order, written in place.
            let mut out =
                Tensor::<f64, (I, B)>::zeros((I.len(x.len_of::<I>()), B.len(x.len_of::<B>())))
                    .unwrap()
                    .to(&x.device())
                    .unwrap();
            out.assign(x * y + p).unwrap();
            out
        });
        on_both!(device, cpu, dev, "add_sum", 1e-5, |x, p, y| {
            let mut out = y.cast::<f32>().eval().unwrap();
            out.add_sum::<(B,), _>(x * p).unwrap();
            out.add_sum::<(B,), _>(x).unwrap();
            out
        });
        on_both!(
            device,
            cpu,
            dev,
            "assign_sum into its own buffer",
            1e-5,
            |x, p, y| {
                let mut out = y.cast::<f32>().eval().unwrap();
                out.assign_sum::<(B,), _>(x * p).unwrap();
                out
            }
        );
        on_both!(device, cpu, dev, "assign_sum and fill", 1e-5, |x, p, y| {
            let mut out = y.cast::<f32>().eval().unwrap();
            out.fill(3.0).unwrap();
            let filled = out.clone();
            out.assign_sum::<(B,), _>(p).unwrap();
            (&out + &filled).eval().unwrap()
        });
    }
    // `fill` for every element type, with values a job's `f64` constant cannot hold exactly
    // (a large i64) and `bool`, which go up as a buffer instead.
    fn filled<T: Element>(device: &Device, value: T) -> Vec<T> {
        let mut t = Tensor::<T, (B, I)>::zeros((B.len(3), I.len(5)))
            .unwrap()
            .to(device)
            .unwrap();
        t.fill(value).unwrap();
        assert_eq!(t.device(), *device);
        t.to(&Device::Cpu).unwrap().to_vec()
    }
    assert_eq!(filled(device, 2.5f32), vec![2.5; 15]);
    assert_eq!(filled(device, -7i32), vec![-7; 15]);
    assert_eq!(filled(device, (1i64 << 60) + 1), vec![(1i64 << 60) + 1; 15]);
    assert_eq!(filled(device, true), vec![true; 15]);
    assert_eq!(filled(device, 200u8), vec![200; 15]);
}

pub fn views(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        let nb = cpu.x.len_of::<B>();
        macro_rules! check {
            ($name:literal, |$x:ident, $p:ident, $y:ident| $e:expr) => {
                on_both!(device, cpu, dev, $name, 1e-6, |$x, $p, $y| $e)
            };
        }
        check!("slice with a step", |x, p, y| (x
            .slice::<B>(..nb.div_ceil(2), 2)
            .unwrap()
            * 2.0)
            .eval()
            .unwrap());
        check!("index", |x, p, y| x
            .index::<B>(B.at(nb - 1))
            .unwrap()
            .exp()
            .eval()
            .unwrap());
        check!("transposed order", |x, p, y| x
            .axes_with_order::<(I, B)>()
            .eval()
            .unwrap());
        check!("broadcast", |x, p, y| (y
            .broadcast::<(J, I)>(J.len(3))
            .unwrap()
            + 1.0)
            .eval()
            .unwrap());
        check!("cast_axes", |x, p, y| y
            .cast_axes::<(J,)>()
            .unwrap()
            .sin()
            .eval()
            .unwrap());
        check!("flatten", |x, p, y| x
            .flatten::<(B, I)>()
            .unwrap()
            .square()
            .eval()
            .unwrap());
        check!("contiguous", |x, p, y| p.contiguous().unwrap());
        check!("concat", |x, p, y| Tensor::concat::<B>(&[x, p, x]).unwrap());
        check!("rename", |x, p, y| x
            .rename::<B, J>()
            .unwrap()
            .exp()
            .eval()
            .unwrap());
        // along I, by ids that share B with the (reversed) source and add J
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ni = cpu.x.len_of::<I>() as i64;
        let ids =
            Tensor::<i64, (J, B)>::from_fn((J.len(3), B.len(nb)), |_| rng.random_range(0..ni))
                .unwrap();
        check!("gather", |x, p, y| p
            .gather::<I, _, _>(&ids.to(&x.device()).unwrap())
            .unwrap());
        check!("to_layout", |x, p, y| x.to_layout::<(I, B)>().unwrap());
        check!("transpose", |x, p, y| x.transpose().eval().unwrap());
    }
}

pub fn contractions(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        let ni = cpu.x.len_of::<I>();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let nj = rng.random_range(1..30);
        let w =
            Tensor::<f32, (I, J)>::from_fn((I.len(ni), J.len(nj)), |_| rng.random_range(-1.0..1.0))
                .unwrap();
        let (w_cpu, w_dev) = (w.clone(), w.to(device).unwrap());
        let pick = |x: &Tensor<f32, (B, I)>| {
            if x.device().is_host() {
                w_cpu.clone()
            } else {
                w_dev.clone()
            }
        };
        let tol = 1e-5;
        // x is a permuted view, p a reversed slice (packed first, on the device), w plain.
        on_both!(device, cpu, dev, "dot", tol, |x, p, y| dot(x, &pick(x))
            .unwrap());
        on_both!(device, cpu, dev, "dot reversed", tol, |x, p, y| dot(
            p,
            &pick(p)
        )
        .unwrap());
        on_both!(device, cpu, dev, "dot transposed weight", tol, |x, p, y| {
            dot(&pick(x).axes_with_order::<(J, I)>(), x).unwrap()
        });
        on_both!(device, cpu, dev, "dot over I", tol, |x, p, y| dot(x, y)
            .unwrap());
        // A batch axis (B) kept once: dot_over contracts I only.
        on_both!(device, cpu, dev, "dot_over batched", tol, |x, p, y| {
            let xj: Tensor<f32, (B, I, J)> =
                (x * pick(x).axes_with_order::<(J, I)>()).eval_in().unwrap();
            dot_over::<(I,), _, _, _>(&xj, p).unwrap()
        });
        // A square weight: x's I meets its Dual<I>.
        let sq =
            Tensor::<f64, (Dual<I>, I)>::from_fn((Dual::<I>::default().len(ni), I.len(ni)), |ix| {
                ((ix.of::<Dual<I>>() * 13 + ix.of::<I>()) % 17) as f64 / 9.0 - 0.9
            })
            .unwrap();
        let (sq_cpu, sq_dev) = (sq.clone(), sq.to(device).unwrap());
        on_both!(device, cpu, dev, "dot dual", 1e-12, |x, p, y| {
            let xd: Tensor<f64, (B, I)> = x.cast::<f64>().eval().unwrap();
            let sq = if x.device().is_host() {
                &sq_cpu
            } else {
                &sq_dev
            };
            dot(&xd, sq).unwrap()
        });
        // The one-call form on host tensors.
        agree(
            "dot_on",
            &dot(&cpu.x, &w).unwrap(),
            &dot_on(&cpu.x, &w, device).unwrap(),
            tol,
        );
        // Both sides 64 and longer (the register-blocked tile of devices without a BLAS),
        // the weight stored transposed.
        let (nb, nk, nj) = (
            rng.random_range(64..150),
            rng.random_range(1..40),
            rng.random_range(64..150),
        );
        let a =
            Tensor::<f32, (B, I)>::from_fn((B.len(nb), I.len(nk)), |_| rng.random_range(-1.0..1.0))
                .unwrap();
        let wt =
            Tensor::<f32, (J, I)>::from_fn((J.len(nj), I.len(nk)), |_| rng.random_range(-1.0..1.0))
                .unwrap();
        let on_device = dot(&a.to(device).unwrap(), &wt.to(device).unwrap()).unwrap();
        agree("dot 64 and longer", &dot(&a, &wt).unwrap(), &on_device, tol);
    }
}

/// Runs `steps` training steps of a digits-sized model (64-256-10, batch 128, Adam) on
/// `device` and returns each step's (buffers made, pool hits, pool misses) on it.
pub fn buffers_per_step(device: &Device, steps: usize) -> Vec<(u64, u64, u64)> {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::{Init, Linear, Params, ParamsBuilder};
    use axes::optim::Adam;
    let counters = || device.counters().expect("the device counts its memory");
    let mut builder = ParamsBuilder::new();
    let first = Linear::new(&mut builder, "first", I.len(64), J.len(256), Init::He).unwrap();
    let last = Linear::new(
        &mut builder,
        "last",
        J.len(256),
        Class.len(10),
        Init::Glorot,
    );
    let last = last.unwrap();
    let mut params: Params<f32> = builder.build::<f32>(1).unwrap().to(device).unwrap();
    let mut adam = Adam::new(1e-3);
    let x = Tensor::<f32, (B, I)>::random_normal((B.len(128), I.len(64)), 0.0, 1.0, 3).unwrap();
    let y = Tensor::<i64, (B,)>::from_fn(B.len(128), |i| (i.of::<B>() % 10) as i64).unwrap();
    let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
    (0..steps)
        .map(|_| {
            let before = counters();
            let tape = Tape::new();
            let p = params.bind(&tape);
            let h = first.forward(&p, &tape.constant(x.clone())).unwrap().relu();
            let logits = last.forward(&p, h).unwrap();
            let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)
                .unwrap()
                .mean::<(B,)>()
                .unwrap();
            let grad = p.gradient(&loss.backward().unwrap()).unwrap();
            adam.step(&mut params, &grad).unwrap();
            device.synchronize().unwrap();
            let after = counters();
            (
                after.buffers - before.buffers,
                after.pool_hits - before.pool_hits,
                after.pool_misses - before.pool_misses,
            )
        })
        .collect()
}

/// Writable views (`slice_mut`, `index_mut`) of tensors on the device: `fill`, `assign` and
/// `add_sum` into a slice (forwards and backwards) and into one position, the same as on
/// the CPU, and the result stays on the device.
pub fn writable_views(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        let (nb, ni) = (cpu.x.len_of::<B>(), cpu.x.len_of::<I>());
        let write = |x: &Tensor<f32, (B, I)>, y: &Tensor<f32, (I,)>| {
            let mut x = x.clone();
            x.slice_mut::<I>(ni / 2.., 1).unwrap().fill(-1.0).unwrap();
            let row = (y * 3.0).eval().unwrap();
            x.index_mut(B.at(nb - 1)).unwrap().assign(&row).unwrap();
            let back = x.slice::<B>(.., -1).unwrap().contiguous().unwrap();
            x.slice_mut::<B>(.., -1)
                .unwrap()
                .add_sum::<(J,), _>(&back.broadcast::<(J, B, I)>(J.len(2)).unwrap())
                .unwrap();
            x
        };
        let (on_cpu, on_device) = (write(&cpu.x, &cpu.y), write(&dev.x, &dev.y));
        assert_eq!(on_device.device(), *device);
        agree(
            "writes through views",
            &on_cpu,
            &on_device.to(&Device::Cpu).unwrap(),
            1e-6,
        );
        assert_eq!(
            dev.x.to(&Device::Cpu).unwrap(),
            cpu.x,
            "the copy is untouched"
        );
    }
}

/// A [`Swappable`](axes::memory::Swappable) on the device: views built once over it read
/// each buffer swapped in (on the device, as on the CPU), and a buffer from another device
/// is refused.
pub fn swapped_buffers(device: &Device) {
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let dev = cpu.to(device);
        let slot = axes::memory::Swappable::new(dev.x.contiguous().unwrap());
        let ni = cpu.x.len_of::<I>();
        let tail = slot.view(|x| x.slice::<I>(ni / 2.., -1)).unwrap();
        let reordered = slot.view(|x| Ok(x.axes_with_order::<(I, B)>())).unwrap();
        for round in 1..=3 {
            let next = (&cpu.x * round as f32).eval().unwrap();
            let previous = slot.swap(next.to(device).unwrap()).unwrap();
            assert_eq!(previous.device(), *device);
            let sum = (tail.get().sum::<(I,)>().unwrap(), reordered.get());
            assert_eq!(sum.0.device(), *device);
            let want = next
                .slice::<I>(ni / 2.., -1)
                .unwrap()
                .sum::<(I,)>()
                .unwrap();
            agree(
                "a view after a swap",
                &want,
                &sum.0.to(&Device::Cpu).unwrap(),
                1e-6,
            );
            assert_eq!(sum.1.to(&Device::Cpu).unwrap(), next, "round {round}");
        }
        if *device != Device::Cpu {
            let error = slot.swap(cpu.x.contiguous().unwrap()).unwrap_err();
            assert!(
                matches!(error, axes::Error::DeviceMismatch { .. }),
                "{error}"
            );
        }
    }
}

/// f16 and bf16 on a device with generated kernels (OpenCL, CUDA: stored as 16 bits,
/// computed in f32; the CPU backend rounds each operation to the half type, as the CPU
/// engine does) against the same
/// computation in f32 on the CPU from the same rounded inputs, rounded once at the end: an
/// element-wise expression, a cast, sums and maxima over each axis, and products, on random
/// shapes with a permuted view. Tolerance: one unit in the last place of the half type at
/// the result (2^-10 relative for f16, 2^-7 for bf16), relative to the sum of the magnitudes
/// for sums and products (f32 accumulation in another order).
pub fn halves(device: &Device) {
    halves_of::<half::f16>(device, 1.0 / 1024.0);
    halves_of::<half::bf16>(device, 1.0 / 128.0);
}

fn halves_of<H: axes::Float + Into<f64>>(device: &Device, ulp: f64) {
    // `t` rounded to H and back: the value a device result of type H holds.
    fn rounded<H: axes::Float, A: AxisSet>(t: &Tensor<f32, A>) -> Tensor<f32, A> {
        t.cast::<H>().eval().unwrap().cast::<f32>().eval().unwrap()
    }
    fn check<H: axes::Float + Into<f64>, A: AxisSet>(
        what: &str,
        device_result: Tensor<H, A>,
        reference: &Tensor<f32, A>,
        scale: &Tensor<f32, A>,
        ulp: f64,
    ) {
        let got = device_result.to(&Device::Cpu).unwrap();
        let (want, scale) = (rounded::<H, A>(reference).to_vec(), scale.to_vec());
        for (k, (g, (w, s))) in got
            .to_vec()
            .into_iter()
            .zip(want.iter().zip(&scale))
            .enumerate()
        {
            let g: f64 = g.into();
            let (w, s) = (*w as f64, *s as f64);
            let ok = g == w || (g - w).abs() <= ulp * s.max(w.abs()) + 1e-30;
            assert!(
                ok,
                "{} {what}: element {k}: device {g}, f32 reference {w}",
                H::DTYPE.name()
            );
        }
    }
    for seed in SEEDS {
        let cpu = Inputs::new(seed);
        let (x, y) = (rounded::<H, _>(&cpu.x), rounded::<H, _>(&cpu.y));
        let mut rng = ChaCha8Rng::seed_from_u64(200 + seed);
        let nj = rng.random_range(1..30);
        let ni = x.len_of::<I>();
        let w =
            Tensor::<f32, (I, J)>::from_fn((I.len(ni), J.len(nj)), |_| rng.random_range(-1.0..1.0))
                .unwrap();
        let w = rounded::<H, _>(&w);
        let on = |t: &Tensor<f32, (B, I)>| t.cast::<H>().eval().unwrap().to(device).unwrap();
        let (xh, wh) = (on(&x), w.cast::<H>().eval().unwrap().to(device).unwrap());
        let yh = y.cast::<H>().eval().unwrap().to(device).unwrap();
        assert_eq!(xh.device(), *device);
        let abs = |t: &Tensor<f32, (B, I)>| t.abs().eval().unwrap();

        let f = (&xh * &yh + xh.exp() - xh.tanh()).eval().unwrap();
        let reference = (&x * &y + x.exp() - x.tanh()).eval().unwrap();
        check::<H, _>(
            "x*y + exp(x) - tanh(x)",
            f,
            &reference,
            &reference.abs().eval().unwrap(),
            ulp,
        );
        let (xt, xht) = (
            x.axes_with_order::<(I, B)>(),
            xh.axes_with_order::<(I, B)>(),
        );
        let permuted = (&xht + &xht).eval().unwrap();
        let reference = (&xt + &xt).eval().unwrap();
        let scale = reference.abs().eval().unwrap();
        check::<H, _>(
            "x + x of a permuted view",
            permuted,
            &reference,
            &scale,
            ulp,
        );
        let as_f32: Tensor<f32, (B, I)> = xh.cast::<f32>().eval().unwrap();
        agree("cast to f32", &x, &as_f32.to(&Device::Cpu).unwrap(), 0.0);

        check::<H, _>(
            "sum over I",
            xh.sum::<(I,)>().unwrap(),
            &x.sum::<(I,)>().unwrap(),
            &abs(&x).sum::<(I,)>().unwrap(),
            ulp,
        );
        check::<H, _>(
            "sum over B",
            xh.sum::<(B,)>().unwrap(),
            &x.sum::<(B,)>().unwrap(),
            &abs(&x).sum::<(B,)>().unwrap(),
            ulp,
        );
        let max = xh.max_over::<(I,)>().unwrap();
        let reference = x.max_over::<(I,)>().unwrap();
        check::<H, _>(
            "max over I",
            max,
            &reference,
            &reference.abs().eval().unwrap(),
            0.0,
        );
        if seed == 0 {
            // Two results of 200,003 elements each: split into parts (kept in f32) and
            // combined, then rounded once.
            let lengths = (B.len(2), J.len(200_003));
            let long = rounded::<H, _>(
                &Tensor::<f32, (B, J)>::random_uniform(lengths, 0.0, 1.0, 5).unwrap(),
            );
            let on_device = long.cast::<H>().eval().unwrap().to(device).unwrap();
            let want = long.sum::<(J,)>().unwrap();
            let got = on_device.sum::<(J,)>().unwrap();
            check::<H, _>("sum of 200,003", got, &want, &want, ulp);
        }
        let product: Tensor<H, (B, J)> = dot(&xh, &wh).unwrap();
        let scale: Tensor<f32, (B, J)> = dot(&abs(&x), &w.abs().eval().unwrap()).unwrap();
        check::<H, _>("dot", product, &dot(&x, &w).unwrap(), &scale, ulp);
    }
}

/// Few results over many elements: the device splits each result's elements into parts and
/// combines the parts' partial results in a second reduction.
pub fn split_reductions(device: &Device) {
    let long = Tensor::<f64, (B, J)>::from_fn((B.len(3), J.len(200_003)), |ix| {
        ((ix.of::<J>() * 7 + ix.of::<B>()) % 1000) as f64 / 7.0 - 70.0
    })
    .unwrap();
    let on_device = long.to(device).unwrap();
    agree(
        "split sum",
        &long.sum::<(J,)>().unwrap(),
        &on_device.sum::<(J,)>().unwrap().to(&Device::Cpu).unwrap(),
        1e-12,
    );
    agree(
        "split max",
        &long.sin().max_over::<(J,)>().unwrap(),
        &on_device
            .sin()
            .max_over::<(J,)>()
            .unwrap()
            .to(&Device::Cpu)
            .unwrap(),
        1e-15,
    );
    agree(
        "split mean of all",
        &long.mean::<(B, J)>().unwrap(),
        &on_device
            .mean::<(J, B)>()
            .unwrap()
            .to(&Device::Cpu)
            .unwrap(),
        1e-12,
    );
    let position = |t: Tensor<i64, (B,)>| t.to_vec();
    assert_eq!(
        position(argmin::<_, _, J>(&long).unwrap()),
        position(argmin::<_, _, J>(&on_device).unwrap())
    );
}

/// Bad input on a device is an error that names the problem.
pub fn errors(device: &Device) {
    let cpu = Inputs::new(0);
    let dev = cpu.to(device);
    let err = (&dev.x + &cpu.y).eval().unwrap_err().to_string();
    assert_eq!(
        err,
        format!("operands on different devices: {device} and cpu; copy one with `.to(&device)`")
    );
    let err = dot(&cpu.x, &dev.p).unwrap_err().to_string();
    assert!(err.contains("different devices"), "{err}");
    let mut host_dest = cpu.x.clone();
    let err = host_dest.assign(&dev.x * 2.0).unwrap_err().to_string();
    assert!(err.contains("different devices"), "{err}");
    let err = (&dev.x).map(|v| v * 2.0).eval().unwrap_err().to_string();
    assert!(err.contains("closure"), "{err}");
    let short = Tensor::<f32, (I,)>::zeros(I.len(cpu.x.len_of::<I>() + 1))
        .unwrap()
        .to(device)
        .unwrap();
    let err = (&dev.x + &short).eval().unwrap_err().to_string();
    assert!(err.starts_with("axis `I` has length"), "{err}");
    // A result larger than any device holds (2^45 f32, 128 TiB) is an error, not an abort.
    let rows = Tensor::<f32, (B,)>::zeros(B.len(1 << 22)).unwrap();
    let cols = Tensor::<f32, (I,)>::zeros(I.len(1 << 23)).unwrap();
    let (rows, cols) = (rows.to(device).unwrap(), cols.to(device).unwrap());
    match (&rows + &cols).eval() {
        Err(e @ axes::Error::OutOfMemory { .. }) => println!("{device}: {e}"),
        other => panic!("expected OutOfMemory, got {:?}", other.map(|_| ())),
    }
    let mut on_device = dev.x.clone();
    let err = on_device
        .set((B.at(0), I.at(0)), 1.0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`set`") && err.contains("to(&Device::Cpu)"),
        "{err}"
    );
    // argmax: the first of equal maxima, the first NaN where there is one.
    let ties = Tensor::<f32, (B, I)>::from_vec(
        (B.len(3), I.len(4)),
        vec![
            1.,
            3.,
            3.,
            0.,
            f32::NAN,
            2.,
            f32::NAN,
            9.,
            -1.,
            -1.,
            -1.,
            -1.,
        ],
    )
    .unwrap();
    let on_device = argmax::<_, _, I>(&ties.to(device).unwrap()).unwrap();
    assert_eq!(on_device.device(), *device);
    assert_eq!(on_device.to_vec(), [1, 0, 0]);
    assert_eq!(argmax::<_, _, I>(&ties).unwrap().to_vec(), [1, 0, 0]);
    let ids = Tensor::<i64, (J,)>::from_vec(J.len(2), vec![0, 99]).unwrap();
    let err = (dev.x.gather::<I, _, _>(&ids.to(device).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("99") && err.contains("`I`"), "{err}");
    let padded = dev.x.pad::<I>(1, 2).unwrap();
    let err = padded.exp().eval().unwrap_err().to_string();
    assert!(
        err.contains("padded") && err.contains("contiguous"),
        "{err}"
    );
    let written = padded.contiguous().unwrap();
    assert_eq!(written.device(), *device);
    assert_eq!(
        written.to(&Device::Cpu).unwrap(),
        cpu.x.pad::<I>(1, 2).unwrap()
    );
    // f16 is computed on every device (see `halves` for the accuracy).
    let half = Tensor::<half::f16, (I,)>::from_vec(I.len(3), vec![half::f16::ONE; 3]).unwrap();
    let doubled = (&half + &half).eval_on(device).unwrap();
    assert_eq!(doubled.to_vec(), [half::f16::from_f32(2.0); 3]);
    // Integer division by zero is an error (as on the CPU), in an expression, a reduction and
    // an assignment; dividing by integers that are not zero is not, and floats give inf.
    let numbers = Tensor::<i32, (B, I)>::from_fn((B.len(3), I.len(4)), |ix| {
        ix.of::<B>() as i32 * 10 - ix.of::<I>() as i32
    })
    .unwrap();
    let divisors = |values: Vec<i32>| {
        Tensor::<i32, (I,)>::from_vec(I.len(4), values)
            .unwrap()
            .to(device)
            .unwrap()
    };
    let (numbers_on, nonzero, with_zero) = (
        numbers.to(device).unwrap(),
        divisors(vec![1, -2, 3, 4]),
        divisors(vec![1, -2, 0, 4]),
    );
    let quotient = (&numbers_on / &nonzero).eval().unwrap();
    assert_eq!(quotient.device(), *device);
    assert_eq!(
        quotient.to(&Device::Cpu).unwrap(),
        (&numbers / &nonzero.to(&Device::Cpu).unwrap())
            .eval()
            .unwrap()
    );
    let by_zero = |result: axes::Result<()>| {
        assert!(
            matches!(result, Err(axes::Error::DivisionByZero)),
            "{result:?}"
        );
    };
    by_zero((&numbers_on / &with_zero).eval().map(drop));
    by_zero(((&numbers_on + 1) / &with_zero * 2).sum::<(I,)>().map(drop));
    by_zero((&numbers_on / 0).cast::<f32>().eval().map(drop));
    let mut target = numbers_on.clone();
    by_zero(target.assign(&numbers_on / &with_zero));
    let floats = (numbers_on.cast::<f32>().eval().unwrap() / 0.0)
        .eval()
        .unwrap();
    assert_eq!(floats.to_vec()[1], f32::NEG_INFINITY);
    // Copies: to the device and back is the identity; to the same device shares storage.
    assert_eq!(dev.p.to(&Device::Cpu).unwrap(), cpu.p);
    assert!(dev.p.to(device).unwrap().shares_storage_with(&dev.p));
}

/// A small model's loss and gradients on `device` agree with the CPU: a contraction, a
/// broadcast bias, tanh, softmax cross-entropy averaged over B, a per-example score
/// (`dot_over` contracting J and keeping B as a batch axis), the maximum and the
/// log-softmax along J, views (J reversed, strided, padded, reordered, B renamed, indexed,
/// broadcast, flattened, joined), J gathered by ids
/// (rows picked more than once among them), a masked fill and dropout, and penalties that use
/// the input and the weight a second time (their gradients accumulate), over permuted and
/// reversed inputs. Returns how many seeds ran.
pub fn gradients(device: &Device) -> usize {
    use axes::autodiff::{self, Tape, Var, softmax_cross_entropy};
    use axes::nn::{Dropout, Mode};
    for seed in SEEDS {
        let inputs = Inputs::new(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        let (nb, ni, nj) = (
            inputs.x.len_of::<B>(),
            inputs.x.len_of::<I>(),
            rng.random_range(1..12),
        );
        let w =
            Tensor::<f32, (J, I)>::from_fn((J.len(nj), I.len(ni)), |_| rng.random_range(-1.0..1.0))
                .unwrap()
                .axes_with_order::<(I, J)>();
        let bias =
            Tensor::<f32, (J,)>::from_fn(J.len(nj), |_| rng.random_range(-1.0..1.0)).unwrap();
        let labels =
            Tensor::<i64, (B,)>::from_fn(B.len(nb), |_| rng.random_range(0..nj as i64)).unwrap();
        let hidden =
            Tensor::<bool, (J, B)>::from_fn((J.len(nj), B.len(nb)), |_| rng.random_bool(0.3))
                .unwrap();
        let picks =
            Tensor::<i32, (I,)>::from_fn(I.len(ni), |_| rng.random_range(0..nj as i32)).unwrap();
        let keys =
            Tensor::<f32, (J, B)>::from_fn((J.len(nj), B.len(nb)), |_| rng.random_range(-1.0..1.0))
                .unwrap();
        let run = |on: &Device| {
            let tape = Tape::<f32>::new();
            let x = tape.var(inputs.x.to(on).unwrap());
            let w = tape.var(w.to(on).unwrap());
            let bias = tape.var(bias.to(on).unwrap());
            let keys = tape.var(keys.to(on).unwrap());
            let labels = labels.to(on).unwrap();
            let h = ((autodiff::dot(&x, &w).unwrap() + &bias).tanh() * 2.0)
                .eval()
                .unwrap();
            let ce = softmax_cross_entropy::<J, _, _, _, _>(&h, &labels).unwrap();
            // a score per example: J contracted, B kept as a batch axis
            let scores = autodiff::dot_over::<(J,), _, _, _, _, _>(&h, &keys).unwrap();
            // the largest logit, and the mean log-probability, of each example
            let peak = h.max_over::<(J,)>().unwrap();
            let log_p = h.log_softmax::<J>().unwrap();
            // views of a variable: J reversed, padded, reordered
            let edge = h.slice::<J>(.., -1).unwrap().pad::<J>(1, 2).unwrap();
            let edge = edge.axes_with_order::<(J, B)>();
            // B renamed I; J gathered by ids that add the axis I
            let renamed = h.rename::<B, I>().unwrap();
            let picked = h.gather::<J, _, _>(&picks.to(on).unwrap()).unwrap();
            // more views: every other J, one example, a new axis, J and B merged, a join
            let strided = h.slice::<J>(.., 2).unwrap();
            let first = h.index::<B>(B.at(0)).unwrap();
            let wide = h.broadcast::<(B, J, I)>(I.len(2)).unwrap();
            let flat = h.flatten::<(J, B)>().unwrap();
            let joined = Var::concat::<J>(&[&h, &strided]).unwrap();
            // J masked per example, then dropout (its mask drawn on the host from the seed)
            let filled = (h.expr().masked_fill(&hidden.to(on).unwrap(), -0.5))
                .unwrap()
                .eval()
                .unwrap();
            let dropped = (Dropout::new(0.3, seed).unwrap())
                .forward(&filled, Mode::Train)
                .unwrap();
            let penalty = (&w * &w).sum::<(I, J)>().unwrap() * 0.01
                + (&x * &x).mean::<(B, I)>().unwrap()
                + (&scores * &scores).mean::<(B,)>().unwrap() * 0.1
                + peak.mean::<(B,)>().unwrap() * 0.1
                - log_p.mean::<(B, J)>().unwrap() * 0.1
                + (&edge * &edge).mean::<(J, B)>().unwrap() * 0.1
                + renamed.exp().mean::<(J, I)>().unwrap() * 0.1
                + (&picked * &picked).mean::<(B, I)>().unwrap() * 0.1
                + dropped.tanh().mean::<(B, J)>().unwrap() * 0.1
                + strided.sin().mean::<(B, J)>().unwrap() * 0.1
                + first.exp().mean::<(J,)>().unwrap() * 0.1
                + wide.sin().mean::<(B, J, I)>().unwrap() * 0.1
                + flat.exp().mean::<(Flat<(J, B)>,)>().unwrap() * 0.1
                + joined.cos().mean::<(B, J)>().unwrap() * 0.1;
            let loss = (ce.mean::<(B,)>().unwrap() + penalty).eval().unwrap();
            let grads = loss.backward().unwrap();
            let cpu = Device::Cpu;
            (
                loss.value().to(&cpu).unwrap(),
                grads.get(&x).unwrap().to(&cpu).unwrap(),
                grads.get(&w).unwrap().to(&cpu).unwrap(),
                grads.get(&bias).unwrap().to(&cpu).unwrap(),
                grads.get(&keys).unwrap().to(&cpu).unwrap(),
            )
        };
        let (here, there) = (run(&Device::Cpu), run(device));
        assert_eq!(there.1.device(), Device::Cpu);
        agree("loss", &here.0, &there.0, 1e-4);
        agree("d x", &here.1, &there.1, 1e-4);
        agree("d w", &here.2, &there.2, 1e-4);
        agree("d bias", &here.3, &there.3, 1e-4);
        agree("d keys", &here.4, &there.4, 1e-4);
    }
    SEEDS.count()
}

/// A small model trained for a few steps on `device` agrees with the same steps on the CPU:
/// two layers, softmax cross-entropy, the gradient gathered into the arena's layout and
/// clipped by its global norm, and Adam (with weight decay) or SGD (with momentum) updating
/// every parameter in one job; the arena compared after every step. Returns how many steps
/// ran.
pub fn training_steps(device: &Device) -> usize {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::{Init, Linear, Params, ParamsBuilder};
    use axes::optim::{Adam, Sgd, clip_grad_norm};
    let mut builder = ParamsBuilder::new();
    let hidden = Linear::<I, J>::new(&mut builder, "h", I.len(5), J.len(7), Init::He).unwrap();
    let out = Linear::<J, I>::new(&mut builder, "o", J.len(7), I.len(5), Init::Glorot).unwrap();
    let start = builder.build::<f32>(3).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let x = Tensor::<f32, (B, I)>::from_fn((B.len(6), I.len(5)), |_| rng.random_range(-1.0..1.0))
        .unwrap();
    let labels = Tensor::<i64, (B,)>::from_fn(B.len(6), |_| rng.random_range(0..5)).unwrap();
    let step = |params: &Params<f32>, on: &Device| {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let x = tape.constant(x.to(on).unwrap());
        let h = hidden.forward(&p, &x).unwrap().tanh();
        let logits = out.forward(&p, h).unwrap();
        let labels = labels.to(on).unwrap();
        let loss = softmax_cross_entropy::<I, _, _, _, _>(logits, &labels)
            .unwrap()
            .mean::<(B,)>()
            .unwrap();
        p.gradient(&loss.backward().unwrap()).unwrap()
    };
    let compare = |what: &str, here: &[f32], there: &[f32]| {
        assert_eq!(here.len(), there.len());
        for (k, (a, b)) in here.iter().zip(there).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + a.abs()),
                "{what} element {k}: {a} on the CPU, {b} on {device}"
            );
        }
    };
    let mut steps = 0;
    for adam in [true, false] {
        let (mut here, mut there) = (start.to(&Device::Cpu).unwrap(), start.to(device).unwrap());
        assert_eq!(there.device(), *device);
        let (mut adam_here, mut adam_there) = (Adam::new(0.05), Adam::new(0.05));
        let (mut sgd_here, mut sgd_there) = (Sgd::new(0.1, 0.9), Sgd::new(0.1, 0.9));
        if adam {
            adam_here = adam_here.with_weight_decay(0.01);
            adam_there = adam_there.with_weight_decay(0.01);
        }
        for _ in 0..3 {
            let (g_here, g_there) = (step(&here, &Device::Cpu), step(&there, device));
            assert_eq!(g_there.device(), *device);
            compare(
                "gradient",
                &g_here.to_vec().unwrap(),
                &g_there.to_vec().unwrap(),
            );
            // clipped to a global norm below the gradients' (so it scales them)
            let (g_here, norm_here) = clip_grad_norm(&here, g_here, 0.05).unwrap();
            let (g_there, norm_there) = clip_grad_norm(&there, g_there, 0.05).unwrap();
            let (norm_here, norm_there) = (norm_here.to_vec()[0], norm_there.to_vec()[0]);
            assert!(norm_here > 0.05 && (norm_here - norm_there).abs() < 1e-4 * norm_here);
            assert_eq!(g_there.device(), *device);
            compare(
                "clipped gradient",
                &g_here.to_vec().unwrap(),
                &g_there.to_vec().unwrap(),
            );
            // A step on a device writes the parameters over themselves: the buffer stays.
            let buffer = |params: &Params<f32>| {
                let memory = params.arena().storage().device_memory();
                memory.map(|m| m as *const axes::protocol::DeviceMemory)
            };
            let before = buffer(&there);
            if adam {
                adam_here.step(&mut here, &g_here).unwrap();
                adam_there.step(&mut there, &g_there).unwrap();
            } else {
                sgd_here.step(&mut here, &g_here).unwrap();
                sgd_there.step(&mut there, &g_there).unwrap();
            }
            assert!(before.is_some() && buffer(&there) == before);
            assert_eq!(there.device(), *device);
            let values = there.to(&Device::Cpu).unwrap();
            compare("parameters", here.arena().flat(), values.arena().flat());
            steps += 1;
        }
    }
    steps
}

/// Token ids of a batch of sequences.
pub type Ids = Tensor<i64, (Batch, Token)>;

/// A 2-layer GPT of 7 symbols, context 6, 8 wide (2 heads of 4), for the shared tests.
pub fn tiny_gpt() -> axes::nn::transformer::GptConfig {
    axes::nn::transformer::GptConfig {
        vocab: 7,
        context: 6,
        hidden: 8,
        heads: 2,
        head_dim: 4,
        inner: 16,
        layers: 2,
    }
}

/// A batch of sequences `s SEP s` of random strings `s` of `half` symbols out of 4 (`SEP` is
/// 4), as ids (the first `2 half` tokens) and targets (the token after each).
pub fn copy_batch(rng: &mut ChaCha8Rng, batch: usize, half: usize) -> (Ids, Ids) {
    let separator = 4;
    let (mut ids, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..batch {
        let s: Vec<i64> = (0..half).map(|_| rng.random_range(0..4)).collect();
        let sequence: Vec<i64> = (s.iter().copied())
            .chain([separator])
            .chain(s.iter().copied())
            .collect();
        ids.extend_from_slice(&sequence[..2 * half]);
        targets.extend_from_slice(&sequence[1..]);
    }
    let lens = (Batch.len(batch), Token.len(2 * half));
    (
        Tensor::from_vec(lens, ids).unwrap(),
        Tensor::from_vec(lens, targets).unwrap(),
    )
}

/// A 2-layer GPT trained on `device` to copy: on the second half of `s SEP s`, each target is
/// the symbol `half + 1` positions back, which a bigram model cannot predict (its loss there
/// stays at ln 4 = 1.39 nats, uniform over the 4 symbols), so the loss there falling below
/// half its initial value (ln 5 = 1.61, uniform over the vocabulary) shows the attention at
/// work. Returns the losses, one per step, until the mean of the last 5 is below half the
/// first (or 150 steps).
pub fn learns_to_copy(device: &Device) -> Vec<f32> {
    use axes::autodiff::{Tape, softmax_cross_entropy};
    use axes::nn::ParamsBuilder;
    use axes::nn::transformer::{Gpt, GptConfig, Vocab};
    use axes::optim::Adam;
    let half = 6;
    let config = GptConfig {
        vocab: 5,
        context: 2 * half,
        hidden: 32,
        heads: 2,
        head_dim: 16,
        inner: 64,
        layers: 2,
    };
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &config).unwrap();
    let mut params = builder.build::<f32>(7).unwrap().to(device).unwrap();
    let mut adam = Adam::new(3e-3);
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut losses: Vec<f32> = Vec::new();
    while losses.len() < 150 {
        let (ids, targets) = copy_batch(&mut rng, 16, half);
        let (ids, targets) = (ids.to(device).unwrap(), targets.to(device).unwrap());
        let tape = Tape::new();
        let p = params.bind(&tape);
        let logits = model.forward(&p, &ids).unwrap();
        assert_eq!(logits.value().device(), *device);
        let per_token = softmax_cross_entropy::<Vocab, _, _, _, _>(&logits, &targets).unwrap();
        let copied = (per_token.slice::<Token>(half.., 1).unwrap())
            .mean::<(Batch, Token)>()
            .unwrap();
        losses.push(copied.value().to(&Device::Cpu).unwrap().to_vec()[0]);
        let grads = p.gradient(&copied.backward().unwrap()).unwrap();
        adam.step(&mut params, &grads).unwrap();
        let recent = &losses[losses.len().saturating_sub(5)..];
        if recent.len() == 5 && recent.iter().sum::<f32>() / 5.0 < losses[0] / 2.0 {
            break;
        }
    }
    let recent = &losses[losses.len() - 5..];
    assert!(
        (losses[0] - 5f32.ln()).abs() < 0.1 && recent.iter().sum::<f32>() / 5.0 < losses[0] / 2.0,
        "the copy loss went from {} to {recent:?} in {} steps",
        losses[0],
        losses.len()
    );
    losses
}

/// A small GPT's logits and the gradient of its loss over every parameter (embeddings, fused
/// layer norms, attention, MLPs) on `device` agree with the CPU, and its tape-free logits
/// with its taped ones.
pub fn transformer(device: &Device) {
    use axes::autodiff::Tape;
    use axes::nn::ParamsBuilder;
    use axes::nn::transformer::Gpt;
    let mut builder = ParamsBuilder::new();
    let model = Gpt::new(&mut builder, "gpt", &tiny_gpt()).unwrap();
    let params = builder.build::<f32>(4).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (ids, targets) = copy_batch(&mut rng, 3, 3);
    let run = |on: &Device| {
        let params = params.to(on).unwrap();
        let (ids, targets) = (ids.to(on).unwrap(), targets.to(on).unwrap());
        let tape = Tape::new();
        let p = params.bind(&tape);
        let logits = model.forward(&p, &ids).unwrap();
        let inferred = model.infer(&params, &ids).unwrap();
        agree(
            "tape-free logits",
            &logits.value().to(&Device::Cpu).unwrap(),
            &inferred.to(&Device::Cpu).unwrap(),
            1e-5,
        );
        let loss = model.loss(&p, &ids, &targets).unwrap();
        let grads = p.gradient(&loss.backward().unwrap()).unwrap();
        assert_eq!(grads.device(), *on);
        (
            logits.value().to(&Device::Cpu).unwrap(),
            grads.to_vec().unwrap(),
        )
    };
    let (here, there) = (run(&Device::Cpu), run(device));
    agree("logits", &here.0, &there.0, 1e-4);
    assert_eq!(here.1.len(), there.1.len());
    for (k, (a, b)) in here.1.iter().zip(&there.1).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * (1.0 + a.abs()),
            "gradient element {k}: {a} on the CPU, {b} on {device}"
        );
    }
}

/// The gradient of a loss built from the transformer's new operations — a fused layer norm,
/// gather, a strided slice, concat, rename, a masked fill, dropout, flatten, index, broadcast,
/// log-softmax — computed on `device` in f64, against central finite differences computed on
/// `device` too, over a permuted input. Returns the relative error (below 1e-6).
pub fn finite_differences(device: &Device) -> f64 {
    use axes::autodiff::{Tape, Var};
    use axes::nn::{Dropout, LayerNorm, Mode, ParamsBuilder};
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let (nb, ni) = (3, 4);
    let x = Tensor::<f64, (I, B)>::from_fn((I.len(ni), B.len(nb)), |_| rng.random_range(-1.0..1.0))
        .unwrap()
        .axes_with_order::<(B, I)>();
    let ids = Tensor::<i64, (J,)>::from_fn(J.len(5), |_| rng.random_range(0..ni as i64)).unwrap();
    let mask = Tensor::<bool, (I,)>::from_fn(I.len(ni), |_| rng.random_bool(0.5)).unwrap();
    let mut builder = ParamsBuilder::new();
    let norm = LayerNorm::new(&mut builder, "norm", I.len(ni), 1e-5).unwrap();
    let mut params = builder.build::<f64>(1).unwrap();
    let gain = Tensor::<f64, (I,)>::from_fn(I.len(ni), |_| rng.random_range(0.5..1.5)).unwrap();
    params.arena_mut().set(&norm.gain, &gain).unwrap();
    let params = params.to(device).unwrap();
    let (ids, mask) = (ids.to(device).unwrap(), mask.to(device).unwrap());
    let loss = |x: &Var<f64, (B, I)>| -> axes::Result<Var<f64, ()>> {
        let p = params.bind(x.tape());
        let h = norm.forward(&p, x)?;
        let picked = h.gather::<I, _, _>(&ids)?;
        let strided = picked.slice::<J>(.., 2)?;
        let joined = Var::concat::<J>(&[&picked, &strided])?.rename::<B, I>()?;
        let filled = x.expr().masked_fill(&mask, 0.3)?.eval()?;
        let dropped = Dropout::new(0.25, 3)?
            .forward(&filled, Mode::Train)?
            .eval()?;
        let flat = dropped.flatten::<(I, B)>()?;
        let row = dropped.index::<B>(B.at(1))?.broadcast::<(I, J)>(J.len(2))?;
        let log_p = h.log_softmax::<I>()?;
        (joined.sin().sum::<(J, I)>()?
            + flat.exp().mean::<(Flat<(I, B)>,)>()?
            + row.tanh().sum::<(I, J)>()?
            + log_p.mean::<(B, I)>()?)
        .eval()
    };
    let on = |values: Vec<f64>| {
        let x = Tensor::<f64, (B, I)>::from_vec((B.len(nb), I.len(ni)), values).unwrap();
        x.to(device).unwrap()
    };
    let tape = Tape::new();
    let var = tape.var(on(x.to_vec()));
    let analytic = (loss(&var).unwrap().backward().unwrap().get(&var).unwrap())
        .to(&Device::Cpu)
        .unwrap()
        .to_vec();
    let base = x.to_vec();
    let at = |values: Vec<f64>| {
        let value = loss(&Tape::new().var(on(values))).unwrap();
        value.value().to(&Device::Cpu).unwrap().to_vec()[0]
    };
    let step = 1e-6;
    let numeric: Vec<f64> = (0..base.len())
        .map(|i| {
            let (mut up, mut down) = (base.clone(), base.clone());
            up[i] += step;
            down[i] -= step;
            (at(up) - at(down)) / (2.0 * step)
        })
        .collect();
    let diff: f64 = (analytic.iter().zip(&numeric))
        .map(|(a, n)| (a - n).powi(2))
        .sum();
    let error = diff.sqrt() / numeric.iter().map(|n| n * n).sum::<f64>().sqrt();
    assert!(
        error < 1e-6,
        "relative error {error:e} on {device}\nanalytic {analytic:?}\nnumeric  {numeric:?}"
    );
    error
}
