//! Optimizers: each updates every parameter of a [`Params`] arena over the flat buffers
//! (parameters, gradient and optimizer state side by side), its update written once as typed
//! expressions of the next parameters and the next state. Where the parameters live, those
//! run as a fused pass of the typed engine each (host memory), or together as one kernel
//! launch that writes the next parameters and state (a device; two launches for
//! half-precision parameters, whose state is f32: one launch writes one element type).
//!
//! A step writes the next parameters and state into buffers the optimizer keeps — those the
//! previous step replaced — so nothing is allocated once training runs, and tensors taken
//! out of the arena earlier keep the values they had.

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::Device;
use crate::dispatch::{JointJob, Output, filled, placed, run_outputs};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::{Borrowed, Cast, Expr, Lazy, Scalar};
use crate::ir::ReduceOp;
use crate::layout::Layout;
use crate::nn::params::{ArenaElement, Flat, flat};
use crate::nn::{Gradient, Params};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Stochastic gradient descent with momentum: `v = μ v + g; p -= lr v`.
///
/// The settings are checked at every step (they may change between steps): an error names
/// one outside its range.
#[derive(Clone, Debug)]
pub struct Sgd<T: Float> {
    /// The learning rate (finite, ≥ 0). With a schedule ([`Sgd::with_schedule`]) each step
    /// first sets it to the schedule's rate for that step.
    pub lr: f64,
    /// The momentum μ (finite, ≥ 0; 0 for plain SGD).
    pub momentum: f64,
    schedule: Option<Arc<dyn Schedule>>,
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
    /// first step, counted again where it starts over on parameters of another size).
    pub fn with_schedule(mut self, schedule: impl Schedule + 'static) -> Self {
        self.schedule = Some(Arc::new(schedule));
        self
    }

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]): two fused
    /// passes over the arena in host memory (the velocity; the parameters, which compute
    /// the velocity again rather than read it back), one launch on a device (two for
    /// half-precision parameters, updated in f32 with an f32 velocity and rounded once).
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        let step = self.buffers.steps_before(params, 1, self.steps);
        if let Some(schedule) = &self.schedule {
            self.lr = schedule.at(step);
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
        let [mu, lr] = buffers.constants(params, [self.momentum, self.lr])?;
        let (p, g) = buffers.views(params, grad)?;
        let v = buffers.state(0);
        let v_next = &v * &mu + wide(&g);
        let p_next = (wide(&p) - v_next * &lr).cast::<T>();
        buffers.apply(params, &p_next, [&v_next])
    }
}

/// Adam (Kingma & Ba) with bias correction.
///
/// The settings are checked at every step (they may change between steps): an error names
/// one outside its range.
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
    schedule: Option<Arc<dyn Schedule>>,
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
    /// first step, counted again where it starts over on parameters of another size): the
    /// optimizer counts the steps, so a training loop does not set `lr` by hand.
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
        self.schedule = Some(Arc::new(schedule));
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

    /// The number of steps taken.
    pub fn steps(&self) -> i32 {
        self.steps
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
        let step = self.buffers.steps_before(params, 2, self.steps as usize);
        if let Some(schedule) = &self.schedule {
            self.lr = schedule.at(step);
        }
        self.check_settings()?;
        if self.check_finite {
            check_finite(params, grad)?;
        }
        self.buffers.prepare(params, 2)?;
        self.steps = i32::try_from(step + 1).unwrap_or(i32::MAX);
        let (b1, b2) = (self.beta1, self.beta2);
        // Bias corrections folded into the step size and epsilon.
        let c1 = 1.0 - b1.powi(self.steps);
        let c2 = 1.0 - b2.powi(self.steps);
        let constants = [
            b1,
            1.0 - b1,
            b2,
            1.0 - b2,
            1.0 - self.lr * self.weight_decay,
            self.lr * c2.sqrt() / c1,
            self.eps * c2.sqrt(),
        ];
        let buffers = &mut self.buffers;
        let [b1, a1, b2, a2, keep, step, eps] = buffers.constants(params, constants)?;
        let (p, g) = buffers.views(params, grad)?;
        let (m, v) = (buffers.state(0), buffers.state(1));
        let m_next = &m * &b1 + wide(&g) * &a1;
        let v_next = &v * &b2 + wide(&g) * wide(&g) * &a2;
        let p_next = (wide(&p) * &keep - m_next * &step / (v_next.sqrt() + &eps)).cast::<T>();
        buffers.apply(params, &p_next, [&m_next, &v_next])
    }
}

