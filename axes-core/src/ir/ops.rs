//! Every element-wise op and every reduction, once.
//!
//! Each row of the tables below gives an op its enum variant, its name, the element types it
//! accepts ([`Domain`]), its scalar function, its device-kernel spelling
//! ([`KernelSpelling`]), its cost kind ([`OpWeights`]) and its derivative (as IR built from
//! other ops). From the rows, through the generators in `ops/generate.rs`, come:
//! - the run-time enums [`UnaryOp`], [`BinaryOp`], [`CompareOp`] and [`ReduceOp`] that the
//!   IR, the interpreter, the kernel generator and autodiff match on;
//! - the typed zero-sized ops in [`unary`], [`binary`] and [`reduce`] that the CPU loop
//!   engine inlines;
//! - through `for_each_unary_op!` and its siblings, the methods
//!   of expressions, tensors and autodiff variables (`x.exp()`, `v.tanh()`).
//!
//! So adding an element-wise op is adding one row; a `match` that does not handle it stops
//! compiling. No op is ever looked up by its name.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::ir::{Domain, UnaryOp};
//! assert_eq!(UnaryOp::Tanh.name(), "tanh");
//! assert_eq!(UnaryOp::Tanh.domain(), Domain::Float);
//! assert_eq!(UnaryOp::Tanh.apply(0.5f64), Some(0.5f64.tanh()));
//! assert!(UnaryOp::ALL.contains(&UnaryOp::Relu));
//! ```

use super::{Ir, IrNode};
use crate::element::{DType, Element};
use crate::num::{Float, Int, Num};

mod generate;
pub(crate) use generate::{binary_method_rows, compare_method_rows, unary_method_rows};
use generate::{
    define_binary_ops, define_compare_ops, define_reduce_ops, define_unary_ops, first_of, in_domain,
};

/// The element types an op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Every numeric type: integers and floats.
    Num,
    /// Floating-point types only.
    Float,
    /// Integer types only (bitwise operations and shifts).
    Int,
}

impl Domain {
    /// Whether an op of this domain accepts elements of type `dtype`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::DType;
    /// use axes::ir::Domain;
    /// assert!(Domain::Num.accepts(DType::U8) && !Domain::Num.accepts(DType::Bool));
    /// assert!(Domain::Int.accepts(DType::I64) && !Domain::Int.accepts(DType::F32));
    /// ```
    pub const fn accepts(self, dtype: DType) -> bool {
        let float = matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
        match self {
            Domain::Num => !matches!(dtype, DType::Bool),
            Domain::Float => float,
            Domain::Int => matches!(dtype, DType::I32 | DType::I64 | DType::U8),
        }
    }
}

/// How a device kernel writes an op: C expression templates, shared by the CUDA and OpenCL
/// dialects.
///
/// In a template, `{x}` is the argument of a unary op and `{a}`, `{b}` those of a binary
/// op; `{bits}` is the element type's width in bits and `{unsigned}` the unsigned integer
/// type of that width; `{exp}` (any other name) is that C math function for the element type
/// (CUDA writes the `float` versions `expf`, ...); `{0.5}` (any number) is that constant in
/// the element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpelling {
    /// For floating-point elements (and for integers when `integer` is `None` and the op
    /// accepts them).
    pub float: &'static str,
    /// For integer elements, where they need another form.
    pub integer: Option<&'static str>,
}

/// IR building for the derivative rules: each method appends one node and returns it.
pub struct Derive<'a>(&'a mut Ir);

impl Derive<'_> {
    /// A constant.
    pub fn c(&mut self, v: f64) -> usize {
        self.0.push(IrNode::Scalar(v))
    }
    /// `op(a)`.
    pub fn unary(&mut self, op: UnaryOp, a: usize) -> usize {
        self.0.push(IrNode::Unary(op, a))
    }
    /// `op(a, b)`.
    pub fn binary(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        self.0.push(IrNode::Binary(op, a, b))
    }
    /// `a op b` (a `bool`).
    pub fn compare(&mut self, op: CompareOp, a: usize, b: usize) -> usize {
        self.0.push(IrNode::Compare(op, a, b))
    }
    /// `select(cond, a, b)`.
    pub fn select(&mut self, cond: usize, a: usize, b: usize) -> usize {
        self.0.push(IrNode::Select(cond, a, b))
    }
    /// `a + b`.
    pub fn add(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Add, a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Sub, a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Mul, a, b)
    }
    /// `a / b`.
    pub fn div(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Div, a, b)
    }
    /// `-a`.
    pub fn neg(&mut self, a: usize) -> usize {
        self.unary(UnaryOp::Neg, a)
    }
}

