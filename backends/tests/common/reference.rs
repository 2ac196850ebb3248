//! Random expression trees and layouts, with a plain reference: the IR evaluated node by
//! node in f64 at index positions computed by hand. Shared by the backends' kernel tests
//! (inside the crate) and the integration tests.
#![allow(dead_code, unreachable_pub)]

use axes_core::DType;
use axes_core::ir::{BinaryOp, CompareOp, Ir, IrNode, UnaryOp};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A random expression over `leaves` leaves, its ops drawn from every float row of the op
/// table, with values kept finite: logarithms, roots and divisors see `|x| + 0.5`, exponents
/// a sine.
pub fn random_ir(rng: &mut ChaCha8Rng, leaves: usize, depth: usize) -> Ir {
    let mut ir = Ir::default();
    node(rng, &mut ir, leaves, depth);
    ir
}

fn positive(ir: &mut Ir, x: usize) -> usize {
    let a = ir.push(IrNode::Unary(UnaryOp::Abs, x));
    let half = ir.push(IrNode::Scalar(0.5));
    ir.push(IrNode::Binary(BinaryOp::Add, a, half))
}

fn node(rng: &mut ChaCha8Rng, ir: &mut Ir, leaves: usize, depth: usize) -> usize {
    if depth == 0 || rng.random_bool(0.25) {
        if rng.random_bool(0.1) {
            let v = rng.random_range(-2.0..2.0f64);
            return ir.push(IrNode::Scalar((v * 8.0).round() / 8.0));
        }
        return ir.push(IrNode::Leaf(rng.random_range(0..leaves)));
    }
    match rng.random_range(0..4) {
        0 | 1 => {
            let x = node(rng, ir, leaves, depth - 1);
            let ops: Vec<UnaryOp> = (UnaryOp::ALL.iter().copied())
                .filter(|op| op.domain().accepts(DType::F64))
                .collect();
            let op = ops[rng.random_range(0..ops.len())];
            let x = match op {
                // Where the op is defined and finite: ln, roots and reciprocals see
                // `|x| + 0.5`, exponentials a sine. Every other op takes any finite value.
                UnaryOp::Ln | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip => positive(ir, x),
                UnaryOp::Exp => ir.push(IrNode::Unary(UnaryOp::Sin, x)),
                _ => x,
            };
            ir.push(IrNode::Unary(op, x))
        }
        2 => {
            let x = node(rng, ir, leaves, depth - 1);
            let y = node(rng, ir, leaves, depth - 1);
            let ops: Vec<BinaryOp> = (BinaryOp::ALL.iter().copied())
                .filter(|op| op.domain().accepts(DType::F64))
                .collect();
            let op = ops[rng.random_range(0..ops.len())];
            let (x, y) = match op {
                // Divisors see `|y| + 0.5`; powers a positive base and an exponent in [-1, 1].
                BinaryOp::Div | BinaryOp::Rem => (x, positive(ir, y)),
                BinaryOp::Pow => (positive(ir, x), ir.push(IrNode::Unary(UnaryOp::Sin, y))),
                _ => (x, y),
            };
            ir.push(IrNode::Binary(op, x, y))
        }
        _ => {
            let a = node(rng, ir, leaves, depth - 1);
            let b = node(rng, ir, leaves, depth - 1);
            let x = node(rng, ir, leaves, depth - 1);
            let y = node(rng, ir, leaves, depth - 1);
            let cmp = CompareOp::ALL[rng.random_range(0..CompareOp::ALL.len())];
            let c = ir.push(IrNode::Compare(cmp, a, b));
            ir.push(IrNode::Select(c, x, y))
        }
    }
}

fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

