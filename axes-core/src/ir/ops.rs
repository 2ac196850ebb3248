//! Every element-wise op and every reduction, once.
//!
//! Each row of the tables below gives an op its enum variant, its name, the element types it
//! accepts ([`Domain`]), its scalar function, its device-kernel spelling
//! ([`KernelSpelling`]) and its derivative (as IR built from other ops). From the rows come:
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

    /// The kind of `op` (every op named: a new op must be given its kind).
    pub const fn of_unary(op: UnaryOp) -> OpWeights {
        match op {
            UnaryOp::Exp
            | UnaryOp::Ln
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Gelu
            | UnaryOp::Silu
            | UnaryOp::Sin
            | UnaryOp::Cos => OpWeights::TRANSCENDENTAL,
            UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip => OpWeights::DIVISION,
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Square
            | UnaryOp::Signum
            | UnaryOp::Relu
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::BitNot => OpWeights::SIMPLE,
        }
    }

    /// The kind of `op`.
    pub const fn of_binary(op: BinaryOp) -> OpWeights {
        match op {
            BinaryOp::Pow => OpWeights::TRANSCENDENTAL,
            BinaryOp::Div | BinaryOp::Rem => OpWeights::DIVISION,
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => OpWeights::SIMPLE,
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
                d |d, x, y, g| Some(d.neg(g));
            /// |x|
            Abs (abs) "abs": Num, |x| x.abs(),
                kernel "{fabs}({x})" int "(({x}) < 0 ? -({x}) : ({x}))",
                d |d, x, y, g| { let s = d.unary(UnaryOp::Signum, x); Some(d.mul(g, s)) };
            /// x²
            Square (square) "square": Num, |x| x.mul(x),
                kernel "({x}) * ({x})",
                d |d, x, y, g| { let two = d.c(2.0); let dx = d.mul(two, x); Some(d.mul(g, dx)) };
            /// -1, 0 or 1 (NaN stays NaN)
            Signum (signum) "signum": Num, |x| x.signum(),
                kernel "(({x}) != ({x}) ? ({x}) : ({x}) > {0} ? {1} : ({x}) < {0} ? -{1} : {0})"
                    int "((({x}) > 0) - (({x}) < 0))",
                d |d, x, y, g| None;
            /// max(x, 0) (NaN stays NaN)
            Relu (relu) "relu": Num, |x| Num::max(x, T::zero()),
                kernel "(({x}) != ({x}) ? ({x}) : (({x}) > {0} ? ({x}) : {0}))"
                    int "(({x}) > {0} ? ({x}) : {0})",
                d |d, x, y, g| {
                    let zero = d.c(0.0);
                    let positive = d.compare(CompareOp::Greater, x, zero);
                    Some(d.select(positive, g, zero))
                };
            /// e^x (vectorised for f32; see [`crate::math`])
            Exp (exp) "exp": Float, |x| x.exp(),
                kernel "{exp}({x})",
                d |d, x, y, g| Some(d.mul(g, y));
            /// ln x
            Ln (ln) "ln": Float, |x| x.ln(),
                kernel "{log}({x})",
                d |d, x, y, g| Some(d.div(g, x));
            /// √x
            Sqrt (sqrt) "sqrt": Float, |x| x.sqrt(),
                kernel "{sqrt}({x})",
                d |d, x, y, g| { let half = d.c(0.5); let dx = d.div(half, y); Some(d.mul(g, dx)) };
            /// 1/√x
            Rsqrt (rsqrt) "rsqrt": Float, |x| x.rsqrt(),
                kernel "{rsqrt}({x})",
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
                d |d, x, y, g| {
                    let one = d.c(1.0);
                    let sq = d.mul(y, y);
                    let dx = d.sub(one, sq);
                    Some(d.mul(g, dx))
                };
            /// 1 / (1 + e^-x)
            Sigmoid (sigmoid) "sigmoid": Float, |x| x.sigmoid(),
                kernel "{1} / ({1} + {exp}(-({x})))",
                d |d, x, y, g| {
                    let one = d.c(1.0);
                    let rest = d.sub(one, y);
                    let dx = d.mul(y, rest);
                    Some(d.mul(g, dx))
                };
            /// sin x
            Sin (sin) "sin": Float, |x| x.sin(),
                kernel "{sin}({x})",
                d |d, x, y, g| { let c = d.unary(UnaryOp::Cos, x); Some(d.mul(g, c)) };
            /// cos x
            Cos (cos) "cos": Float, |x| x.cos(),
                kernel "{cos}({x})",
                d |d, x, y, g| {
                    let s = d.unary(UnaryOp::Sin, x);
                    let gs = d.mul(g, s);
                    Some(d.neg(gs))
                };
            /// 1/x
            Recip (recip) "recip": Float, |x| T::one().div(x),
                kernel "{1} / ({x})",
                d |d, x, y, g| { let sq = d.mul(y, y); let gs = d.mul(g, sq); Some(d.neg(gs)) };
            /// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))` (on the
            /// CPU as the equal `x σ(2 √(2/π) (x + 0.044715 x³))`: [`crate::math::gelu_f32`])
            Gelu (gelu) "gelu": Float, |x| x.gelu(),
                kernel "{0.5} * ({x}) * ({1} + {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x}))))",
                d |d, x, y, g| {
                    // 0.5 (1 + t) + 0.5 x (1 - t²) √(2/π) (1 + 3 · 0.044715 x²)
                    let (c, k, k3) = (d.c(0.7978845608028654), d.c(0.044715), d.c(0.134145));
                    let (one, half) = (d.c(1.0), d.c(0.5));
                    let x2 = d.mul(x, x);
                    let x3 = d.mul(x2, x);
                    let kx3 = d.mul(k, x3);
                    let inner = d.add(x, kx3);
                    let u = d.mul(c, inner);
                    let t = d.unary(UnaryOp::Tanh, u);
                    let one_t = d.add(one, t);
                    let left = d.mul(half, one_t);
                    let t2 = d.mul(t, t);
                    let sech2 = d.sub(one, t2);
                    let k3x2 = d.mul(k3, x2);
                    let du = d.add(one, k3x2);
                    let cdu = d.mul(c, du);
                    let hx = d.mul(half, x);
                    let hxs = d.mul(hx, sech2);
                    let right = d.mul(hxs, cdu);
                    let dx = d.add(left, right);
                    Some(d.mul(g, dx))
                };
            /// SiLU (swish): `x σ(x) = x / (1 + e^-x)`
            Silu (silu) "silu": Float, |x| x.mul(x.sigmoid()),
                kernel "({x}) / ({1} + {exp}(-({x})))",
                d |d, x, y, g| {
                    // σ + x σ (1 - σ) = y + σ (1 - y)
                    let s = d.unary(UnaryOp::Sigmoid, x);
                    let one = d.c(1.0);
                    let rest = d.sub(one, y);
                    let sr = d.mul(s, rest);
                    let dx = d.add(y, sr);
                    Some(d.mul(g, dx))
                };
            /// ⌊x⌋
            Floor (floor) "floor": Float, |x| x.floor(),
                kernel "{floor}({x})",
                d |d, x, y, g| None;
            /// ⌈x⌉
            Ceil (ceil) "ceil": Float, |x| x.ceil(),
                kernel "{ceil}({x})",
                d |d, x, y, g| None;
            /// `!x`: every bit flipped (integers)
            BitNot (bit_not) "bit_not": Int, |x| x.bit_not(),
                kernel "~({x})",
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
                d |d, a, b, y, g| [Some(g), Some(g)];
            /// `a - b`
            Sub "sub": Num, |a, b| a.sub(b),
                kernel "({a}) - ({b})",
                d |d, a, b, y, g| [Some(g), Some(d.neg(g))];
            /// `a * b`
            Mul "mul": Num, |a, b| a.mul(b),
                kernel "({a}) * ({b})",
                d |d, a, b, y, g| [Some(d.mul(g, b)), Some(d.mul(g, a))];
            /// `a / b` (integers: 0 where `b` is 0)
            Div "div": Num, |a, b| a.div(b),
                kernel "({a}) / ({b})" int "(({b}) == 0 ? {0} : ({a}) / ({b}))",
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
                d |d, a, b, y, g| [None, None];
            /// `a | b` (integers)
            BitOr (bit_or) "bit_or": Int, |a, b| a.bit_or(b),
                kernel "({a}) | ({b})",
                d |d, a, b, y, g| [None, None];
            /// `a ^ b` (integers)
            BitXor (bit_xor) "bit_xor": Int, |a, b| a.bit_xor(b),
                kernel "({a}) ^ ({b})",
                d |d, a, b, y, g| [None, None];
            /// `a << b`, the shift taken modulo the type's width in bits (Rust's
            /// `wrapping_shl`; integers; kernels shift the unsigned bits, so a negative or
            /// overflowing value is no undefined behaviour)
            Shl (shift_left) "shl": Int, |a, b| a.shl(b),
                kernel "({unsigned})({a}) << (({b}) & ({bits} - 1))",
                d |d, a, b, y, g| [None, None];
            /// `a >> b`, arithmetic for signed types, the shift taken modulo the type's width
            /// (Rust's `wrapping_shr`; integers; kernels rely on the arithmetic shift every
            /// CUDA and OpenCL compiler gives signed values)
            Shr (shift_right) "shr": Int, |a, b| a.shr(b),
                kernel "({a}) >> (({b}) & ({bits} - 1))",
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

macro_rules! define_unary_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$x:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            d |$d:ident, $dx:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        /// An element-wise function of one argument (the rows of
        /// `for_each_unary_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $($(#[$doc])* $op,)*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(UnaryOp::$op => $name,)* }
            }

            /// The element types it accepts.
            pub const fn domain(self) -> Domain {
                match self { $(UnaryOp::$op => Domain::$domain,)* }
            }

            /// How device kernels write it.
            pub const fn kernel(self) -> KernelSpelling {
                match self {
                    $(UnaryOp::$op => KernelSpelling {
                        float: $kernel,
                        integer: first_of!($(Some($int),)? None),
                    },)*
                }
            }

            /// Applies the op to one floating-point element (`None` for an op of integers
            /// only).
            #[inline(always)]
            pub fn apply<T: Float>(self, value: T) -> Option<T> {
                match self { $(UnaryOp::$op => in_domain!($domain, Float, { let $x = value; $scalar }),)* }
            }

            /// `out[i] = op(a[i])` over floats: one `match` per block of elements, not per
            /// element; `false` (nothing written) for an op of integers only.
            #[inline(always)]
            pub fn apply_all<T: Float>(self, out: &mut [T], a: &[T]) -> bool {
                match self {
                    $(UnaryOp::$op => in_domain!($domain, Float, {
                        for (o, &$x) in out.iter_mut().zip(a) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// `out[i] = op(a[i])` over integers; `false` (nothing written) for an op of
            /// floats only.
            #[inline(always)]
            pub fn apply_all_int<T: Int>(self, out: &mut [T], a: &[T]) -> bool {
                match self {
                    $(UnaryOp::$op => in_domain!($domain, Int, {
                        for (o, &$x) in out.iter_mut().zip(a) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// Appends to `ir` the adjoint of the argument `x` of this op, whose result is
            /// node `y` and whose adjoint is node `g`; `None` where no gradient flows.
            #[allow(unused_variables)]
            pub fn derivative(self, ir: &mut Ir, x: usize, y: usize, g: usize) -> Option<usize> {
                let mut builder = Derive(ir);
                match self {
                    $(UnaryOp::$op => {
                        let ($d, $dx, $y, $g) = (&mut builder, x, y, g);
                        $derivative
                    })*
                }
            }
        }

        /// The unary ops as typed zero-sized values, for the CPU loop engine.
        pub mod unary {
            use super::{OpWeights, UnaryFn, UnaryOp};
            use crate::ir::{Ir, IrNode};
            #[allow(unused_imports)]
            use crate::num::{Float, Int, Num};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: $domain> UnaryFn<T> for $op {
                    type Out = T;
                    const WEIGHT: OpWeights = OpWeights::of_unary(UnaryOp::$op);
                    #[inline(always)]
                    fn apply(self, $x: T) -> T {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize) -> usize {
                        ir.push(IrNode::Unary(UnaryOp::$op, a))
                    }
                }
            )*
        }
    };
}

macro_rules! define_binary_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$a:ident, $b:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            d |$d:ident, $da:ident, $db:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        /// An element-wise function of two arguments (the rows of
        /// `for_each_binary_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $($(#[$doc])* $op,)*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: &'static [BinaryOp] = &[$(BinaryOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(BinaryOp::$op => $name,)* }
            }

            /// The element types it accepts.
            pub const fn domain(self) -> Domain {
                match self { $(BinaryOp::$op => Domain::$domain,)* }
            }

            /// How device kernels write it.
            pub const fn kernel(self) -> KernelSpelling {
                match self {
                    $(BinaryOp::$op => KernelSpelling {
                        float: $kernel,
                        integer: first_of!($(Some($int),)? None),
                    },)*
                }
            }

            /// Applies the op to two floating-point elements (`None` for an op of integers
            /// only).
            #[inline(always)]
            pub fn apply<T: Float>(self, left: T, right: T) -> Option<T> {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Float, {
                        let ($a, $b) = (left, right);
                        $scalar
                    }),)*
                }
            }

            /// `out[i] = op(a[i], b[i])` over floats: one `match` per block of elements;
            /// `false` (nothing written) for an op of integers only.
            #[inline(always)]
            pub fn apply_all<T: Float>(self, out: &mut [T], a: &[T], b: &[T]) -> bool {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Float, {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// `out[i] = op(a[i], b[i])` over integers; `false` (nothing written) for an op
            /// of floats only.
            #[inline(always)]
            pub fn apply_all_int<T: Int>(self, out: &mut [T], a: &[T], b: &[T]) -> bool {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Int, {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// Appends to `ir` the adjoints of the arguments `a` and `b` of this op, whose
            /// result is node `y` and whose adjoint is node `g`.
            #[allow(unused_variables)]
            pub fn derivative(
                self,
                ir: &mut Ir,
                a: usize,
                b: usize,
                y: usize,
                g: usize,
            ) -> [Option<usize>; 2] {
                let mut builder = Derive(ir);
                match self {
                    $(BinaryOp::$op => {
                        let ($d, $da, $db, $y, $g) = (&mut builder, a, b, y, g);
                        $derivative
                    })*
                }
            }
        }

        /// The binary ops as typed zero-sized values, for the CPU loop engine.
        pub mod binary {
            use super::{BinaryFn, BinaryOp, OpWeights};
            use crate::ir::{Ir, IrNode};
            #[allow(unused_imports)]
            use crate::num::{Float, Int, Num};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: $domain> BinaryFn<T> for $op {
                    type Out = T;
                    const WEIGHT: OpWeights = OpWeights::of_binary(BinaryOp::$op);
                    #[inline(always)]
                    fn apply(self, $a: T, $b: T) -> T {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize, b: usize) -> usize {
                        ir.push(IrNode::Binary(BinaryOp::$op, a, b))
                    }
                }
            )*
            pub use super::compare::*;
        }
    };
}

macro_rules! define_compare_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident ($method:ident) $name:literal: |$a:ident, $b:ident| $scalar:expr, kernel $kernel:literal;
    )*) => {
        /// A comparison of two elements, giving `bool` (the rows of
        /// `for_each_compare_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CompareOp {
            $($(#[$doc])* $op,)*
        }

        impl CompareOp {
            /// Every comparison, in table order.
            pub const ALL: &'static [CompareOp] = &[$(CompareOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(CompareOp::$op => $name,)* }
            }

            /// The C operator device kernels write.
            pub const fn kernel(self) -> &'static str {
                match self { $(CompareOp::$op => $kernel,)* }
            }

            /// Compares two elements.
            #[inline(always)]
            pub fn apply<T: Element>(self, left: T, right: T) -> bool {
                match self { $(CompareOp::$op => { let ($a, $b) = (left, right); $scalar })* }
            }

            /// `out[i] = op(a[i], b[i])`: one `match` per block of elements.
            pub fn apply_all<T: Element>(self, out: &mut [bool], a: &[T], b: &[T]) {
                match self {
                    $(CompareOp::$op => {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    })*
                }
            }
        }

        /// The comparisons as typed zero-sized values (re-exported by [`binary`]).
        mod compare {
            use super::{BinaryFn, CompareOp};
            use crate::element::Element;
            use crate::ir::{Ir, IrNode};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: Element> BinaryFn<T> for $op {
                    type Out = bool;
                    #[inline(always)]
                    fn apply(self, $a: T, $b: T) -> bool {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize, b: usize) -> usize {
                        ir.push(IrNode::Compare(CompareOp::$op, a, b))
                    }
                }
            )*
        }
    };
}