/// How many element-wise ops of each kind of cost an expression computes per element: cheap
/// ones (a vector instruction or two: add, compare, `abs`), divisions and square roots (a
/// long-latency instruction), and transcendental functions (a polynomial of dozens of
/// instructions: `exp`, `tanh`, `pow`). The CPU's cost model ([`crate::engine::cost`]) puts
/// times on the kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpWeights {
    /// Cheap ops.
    pub simple: u32,
    /// Divisions and square roots.
    pub division: u32,
    /// Transcendental functions.
    pub transcendental: u32,
}

impl OpWeights {
    /// No op (a tensor or a constant).
    pub const NONE: OpWeights = OpWeights {
        simple: 0,
        division: 0,
        transcendental: 0,
    };
    /// One cheap op.
    pub const SIMPLE: OpWeights = OpWeights {
        simple: 1,
        ..OpWeights::NONE
    };
    /// One division or square root.
    pub const DIVISION: OpWeights = OpWeights {
        division: 1,
        ..OpWeights::NONE
    };
    /// One transcendental function.
    pub const TRANSCENDENTAL: OpWeights = OpWeights {
        transcendental: 1,
        ..OpWeights::NONE
    };

    /// Both counts together.
    pub const fn plus(self, other: OpWeights) -> OpWeights {
        OpWeights {
            simple: self.simple.saturating_add(other.simple),
            division: self.division.saturating_add(other.division),
            transcendental: self.transcendental.saturating_add(other.transcendental),
        }
    }
}

/// A typed element-wise function of one argument: what the CPU loop engine inlines.
pub trait UnaryFn<T: Element>: Copy + Send + Sync {
    /// The result element type.
    type Out: Element;
    /// What the function costs per element (for the CPU's thread-split decisions).
    const WEIGHT: OpWeights = OpWeights::SIMPLE;
    /// Applies the function.
    fn apply(self, x: T) -> Self::Out;
    /// Appends the op applied to node `a` to `ir` (ops with parameters spell them out with
    /// constants, so the IR is complete).
    fn describe(self, ir: &mut Ir, a: usize) -> usize;
}

/// A typed element-wise function of two arguments.
pub trait BinaryFn<T: Element>: Copy + Send + Sync {
    /// The result element type.
    type Out: Element;
    /// What the function costs per element (for the CPU's thread-split decisions).
    const WEIGHT: OpWeights = OpWeights::SIMPLE;
    /// Applies the function.
    fn apply(self, a: T, b: T) -> Self::Out;
    /// Appends the op applied to nodes `a` and `b` to `ir`.
    fn describe(self, ir: &mut Ir, a: usize, b: usize) -> usize;
}

/// A typed associative reduction with an identity, as a zero-sized type so the reduction
/// loop inlines it.
pub trait ReduceFn<T>: Copy + Send + Sync {
    /// The run-time op.
    const OP: ReduceOp;
    /// The identity (`combine(identity, x) == x`).
    fn identity() -> T;
    /// Combines two partial results.
    fn combine(a: T, b: T) -> T;
}

