//! Typed ops with a parameter: `x.powi(3)`, `x.powf(0.5)`, `x.clamp(lo, hi)`. They describe
//! themselves as table ops ([`crate::ir::ops`]) with constants.

use crate::ir::{BinaryOp, Ir, IrNode, OpWeights, UnaryFn};
use crate::num::{Float, Num};

/// `x^n` for a fixed integer `n`.
#[derive(Clone, Copy, Debug)]
pub struct Powi(pub i32);
impl<T: Num> UnaryFn<T> for Powi {
    type Out = T;
    const WEIGHT: OpWeights = OpWeights::TRANSCENDENTAL;
    #[inline(always)]
    fn apply(self, x: T) -> T {
        x.powi(self.0)
    }
    fn describe(self, ir: &mut Ir, a: usize) -> usize {
        let n = ir.push(IrNode::Scalar(self.0 as f64));
        ir.push(IrNode::Binary(BinaryOp::Pow, a, n))
    }
}

/// `x^p` for a fixed float `p`.
#[derive(Clone, Copy, Debug)]
pub struct Powf<T>(pub T);
impl<T: Float> UnaryFn<T> for Powf<T> {
    type Out = T;
    const WEIGHT: OpWeights = OpWeights::TRANSCENDENTAL;
    #[inline(always)]
    fn apply(self, x: T) -> T {
        x.powf(self.0)
    }
    fn describe(self, ir: &mut Ir, a: usize) -> usize {
        let p = ir.push(IrNode::Scalar(self.0.to_f64()));
        ir.push(IrNode::Binary(BinaryOp::Pow, a, p))
    }
}

/// `min(max(x, low), high)` (NaN stays NaN).
#[derive(Clone, Copy, Debug)]
pub struct Clamp<T>(pub T, pub T);
impl<T: Num> UnaryFn<T> for Clamp<T> {
    type Out = T;
    const WEIGHT: OpWeights = OpWeights::SIMPLE.plus(OpWeights::SIMPLE);
    #[inline(always)]
    fn apply(self, x: T) -> T {
        Num::min(Num::max(x, self.0), self.1)
    }
    fn describe(self, ir: &mut Ir, a: usize) -> usize {
        let low = ir.push(IrNode::Scalar(self.0.to_f64()));
        let high = ir.push(IrNode::Scalar(self.1.to_f64()));
        let raised = ir.push(IrNode::Binary(BinaryOp::Max, a, low));
        ir.push(IrNode::Binary(BinaryOp::Min, raised, high))
    }
}
