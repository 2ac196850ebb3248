//! Dynamic loss scaling: training in f16 without its gradients underflowing.

use crate::Device;
use crate::autodiff::{Grads, Var};
use crate::dispatch::{Input, moved, placed, unique_for_writing};
use crate::element::Element;
use crate::error::Result;
use crate::eval::ExprExt;
use crate::expr::Scalar;
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode};
use crate::nn::Gradient;
use crate::nn::params::{ArenaElement, flat};
use crate::num::Float;
use crate::storage::Storage;

use super::buffers::{element, scalars_written};
use super::{check_setting, wide};

/// Dynamic loss scaling, as PyTorch's `GradScaler`, for training in f16: whose smallest
/// normal value, 6·10⁻⁵, is above many of a model's gradients. The backward pass starts from
/// the loss times a scale, so that the gradients it computes are that much larger;
/// [`LossScale::unscale`] divides them again, in f32. Where a gradient overflowed (an
/// infinity or a NaN anywhere), the optimizer step that takes it is skipped — every
/// parameter and optimizer state stays as it was, and the step count too — and the scale
/// halves; after [`LossScale::growth_interval`] clean steps in a row it doubles. The scale
/// lives on the loss's device and every decision is taken there: no step reads a value
/// back to the host. bf16 has f32's range and needs none.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Init, ParamsBuilder};
/// use axes::optim::{Adam, LossScale};
/// use half::f16;
/// #[derive(Axis)] struct Feature;
/// let mut builder = ParamsBuilder::new();
/// let w = builder.add::<(Feature,)>("w", Feature.len(2), Init::Ones, 2, 2)?;
/// let mut params = builder.build::<f32>(0)?;
/// let (mut adam, mut scale) = (Adam::new(1e-3), LossScale::new());
/// // A loss whose gradient, 2⁻²⁶ per element, is below f16's smallest value unless scaled.
/// let small = f16::from_f32(2f32.powi(-13));
/// let tape = Tape::<f16>::new();
/// let p = params.bind_as::<f16>(&tape)?;
/// let loss = (p.var(&w)?.sum::<(Feature,)>()? * small * small).eval()?;
/// let grad = p.gradient(&scale.backward(&loss)?)?;
/// assert_eq!(grad.to_vec()?[0], f16::from_f32(2f32.powi(-11))); // times the scale, 2¹⁵
/// let grad = scale.unscale(&grad)?;
/// assert_eq!(grad.to_vec()?[0], 2f32.powi(-26));
/// adam.step(&mut params, &grad)?;
/// assert_eq!(scale.scale()?, 32768.0); // 2¹⁶ does not fit f16: 2¹⁵
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LossScale {
    /// The scale of the first step (finite, > 0; 2¹⁶ by default, as PyTorch's), at most the
    /// largest power of two the loss's type holds (2¹⁵ in f16).
    pub init: f64,
    /// Clean steps in a row after which the scale doubles (≥ 1; 2000 by default).
    pub growth_interval: usize,
    /// The clean steps a new state starts from (a resumed scale's).
    start_clean: usize,
    /// The scale and the clean steps since it last changed, as f32, on the loss's device.
    state: Option<Storage<f32>>,
}

impl Default for LossScale {
    fn default() -> Self {
        Self::new()
    }
}

impl LossScale {
    /// A loss scale of 2¹⁶ that doubles after 2000 clean steps, as PyTorch's default.
    pub fn new() -> Self {
        LossScale {
            init: 65536.0,
            growth_interval: 2000,
            start_clean: 0,
            state: None,
        }
    }

    /// This loss scale going on from `state` (the scale, and the clean steps it has counted
    /// toward doubling), as [`LossScale::state`] read it: how a resumed run takes up the
    /// scale its checkpoint kept.
    pub fn resumed(mut self, (scale, clean_steps): (f64, usize)) -> Self {
        self.init = scale;
        self.start_clean = clean_steps;
        self.state = None;
        self
    }

    /// With the scale doubling after `steps` clean steps in a row.
    pub fn with_growth_interval(mut self, steps: usize) -> Self {
        self.growth_interval = steps;
        self
    }

    /// The gradients of `loss` times the scale: [`Var::backward`] seeded with the scale in
    /// place of 1. Pass the parameters' gradient to [`LossScale::unscale`].
    pub fn backward<H: Float>(&mut self, loss: &Var<H, ()>) -> Result<Grads<H>> {
        let state = self.buffer_on::<H>(loss.value().device())?;
        let seed = element(state, 0).cast::<H>().eval()?;
        loss.backward_from(seed.storage().clone())
    }