/// The table of element-wise functions of one argument: each row is
/// `Variant (method) "name": Domain, |x| scalar, kernel "template" [int "template"],
/// d |d, x, y, g| adjoint;` where the derivative rule returns the adjoint of the argument
/// (`g` times dy/dx, built with [`Derive`]; `y` is the op's result), or `None` where no
/// gradient flows. Rows without `(method)` get no method (`neg` is the `-` operator).
///
/// The table is a macro so that each layer can generate its part from it: pass the name of
/// a macro that takes the rows.
macro_rules! for_each_unary_op {
    ($($callback:ident)::+ $(, $($extra:tt)*)?) => {
        $($callback)::+! { [$($($extra)*)?]
            /// `-x`
            Neg "neg": Num, |x| x.neg(),
                kernel "-({x})",
                cost SIMPLE,
                d |d, x, y, g| Some(d.neg(g));
            /// |x|
            Abs (abs) "abs": Num, |x| x.abs(),
                kernel "{fabs}({x})" int "(({x}) < 0 ? -({x}) : ({x}))",
                cost SIMPLE,
                d |d, x, y, g| { let s = d.unary(UnaryOp::Signum, x); Some(d.mul(g, s)) };
            /// x²
            Square (square) "square": Num, |x| x.mul(x),
                kernel "({x}) * ({x})",
                cost SIMPLE,
                d |d, x, y, g| { let two = d.c(2.0); let dx = d.mul(two, x); Some(d.mul(g, dx)) };
            /// -1, 0 or 1 (NaN stays NaN)
            Signum (signum) "signum": Num, |x| x.signum(),
                kernel "(({x}) != ({x}) ? ({x}) : ({x}) > {0} ? {1} : ({x}) < {0} ? -{1} : {0})"
                    int "((({x}) > 0) - (({x}) < 0))",
                cost SIMPLE,
                d |d, x, y, g| None;
            /// max(x, 0) (NaN stays NaN)
            Relu (relu) "relu": Num, |x| Num::max(x, T::zero()),
                kernel "(({x}) != ({x}) ? ({x}) : (({x}) > {0} ? ({x}) : {0}))"
                    int "(({x}) > {0} ? ({x}) : {0})",
                cost SIMPLE,
                d |d, x, y, g| {
                    let zero = d.c(0.0);
                    let positive = d.compare(CompareOp::Greater, x, zero);
                    Some(d.select(positive, g, zero))
                };
            /// e^x (vectorised for f32; see [`crate::math`])
            Exp (exp) "exp": Float, |x| x.exp(),
                kernel "{exp}({x})",
                cost TRANSCENDENTAL,
                d |d, x, y, g| Some(d.mul(g, y));
            /// ln x
            Ln (ln) "ln": Float, |x| x.ln(),
                kernel "{log}({x})",
                cost TRANSCENDENTAL,
                d |d, x, y, g| Some(d.div(g, x));
            /// √x
            Sqrt (sqrt) "sqrt": Float, |x| x.sqrt(),
                kernel "{sqrt}({x})",
                cost DIVISION,
                d |d, x, y, g| { let half = d.c(0.5); let dx = d.div(half, y); Some(d.mul(g, dx)) };
            /// 1/√x
            Rsqrt (rsqrt) "rsqrt": Float, |x| x.rsqrt(),
                kernel "{rsqrt}({x})",
                cost DIVISION,
                d |d, x, y, g| {
                    let c = d.c(-0.5);
                    let sq = d.mul(y, y);
                    let cube = d.mul(sq, y);
                    let dx = d.mul(c, cube);
                    Some(d.mul(g, dx))
                };
            /// tanh x
            Tanh (tanh) "tanh": Float, |x| x.tanh(),
                kernel "{tanh}({x})",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    let one = d.c(1.0);
                    let sq = d.mul(y, y);
                    let dx = d.sub(one, sq);
                    Some(d.mul(g, dx))
                };
            /// 1 / (1 + e^-x)
            Sigmoid (sigmoid) "sigmoid": Float, |x| x.sigmoid(),
                kernel "{1} / ({1} + {exp}(-({x})))",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    let one = d.c(1.0);
                    let rest = d.sub(one, y);
                    let dx = d.mul(y, rest);
                    Some(d.mul(g, dx))
                };
            /// sin x
            Sin (sin) "sin": Float, |x| x.sin(),
                kernel "{sin}({x})",
                cost TRANSCENDENTAL,
                d |d, x, y, g| { let c = d.unary(UnaryOp::Cos, x); Some(d.mul(g, c)) };
            /// cos x
            Cos (cos) "cos": Float, |x| x.cos(),
                kernel "{cos}({x})",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    let s = d.unary(UnaryOp::Sin, x);
                    let gs = d.mul(g, s);
                    Some(d.neg(gs))
                };
            /// 1/x
            Recip (recip) "recip": Float, |x| T::one().div(x),
                kernel "{1} / ({x})",
                cost DIVISION,
                d |d, x, y, g| { let sq = d.mul(y, y); let gs = d.mul(g, sq); Some(d.neg(gs)) };
            /// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))` (on the
            /// CPU as the equal `x σ(2 √(2/π) (x + 0.044715 x³))`: [`crate::math::gelu_f32`])
            Gelu (gelu) "gelu": Float, |x| x.gelu(),
                kernel "{0.5} * ({x}) * ({1} + {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x}))))",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    let dx = d.unary(UnaryOp::GeluDerivative, x);
                    Some(d.mul(g, dx))
                };
            /// GELU's derivative (tanh approximation): with `t = tanh(√(2/π) (x + 0.044715 x³))`,
            /// `0.5 (1 + t) + 0.5 x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)`, its second term 0 from
            /// |x| = 64 on (on the CPU through σ, as GELU:
            /// [`crate::math::gelu_derivative_f32`]). GELU's backward pass is this op and a product
            GeluDerivative (gelu_derivative) "gelu_derivative": Float, |x| x.gelu_derivative(),
                kernel "{0.5} * ({1} + {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x})))) + {0.5} * ({fabs}({x}) < {64} ? ({x}) : {0}) * ({1} - {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x}))) * {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x})))) * {0.7978845608028654} * ({1} + {0.134145} * ({fabs}({x}) < {64} ? ({x}) : {0}) * ({fabs}({x}) < {64} ? ({x}) : {0}))",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    // With s = σ(v), v = 2√(2/π) (x + 0.044715 x³), w = dv/dx:
                    // s (1 − s) (2w + x w² (1 − 2s) + 12 √(2/π) 0.044715 x²)
                    let (c2, k, k3) = (d.c(1.5957691216057308), d.c(0.044715), d.c(0.134145));
                    let (one, two, c12) = (d.c(1.0), d.c(2.0), d.c(0.4281288976356015));
                    let x2 = d.mul(x, x);
                    let x3 = d.mul(x2, x);
                    let kx3 = d.mul(k, x3);
                    let inner = d.add(x, kx3);
                    let v = d.mul(c2, inner);
                    let s = d.unary(UnaryOp::Sigmoid, v);
                    let rest = d.sub(one, s);
                    let ss = d.mul(s, rest);
                    let k3x2 = d.mul(k3, x2);
                    let du = d.add(one, k3x2);
                    let w = d.mul(c2, du);
                    let two_w = d.mul(two, w);
                    let w2 = d.mul(w, w);
                    let xw2 = d.mul(x, w2);
                    let two_s = d.mul(two, s);
                    let one_2s = d.sub(one, two_s);
                    let curve = d.mul(xw2, one_2s);
                    let cx2 = d.mul(c12, x2);
                    let sum = d.add(two_w, curve);
                    let sum = d.add(sum, cx2);
                    let dx = d.mul(ss, sum);
                    Some(d.mul(g, dx))
                };
            /// SiLU (swish): `x σ(x) = x / (1 + e^-x)`
            Silu (silu) "silu": Float, |x| x.mul(x.sigmoid()),
                kernel "({x}) / ({1} + {exp}(-({x})))",
                cost TRANSCENDENTAL,
                d |d, x, y, g| {
                    // σ + x σ (1 - σ) = y + σ (1 - y)
                    let s = d.unary(UnaryOp::Sigmoid, x);
                    let one = d.c(1.0);
                    let rest = d.sub(one, y);
                    let sr = d.mul(s, rest);
                    let dx = d.add(y, sr);
                    Some(d.mul(g, dx))
                };
            /// Softplus, `ln(1 + e^x)`: a smooth ReLU (computed as `x + ln(1 + e^-x)` above 0,
            /// with `ln_1p`, so that it neither overflows nor loses `e^x` where it is tiny)
            Softplus (softplus) "softplus": Float, |x| x.softplus(),
                kernel "(({x}) > {0} ? ({x}) + {log1p}({exp}(-({x}))) : {log1p}({exp}({x})))",
                cost TRANSCENDENTAL,
                d |d, x, y, g| { let s = d.unary(UnaryOp::Sigmoid, x); Some(d.mul(g, s)) };
            /// ⌊x⌋
            Floor (floor) "floor": Float, |x| x.floor(),
                kernel "{floor}({x})",
                cost SIMPLE,
                d |d, x, y, g| None;
            /// ⌈x⌉
            Ceil (ceil) "ceil": Float, |x| x.ceil(),
                kernel "{ceil}({x})",
                cost SIMPLE,
                d |d, x, y, g| None;
            /// `!x`: every bit flipped (integers)
            BitNot (bit_not) "bit_not": Int, |x| x.bit_not(),
                kernel "~({x})",
                cost SIMPLE,
                d |d, x, y, g| None;
        }
    };
}
pub(crate) use for_each_unary_op;