/// Turns the rows of `for_each_unary_op!` into one call of the
/// macro `target` per row, `target! { [attributes] Variant [method] Domain }`, for the
/// layers that give each op a method.
macro_rules! unary_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$x:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            d |$d:ident, $dx:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$($method)?] $domain } )*
    };
}
pub(crate) use unary_method_rows;

/// `unary_method_rows!` for the rows of
/// `for_each_binary_op!`.
macro_rules! binary_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$a:ident, $b:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            d |$d:ident, $da:ident, $db:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$($method)?] $domain } )*
    };
}
pub(crate) use binary_method_rows;

/// `unary_method_rows!` for the rows of
/// `for_each_compare_op!`.
macro_rules! compare_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident ($method:ident) $name:literal: |$a:ident, $b:ident| $scalar:expr, kernel $kernel:literal;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$method] Element } )*
    };
}
pub(crate) use compare_method_rows;

/// `Some($body)` for a row of domain `$domain` over elements of kind `$kind` (`Float` or
/// `Int`) where the row accepts them, else `None`: a row's scalar function compiles only for
/// the types of its domain.
macro_rules! in_domain {
    (Num, $kind:ident, $body:block) => {
        Some($body)
    };
    (Float, Float, $body:block) => {
        Some($body)
    };
    (Int, Int, $body:block) => {
        Some($body)
    };
    ($domain:ident, $kind:ident, $body:block) => {
        None
    };
}

