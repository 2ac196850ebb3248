//! Optimizers: each updates every parameter of a [`Params`] arena over the flat buffers
//! (parameters, gradient and optimizer state side by side), its update written once as typed
//! expressions of the next parameters and the next state. Where the parameters live, those
//! run as a fused pass of the typed engine each (host memory), or together as one kernel
//! launch that writes the parameters and the state over themselves (a device; two launches
//! for half-precision parameters, whose state is f32: one launch writes one element type).
//!
//! What changes from step to step — the step count, the schedule's rate, Adam's bias
//! corrections — lives in a small buffer on the parameters' device that one job per step
//! advances: no step reads a value back to the host, and none builds a kernel again (nor
//! does clipping: [`clip_grad_norm`]). On a device the parameters' and the state's buffers stay
//! the same from step to step (tensors taken out of the arena earlier keep the values they
//! had: the first step copies a buffer they share); in host memory a step writes into the
//! buffers the previous step replaced, so nothing is allocated once training runs.

mod buffers;
mod clip;
mod scale;
mod schedule;

pub use clip::{Norm, clip_grad_norm, clip_grad_norm_checked};
pub use scale::LossScale;
pub use schedule::{Formula, Schedule, WarmupCosine};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::{Borrowed, Cast, Lazy, Scalar, select};
use crate::io::TensorFile;
use crate::ir::{BinaryOp, IrNode};
use crate::nn::params::Flat;
use crate::nn::{Gradient, Params};
use crate::num::Float;

use buffers::{Buffers, StateNames};
use clip::check_finite;

/// Stochastic gradient descent with momentum: `v = μ v + g; p -= lr v`.
///
/// The settings are checked at every step (they may change between steps): an error names
/// one outside its range. An optimizer belongs to the parameters of its first step (one
/// model, wherever [`Params::to`] moves it: its state follows); a step with another model's
/// is an error naming both.
#[derive(Clone, Debug)]
pub struct Sgd<T: Float> {
    /// The learning rate (finite, ≥ 0). With a schedule ([`Sgd::with_schedule`]) each step
    /// first sets it to the schedule's rate for that step.
    pub lr: f64,
    /// The momentum μ (finite, ≥ 0; 0 for plain SGD).
    pub momentum: f64,
    schedule: Option<Formula>,
    steps: usize,
    check_finite: bool,
    buffers: Buffers<T>,
}

impl<T: Float> Sgd<T> {
    /// SGD with learning rate `lr` and momentum `momentum`.
    pub fn new(lr: f64, momentum: f64) -> Self {
        Sgd {
            lr,
            momentum,
            schedule: None,
            steps: 0,
            check_finite: false,
            buffers: Buffers::default(),
        }
    }

    /// Checks before each step that the gradient and the parameters are finite: a NaN or an
    /// infinity is an error naming the parameter, and the step is not taken (one reduction
    /// over the arena per step).
    pub fn checking_finite(mut self) -> Self {
        self.check_finite = true;
        self
    }

    /// With the learning rate of each step taken from `schedule` (its step 0 the optimizer's
    /// first step), evaluated on the parameters' device.
    pub fn with_schedule(mut self, schedule: impl Schedule + 'static) -> Self {
        self.schedule = Some(schedule.rate());
        self
    }