/// The table of element-wise functions of two arguments (rows as in
/// `for_each_unary_op!`; the derivative rule returns the
/// adjoints of both arguments). The arithmetic rows have no method: they are operators.
macro_rules! for_each_binary_op {
    ($($callback:ident)::+ $(, $($extra:tt)*)?) => {
        $($callback)::+! { [$($($extra)*)?]
            /// `a + b`
            Add "add": Num, |a, b| a.add(b),
                kernel "({a}) + ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [Some(g), Some(g)];
            /// `a - b`
            Sub "sub": Num, |a, b| a.sub(b),
                kernel "({a}) - ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [Some(g), Some(d.neg(g))];
            /// `a * b`
            Mul "mul": Num, |a, b| a.mul(b),
                kernel "({a}) * ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [Some(d.mul(g, b)), Some(d.mul(g, a))];
            /// `a / b` (integers: 0 where `b` is 0)
            Div "div": Num, |a, b| a.div(b),
                kernel "({a}) / ({b})" int "(({b}) == 0 ? {0} : ({a}) / ({b}))",
                cost DIVISION,
                d |d, a, b, y, g| {
                    let da = d.div(g, b);
                    let q = d.div(y, b);
                    let gq = d.mul(g, q);
                    [Some(da), Some(d.neg(gq))]
                };
            /// The larger, element-wise (NaN if either is NaN; the gradient goes to the
            /// larger side).
            Max (max) "max": Num, |a, b| Num::max(a, b),
                kernel "((({a}) != ({a}) || ({b}) != ({b})) ? ({a}) + ({b}) : (({a}) > ({b}) ? ({a}) : ({b})))"
                    int "(({a}) > ({b}) ? ({a}) : ({b}))",
                cost SIMPLE,
                d |d, a, b, y, g| {
                    let zero = d.c(0.0);
                    let to_a = d.compare(CompareOp::GreaterEqual, a, b);
                    let to_b = d.compare(CompareOp::Less, a, b);
                    [Some(d.select(to_a, g, zero)), Some(d.select(to_b, g, zero))]
                };
            /// The smaller, element-wise (NaN if either is NaN).
            Min (min) "min": Num, |a, b| Num::min(a, b),
                kernel "((({a}) != ({a}) || ({b}) != ({b})) ? ({a}) + ({b}) : (({a}) < ({b}) ? ({a}) : ({b})))"
                    int "(({a}) < ({b}) ? ({a}) : ({b}))",
                cost SIMPLE,
                d |d, a, b, y, g| {
                    let zero = d.c(0.0);
                    let to_a = d.compare(CompareOp::LessEqual, a, b);
                    let to_b = d.compare(CompareOp::Greater, a, b);
                    [Some(d.select(to_a, g, zero)), Some(d.select(to_b, g, zero))]
                };
            /// `a ^ b`, element-wise (the base must be positive where the exponent's gradient
            /// is wanted).
            Pow (pow) "pow": Float, |a, b| a.powf(b),
                kernel "{pow}({a}, {b})",
                cost TRANSCENDENTAL,
                d |d, a, b, y, g| {
                    // d/da a^b = b a^(b-1); d/db a^b = a^b ln a
                    let one = d.c(1.0);
                    let b1 = d.sub(b, one);
                    let p = d.binary(BinaryOp::Pow, a, b1);
                    let bp = d.mul(b, p);
                    let ln = d.unary(UnaryOp::Ln, a);
                    let yl = d.mul(y, ln);
                    [Some(d.mul(g, bp)), Some(d.mul(g, yl))]
                };
            /// `a % b`: the remainder of `a / b`, truncated like Rust's `%`: its sign is `a`'s
            /// (`-7 % 3 == -1`, not Python's 2). Integers: a remainder by 0 is
            /// `Error::DivisionByZero`, as for `/`, and `MIN % -1` is 0; floats: C's `fmod`.
            Rem "rem": Num, |a, b| a.rem(b),
                kernel "{fmod}({a}, {b})" int "((({b}) == 0 || ({b}) == -1) ? {0} : ({a}) % ({b}))",
                cost DIVISION,
                d |d, a, b, y, g| {
                    // a % b = a - trunc(a / b) b: d/da = 1, d/db = -trunc(a / b)
                    let a_less = d.sub(a, y);
                    let q = d.div(a_less, b);
                    let gq = d.mul(g, q);
                    [Some(g), Some(d.neg(gq))]
                };
            /// `a & b` (integers)
            BitAnd (bit_and) "bit_and": Int, |a, b| a.bit_and(b),
                kernel "({a}) & ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [None, None];
            /// `a | b` (integers)
            BitOr (bit_or) "bit_or": Int, |a, b| a.bit_or(b),
                kernel "({a}) | ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [None, None];
            /// `a ^ b` (integers)
            BitXor (bit_xor) "bit_xor": Int, |a, b| a.bit_xor(b),
                kernel "({a}) ^ ({b})",
                cost SIMPLE,
                d |d, a, b, y, g| [None, None];
            /// `a << b`, the shift taken modulo the type's width in bits (Rust's
            /// `wrapping_shl`; integers; kernels shift the unsigned bits, so a negative or
            /// overflowing value is no undefined behaviour)
            Shl (shift_left) "shl": Int, |a, b| a.shl(b),
                kernel "({unsigned})({a}) << (({b}) & ({bits} - 1))",
                cost SIMPLE,
                d |d, a, b, y, g| [None, None];
            /// `a >> b`, arithmetic for signed types, the shift taken modulo the type's width
            /// (Rust's `wrapping_shr`; integers; kernels rely on the arithmetic shift every
            /// CUDA and OpenCL compiler gives signed values)
            Shr (shift_right) "shr": Int, |a, b| a.shr(b),
                kernel "({a}) >> (({b}) & ({bits} - 1))",
                cost SIMPLE,
                d |d, a, b, y, g| [None, None];
        }
    };
}
pub(crate) use for_each_binary_op;

