//! Functions of one argument in `tensor!`: `name(x)` is the element-wise method `x.name()`,
//! on a tensor, on a compound expression and on a reduction's result, checked against a
//! plain loop. Only what the test names is imported (not `ExprExt`): the macro brings the
//! methods into scope itself.

use axes::{Axis, Tensor, tensor};

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct I;

const NB: usize = 2;
const NI: usize = 5;

fn data() -> Vec<f64> {
    vec![-2.5, -1.0, -0.25, 0.0, 0.75, 1.5, 2.0, 3.25, -0.5, 4.0]
}

fn x() -> Tensor<f64, (B, I)> {
    Tensor::from_vec((B.len(NB), I.len(NI)), data()).unwrap()
}

fn gelu(v: f64) -> f64 {
    let t = (0.7978845608028654 * (v + 0.044715 * v * v * v)).tanh();
    0.5 * v * (1.0 + t)
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// -1, 0 or 1 (the library's `signum` gives 0 at 0, unlike `f64::signum`).
fn signum(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

fn assert_all_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * w.abs().max(1.0),
            "element {k}: got {g}, want {w}"
        );
    }
}

#[test]
fn one_argument_functions_on_a_tensor() {
    let x = x();
    let d = data();
    let floor = tensor!([B, I] = floor(x[B, I])).unwrap();
    let want: Vec<f64> = d.iter().map(|v| v.floor()).collect();
    assert_all_close(&floor.to_vec(), &want);

    let signs = tensor!([B, I] = signum(x[B, I])).unwrap();
    let mut want = Vec::new();
    for v in &d {
        want.push(signum(*v));
    }
    assert_all_close(&signs.to_vec(), &want);

    let gelu_x = tensor!([B, I] = gelu(x[B, I])).unwrap();
    let want: Vec<f64> = d.iter().map(|v| gelu(*v)).collect();
    assert_all_close(&gelu_x.to_vec(), &want);

    let soft = tensor!([B, I] = softplus(x[B, I])).unwrap();
    let want: Vec<f64> = d.iter().map(|v| v.exp().ln_1p()).collect();
    assert_all_close(&soft.to_vec(), &want);
}

#[test]
fn one_argument_functions_on_expressions() {
    let x = x();
    let d = data();
    // rsqrt of a compound expression, plus sigmoid and ceil, into an existing tensor
    let mut y = Tensor::<f64, (I, B)>::zeros((B.len(NB), I.len(NI))).unwrap();
    tensor!(y[B, I] = rsqrt(x[B, I] * x[B, I] + 1.0) + sigmoid(x[B, I]) - ceil(x[B, I] / 2.0))
        .unwrap();
    let y = tensor!([B, I] = y[B, I]).unwrap();
    let mut want = Vec::new();
    for b in 0..NB {
        for i in 0..NI {
            let v = d[b * NI + i];
            want.push(1.0 / (v * v + 1.0).sqrt() + sigmoid(v) - (v / 2.0).ceil());
        }
    }
    assert_all_close(&y.to_vec(), &want);

    // a function of a reduction (an owned tensor), nested functions, and `neg`
    let z = tensor!([B] = sqrt(sum[I](square(x[B, I]))) + neg(abs(min[I](x[B, I])))).unwrap();
    let mut want = Vec::new();
    for b in 0..NB {
        let row = &d[b * NI..(b + 1) * NI];
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        let smallest = row.iter().copied().fold(f64::INFINITY, f64::min);
        want.push(norm - smallest.abs());
    }
    assert_all_close(&z.to_vec(), &want);

    // summed over I, into a scalar
    let s = tensor!([] = signum(x[B, I]) * floor(x[B, I] * 2.0)).unwrap();
    let mut want = 0.0;
    for v in &d {
        want += signum(*v) * (v * 2.0).floor();
    }
    assert_all_close(&s.to_vec(), &[want]);
}