    /// The steps taken, as the parameters' device counts them (see [`Adam::steps`]).
    pub fn steps(&self) -> Result<usize> {
        self.buffers.steps_taken()
    }

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]): two fused
    /// passes over the arena in host memory (the velocity; the parameters, which compute
    /// the velocity again rather than read it back), one launch on a device (two for
    /// half-precision parameters, updated in f32 with an f32 velocity and rounded once).
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        self.buffers.bind(params, "Sgd")?;
        let step = self.steps;
        if let Some(schedule) = &self.schedule {
            self.lr = schedule.at(step as f64);
        }
        check_setting(
            "Sgd::lr",
            self.lr,
            finite_at_least_0(self.lr),
            "finite and ≥ 0",
        )?;
        let momentum = self.momentum;
        check_setting(
            "Sgd::momentum",
            momentum,
            finite_at_least_0(momentum),
            "finite and ≥ 0",
        )?;
        if self.check_finite {
            check_finite(params, grad)?;
        }
        let buffers = &mut self.buffers;
        buffers.prepare(params, 1)?;
        self.steps = step + 1;
        // The rate: the schedule's for this step, else the setting (0 in its place under a
        // schedule, so that a rate the host follows never places the settings again).
        let schedule = &self.schedule;
        let lr = if schedule.is_some() { 0.0 } else { self.lr };
        let (p, g, gate) = buffers.views(params, grad)?;
        let settings = [lr, momentum];
        let scalars =
            (buffers.scalars).advance(params.device(), &gate, &settings, |ir, t, s| {
                vec![schedule.as_ref().map_or(s[0], |rate| rate.lower(ir, t))]
            })?;
        let (lr, mu) = (&scalars.values[0], &scalars.settings[1]);
        let v = buffers.state(0);
        let v_next = &v * mu + wide(&g);
        let p_next = (wide(&p) - v_next * lr).cast::<T>();
        if grad.gate().is_some() {
            // Each result the old value where the loss scale skips the step.
            let taken = (&gate).greater(Scalar(<T::Wide as Element>::zero()));
            let p_kept = select(taken, p_next, &p);
            buffers.apply(params, &p_kept, [&select(taken, v_next, &v)])?;
        } else {
            buffers.apply(params, &p_next, [&v_next])?;
        }
        params.rewrite_working_copy()
    }
}

/// Adam (Kingma & Ba) with bias correction.
///
/// The settings are checked at every step (they may change between steps): an error names
/// one outside its range. As [`Sgd`], an optimizer belongs to the parameters of its first
/// step.
#[derive(Clone, Debug)]
pub struct Adam<T: Float> {
    /// The learning rate (finite, ≥ 0). With a schedule ([`Adam::with_schedule`]) each step
    /// first sets it to the schedule's rate for that step.
    pub lr: f64,
    /// Decay of the first moment (in [0, 1)).
    pub beta1: f64,
    /// Decay of the second moment (in [0, 1)).
    pub beta2: f64,
    /// Added to the root of the second moment (finite, > 0).
    pub eps: f64,
    /// Decoupled weight decay (AdamW): each step also takes `lr · weight_decay · p` off
    /// every parameter. 0 by default (finite, ≥ 0).
    pub weight_decay: f64,
    schedule: Option<Formula>,
    steps: i32,
    check_finite: bool,
    buffers: Buffers<T>,
}