/// `x` read as its type's [`Float::Wide`] (f32 for half types; unchanged otherwise).
fn wide<T: Float>(x: &Flat<T>) -> Lazy<'_, Cast<Borrowed<Flat<T>>, T::Wide>> {
    x.cast::<T::Wide>()
}

/// Whether `value` is a finite number ≥ 0.
fn finite_at_least_0(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

/// An error naming `setting` unless `ok`.
fn check_setting(setting: &str, value: f64, ok: bool, allowed: &str) -> Result<()> {
    if ok {
        return Ok(());
    }
    Err(Error::InvalidSetting {
        setting: setting.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    })
}

/// An error naming the first parameter whose gradient or value is NaN or infinite: one
/// reduction over the arena (`0 g + 0 p` is 0 exactly where both are finite), and only
/// where it finds one, a search for the parameter on the host.
fn check_finite<T: Float>(params: &Params<T>, grad: &Gradient<T>) -> Result<()> {
    let g = flat(grad.storage_for(params.arena())?.clone());
    let p = flat(params.arena().storage().clone());
    let zero = Scalar(T::zero());
    if !(&g * zero + &p * zero).sum_all()?.is_nan() {
        return Ok(());
    }
    let (g, p) = (g.try_to_vec()?, p.try_to_vec()?);
    first_non_finite(
        params,
        &[("the gradient of parameter", &g), ("parameter", &p)],
    )?;
    Err(Error::NonFinite {
        what: "the gradient, between parameters".into(),
        value: "NaN".into(),
    })
}

/// An error naming the first parameter (in order) where one of `buffers` (each laid out like
/// the arena, named by what it holds) is NaN or infinite; `Ok` where none is.
fn first_non_finite<T: Float>(params: &Params<T>, buffers: &[(&str, &Vec<T>)]) -> Result<()> {
    for (name, layout) in params.names().zip(params.arena().layouts()) {
        let count = layout.element_count().unwrap_or(0);
        let at = layout.offset()..layout.offset() + count;
        for (what, values) in buffers {
            if let Some(&value) = values[at.clone()].iter().find(|v| !v.to_f64().is_finite()) {
                return Err(Error::NonFinite {
                    what: format!("{what} `{name}`"),
                    value: value.to_f64().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// `grad` scaled so that its global L2 norm — over every parameter at once — is at most
/// `max_norm`, and the norm it had (PyTorch's `clip_grad_norm_`: the scale is
/// `max_norm / (norm + 1e-6)` where the norm is larger). Two reductions over the gradient
/// buffer (the largest magnitude, then the sum of squares scaled by it, so that no square
/// overflows), each read back to the host, and one scaling pass only when it clips. A NaN or infinite norm is returned with the gradient unchanged:
/// [`clip_grad_norm_checked`] makes it an error.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::nn::{Gradient, Init, Linear, ParamsBuilder};
/// use axes::optim::clip_grad_norm;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
/// let mut builder = ParamsBuilder::new();
/// Linear::<In, Out>::new(&mut builder, "l", In.len(1), Out.len(1), Init::Zeros)?;
/// let params = builder.build::<f64>(0)?;
/// // the weight's gradient 3, the bias's 4 (at their offsets of the arena): norm 5
/// let mut values = vec![0.0; params.arena().len()];
/// let at: Vec<usize> = params.arena().layouts().iter().map(|l| l.offset()).collect();
/// (values[at[0]], values[at[1]]) = (3.0, 4.0);
/// let (clipped, norm) = clip_grad_norm(&params, Gradient::from_vec(&params, values)?, 1.0)?;
/// assert_eq!(norm, 5.0);
/// let clipped = clipped.to_vec()?;
/// assert!((clipped[at[0]] - 0.6).abs() < 1e-6 && (clipped[at[1]] - 0.8).abs() < 1e-6);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn clip_grad_norm<T: Float>(
    params: &Params<T>,
    grad: Gradient<T>,
    max_norm: f64,
) -> Result<(Gradient<T>, f64)> {
    check_setting(
        "clip_grad_norm::max_norm",
        max_norm,
        finite_at_least_0(max_norm),
        "finite and ≥ 0",
    )?;
    let norm = global_norm(&flat(grad.storage_for(params.arena())?.clone()))?;
    if !norm.is_finite() || norm <= max_norm {
        return Ok((grad, norm));
    }
    let scaled = grad.scaled(max_norm / (norm + 1e-6))?;
    Ok((scaled, norm))
}

/// The L2 norm of `g`, with no square overflowing or underflowing: the largest magnitude
/// `m` first (NaN or infinite where an element is), then `m √Σ (g/m)²` summed in the wide
/// type — two reductions that any device runs, none in f64.
fn global_norm<T: Float>(g: &Flat<T>) -> Result<f64> {
    let largest = g.abs().max_over::<(ArenaElement,)>()?.try_to_vec()?[0].to_f64();
    if largest == 0.0 || !largest.is_finite() {
        return Ok(largest);
    }
    let scaled = wide(g) * Scalar(T::Wide::from_f64(1.0 / largest));
    Ok(largest * scaled.square().sum_all()?.to_f64().sqrt())
}

/// [`clip_grad_norm`], with a NaN or infinite norm an error naming the first parameter whose
/// gradient is not finite (PyTorch's `error_if_nonfinite=True`): the step that would follow
/// is not taken silently with a broken gradient.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::nn::{Gradient, Init, ParamsBuilder};
/// use axes::optim::clip_grad_norm_checked;
/// #[derive(Axis)] struct Feature;
/// let mut builder = ParamsBuilder::new();
/// builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
/// let params = builder.build::<f32>(0)?;
/// let grad = Gradient::from_vec(&params, vec![f32::INFINITY, 1.0])?;
/// let error = clip_grad_norm_checked(&params, grad, 1.0).unwrap_err().to_string();
/// assert!(error.contains("the gradient of parameter `bias` holds inf"), "{error}");
/// # Ok::<(), axes::Error>(())
/// ```
pub fn clip_grad_norm_checked<T: Float>(
    params: &Params<T>,
    grad: Gradient<T>,
    max_norm: f64,
) -> Result<(Gradient<T>, f64)> {
    let (grad, norm) = clip_grad_norm(params, grad, max_norm)?;
    if norm.is_finite() {
        return Ok((grad, norm));
    }
    first_non_finite(params, &[("the gradient of parameter", &grad.to_vec()?)])?;
    // Every element finite, yet no finite norm: a NaN in the gaps between parameters.
    Err(Error::NonFinite {
        what: "the gradient, between parameters".into(),
        value: norm.to_string(),
    })
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

    /// The rate for step `step` (counted from 0).
    pub fn at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak * (step + 1) as f64 / self.warmup as f64;
        }
        let span = self.total - self.warmup;
        let progress = ((step - self.warmup) as f64 / span as f64).min(1.0);
        self.floor
            + (self.peak - self.floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// A learning rate for each step, that an optimizer owns and reads before each of its steps
/// ([`Adam::with_schedule`], [`Sgd::with_schedule`]).
pub trait Schedule: std::fmt::Debug + Send + Sync {
    /// The rate for step `step` (counted from 0).
    fn at(&self, step: usize) -> f64;
}

impl Schedule for WarmupCosine {
    fn at(&self, step: usize) -> f64 {
        WarmupCosine::at(self, step)
    }
}

/// The buffers of the next parameters and of the next state.
type Next<T> = (Storage<T>, Vec<Storage<<T as Float>::Wide>>);

/// One result of an optimizer's update, written once as a typed expression over the arena's
/// elements: in host memory a pass of the typed engine of its own, on a device a part of the
/// one job that computes every result.
trait ArenaUpdate<W: Float> {
    /// The result, in `spare` where nothing else holds it, else in a new buffer.
    fn written(&self, spare: &mut Option<Storage<W>>) -> Result<Storage<W>>;
    /// Its nodes and leaves added to `job`; the node holding it.
    fn joined<'a>(&'a self, job: &mut JointJob<'a>) -> usize;
}

impl<W: Float, E> ArenaUpdate<W> for E
where
    E: Expr<Elem = W, Axes = (ArenaElement,)> + Copy,
{
    fn written(&self, spare: &mut Option<Storage<W>>) -> Result<Storage<W>> {
        match spare.take().filter(Storage::is_unique) {
            Some(buffer) => {
                let mut into = flat(buffer);
                into.assign(*self)?;
                Ok(into.storage().clone())
            }
            None => Ok(self.eval()?.storage().clone()),
        }
    }

    fn joined<'a>(&'a self, job: &mut JointJob<'a>) -> usize {
        job.add(self)
    }
}

/// An optimizer's buffers, each laid out like the parameter arena: its state (velocity,
/// moments) in the parameters' [`Float::Wide`] type (f32 for half types: a second moment of
/// 1e-3 · g² is 0 in f16 for every |g| below 8e-3), and the buffers the last step replaced,
/// which the next step writes into.
#[derive(Clone, Debug)]
struct Buffers<T: Float> {
    state: Vec<Storage<T::Wide>>,
    /// The parameters' previous buffer.
    spare_params: Option<Storage<T>>,
    /// Each state's previous buffer.
    spare_state: Vec<Option<Storage<T::Wide>>>,
}

impl<T: Float> Default for Buffers<T> {
    fn default() -> Self {
        Buffers {
            state: Vec::new(),
            spare_params: None,
            spare_state: Vec::new(),
        }
    }
}

impl<T: Float> Buffers<T> {
    /// Whether `count` state buffers for `params` are there (else the optimizer starts over).
    fn fit(&self, params: &Params<T>, count: usize) -> bool {
        let arena = params.arena();
        let fits = |s: &Storage<T::Wide>| s.len() == arena.len() && s.device() == arena.device();
        self.state.len() == count && self.state.iter().all(fits)
    }

    /// The steps taken on `params` before this one: `taken`, or 0 where the optimizer
    /// starts over (its `count` state buffers do not fit them).
    fn steps_before(&self, params: &Params<T>, count: usize, taken: usize) -> usize {
        if self.fit(params, count) { taken } else { 0 }
    }

    /// Makes `count` state buffers of zeros for `params` unless they are there already, on
    /// the parameters' device.
    fn prepare(&mut self, params: &Params<T>, count: usize) -> Result<()> {
        if self.fit(params, count) {
            return Ok(());
        }
        let arena = params.arena();
        self.state = (0..count)
            .map(|_| filled(arena.device(), arena.len(), T::Wide::zero()))
            .collect::<Result<_>>()?;
        self.spare_params = None;
        self.spare_state = vec![None; count];
        Ok(())
    }

    /// `values` as tensors of no axes, on the parameters' device (one buffer for all):
    /// operands that change between steps without changing the kernels that read them.
    fn constants<const N: usize>(
        &self,
        params: &Params<T>,
        values: [f64; N],
    ) -> Result<[Tensor<T::Wide, ()>; N]> {
        let mut buffer = crate::storage::with_capacity(N)?;
        buffer.extend(values.map(T::Wide::from_f64));
        let storage = placed(buffer, params.device())?;
        Ok(std::array::from_fn(|k| {
            let at = Layout::new(&[], &[], k, N).expect("inside the buffer");
            Tensor::from_parts(storage.clone(), at).expect("rank 0 fits")
        }))
    }

    /// The parameters and the gradient, as flat tensors.
    fn views(&self, params: &Params<T>, grad: &Gradient<T>) -> Result<(Flat<T>, Flat<T>)> {
        // Operands on two devices are an error of the evaluation itself.
        let arena = params.arena();
        let grad = grad.storage_for(arena)?;
        Ok((flat(arena.storage().clone()), flat(grad.clone())))
    }

    /// State buffer `k`, as a flat tensor.
    fn state(&self, k: usize) -> Flat<T::Wide> {
        flat(self.state[k].clone())
    }

    /// Puts `p` in place of the parameters and `state` in place of the state, keeping the
    /// buffers they replace for the next step.
    fn finish(
        &mut self,
        params: &mut Params<T>,
        p: Storage<T>,
        state: impl IntoIterator<Item = Storage<T::Wide>>,
    ) -> Result<()> {
        self.spare_params = Some(params.arena_mut().replace_storage(p)?);
        for (k, next) in state.into_iter().enumerate() {
            self.spare_state[k] = Some(std::mem::replace(&mut self.state[k], next));
        }
        Ok(())
    }

    /// Takes a step: `p_next` becomes the parameters and `state[k]` state `k`, each written
    /// into the buffer it replaced last step where nothing else holds that buffer. In host
    /// memory each result is one pass of the typed engine (each reads only the buffers of
    /// the step before, so their order does not matter); on a device all of them are one
    /// job — one launch, two for half-precision parameters (a job's results share one type).
    fn apply<const S: usize>(
        &mut self,
        params: &mut Params<T>,
        p_next: &dyn ArenaUpdate<T>,
        state: [&dyn ArenaUpdate<T::Wide>; S],
    ) -> Result<()> {
        let (next_p, next_state) = match params.device() {
            Device::Cpu => {
                let next_state = (state.iter().zip(&mut self.spare_state))
                    .map(|(next, spare)| next.written(spare))
                    .collect::<Result<Vec<_>>>()?;
                (p_next.written(&mut self.spare_params)?, next_state)
            }
            Device::Backend(_) => self.jointly(params.arena().len(), p_next, state)?,
        };
        self.finish(params, next_p, next_state)
    }

    /// [`Buffers::apply`]'s results on a device, as one job (two for half types).
    fn jointly<const S: usize>(
        &mut self,
        len: usize,
        p_next: &dyn ArenaUpdate<T>,
        state: [&dyn ArenaUpdate<T::Wide>; S],
    ) -> Result<Next<T>> {
        let mut job = JointJob::default();
        let p = p_next.joined(&mut job);
        let roots = state.map(|next| next.joined(&mut job));
        let inputs = job.inputs(&[TypeId::of::<ArenaElement>()])?;
        let (ir, lens) = (job.ir(), [len]);
        if TypeId::of::<T>() == TypeId::of::<T::Wide>() {
            let mut outputs = vec![output(p, self.spare_params.take())];
            for (k, &root) in roots.iter().enumerate() {
                outputs.push(output(root, self.spare_state[k].take().map(same_type)));
            }
            let mut results = run_outputs(ir, &lens, &inputs, outputs)?.into_iter();
            let (p, _) = results.next().expect("one result per root");
            return Ok((p, results.map(|(s, _)| same_type(s)).collect()));
        }
        let outputs = (roots.iter().enumerate())
            .map(|(k, &root)| output(root, self.spare_state[k].take()))
            .collect();
        let next_state = run_outputs(ir, &lens, &inputs, outputs)?;
        let p = output(p, self.spare_params.take());
        let (next_p, _) = run_outputs(ir, &lens, &inputs, vec![p])?.remove(0);
        Ok((next_p, next_state.into_iter().map(|(s, _)| s).collect()))
    }
}

/// The result of an optimizer's job holding node `root` over the whole arena, written into
/// `spare` when nothing else holds it.
fn output<T: Element>(root: usize, spare: Option<Storage<T>>) -> Output<T> {
    let result = Output::new(root, vec![0], ReduceOp::Sum);
    match spare.filter(Storage::is_unique) {
        Some(buffer) => {
            let whole = Layout::row_major(&[buffer.len()]);
            result.written_into(buffer, whole)
        }
        None => result,
    }
}

/// `value` as type `B`, which is its own type `A` (f32's or f64's [`Float::Wide`]).
fn same_type<A: 'static, B: 'static>(value: A) -> B {
    let mut slot = Some(value);
    let slot: &mut dyn Any = &mut slot;
    (slot.downcast_mut::<Option<B>>())
        .and_then(Option::take)
        .expect("called only where the two types are one")
}
