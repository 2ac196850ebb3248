//! Learning-rate schedules, written as a [`Formula`] of the step count that an optimizer
//! evaluates on the parameters' device at every step.

use std::ops::{Add, Div, Mul, Sub};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, UnaryOp};

use super::{check_setting, finite_at_least_0};

/// A number computed from an optimizer's step count (counted from 0): the optimizer
/// evaluates it on the parameters' device at every step, in their [`Float::Wide`] type —
/// no host read, no kernel built again as the step advances — and [`Formula::at`] on the
/// host, in f64. Built from [`Formula::step`], constants, `+ - * /`, [`Formula::min`],
/// [`Formula::max`], [`Formula::cos`], [`Formula::sqrt`], [`Formula::pow`] and
/// [`Formula::below`].
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::optim::Formula;
/// // halve the rate every 100 steps
/// let t = Formula::step();
/// let rate = Formula::constant(0.5).pow((t / 100.0).floor()) * 1e-3;
/// assert_eq!(rate.at(250.0), 2.5e-4);
/// ```
///
/// [`Float::Wide`]: crate::num::Float::Wide
#[derive(Clone, Debug, PartialEq)]
pub struct Formula(Arc<Term>);

#[derive(Debug, PartialEq)]
enum Term {
    Step,
    Constant(f64),
    Unary(Op1, Formula),
    Binary(Op2, Formula, Formula),
    /// `then` where `value < limit`, else `otherwise`.
    Below {
        value: Formula,
        limit: Formula,
        then: Formula,
        otherwise: Formula,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op1 {
    Cos,
    Sqrt,
    Floor,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op2 {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Pow,
}

impl Formula {
    /// The step count, from 0 at the optimizer's first step.
    pub fn step() -> Formula {
        Formula(Arc::new(Term::Step))
    }

    /// The constant `value`.
    pub fn constant(value: f64) -> Formula {
        Formula(Arc::new(Term::Constant(value)))
    }

    fn unary(&self, op: Op1) -> Formula {
        Formula(Arc::new(Term::Unary(op, self.clone())))
    }

    fn binary(&self, op: Op2, other: impl Into<Formula>) -> Formula {
        Formula(Arc::new(Term::Binary(op, self.clone(), other.into())))
    }

    /// The cosine (of radians).
    pub fn cos(&self) -> Formula {
        self.unary(Op1::Cos)
    }

    /// The square root.
    pub fn sqrt(&self) -> Formula {
        self.unary(Op1::Sqrt)
    }

    /// The largest integer not above it.
    pub fn floor(&self) -> Formula {
        self.unary(Op1::Floor)
    }

    /// The smaller of the two.
    pub fn min(&self, other: impl Into<Formula>) -> Formula {
        self.binary(Op2::Min, other)
    }

    /// The larger of the two.
    pub fn max(&self, other: impl Into<Formula>) -> Formula {
        self.binary(Op2::Max, other)
    }

    /// This to the power `exponent`.
    pub fn pow(&self, exponent: impl Into<Formula>) -> Formula {
        self.binary(Op2::Pow, exponent)
    }

    /// `then` where this is below `limit`, else `otherwise`.
    pub fn below(
        &self,
        limit: impl Into<Formula>,
        then: impl Into<Formula>,
        otherwise: impl Into<Formula>,
    ) -> Formula {
        Formula(Arc::new(Term::Below {
            value: self.clone(),
            limit: limit.into(),
            then: then.into(),
            otherwise: otherwise.into(),
        }))
    }

    /// Its value at step `step`, in f64.
    pub fn at(&self, step: f64) -> f64 {
        match &*self.0 {
            Term::Step => step,
            &Term::Constant(value) => value,
            Term::Unary(op, x) => {
                let x = x.at(step);
                match op {
                    Op1::Cos => x.cos(),
                    Op1::Sqrt => x.sqrt(),
                    Op1::Floor => x.floor(),
                }
            }
            Term::Binary(op, a, b) => {
                let (a, b) = (a.at(step), b.at(step));
                match op {
                    Op2::Add => a + b,
                    Op2::Sub => a - b,
                    Op2::Mul => a * b,
                    Op2::Div => a / b,
                    Op2::Min => a.min(b),
                    Op2::Max => a.max(b),
                    Op2::Pow => a.powf(b),
                }
            }
            Term::Below {
                value,
                limit,
                then,
                otherwise,
            } => {
                if value.at(step) < limit.at(step) {
                    then.at(step)
                } else {
                    otherwise.at(step)
                }
            }
        }
    }

    /// Appends its nodes to `ir`, the step count being node `step`; the node holding it.
    pub(crate) fn lower(&self, ir: &mut Ir, step: usize) -> usize {
        match &*self.0 {
            Term::Step => step,
            &Term::Constant(value) => ir.push(IrNode::Scalar(value)),
            Term::Unary(op, x) => {
                let x = x.lower(ir, step);
                let op = match op {
                    Op1::Cos => UnaryOp::Cos,
                    Op1::Sqrt => UnaryOp::Sqrt,
                    Op1::Floor => UnaryOp::Floor,
                };
                ir.push(IrNode::Unary(op, x))
            }
            Term::Binary(op, a, b) => {
                let (a, b) = (a.lower(ir, step), b.lower(ir, step));
                let op = match op {
                    Op2::Add => BinaryOp::Add,
                    Op2::Sub => BinaryOp::Sub,
                    Op2::Mul => BinaryOp::Mul,
                    Op2::Div => BinaryOp::Div,
                    Op2::Min => BinaryOp::Min,
                    Op2::Max => BinaryOp::Max,
                    Op2::Pow => BinaryOp::Pow,
                };
                ir.push(IrNode::Binary(op, a, b))
            }
            Term::Below {
                value,
                limit,
                then,
                otherwise,
            } => {
                let (value, limit) = (value.lower(ir, step), limit.lower(ir, step));
                let below = ir.push(IrNode::Compare(CompareOp::Less, value, limit));
                let (then, otherwise) = (then.lower(ir, step), otherwise.lower(ir, step));
                ir.push(IrNode::Select(below, then, otherwise))
            }
        }
    }
}

impl From<f64> for Formula {
    fn from(value: f64) -> Formula {
        Formula::constant(value)
    }
}

macro_rules! formula_operator {
    ($($trait:ident $method:ident $op:ident;)*) => {$(
        impl<R: Into<Formula>> $trait<R> for Formula {
            type Output = Formula;
            fn $method(self, other: R) -> Formula {
                self.binary(Op2::$op, other)
            }
        }
        impl<R: Into<Formula>> $trait<R> for &Formula {
            type Output = Formula;
            fn $method(self, other: R) -> Formula {
                self.binary(Op2::$op, other)
            }
        }
        impl $trait<Formula> for f64 {
            type Output = Formula;
            fn $method(self, other: Formula) -> Formula {
                Formula::constant(self).binary(Op2::$op, other)
            }
        }
    )*};
}

formula_operator! {
    Add add Add;
    Sub sub Sub;
    Mul mul Mul;
    Div div Div;
}

/// A learning rate for each step, that an optimizer owns ([`Adam::with_schedule`],
/// [`Sgd::with_schedule`]) and evaluates on the parameters' device before each of its steps.
///
/// [`Adam::with_schedule`]: super::Adam::with_schedule
/// [`Sgd::with_schedule`]: super::Sgd::with_schedule
pub trait Schedule: std::fmt::Debug + Send + Sync {
    /// The rate as a formula of the step (counted from 0).
    fn rate(&self) -> Formula;
}

/// A learning rate that rises linearly from 0 over `warmup` steps to `peak`, then falls along
/// a cosine to `floor` at step `total` (and stays there).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::optim::WarmupCosine;
/// let schedule = WarmupCosine::new(1e-3, 1e-4, 10, 110)?;
/// assert_eq!(schedule.at(0), 1e-4 * 0.0 + 1e-3 * 0.1);       // the first step: 1/10 of the peak
/// assert_eq!(schedule.at(9), 1e-3);                          // the end of the warmup
/// assert!((schedule.at(60) - 5.5e-4).abs() < 1e-12);         // half way down
/// assert_eq!(schedule.at(500), 1e-4);
/// assert!(WarmupCosine::new(1e-3, 1e-4, 110, 110).is_err()); // no steps left for the cosine
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupCosine {
    peak: f64,
    floor: f64,
    warmup: usize,
    total: usize,
}

impl WarmupCosine {
    /// A schedule to `peak` (the rate at the end of the warmup) over `warmup` steps, then
    /// down to `floor` at step `total`. An error unless both rates are finite and ≥ 0 and the
    /// warmup ends before `total`.
    pub fn new(peak: f64, floor: f64, warmup: usize, total: usize) -> Result<Self> {
        let rate = "finite and ≥ 0";
        check_setting("WarmupCosine::peak", peak, finite_at_least_0(peak), rate)?;
        check_setting("WarmupCosine::floor", floor, finite_at_least_0(floor), rate)?;
        if warmup >= total {
            return Err(Error::InvalidSetting {
                setting: "WarmupCosine::warmup".into(),
                value: warmup.to_string(),
                allowed: format!("below `total` ({total})"),
            });
        }
        Ok(WarmupCosine {
            peak,
            floor,
            warmup,
            total,
        })
    }

    /// The rate for step `step` (counted from 0), on the host.
    pub fn at(&self, step: usize) -> f64 {
        self.rate().at(step as f64)
    }
}

impl Schedule for WarmupCosine {
    fn rate(&self) -> Formula {
        let t = Formula::step();
        let (peak, floor) = (self.peak, self.floor);
        let (warmup, span) = (self.warmup as f64, (self.total - self.warmup) as f64);
        let rising = peak * (&t + 1.0) / warmup;
        let progress = ((&t - warmup) / span).min(1.0);
        let cosine = floor + (peak - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        t.below(warmup, rising, cosine)
    }
}
