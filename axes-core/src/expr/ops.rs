//! Element-wise operators as zero-sized types, so each expression node is monomorphised
//! around its operator and the loop body inlines completely.

use crate::element::Element;
use crate::expr::{Ir, IrNode};

/// An element-wise function of one argument.
pub trait UnaryOp<T: Element>: Copy + Send + Sync {
    /// The result element type.
    type Out: Element;
    /// Its name in the run-time description.
    const NAME: &'static str;
    /// Applies the function.
    fn apply(self, x: T) -> Self::Out;
    /// Appends the op applied to node `a` to `ir` (ops with parameters spell them out with
    /// constants, so the IR is complete).
    fn describe(self, ir: &mut Ir, a: usize) -> usize {
        ir.push(IrNode::Unary(Self::NAME, a))
    }
}

/// An element-wise function of two arguments.
pub trait BinaryOp<T: Element>: Copy + Send + Sync {
    /// The result element type.
    type Out: Element;
    /// Its name in the run-time description.
    const NAME: &'static str;
    /// Applies the function.
    fn apply(self, a: T, b: T) -> Self::Out;
}

/// The unary operators.
pub mod unary {
    use super::UnaryOp;
    use crate::expr::{Ir, IrNode};
    use crate::num::{Float, Num};

    macro_rules! unary_ops {
        ($($(#[$doc:meta])* $name:ident: $bound:ident, $ir:literal, |$x:ident| $body:expr;)*) => {$(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;
            impl<T: $bound> UnaryOp<T> for $name {
                type Out = T;
                const NAME: &'static str = $ir;
                #[inline(always)]
                fn apply(self, $x: T) -> T {
                    $body
                }
            }
        )*};
    }

    unary_ops! {
        /// `-x`
        Neg: Num, "neg", |x| x.neg();
        /// `|x|`
        Abs: Num, "abs", |x| x.abs();
        /// `x * x`
        Square: Num, "square", |x| x.mul(x);
        /// -1, 0 or 1
        Signum: Num, "signum", |x| x.signum();
        /// `max(x, 0)`
        Relu: Num, "relu", |x| Num::max(x, T::zero());
        /// e^x
        Exp: Float, "exp", |x| x.exp();
        /// ln x
        Ln: Float, "ln", |x| x.ln();
        /// √x
        Sqrt: Float, "sqrt", |x| x.sqrt();
        /// 1/√x
        Rsqrt: Float, "rsqrt", |x| x.rsqrt();
        /// tanh x
        Tanh: Float, "tanh", |x| x.tanh();
        /// 1 / (1 + e^-x)
        Sigmoid: Float, "sigmoid", |x| x.sigmoid();
        /// sin x
        Sin: Float, "sin", |x| x.sin();
        /// cos x
        Cos: Float, "cos", |x| x.cos();
        /// 1/x
        Recip: Float, "recip", |x| T::one().div(x);
        /// ⌊x⌋
        Floor: Float, "floor", |x| x.floor();
        /// ⌈x⌉
        Ceil: Float, "ceil", |x| x.ceil();
    }

    /// `x^n` for a fixed integer `n`.
    #[derive(Clone, Copy, Debug)]
    pub struct Powi(pub i32);
    impl<T: Num> UnaryOp<T> for Powi {
        type Out = T;
        const NAME: &'static str = "powi";
        #[inline(always)]
        fn apply(self, x: T) -> T {
            x.powi(self.0)
        }
        fn describe(self, ir: &mut Ir, a: usize) -> usize {
            let n = ir.push(IrNode::Scalar(self.0 as f64));
            ir.push(IrNode::Binary("powi", a, n))
        }
    }

    /// `x^p` for a fixed float `p`.
    #[derive(Clone, Copy, Debug)]
    pub struct Powf<T>(pub T);
    impl<T: Float> UnaryOp<T> for Powf<T> {
        type Out = T;
        const NAME: &'static str = "powf";
        #[inline(always)]
        fn apply(self, x: T) -> T {
            x.powf(self.0)
        }
        fn describe(self, ir: &mut Ir, a: usize) -> usize {
            let p = ir.push(IrNode::Scalar(self.0.to_f64()));
            ir.push(IrNode::Binary("pow", a, p))
        }
    }

    /// `min(max(x, low), high)` (NaN stays NaN).
    #[derive(Clone, Copy, Debug)]
    pub struct Clamp<T>(pub T, pub T);
    impl<T: Num> UnaryOp<T> for Clamp<T> {
        type Out = T;
        const NAME: &'static str = "clamp";
        #[inline(always)]
        fn apply(self, x: T) -> T {
            Num::min(Num::max(x, self.0), self.1)
        }
        fn describe(self, ir: &mut Ir, a: usize) -> usize {
            let low = ir.push(IrNode::Scalar(self.0.to_f64()));
            let high = ir.push(IrNode::Scalar(self.1.to_f64()));
            let raised = ir.push(IrNode::Binary("max", a, low));
            ir.push(IrNode::Binary("min", raised, high))
        }
    }
}

/// The binary operators.
pub mod binary {
    use super::BinaryOp;
    use crate::element::Element;
    use crate::num::{Float, Num};

    macro_rules! binary_ops {
        ($($(#[$doc:meta])* $name:ident: $bound:ident -> $out:ty, $ir:literal, |$a:ident, $b:ident| $body:expr;)*) => {$(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;
            impl<T: $bound> BinaryOp<T> for $name {
                type Out = $out;
                const NAME: &'static str = $ir;
                #[inline(always)]
                fn apply(self, $a: T, $b: T) -> $out {
                    $body
                }
            }
        )*};
    }

    binary_ops! {
        /// `a + b`
        Add: Num -> T, "add", |a, b| a.add(b);
        /// `a - b`
        Sub: Num -> T, "sub", |a, b| a.sub(b);
        /// `a * b`
        Mul: Num -> T, "mul", |a, b| a.mul(b);
        /// `a / b`
        Div: Num -> T, "div", |a, b| a.div(b);
        /// The larger (NaN if either is NaN).
        Max: Num -> T, "max", |a, b| Num::max(a, b);
        /// The smaller (NaN if either is NaN).
        Min: Num -> T, "min", |a, b| Num::min(a, b);
        /// `a^b`
        Pow: Float -> T, "pow", |a, b| a.powf(b);
        /// `a == b`
        Equal: Element -> bool, "eq", |a, b| a == b;
        /// `a != b`
        NotEqual: Element -> bool, "ne", |a, b| a != b;
        /// `a < b`
        Less: Element -> bool, "lt", |a, b| a < b;
        /// `a <= b`
        LessEqual: Element -> bool, "le", |a, b| a <= b;
        /// `a > b`
        Greater: Element -> bool, "gt", |a, b| a > b;
        /// `a >= b`
        GreaterEqual: Element -> bool, "ge", |a, b| a >= b;
    }
}
