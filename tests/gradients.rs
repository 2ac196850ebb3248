//! Gradient checks: every differentiable operation's gradient against central finite
//! differences in f64, on random inputs with random lengths, including permuted and strided
//! views, broadcasts, reductions, contractions (dual pairs too), the softmax cross-entropy
//! and fused expressions. The error is the relative 2-norm ‖analytic − numeric‖ / ‖numeric‖.

use axes::autodiff::{Tape, Var, VarExpr, dot, dot_over, softmax_cross_entropy};
use axes::prelude::*;
use axes::{Layout, Storage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct I;
#[derive(Axis)]
struct O;
#[derive(Axis)]
struct C;
#[derive(Axis)]
struct H;

const STEP: f64 = 1e-6;
const TOLERANCE: f64 = 1e-6;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn len(rng: &mut ChaCha8Rng) -> usize {
    rng.random_range(1..=5)
}

/// A random tensor with values in `low..high`, kept at least 0.1 away from 0 (where relu,
/// abs and max have kinks and recip/div blow up).
fn random<A: AxisSet>(lens: &[usize], low: f64, high: f64, rng: &mut ChaCha8Rng) -> Tensor<f64, A> {
    let data = (0..lens.iter().product())
        .map(|_| {
            let v: f64 = rng.random_range(low..high);
            if v.abs() < 0.1 { v + 0.3 } else { v }
        })
        .collect();
    Tensor::from_parts(Storage::new(data), Layout::row_major(lens)).unwrap()
}

fn with_values<A: AxisSet>(lens: &[usize], values: Vec<f64>) -> Tensor<f64, A> {
    Tensor::from_parts(Storage::new(values), Layout::row_major(lens)).unwrap()
}

fn relative_error(analytic: &[f64], numeric: &[f64]) -> f64 {
    let diff: f64 = analytic
        .iter()
        .zip(numeric)
        .map(|(a, n)| (a - n).powi(2))
        .sum();
    let norm: f64 = numeric.iter().map(|n| n * n).sum();
    diff.sqrt() / norm.sqrt().max(1e-12)
}

/// Checks the gradient of `f` with respect to its argument at `x` (any layout).
fn check<A: AxisSet>(
    name: &str,
    x: &Tensor<f64, A>,
    f: impl Fn(&Var<f64, A>) -> axes::Result<Var<f64, ()>>,
) {
    let tape = Tape::new();
    let var = tape.var(x.clone());
    let loss = f(&var).unwrap();
    let analytic = loss.backward().unwrap().get(&var).unwrap();
    assert_eq!(analytic.lens(), x.lens(), "{name}: gradient lengths");
    let analytic = analytic.to_vec();
    let base = x.to_vec();
    let at = |values: Vec<f64>| {
        let tape = Tape::new();
        f(&tape.var(with_values::<A>(x.lens(), values)))
            .unwrap()
            .value()
            .to_vec()[0]
    };
    let numeric: Vec<f64> = (0..base.len())
        .map(|i| {
            let (mut up, mut down) = (base.clone(), base.clone());
            up[i] += STEP;
            down[i] -= STEP;
            (at(up) - at(down)) / (2.0 * STEP)
        })
        .collect();
    let error = relative_error(&analytic, &numeric);
    assert!(
        error < TOLERANCE,
        "{name}: relative error {error:e}\nanalytic {analytic:?}\nnumeric  {numeric:?}"
    );
    println!("{name}: relative error {error:.1e}");
}

/// Σ out · r for a fixed random `r`, so that every output element matters differently.
fn project<A>(out: VarExpr<f64, A>, r: &Tensor<f64, A>) -> axes::Result<Var<f64, ()>>
where
    A: axes::expr::Reducible<A> + axes::list::DifferenceWith<A, Output = ()>,
{
    let r = out.tape().constant(r.clone());
    (out * &r).sum::<A>()
}

#[test]
fn unary_ops_on_permuted_inputs() {
    let mut rng = rng(1);
    for round in 0..3 {
        let (nb, ni) = (len(&mut rng), len(&mut rng));
        let signed = random::<(B, I)>(&[nb, ni], -2.0, 2.0, &mut rng);
        let positive = random::<(B, I)>(&[nb, ni], 0.3, 2.0, &mut rng);
        let r = random::<(I, B)>(&[ni, nb], -1.0, 1.0, &mut rng);
        type Op = fn(VarExpr<f64, (I, B)>) -> VarExpr<f64, (I, B)>;
        let ops: [(&str, Op, bool); 19] = [
            ("relu", |x| x.relu(), false),
            ("gelu", |x| x.gelu(), false),
            ("gelu_derivative", |x| x.gelu_derivative(), false),
            ("silu", |x| x.silu(), false),
            ("softplus", |x| x.softplus(), false),
            ("exp", |x| x.exp(), false),
            ("ln", |x| x.ln(), true),
            ("sqrt", |x| x.sqrt(), true),
            ("rsqrt", |x| x.rsqrt(), true),
            ("tanh", |x| x.tanh(), false),
            ("sigmoid", |x| x.sigmoid(), false),
            ("square", |x| x.square(), false),
            ("abs", |x| x.abs(), false),
            ("sin", |x| x.sin(), false),
            ("cos", |x| x.cos(), false),
            ("recip", |x| x.recip(), false),
            ("neg", |x| -x, false),
            ("powf", |x| x.powf(3.0), true),
            ("scalars", |x| 2.0 * x - 1.0, false),
        ];
        for (name, op, needs_positive) in ops {
            let x = if needs_positive { &positive } else { &signed };
            // The variable is a permuted view; the result is in (I, B).
            let view: Tensor<f64, (I, B)> = x.axes_with_order();
            check(&format!("{name} #{round}"), &view, |v| {
                project(op(v.expr()), &r)
            });
        }
    }
}

#[test]
fn binary_ops_broadcast_and_sum_back() {
    let mut rng = rng(2);
    for round in 0..3 {
        let (nb, ni, nc) = (len(&mut rng), len(&mut rng), len(&mut rng));
        let x = random::<(B, I)>(&[nb, ni], 0.3, 2.0, &mut rng);
        let y = random::<(I, C)>(&[ni, nc], 0.3, 2.0, &mut rng);
        let r = random::<(B, I, C)>(&[nb, ni, nc], -1.0, 1.0, &mut rng);
        type Op = fn(VarExpr<f64, (B, I)>, VarExpr<f64, (I, C)>) -> VarExpr<f64, (B, I, C)>;
        // `%` is differentiable away from its jumps (where x/y is an integer): random operands
        // sit a finite-difference step away from one with probability ~1e-5.
        let ops: [(&str, Op); 8] = [
            ("add", |x, y| x + y),
            ("sub", |x, y| x - y),
            ("mul", |x, y| x * y),
            ("div", |x, y| x / y),
            ("max", |x, y| x.max(y)),
            ("min", |x, y| x.min(y)),
            ("pow", |x, y| x.pow(y)),
            ("rem", |x, y| x % y),
        ];
        for (name, op) in ops {
            // Gradient of x (y broadcast along B), then of y (summed over B), with the other
            // operand also a variable so both gradients are written in the same pass.
            check(&format!("{name} d/dx #{round}"), &x, |v| {
                let w = v.tape().var(y.clone());
                project(op(v.expr(), w.expr()), &r)
            });
            check(&format!("{name} d/dy #{round}"), &y, |w| {
                let v = w.tape().var(x.clone());
                project(op(v.expr(), w.expr()), &r)
            });
        }
    }
}

#[test]
fn reductions_fused_and_their_backward_broadcasts() {
    let mut rng = rng(3);
    for round in 0..3 {
        let (nb, ni, nc) = (len(&mut rng), len(&mut rng), len(&mut rng));
        let x = random::<(B, I, C)>(&[nb, ni, nc], -2.0, 2.0, &mut rng);
        let y = random::<(B, I, C)>(&[nb, ni, nc], -2.0, 2.0, &mut rng);
        let r_ic = random::<(I, C)>(&[ni, nc], -1.0, 1.0, &mut rng);
        let r_b = random::<(B,)>(&[nb], -1.0, 1.0, &mut rng);
        check(&format!("sum over B #{round}"), &x, |v| {
            project(v.sum::<(B,)>()?.expr(), &r_ic)
        });
        check(&format!("mean over I, C #{round}"), &x, |v| {
            project(v.mean::<(C, I)>()?.expr(), &r_b)
        });
        check(&format!("sum of all #{round}"), &x, |v| {
            v.sum::<(B, I, C)>()
        });
        // The seed's L2 example, fused: Σ (x - y)², one pass forward and one backward.
        check(&format!("sum((x - y)^2) #{round}"), &x, |v| {
            let w = v.tape().constant(y.clone());
            (v - &w).square().sum::<(B, I, C)>()
        });
        // A reduction feeding another fused expression.
        check(&format!("tanh(sum) #{round}"), &x, |v| {
            project(v.expr().sin().sum::<(B,)>()?.tanh(), &r_ic)
        });
    }
}

#[test]
fn dot_gradients_on_the_right_axes() {
    let mut rng = rng(4);
    for round in 0..3 {
        let (nb, ni, no, nc) = (len(&mut rng), len(&mut rng), len(&mut rng), len(&mut rng));
        let x = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        let w = random::<(I, O)>(&[ni, no], -1.0, 1.0, &mut rng);
        let r = random::<(B, O)>(&[nb, no], -1.0, 1.0, &mut rng);
        check(&format!("dot d/dx #{round}"), &x, |v| {
            let w = v.tape().var(w.clone());
            project(dot(v, &w)?.expr(), &r)
        });
        // The weight as a transposed view (O, I): same axes, other strides.
        let wt: Tensor<f64, (O, I)> = w.axes_with_order();
        check(&format!("dot d/dw (permuted) #{round}"), &wt, |wv| {
            let v = wv.tape().var(x.clone());
            project(dot(&v, wv)?.expr(), &r)
        });
        // Two contracted axes and a strided (sliced) operand.
        let x3 = random::<(B, I, C)>(&[nb, 2 * ni, nc], -1.0, 1.0, &mut rng);
        let x3 = x3.slice::<I>(.., 2).unwrap();
        let w3 = random::<(C, I, O)>(&[nc, ni, no], -1.0, 1.0, &mut rng);
        check(
            &format!("dot over I, C d/dx (strided) #{round}"),
            &x3,
            |v| {
                let w = v.tape().var(w3.clone());
                project(dot(v, &w)?.expr(), &r)
            },
        );
        check(&format!("dot over I, C d/dw #{round}"), &w3, |wv| {
            let v = wv.tape().var(x3.clone());
            project(dot(&v, wv)?.expr(), &r)
        });
        // A square weight (Dual<H>, H): x's H meets the weight's Dual<H>.
        let nh = len(&mut rng);
        let xh = random::<(B, H)>(&[nb, nh], -1.0, 1.0, &mut rng);
        let sq = random::<(Dual<H>, H)>(&[nh, nh], -1.0, 1.0, &mut rng);
        let rh = random::<(B, H)>(&[nb, nh], -1.0, 1.0, &mut rng);
        check(&format!("square d/dx #{round}"), &xh, |v| {
            let w = v.tape().var(sq.clone());
            project(dot(v, &w)?.expr(), &rh)
        });
        check(&format!("square d/dw #{round}"), &sq, |wv| {
            let v = wv.tape().var(xh.clone());
            project(dot(&v, wv)?.expr(), &rh)
        });
    }
}

/// `dot_over` keeps the shared axes it does not contract as batch axes: attention's
/// (B, H, Q, D)·(B, H, K, D) over D, here (B, O, I)·(C, I, B) over I, in permuted and strided
/// layouts, and with two batch axes.
#[test]
fn dot_over_gradients_keep_batch_axes() {
    let mut rng = rng(7);
    for round in 0..3 {
        let (nb, ni, no, nc) = (len(&mut rng), len(&mut rng), len(&mut rng), len(&mut rng));
        // x (B, O, I) as a permuted view of (I, B, O); y (C, I, B) sliced along I.
        let x = random::<(I, B, O)>(&[ni, nb, no], -1.0, 1.0, &mut rng);
        let x: Tensor<f64, (B, O, I)> = x.axes_with_order();
        let y = random::<(C, I, B)>(&[nc, 2 * ni, nb], -1.0, 1.0, &mut rng);
        let y = y.slice::<I>(.., 2).unwrap();
        // the result: x's kept axes (B, O), then y's (C)
        let r = random::<(B, O, C)>(&[nb, no, nc], -1.0, 1.0, &mut rng);
        check(&format!("dot_over I d/dx #{round}"), &x, |v| {
            let w = v.tape().var(y.clone());
            project(dot_over::<(I,), _, _, _, _, _>(v, &w)?.expr(), &r)
        });
        check(&format!("dot_over I d/dy #{round}"), &y, |w| {
            let v = w.tape().var(x.clone());
            project(dot_over::<(I,), _, _, _, _, _>(&v, w)?.expr(), &r)
        });
        // two batch axes (B, H), contracted I; y's batch axes in another order.
        let nh = len(&mut rng);
        let x2 = random::<(B, H, O, I)>(&[nb, nh, no, ni], -1.0, 1.0, &mut rng);
        let y2 = random::<(H, C, B, I)>(&[nh, nc, nb, ni], -1.0, 1.0, &mut rng);
        let r2 = random::<(B, H, O, C)>(&[nb, nh, no, nc], -1.0, 1.0, &mut rng);
        check(
            &format!("dot_over two batch axes d/dx #{round}"),
            &x2,
            |v| {
                let w = v.tape().var(y2.clone());
                project(dot_over::<(I,), _, _, _, _, _>(v, &w)?.expr(), &r2)
            },
        );
        check(
            &format!("dot_over two batch axes d/dy #{round}"),
            &y2,
            |w| {
                let v = w.tape().var(x2.clone());
                project(dot_over::<(I,), _, _, _, _, _>(&v, w)?.expr(), &r2)
            },
        );
        // contracting every shared axis is dot: both gradients agree with dot's
        let r3 = random::<(O, C)>(&[no, nc], -1.0, 1.0, &mut rng);
        let grads = |over: bool| {
            let tape = Tape::new();
            let (v, w) = (tape.var(x2.clone()), tape.var(y2.clone()));
            let z = if over {
                dot_over::<(B, H, I), _, _, _, _, _>(&v, &w).unwrap()
            } else {
                dot(&v, &w).unwrap()
            };
            let g = project(z.expr(), &r3).unwrap().backward().unwrap();
            (z.value().clone(), g.get(&v).unwrap(), g.get(&w).unwrap())
        };
        assert_eq!(grads(true), grads(false));
    }
}

/// softmax, log-softmax, logsumexp and max along an axis of a variable: values against the
/// tensor functions, gradients against finite differences, on permuted inputs.
#[test]
fn softmax_family_and_max_along_an_axis() {
    let mut rng = rng(8);
    for round in 0..3 {
        let (nb, nc) = (len(&mut rng), len(&mut rng) + 1);
        let x = random::<(C, B)>(&[nc, nb], -2.0, 2.0, &mut rng);
        let x: Tensor<f64, (B, C)> = x.axes_with_order();
        let r = random::<(B, C)>(&[nb, nc], -1.0, 1.0, &mut rng);
        let rb = random::<(B,)>(&[nb], -1.0, 1.0, &mut rng);
        let tape = Tape::new();
        let v = tape.constant(x.clone());
        let close = |a: &Tensor<f64, (B, C)>, b: &Tensor<f64, (B, C)>| {
            a.to_vec()
                .iter()
                .zip(b.to_vec())
                .all(|(p, q)| (p - q).abs() < 1e-12)
        };
        assert!(close(
            v.softmax::<C>().unwrap().value(),
            &x.softmax::<C>().unwrap()
        ));
        assert!(close(
            v.log_softmax::<C>().unwrap().value(),
            &x.log_softmax::<C>().unwrap()
        ));
        let lse = v.logsumexp::<(C,)>().unwrap().value().to_vec();
        let expected = x.logsumexp::<(C,)>().unwrap().to_vec();
        assert!(
            lse.iter()
                .zip(&expected)
                .all(|(p, q)| (p - q).abs() < 1e-12)
        );
        assert_eq!(
            v.max_over::<(C,)>().unwrap().value(),
            &x.max_over::<(C,)>().unwrap()
        );
        check(&format!("softmax #{round}"), &x, |v| {
            project(v.softmax::<C>()?.expr(), &r)
        });
        check(&format!("log_softmax #{round}"), &x, |v| {
            project(v.log_softmax::<C>()?.expr(), &r)
        });
        check(&format!("logsumexp #{round}"), &x, |v| {
            project(v.logsumexp::<(C,)>()?.expr(), &rb)
        });
        check(&format!("max_over #{round}"), &x, |v| {
            project(v.max_over::<(C,)>()?.expr(), &rb)
        });
    }
    // ties share the gradient of the maximum evenly; an empty axis is an error
    let tape = Tape::new();
    let v = tape.var(Tensor::<f64, (C,)>::from_vec(C.len(4), vec![1., 3., 3., 0.]).unwrap());
    let dx: Tensor<f64, (C,)> = v
        .max_over::<(C,)>()
        .unwrap()
        .backward()
        .unwrap()
        .get(&v)
        .unwrap();
    assert_eq!(dx.to_vec(), [0., 0.5, 0.5, 0.]);
    let empty = tape.var(Tensor::<f64, (B, C)>::zeros((B.len(2), C.len(0))).unwrap());
    assert!(empty.max_over::<(C,)>().is_err());
}

/// Views of variables: another axis order, slices forwards and backwards, padding — each
/// gradient against finite differences; steps other than ±1 are an error.
#[test]
fn views_of_variables() {
    let mut rng = rng(9);
    for round in 0..3 {
        let (nb, ni) = (len(&mut rng), len(&mut rng) + 2);
        let x = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        let start = rng.random_range(0..ni - 1);
        let end = rng.random_range(start + 1..=ni);
        let rs = random::<(B, I)>(&[nb, end - start], -1.0, 1.0, &mut rng);
        let rp = random::<(B, I)>(&[nb, ni + 3], -1.0, 1.0, &mut rng);
        let rt = random::<(I, B)>(&[ni, nb], -1.0, 1.0, &mut rng);
        let rt2 = rt.clone();
        check(&format!("slice #{round}"), &x, |v| {
            project(v.slice::<I>(start..end, 1)?.expr(), &rs)
        });
        check(&format!("reversed slice #{round}"), &x, |v| {
            project((v.slice::<I>(start..end, -1)?.expr()) * 2.0, &rs)
        });
        check(&format!("pad #{round}"), &x, |v| {
            project(v.pad::<I>(2, 1)?.expr(), &rp)
        });
        check(&format!("axes_with_order #{round}"), &x, |v| {
            let t: Var<f64, (I, B)> = v.axes_with_order();
            project(t.expr().exp(), &rt2)
        });
        let tape = Tape::new();
        let v = tape.var(x.clone());
        assert_eq!(
            v.slice::<I>(start..end, -1).unwrap().value(),
            &x.slice::<I>(start..end, -1).unwrap()
        );
        assert!(v.slice::<I>(0..ni + 1, 1).is_err());
        // every step, forwards and backwards
        for step in [2, -3] {
            let value = v.slice::<I>(start..end, step).unwrap();
            assert_eq!(value.value(), &x.slice::<I>(start..end, step).unwrap());
            let r = random::<(B, I)>(value.value().lens(), -1.0, 1.0, &mut rng);
            check(&format!("slice by {step} #{round}"), &x, |v| {
                project(v.slice::<I>(start..end, step)?.expr().sin(), &r)
            });
        }
        let at = rng.random_range(0..ni);
        let ri = random::<(B,)>(&[nb], -1.0, 1.0, &mut rng);
        check(&format!("index #{round}"), &x, |v| {
            project(v.index::<I>(I.at(at))?.expr().exp(), &ri)
        });
        let no = len(&mut rng);
        let rb = random::<(O, B, I)>(&[no, nb, ni], -1.0, 1.0, &mut rng);
        check(&format!("broadcast #{round}"), &x, |v| {
            let wide: Var<f64, (O, B, I)> = v.broadcast(O.len(no))?;
            project(wide.expr().tanh(), &rb)
        });
        // I before B is not a view of x: flatten copies, its gradient splits back
        let rf = random::<(Flat<(I, B)>,)>(&[ni * nb], -1.0, 1.0, &mut rng);
        check(&format!("flatten #{round}"), &x, |v| {
            project(v.flatten::<(I, B)>()?.expr().exp(), &rf)
        });
        let ru = random::<(I, B)>(&[ni, nb], -1.0, 1.0, &mut rng);
        check(&format!("flatten then unflatten #{round}"), &x, |v| {
            let back: Var<f64, (I, B)> = v.flatten::<(I, B)>()?.unflatten::<(I, B)>()?;
            project(back.expr().exp(), &ru)
        });
        let rc = random::<(B, I)>(&[nb, ni + (end - start)], -1.0, 1.0, &mut rng);
        check(&format!("concat #{round}"), &x, |v| {
            let tail = v.slice::<I>(start..end, 1)?;
            project(Var::concat::<I>(&[v, &tail])?.expr().sin(), &rc)
        });
        let rs2 = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        check(&format!("split #{round}"), &x, |v| {
            let pieces = v.split::<I>(&[start, ni - start])?;
            let joined = Var::concat::<I>(&[&pieces[1], &pieces[0]])?;
            project(joined.expr().exp(), &rs2)
        });
        assert!(v.split::<I>(&[ni + 1]).is_err());
    }
}

/// Sets the parameters `values` names (each over `H`) through a file, as a checkpoint would.
fn set_parameters(params: &mut axes::nn::Params<f64>, values: &[(&str, &Tensor<f64, (H,)>)]) {
    let mut file = axes::io::TensorFile::new();
    for (name, value) in values {
        file.insert(name, value);
    }
    let path = std::env::temp_dir().join(format!(
        "axes-set-{}-{}.safetensors",
        std::process::id(),
        values[0].0
    ));
    file.write(&path).unwrap();
    params.load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
}

/// Layer norm over a named axis, on a permuted input: the input's gradient against finite
/// differences, the gain's and bias's against their closed forms, and the tape-free forward.
#[test]
fn layer_norm_over_a_named_axis() {
    use axes::nn::{LayerNorm, ParamsBuilder};
    let mut rng = rng(10);
    for round in 0..3 {
        let (nb, nh, nc) = (len(&mut rng), len(&mut rng) + 1, len(&mut rng));
        let mut builder = ParamsBuilder::new();
        let norm = LayerNorm::new(&mut builder, "ln", H.len(nh), 1e-5).unwrap();
        let mut params = builder.build::<f64>(0).unwrap();
        let gain = random::<(H,)>(&[nh], 0.5, 1.5, &mut rng);
        let bias = random::<(H,)>(&[nh], -1.0, 1.0, &mut rng);
        set_parameters(&mut params, &[("ln.weight", &gain), ("ln.bias", &bias)]);
        let x = random::<(H, B, C)>(&[nh, nb, nc], -2.0, 2.0, &mut rng);
        let x: Tensor<f64, (B, H, C)> = x.axes_with_order();
        let r = random::<(B, H, C)>(&[nb, nh, nc], -1.0, 1.0, &mut rng);
        check(&format!("layer norm d/dx #{round}"), &x, |v| {
            project(norm.forward(&params.bind(v.tape()), v)?.expr(), &r)
        });
        let tape = Tape::new();
        let bound = params.bind(&tape);
        let y = norm.forward(&bound, tape.constant(x.clone())).unwrap();
        let grads = project(y.expr(), &r).unwrap().backward().unwrap();
        let d_gain = grads.get(&bound.var(&norm.gain).unwrap()).unwrap();
        let d_bias = grads.get(&bound.var(&norm.bias).unwrap()).unwrap();
        // the normalised input, and the closed forms Σ normalised·r and Σ r over (B, C)
        let normalised = ((y.value() - &bias) / &gain).eval().unwrap();
        let expected_gain = (&normalised * &r).sum::<(B, C)>().unwrap();
        let close = |a: &Tensor<f64, (H,)>, b: &Tensor<f64, (H,)>| {
            a.to_vec()
                .iter()
                .zip(b.to_vec())
                .all(|(p, q)| (p - q).abs() < 1e-9)
        };
        assert!(
            close(&d_gain, &expected_gain),
            "{d_gain:?} vs {expected_gain:?}"
        );
        assert!(close(&d_bias, &r.sum::<(B, C)>().unwrap()));
        let means = normalised.mean::<(H,)>().unwrap().to_vec();
        assert!(means.iter().all(|m| m.abs() < 1e-9));
        // without a tape: the same values (to rounding: the taped mean multiplies by 1/n)
        let inferred = norm.infer(&params, &x).unwrap().to_vec();
        let taped = y.value().to_vec();
        assert!(
            inferred
                .iter()
                .zip(&taped)
                .all(|(p, q)| (p - q).abs() < 1e-12)
        );
    }
}

/// RMS norm over a named axis: the input's gradient against finite differences, the gain's
/// against its closed form, and the tape-free forward.
#[test]
fn rms_norm_over_a_named_axis() {
    use axes::nn::{ParamsBuilder, RmsNorm};
    let mut rng = rng(11);
    for round in 0..3 {
        let (nb, nh) = (len(&mut rng), len(&mut rng) + 1);
        let mut builder = ParamsBuilder::new();
        let norm = RmsNorm::new(&mut builder, "rms", H.len(nh), 1e-6).unwrap();
        let mut params = builder.build::<f64>(0).unwrap();
        let gain = random::<(H,)>(&[nh], 0.5, 1.5, &mut rng);
        set_parameters(&mut params, &[("rms.weight", &gain)]);
        let x = random::<(H, B)>(&[nh, nb], -2.0, 2.0, &mut rng);
        let r = random::<(H, B)>(&[nh, nb], -1.0, 1.0, &mut rng);
        check(&format!("rms norm d/dx #{round}"), &x, |v| {
            project(norm.forward(&params.bind(v.tape()), v)?.expr(), &r)
        });
        let tape = Tape::new();
        let bound = params.bind(&tape);
        let y = norm.forward(&bound, tape.constant(x.clone())).unwrap();
        let grads = project(y.expr(), &r).unwrap().backward().unwrap();
        let d_gain = grads.get(&bound.var(&norm.gain).unwrap()).unwrap().to_vec();
        let expected = ((y.value() / &gain) * &r).sum::<(B,)>().unwrap().to_vec();
        assert!(
            d_gain
                .iter()
                .zip(&expected)
                .all(|(p, q)| (p - q).abs() < 1e-9)
        );
        let inferred = norm.infer(&params, &x).unwrap().to_vec();
        let taped = y.value().to_vec();
        assert!(
            inferred
                .iter()
                .zip(&taped)
                .all(|(p, q)| (p - q).abs() < 1e-12)
        );
    }
}

#[test]
fn softmax_cross_entropy_gradient() {
    let mut rng = rng(5);
    for round in 0..4 {
        let (nb, nc) = (len(&mut rng), 1 + len(&mut rng));
        let labels: Vec<i64> = (0..nb).map(|_| rng.random_range(0..nc as i64)).collect();
        let labels = Tensor::<i64, (B,)>::from_vec(B.len(nb), labels).unwrap();
        let logits = random::<(B, C)>(&[nb, nc], -3.0, 3.0, &mut rng);
        check(&format!("cross-entropy #{round}"), &logits, |v| {
            softmax_cross_entropy::<C, _, _, _, _>(v, &labels)?.mean::<(B,)>()
        });
        // Class axis first in the layout, and a weighted (not mean) reduction.
        let r = random::<(B,)>(&[nb], 0.1, 1.0, &mut rng);
        let class_major: Tensor<f64, (C, B)> = logits.axes_with_order();
        check(
            &format!("cross-entropy (C, B) #{round}"),
            &class_major,
            |v| {
                project(
                    softmax_cross_entropy::<C, _, _, _, _>(v, &labels)?.expr(),
                    &r,
                )
            },
        );
        // Large logits stay finite (stable).
        let big = Tensor::<f64, (B, C)>::full((B.len(nb), C.len(nc)), 800.0).unwrap();
        let tape = Tape::new();
        let loss = softmax_cross_entropy::<C, _, _, _, _>(&tape.var(big), &labels).unwrap();
        assert!(
            loss.value()
                .to_vec()
                .iter()
                .all(|l| (l - (nc as f64).ln()).abs() < 1e-9)
        );
    }
}

#[test]
fn fused_expression_with_a_variable_used_twice() {
    let mut rng = rng(6);
    for round in 0..3 {
        let (nb, ni) = (len(&mut rng), len(&mut rng));
        let x = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        let w = random::<(I,)>(&[ni], -1.0, 1.0, &mut rng);
        let b = random::<(B,)>(&[nb], -1.0, 1.0, &mut rng);
        let r = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        let f = |x: &Var<f64, (B, I)>, w: &Var<f64, (I,)>, b: &Var<f64, (B,)>| {
            let e = ((x * w).tanh() + x.sigmoid() * 2.0 - b).exp() / (x.square() + 1.0);
            assert_eq!(
                e.ir().to_string().matches("leaf0").count(),
                3,
                "x read 3 times, one leaf"
            );
            project(e, &r)
        };
        check(&format!("fused d/dx #{round}"), &x, |v| {
            let t = v.tape();
            f(v, &t.var(w.clone()), &t.var(b.clone()))
        });
        check(&format!("fused d/dw #{round}"), &w, |wv| {
            let t = wv.tape();
            f(&t.var(x.clone()), wv, &t.var(b.clone()))
        });
        check(&format!("fused d/db #{round}"), &b, |bv| {
            let t = bv.tape();
            f(&t.var(x.clone()), &t.var(w.clone()), bv)
        });
        // A variable feeding several nodes: its gradients add up.
        check(&format!("shared variable #{round}"), &x, |v| {
            let t = v.tape();
            let wv = t.var(w.clone());
            let first = dot(v, &wv)?; // (B,)
            let second = v.expr().tanh().sum::<(I,)>()?; // (B,)
            (first * &second + v.sum::<(I,)>()?).sum::<(B,)>()
        });
    }
}

/// The gradient of `x` in `x + h` is the upstream gradient itself, shared rather than
/// copied: one shared by two variables, and one accumulated onto later (a residual
/// connection: `x` feeds another node too) stay each their own.
#[test]
fn gradients_passed_through_an_addition() -> axes::Result<()> {
    let mut rng = rng(7);
    let (nb, ni) = (len(&mut rng), len(&mut rng));
    let x = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
    let r = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
    let residual = |v: &Var<f64, (B, I)>| -> axes::Result<[Var<f64, (B, I)>; 4]> {
        let h = (v.tanh() * 3.0).eval()?;
        let y = (v + &h).eval()?;
        let z = (&y + v.sigmoid()).eval()?;
        let out = (&y * 2.0 + &z).eval()?;
        Ok([h, y, z, out])
    };
    check("residual", &x, |v| {
        let [.., out] = residual(v)?;
        project(out.expr(), &r)
    });
    let tape = Tape::new();
    let v = tape.var(x.clone());
    let [h, y, z, out] = residual(&v)?;
    let grads = project(out.expr(), &r)?.backward()?;
    // d/dh and d/dz are the upstream gradients of y and of out, unchanged by what was
    // accumulated onto the buffers they share.
    assert_eq!(grads.get(&h)?.to_vec(), grads.get(&y)?.to_vec());
    assert_eq!(grads.get(&z)?.to_vec(), r.to_vec());
    let expected: Vec<f64> = r.to_vec().iter().map(|r| 3.0 * r).collect();
    assert_eq!(grads.get(&y)?.to_vec(), expected);
    // Over the same axes in another order: the gradient is a transposed view.
    let transposed = |v: &Var<f64, (B, I)>| -> axes::Result<Var<f64, (I, B)>> {
        let h = (v.tanh() * 3.0).eval()?;
        (&v.axes_with_order::<(I, B)>() + &h).eval()
    };
    let r_t: Tensor<f64, (I, B)> = r.axes_with_order::<(I, B)>().contiguous()?;
    check("transposed", &x, |v| project(transposed(v)?.expr(), &r_t));
    Ok(())
}

#[test]
fn gather_picks_rows_and_adds_their_gradients_back() {
    let mut rng = rng(21);
    for round in 0..3 {
        let (nc, ni, nb, no) = (
            len(&mut rng) + 1,
            len(&mut rng),
            len(&mut rng),
            len(&mut rng),
        );
        // an embedding table stored transposed, and ids with repeats
        let table = random::<(I, C)>(&[ni, nc], -1.0, 1.0, &mut rng).axes_with_order::<(C, I)>();
        let ids = Tensor::<i64, (B, O)>::from_fn((B.len(nb), O.len(no)), |_| {
            rng.random_range(0..nc as i64)
        })
        .unwrap();
        let picked: Tensor<f64, (I, B, O)> = table.gather::<C, _, _>(&ids).unwrap();
        let (rows, id) = (table.to_vec_in::<(C, I)>(), ids.to_vec());
        let expected: Vec<f64> = (0..nb * no)
            .flat_map(|bo| (0..ni).map(move |i| (bo, i)))
            .map(|(bo, i)| rows[id[bo] as usize * ni + i])
            .collect();
        assert_eq!(picked.to_vec_in::<(B, O, I)>(), expected);
        let r = random::<(I, B, O)>(&[ni, nb, no], -1.0, 1.0, &mut rng);
        check(&format!("gather #{round}"), &table, |v| {
            project((v.gather::<C, _, _>(&ids)?.expr() * 3.0).tanh(), &r)
        });
        // an axis the table and the ids share: a label lookup
        let scores = random::<(C, B)>(&[nc, nb], -1.0, 1.0, &mut rng);
        let labels =
            Tensor::<i32, (B,)>::from_fn(B.len(nb), |_| rng.random_range(0..nc as i32)).unwrap();
        let rb = random::<(B,)>(&[nb], -1.0, 1.0, &mut rng);
        check(
            &format!("gather along a shared axis #{round}"),
            &scores,
            |v| project(v.gather::<C, _, _>(&labels)?.expr(), &rb),
        );
        let tape = Tape::new();
        let bad = (&ids + nc as i64).eval().unwrap();
        let error = (tape.var(table.clone()).gather::<C, _, _>(&bad))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`C`") && error.contains(&nc.to_string()),
            "{error}"
        );
    }
}