impl<T: Float> Adam<T> {
    /// Adam with learning rate `lr` and the usual β₁ = 0.9, β₂ = 0.999, ε = 1e-8.
    pub fn new(lr: f64) -> Self {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            schedule: None,
            steps: 0,
            check_finite: false,
            buffers: Buffers::default(),
        }
    }

    /// With decoupled weight decay `weight_decay` (AdamW).
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// With the learning rate of each step taken from `schedule` (its step 0 the optimizer's
    /// first step): the optimizer counts the steps, so a training loop does not set `lr` by
    /// hand.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::nn::{Gradient, Init, ParamsBuilder};
    /// use axes::optim::{Adam, WarmupCosine};
    /// #[derive(Axis)] struct Feature;
    /// let mut builder = ParamsBuilder::new();
    /// builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
    /// let mut params = builder.build::<f32>(0)?;
    /// let schedule = WarmupCosine::new(1e-2, 1e-3, 4, 20)?;
    /// let mut adam = Adam::new(0.0).with_schedule(schedule);
    /// let grad = Gradient::from_vec(&params, vec![1.0, -1.0])?;
    /// for step in 0..6 {
    ///     adam.step(&mut params, &grad)?;
    ///     assert_eq!(adam.lr, schedule.at(step));
    /// }
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn with_schedule(mut self, schedule: impl Schedule + 'static) -> Self {
        self.schedule = Some(schedule.rate());
        self
    }

    /// Checks before each step that the gradient and the parameters are finite: a NaN or an
    /// infinity is an error naming the parameter, and the step is not taken (one reduction
    /// over the arena per step).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::nn::{Gradient, Init, ParamsBuilder};
    /// use axes::optim::Adam;
    /// #[derive(Axis)] struct Feature;
    /// let mut builder = ParamsBuilder::new();
    /// builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
    /// let mut params = builder.build::<f32>(0)?;
    /// let mut adam = Adam::new(1e-3).checking_finite();
    /// let grad = Gradient::from_vec(&params, vec![1.0, f32::NAN])?;
    /// let error = adam.step(&mut params, &grad).unwrap_err().to_string();
    /// assert!(error.contains("the gradient of parameter `bias` holds NaN"), "{error}");
    /// assert_eq!(params.arena().storage().host()?.to_vec(), [0.0, 0.0]); // no step taken
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn checking_finite(mut self) -> Self {
        self.check_finite = true;
        self
    }

    /// The steps taken, as the parameters' device counts them (a recorded step's replays
    /// advance the count there and not here): a read of one value from the device. An error
    /// where the device cannot be read.
    pub fn steps(&self) -> Result<usize> {
        self.buffers.steps_taken()
    }

    /// An error naming the first setting outside its range.
    fn check_settings(&self) -> Result<()> {
        check_setting(
            "Adam::lr",
            self.lr,
            finite_at_least_0(self.lr),
            "finite and ≥ 0",
        )?;
        for (setting, beta) in [("Adam::beta1", self.beta1), ("Adam::beta2", self.beta2)] {
            check_setting(setting, beta, (0.0..1.0).contains(&beta), "in [0, 1)")?;
        }
        let eps = self.eps;
        check_setting(
            "Adam::eps",
            eps,
            eps.is_finite() && eps > 0.0,
            "finite and > 0",
        )?;
        let decay = self.weight_decay;
        check_setting(
            "Adam::weight_decay",
            decay,
            finite_at_least_0(decay),
            "finite and ≥ 0",
        )
    }

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]): three fused
    /// passes over the arena in host memory (each moment; the parameters, which compute the
    /// moments again rather than read them back), one launch on a device (two for
    /// half-precision parameters, updated in f32 with f32 moments and rounded once).
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        self.buffers.bind(params, "Adam")?;
        let step = self.steps as usize;
        if let Some(schedule) = &self.schedule {
            self.lr = schedule.at(step as f64);
        }
        self.check_settings()?;
        if self.check_finite {
            check_finite(params, grad)?;
        }
        self.buffers.prepare(params, 2)?;
        self.steps = i32::try_from(step + 1).unwrap_or(i32::MAX);
        let (b1, b2) = (self.beta1, self.beta2);
        let schedule = &self.schedule;
        let lr = if schedule.is_some() { 0.0 } else { self.lr };
        let settings = [lr, b1, 1.0 - b1, b2, 1.0 - b2, self.eps, self.weight_decay];
        let buffers = &mut self.buffers;
        let (p, g, gate) = buffers.views(params, grad)?;
        let scalars =
            (buffers.scalars).advance(params.device(), &gate, &settings, |ir, t, s| {
                let lr = schedule.as_ref().map_or(s[0], |rate| rate.lower(ir, t));
                let one = ir.push(IrNode::Scalar(1.0));
                let taken = ir.push(IrNode::Binary(BinaryOp::Add, t, one));
                // Bias corrections 1 - βᵗ, folded into the step size and epsilon.
                let mut correction = |beta| {
                    let power = ir.push(IrNode::Binary(BinaryOp::Pow, beta, taken));
                    ir.push(IrNode::Binary(BinaryOp::Sub, one, power))
                };
                let (c1, c2) = (correction(s[1]), correction(s[3]));
                let root_c2 = ir.push(IrNode::Unary(crate::ir::UnaryOp::Sqrt, c2));
                let scaled = ir.push(IrNode::Binary(BinaryOp::Mul, lr, root_c2));
                let step_size = ir.push(IrNode::Binary(BinaryOp::Div, scaled, c1));
                let eps = ir.push(IrNode::Binary(BinaryOp::Mul, s[5], root_c2));
                let decay = ir.push(IrNode::Binary(BinaryOp::Mul, lr, s[6]));
                let keep = ir.push(IrNode::Binary(BinaryOp::Sub, one, decay));
                vec![step_size, eps, keep]
            })?;
        let [b1, a1, b2, a2] = [1, 2, 3, 4].map(|k| &scalars.settings[k]);
        let [step, eps, keep] = [0, 1, 2].map(|k| &scalars.values[k]);
        let (m, v) = (buffers.state(0), buffers.state(1));
        let m_next = &m * b1 + wide(&g) * a1;
        let v_next = &v * b2 + wide(&g) * wide(&g) * a2;
        let update = wide(&p) * keep - m_next * step / (v_next.sqrt() + eps);
        let p_next = update.cast::<T>();
        if grad.gate().is_some() {
            // Each result the old value where the loss scale skips the step.
            let taken = (&gate).greater(Scalar(<T::Wide as Element>::zero()));
            let p_kept = select(taken, p_next, &p);
            let (m_kept, v_kept) = (select(taken, m_next, &m), select(taken, v_next, &v));
            buffers.apply(params, &p_kept, [&m_kept, &v_kept])?;
        } else {
            buffers.apply(params, &p_next, [&m_next, &v_next])?;
        }
        params.rewrite_working_copy()
    }
}