/// The value of `ir` for leaf values `leaves`, each op rounded by `round` (to f32 or not).
pub fn eval(ir: &Ir, leaves: &[f64], round: fn(f64) -> f64) -> f64 {
    let mut v = vec![0.0; ir.nodes.len()];
    for (i, node) in ir.nodes.iter().enumerate() {
        v[i] = round(match *node {
            IrNode::Leaf(k) => leaves[k],
            IrNode::Scalar(s) => s,
            IrNode::Unary(op, a) => {
                let x = v[a];
                match op {
                    UnaryOp::Neg => -x,
                    UnaryOp::Abs => x.abs(),
                    UnaryOp::Square => x * x,
                    UnaryOp::Signum => {
                        if x.is_nan() {
                            x
                        } else if x > 0.0 {
                            1.0
                        } else if x < 0.0 {
                            -1.0
                        } else {
                            0.0
                        }
                    }
                    UnaryOp::Relu => max(x, 0.0),
                    UnaryOp::Exp => x.exp(),
                    UnaryOp::Ln => x.ln(),
                    UnaryOp::Sqrt => x.sqrt(),
                    UnaryOp::Rsqrt => 1.0 / x.sqrt(),
                    UnaryOp::Tanh => x.tanh(),
                    UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                    UnaryOp::Silu => x / (1.0 + (-x).exp()),
                    UnaryOp::Softplus => x.exp().ln_1p(),
                    UnaryOp::Sin => x.sin(),
                    UnaryOp::Cos => x.cos(),
                    UnaryOp::Recip => 1.0 / x,
                    UnaryOp::Floor => x.floor(),
                    UnaryOp::Ceil => x.ceil(),
                    UnaryOp::Gelu => {
                        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
                        0.5 * x * (1.0 + u.tanh())
                    }
                    UnaryOp::GeluDerivative => {
                        let c = (2.0 / std::f64::consts::PI).sqrt();
                        let t = (c * (x + 0.044715 * x.powi(3))).tanh();
                        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 0.134145 * x * x)
                    }
                    UnaryOp::BitNot => panic!("an integer op in a float expression"),
                }
            }
            IrNode::Binary(op, a, b) => {
                let (x, y) = (v[a], v[b]);
                match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    BinaryOp::Mul => x * y,
                    BinaryOp::Div => x / y,
                    BinaryOp::Max => max(x, y),
                    BinaryOp::Min => min(x, y),
                    BinaryOp::Pow => x.powf(y),
                    BinaryOp::Rem => x % y,
                    BinaryOp::BitAnd
                    | BinaryOp::BitOr
                    | BinaryOp::BitXor
                    | BinaryOp::Shl
                    | BinaryOp::Shr => panic!("an integer op in a float expression"),
                }
            }
            IrNode::Compare(op, a, b) => {
                let (x, y) = (v[a], v[b]);
                let holds = match op {
                    CompareOp::Greater => x > y,
                    CompareOp::GreaterEqual => x >= y,
                    CompareOp::Less => x < y,
                    CompareOp::LessEqual => x <= y,
                    CompareOp::Equal => x == y,
                    CompareOp::NotEqual => x != y,
                };
                if holds { 1.0 } else { 0.0 }
            }
            IrNode::Select(c, a, b) => {
                if v[c] != 0.0 {
                    v[a]
                } else {
                    v[b]
                }
            }
            IrNode::Cast(..) | IrNode::Map(_) => panic!("not generated"),
        });
    }
    *v.last().unwrap()
}

/// One operand's buffer and how it is read over the iteration axes.
#[derive(Clone, Debug)]
pub struct Operand {
    pub data: Vec<f64>,
    pub offset: i64,
    pub strides: Vec<i64>,
}

impl Operand {
    pub fn at(&self, index: &[usize]) -> f64 {
        let p = self.offset
            + index
                .iter()
                .zip(&self.strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum::<i64>();
        self.data[p as usize]
    }
}

/// A random operand over `lens`: some axes present (in a random storage order, some
/// reversed), the others broadcast (stride 0), at a random offset in a larger buffer.
pub fn random_operand(rng: &mut ChaCha8Rng, lens: &[usize]) -> Operand {
    let rank = lens.len();
    let present: Vec<usize> = (0..rank).filter(|_| rng.random_bool(0.75)).collect();
    let mut order = present.clone();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut strides = vec![0i64; rank];
    let mut size = 1i64;
    for &a in order.iter().rev() {
        strides[a] = size;
        size *= lens[a] as i64;
    }
    let pad = rng.random_range(0..4i64);
    let mut offset = pad;
    for &a in &present {
        if rng.random_bool(0.3) {
            offset += (lens[a] as i64 - 1) * strides[a];
            strides[a] = -strides[a];
        }
    }
    let data = (0..(size + pad + 2) as usize)
        .map(|_| rng.random_range(-2.0..2.0))
        .collect();
    Operand {
        data,
        offset,
        strides,
    }
}

/// Row-major strides over `lens` in a random axis order (an output layout).
pub fn random_dense(rng: &mut ChaCha8Rng, lens: &[usize]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut strides = vec![0i64; lens.len()];
    let mut size = 1i64;
    for &a in order.iter().rev() {
        strides[a] = size;
        size *= lens[a] as i64;
    }
    strides
}

/// Every multi-index over `lens`, row-major.
pub fn indices(lens: &[usize]) -> Vec<Vec<usize>> {
    let count: usize = lens.iter().product();
    (0..count)
        .map(|mut n| {
            let mut index = vec![0; lens.len()];
            for a in (0..lens.len()).rev() {
                index[a] = n % lens[a];
                n /= lens[a];
            }
            index
        })
        .collect()
}

/// Whether `got` matches `expected` within `tolerance` relative (NaN matches NaN).
pub fn close(got: f64, expected: f64, tolerance: f64) -> bool {
    (got.is_nan() && expected.is_nan())
        || got == expected
        || (got - expected).abs() <= tolerance * (1.0 + expected.abs())
}

pub fn to_f32(v: f64) -> f64 {
    v as f32 as f64
}

pub fn exact(v: f64) -> f64 {
    v
}