    /// `grad` divided by the scale, in f32 (its type's [`Float::Wide`]), to give to an
    /// optimizer, which takes the step only where every element is finite; the scale
    /// halves where one is not, and doubles after [`LossScale::growth_interval`] clean
    /// steps. Three passes over the gradient's device (the division, a sum telling whether
    /// every element is finite, the scale's update), none read back.
    pub fn unscale<H: Float>(&mut self, grad: &Gradient<H>) -> Result<Gradient<H::Wide>> {
        self.check()?;
        let state = self.buffer_on::<H>(grad.device())?;
        let scale = element(state, 0);
        let g = flat(grad.storage().clone());
        let unscaled = (wide(&g) * scale.cast::<H::Wide>().recip()).eval()?;
        // 0 exactly where every element is finite (0 · ∞ and 0 · NaN are NaN).
        let zero = Scalar(H::Wide::zero());
        let finite = (&unscaled * zero).sum::<(ArenaElement,)>()?;
        let gate = (&finite).equal(zero).cast::<H::Wide>().eval()?;
        self.update::<H>(&finite)?;
        Ok(grad.gated(unscaled.storage().clone(), gate.storage().clone()))
    }

    /// The scale the next step's loss is multiplied by: read back from its device (the
    /// initial one before any step).
    pub fn scale(&self) -> Result<f64> {
        Ok(self.state()?.0)
    }

    /// The scale and the clean steps counted toward its doubling, read back from its
    /// device: what a checkpoint keeps to resume ([`LossScale::resumed`]).
    pub fn state(&self) -> Result<(f64, usize)> {
        match &self.state {
            Some(state) => {
                let values = state.current_values()?;
                Ok((f64::from(values[0]), values[1] as usize))
            }
            None => Ok((self.init, self.start_clean)),
        }
    }

    /// An error naming a setting outside its range.
    fn check(&self) -> Result<()> {
        let init = self.init;
        check_setting(
            "LossScale::init",
            init,
            init.is_finite() && init > 0.0,
            "finite and > 0",
        )?;
        let interval = self.growth_interval;
        check_setting(
            "LossScale::growth_interval",
            interval as f64,
            interval >= 1,
            "≥ 1",
        )
    }

    /// The scale's buffer on `device` (made at the first step, moved where the loss moved).
    fn buffer_on<H: Float>(&mut self, device: Device) -> Result<&mut Storage<f32>> {
        self.check()?;
        match &mut self.state {
            Some(state) if state.device() == device => {}
            Some(state) => *state = moved(state, device)?,
            None => {
                let init = self.init.min(largest_power_of_two::<H>()) as f32;
                let clean = self.start_clean as f32;
                self.state = Some(placed(crate::storage::copied(&[init, clean])?, device)?);
            }
        }
        Ok(self.state.as_mut().expect("made above"))
    }

    /// The scale's update, in place on its device: halved, and the clean steps reset, where
    /// `finite` (0 where the gradient was finite) is not 0; else one more clean step, and
    /// the scale doubled (at most to the largest power of two `H` holds) after
    /// `growth_interval` of them.
    fn update<H: Float>(&mut self, finite: &crate::Tensor<H::Wide, ()>) -> Result<()> {
        let cap = largest_power_of_two::<H>();
        let interval = self.growth_interval as f64;
        let state = self.state.as_mut().expect("made by `unscale`");
        let device = state.device();
        unique_for_writing(state)?;
        let mut ir = Ir::default();
        let (scale, clean, sum) = (ir.leaf(), ir.leaf(), ir.leaf());
        let mut push = |node| ir.push(node);
        let [zero, one, two, half, interval, cap] =
            [0.0, 1.0, 2.0, 0.5, interval, cap].map(|v| push(IrNode::Scalar(v)));
        let clean_now = push(IrNode::Compare(CompareOp::Equal, sum, zero));
        let counted = push(IrNode::Binary(BinaryOp::Add, clean, one));
        let grow = push(IrNode::Compare(CompareOp::GreaterEqual, counted, interval));
        let doubled = push(IrNode::Binary(BinaryOp::Mul, scale, two));
        let grown = push(IrNode::Binary(BinaryOp::Min, doubled, cap));
        let kept = push(IrNode::Select(grow, grown, scale));
        let halved = push(IrNode::Binary(BinaryOp::Mul, scale, half));
        let next_scale = push(IrNode::Select(clean_now, kept, halved));
        let restarted = push(IrNode::Select(grow, zero, counted));
        let next_clean = push(IrNode::Select(clean_now, restarted, zero));
        let at = |k| crate::layout::Layout::new(&[], &[], k, 2).expect("inside the buffer");
        let inputs = vec![
            Input::new(&*state, &at(0), &[], 0)?,
            Input::new(&*state, &at(1), &[], 0)?,
            Input::new(finite.storage(), finite.layout(), &[], 0)?,
        ];
        let roots = [next_scale, next_clean];
        if let Some(values) = scalars_written::<f32>(device, &ir, inputs, &roots, &[0, 1])? {
            *state = values;
        }
        Ok(())
    }
}

/// The largest power of two `H` (and the f32 the scale is kept in) holds: 2¹⁵ for f16, 2¹²⁷
/// for bf16 and f32, and no more than 2⁶⁴ (no loss needs more).
fn largest_power_of_two<H: Float>() -> f64 {
    let mut power = 1.0f64;
    while power < 2f64.powi(64)
        && H::from_f64(power * 2.0).to_f64().is_finite()
        && ((power * 2.0) as f32).is_finite()
    {
        power *= 2.0;
    }
    power
}