#[test]
fn renamed_variables() {
    let mut rng = rng(22);
    for round in 0..3 {
        let (nb, ni) = (len(&mut rng), len(&mut rng));
        let x = random::<(I, B)>(&[ni, nb], -1.0, 1.0, &mut rng).axes_with_order::<(B, I)>();
        let r = random::<(I, O)>(&[ni, nb], -1.0, 1.0, &mut rng);
        check(&format!("rename #{round}"), &x, |v| {
            let renamed: Var<f64, (I, O)> = v.rename::<B, O>()?;
            project(renamed.expr().exp() * &renamed, &r)
        });
    }
}

#[test]
fn masked_fill_and_dropout() {
    use axes::nn::{Dropout, Mode};
    let mut rng = rng(23);
    for round in 0..3 {
        let (nb, ni) = (len(&mut rng), len(&mut rng) + 1);
        let x = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        // a mask over I only, broadcast over B
        let mask = Tensor::<bool, (I,)>::from_fn(I.len(ni), |_| rng.random_bool(0.5)).unwrap();
        let r = random::<(B, I)>(&[nb, ni], -1.0, 1.0, &mut rng);
        check(&format!("masked_fill #{round}"), &x, |v| {
            project(v.expr().masked_fill(&mask, 0.5)?.exp(), &r)
        });
        let tape = Tape::new();
        let filled = (tape.var(x.clone()).expr().masked_fill(&mask, 0.5))
            .unwrap()
            .eval()
            .unwrap();
        let expected = select(&mask, 0.5, &x).eval().unwrap();
        assert_eq!(filled.value(), &expected.axes_with_order::<(B, I)>());
        // the same seed gives the same mask, so finite differences see one function
        let p = 0.4;
        check(&format!("dropout #{round}"), &x, |v| {
            let dropped = Dropout::new(p, round)?.forward(v, Mode::Train)?;
            project(dropped.tanh(), &r)
        });
        let dropped = (Dropout::new(p, round).unwrap())
            .forward(tape.var(x.clone()), Mode::Train)
            .unwrap()
            .eval()
            .unwrap();
        for (y, x) in dropped.value().to_vec().into_iter().zip(x.to_vec()) {
            assert!(
                y == 0.0 || (y - x / (1.0 - p)).abs() < 1e-15,
                "{y} from {x}"
            );
        }
    }
}