/// The first of its arguments (for optional table columns).
macro_rules! first_of {
    ($first:expr $(, $rest:expr)* $(,)?) => {
        $first
    };
}

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

macro_rules! define_reduce_ops {
    ($(
        $(#[$doc:meta])*
        $op:ident ($typed:ident) $name:literal: $identity:ident, $combine:ident;
    )*) => {
        /// An associative reduction with an identity.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ReduceOp {
            $($(#[$doc])* $op,)*
        }

        impl ReduceOp {
            /// Every reduction, in table order.
            pub const ALL: &'static [ReduceOp] = &[$(ReduceOp::$op),*];

            /// The name (in messages).
            pub const fn name(self) -> &'static str {
                match self { $(ReduceOp::$op => $name,)* }
            }

            /// The binary op that combines two partial results.
            pub const fn combine_op(self) -> BinaryOp {
                match self { $(ReduceOp::$op => BinaryOp::$combine,)* }
            }

            /// The value a reduction over nothing gives.
            pub const fn identity(self) -> Identity {
                match self { $(ReduceOp::$op => Identity::$identity,)* }
            }
        }

        /// The reductions as typed zero-sized values, for the CPU loop engine.
        pub mod reduce {
            use super::{binary, BinaryFn, ReduceFn, ReduceOp};
            use crate::num::Num;
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $typed;
                impl<T: Num> ReduceFn<T> for $typed {
                    const OP: ReduceOp = ReduceOp::$op;
                    #[inline(always)]
                    fn identity() -> T {
                        super::identity_of::<T>(Identity::$identity)
                    }
                    #[inline(always)]
                    fn combine(a: T, b: T) -> T {
                        binary::$combine.apply(a, b)
                    }
                }
            )*
            use super::Identity;
        }
    };
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
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_within_each_table() {
        let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|op| op.name()).collect();
        names.extend(BinaryOp::ALL.iter().map(|op| op.name()));
        names.extend(CompareOp::ALL.iter().map(|op| op.name()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "two ops share a name");
    }

    #[test]
    fn typed_and_run_time_forms_agree() {
        for &x in &[-2.5f64, -0.3, 0.0, 0.7, 3.0] {
            assert_eq!(Some(UnaryFn::apply(unary::Tanh, x)), UnaryOp::Tanh.apply(x));
            assert_eq!(Some(UnaryFn::apply(unary::Relu, x)), UnaryOp::Relu.apply(x));
            assert_eq!(
                Some(BinaryFn::apply(binary::Max, x, 0.5)),
                BinaryOp::Max.apply(x, 0.5)
            );
            assert_eq!(
                BinaryFn::apply(binary::Less, x, 0.5),
                CompareOp::Less.apply(x, 0.5)
            );
        }
        let mut out = [0.0f32; 3];
        assert!(UnaryOp::Square.apply_all(&mut out, &[1.0, -2.0, 3.0]));
        assert_eq!(out, [1.0, 4.0, 9.0]);
        assert!(!UnaryOp::BitNot.apply_all(&mut out, &[1.0, -2.0, 3.0]));
        let mut bits = [0u8; 2];
        assert!(BinaryOp::Shl.apply_all_int(&mut bits, &[3, 128], &[2, 9]));
        assert_eq!(bits, [12, 0]); // 128 << (9 mod 8)
        assert!(!UnaryOp::Exp.apply_all_int(&mut bits, &[1, 2]));
    }

    #[test]
    fn every_integer_spelling_belongs_to_an_op_integers_may_use() {
        for op in UnaryOp::ALL {
            if op.kernel().integer.is_some() {
                assert_eq!(op.domain(), Domain::Num, "{}", op.name());
            }
        }
        for op in BinaryOp::ALL {
            if op.kernel().integer.is_some() {
                assert_eq!(op.domain(), Domain::Num, "{}", op.name());
            }
        }
    }

    #[test]
    fn reductions_start_from_their_identity() {
        assert_eq!(<reduce::SumOp as ReduceFn<i32>>::identity(), 0);
        assert_eq!(
            <reduce::MaxOp as ReduceFn<f32>>::identity(),
            f32::NEG_INFINITY
        );
        assert_eq!(<reduce::MinOp as ReduceFn<u8>>::combine(3, 7), 3);
        assert_eq!(ReduceOp::Prod.combine_op(), BinaryOp::Mul);
    }
}