/// The table of comparisons: `Variant (method) "name": |a, b| scalar, kernel "C operator";`.
/// Their results are `bool`; no gradient flows through them.
macro_rules! for_each_compare_op {
    ($($callback:ident)::+ $(, $($extra:tt)*)?) => {
        $($callback)::+! { [$($($extra)*)?]
            /// `a == b`
            Equal (equal) "eq": |a, b| a == b, kernel "==";
            /// `a != b`
            NotEqual (not_equal) "ne": |a, b| a != b, kernel "!=";
            /// `a < b`
            Less (less) "lt": |a, b| a < b, kernel "<";
            /// `a <= b`
            LessEqual (less_equal) "le": |a, b| a <= b, kernel "<=";
            /// `a > b`
            Greater (greater) "gt": |a, b| a > b, kernel ">";
            /// `a >= b`
            GreaterEqual (greater_equal) "ge": |a, b| a >= b, kernel ">=";
        }
    };
}
pub(crate) use for_each_compare_op;

for_each_unary_op!(define_unary_ops);
for_each_binary_op!(define_binary_ops);
for_each_compare_op!(define_compare_ops);

/// What a reduction's identity is, in every element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// 0
    Zero,
    /// 1
    One,
    /// The lowest value of the type (-inf for floats).
    Lowest,
    /// The highest value of the type (+inf for floats).
    Highest,
}

define_reduce_ops! {
    /// Sum.
    Sum (SumOp) "sum": Zero, Add;
    /// Product.
    Prod (ProdOp) "prod": One, Mul;
    /// Maximum (NaN-propagating).
    Max (MaxOp) "max": Lowest, Max;
    /// Minimum (NaN-propagating).
    Min (MinOp) "min": Highest, Min;
}

/// The value of `identity` in `T`.
#[inline(always)]
pub fn identity_of<T: Num>(identity: Identity) -> T {
    match identity {
        Identity::Zero => T::zero(),
        Identity::One => T::one(),
        Identity::Lowest => T::lowest(),
        Identity::Highest => T::highest(),
    }
}

#[cfg(test)]
mod tests;