/// `x` read as its type's [`Float::Wide`] (f32 for half types; unchanged otherwise).
fn wide<T: Float>(x: &Flat<T>) -> Lazy<'_, Cast<Borrowed<Flat<T>>, T::Wide>> {
    x.cast::<T::Wide>()
}

/// Whether `value` is a finite number ≥ 0.
pub(crate) fn finite_at_least_0(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

/// An error naming `setting` unless `ok`.
pub(crate) fn check_setting(setting: &str, value: f64, ok: bool, allowed: &str) -> Result<()> {
    if ok {
        return Ok(());
    }
    Err(Error::InvalidSetting {
        setting: setting.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    })
}

/// An optimizer's state, saved beside the parameters and loaded to resume training exactly:
/// per parameter, each state tensor as `{parameter}.{state}` with the parameter's axes —
/// PyTorch's names for them: SGD's `momentum_buffer`, Adam's `exp_avg` and `exp_avg_sq` —
/// and the steps taken as `sgd.step` or `adam.step` (an i64 scalar). The state of
/// parameters in a half type is stored in f32, as the optimizer keeps it.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::io::TensorFile;
/// use axes::nn::{Gradient, Init, ParamsBuilder};
/// use axes::optim::{Adam, OptimizerState};
/// #[derive(Axis)] struct Feature;
/// let mut builder = ParamsBuilder::new();
/// builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
/// let mut params = builder.build::<f32>(0)?;
/// let grad = Gradient::from_vec(&params, vec![1.0, -1.0])?;
/// let mut adam = Adam::new(0.1);
/// adam.step(&mut params, &grad)?;
/// let mut file = TensorFile::new();
/// adam.save_state(&params, &mut file)?;
/// assert!(file.names().eq(["adam.step", "bias.exp_avg", "bias.exp_avg_sq"]));
/// // Another run of the same model resumes where this one stopped.
/// let mut resumed = Adam::new(0.1);
/// resumed.load_state(&params, &file)?;
/// assert_eq!(resumed.steps()?, 1);
/// # Ok::<(), axes::Error>(())
/// ```
pub trait OptimizerState<T: Float> {
    /// Adds the state for `params` to `file` (zeros before the first step); an error where
    /// the optimizer steps other parameters.
    fn save_state(&self, params: &Params<T>, file: &mut TensorFile) -> Result<()>;

    /// Reads the state [`OptimizerState::save_state`] wrote for parameters of the same
    /// names, axes and lengths into this optimizer, which from then on steps `params`: the
    /// next step is the one after the saved ones. An error (naming the first tensor absent
    /// or different, or another optimizer's state) leaves the optimizer as it was.
    fn load_state(&mut self, params: &Params<T>, file: &TensorFile) -> Result<()>;
}

/// SGD's state as saved.
const SGD_STATE: StateNames = StateNames {
    kind: "sgd",
    optimizer: "Sgd",
    tensors: &["momentum_buffer"],
};

/// Adam's state as saved.
const ADAM_STATE: StateNames = StateNames {
    kind: "adam",
    optimizer: "Adam",
    tensors: &["exp_avg", "exp_avg_sq"],
};

impl<T: Float> OptimizerState<T> for Sgd<T> {
    fn save_state(&self, params: &Params<T>, file: &mut TensorFile) -> Result<()> {
        self.buffers.save(params, SGD_STATE, file)
    }

    fn load_state(&mut self, params: &Params<T>, file: &TensorFile) -> Result<()> {
        self.steps = self.buffers.load(params, SGD_STATE, file)?;
        Ok(())
    }
}

impl<T: Float> OptimizerState<T> for Adam<T> {
    fn save_state(&self, params: &Params<T>, file: &mut TensorFile) -> Result<()> {
        self.buffers.save(params, ADAM_STATE, file)
    }

    fn load_state(&mut self, params: &Params<T>, file: &TensorFile) -> Result<()> {
        let steps = self.buffers.load(params, ADAM_STATE, file)?;
        self.steps = i32::try_from(steps).unwrap_or(i32::MAX);
        Ok(())
    }
}
