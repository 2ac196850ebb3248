//! Optimizers: each updates every parameter of a [`Params`] arena with fused passes over the
//! flat buffers (parameters, gradient and optimizer state side by side), where the
//! parameters live: in host memory a few passes of the typed engine, on a device one kernel
//! launch that writes the next parameters and state together.
//!
//! A step writes the next parameters and state into buffers the optimizer keeps — those the
//! previous step replaced — so nothing is allocated once training runs, and tensors taken
//! out of the arena earlier keep the values they had.

use axes_macros::Axis;

use crate::dispatch::{Input, Output, filled, passes_or_job, placed, run_outputs};
use crate::error::Result;
use crate::eval::ExprExt;
use crate::expr::{Expr, IntoExpr, Scalar};
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp, UnaryOp};
use crate::layout::Layout;
use crate::nn::{Gradient, Params};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Stochastic gradient descent with momentum: `v = μ v + g; p -= lr v`.
#[derive(Clone, Debug)]
pub struct Sgd<T: Float> {
    /// The learning rate.
    pub lr: f64,
    /// The momentum μ (0 for plain SGD).
    pub momentum: f64,
    buffers: Buffers<T>,
}

impl<T: Float> Sgd<T> {
    /// SGD with learning rate `lr` and momentum `momentum`.
    pub fn new(lr: f64, momentum: f64) -> Self {
        Sgd {
            lr,
            momentum,
            buffers: Buffers::default(),
        }
    }

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]): two fused
    /// passes over the arena in host memory, one launch on a device.
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        self.buffers.prepare(params, 1)?;
        let constants = [self.momentum, self.lr];
        let on = (&mut self.buffers, params, grad);
        passes_or_job(
            on.1.device(),
            on,
            |(buffers, params, grad)| {
                let [mu, lr] = buffers.constants(params, constants)?;
                let (p, g) = buffers.views(params, grad)?;
                let v = buffers.write(1, &buffers.state(0) * &mu + &g)?;
                let p = buffers.write(0, &p - &v * &lr)?;
                buffers.finish(params, p, [v])
            },
            |(buffers, params, grad)| {
                // v = mu v + g; p = p - lr v
                let mut u = Update::new(1);
                let [mu, lr] = u.constants();
                let (p, g, v) = (u.params(), u.gradient(), u.state(0));
                let kept = u.mul(v, mu);
                let v = u.add(kept, g);
                let step = u.mul(v, lr);
                let p = u.sub(p, step);
                buffers.update(params, grad, u, [p, v], constants)
            },
        )
    }
}

/// Adam (Kingma & Ba) with bias correction.
#[derive(Clone, Debug)]
pub struct Adam<T: Float> {
    /// The learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the root of the second moment.
    pub eps: f64,
    /// Decoupled weight decay (AdamW): each step also takes `lr · weight_decay · p` off
    /// every parameter. 0 by default.
    pub weight_decay: f64,
    steps: i32,
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
            steps: 0,
            buffers: Buffers::default(),
        }
    }

    /// With decoupled weight decay `weight_decay` (AdamW).
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// The number of steps taken.
    pub fn steps(&self) -> i32 {
        self.steps
    }

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]): three fused
    /// passes over the arena in host memory (the two moments, then the parameters), one
    /// launch on a device.
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        if self.buffers.prepare(params, 2)? {
            self.steps = 0;
        }
        self.steps += 1;
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
        let on = (&mut self.buffers, params, grad);
        passes_or_job(
            on.1.device(),
            on,
            |(buffers, params, grad)| {
                let [b1, a1, b2, a2, keep, step, eps] = buffers.constants(params, constants)?;
                let (p, g) = buffers.views(params, grad)?;
                let (m, v) = (buffers.state(0), buffers.state(1));
                let m = buffers.write(1, &m * &b1 + &g * &a1)?;
                let v = buffers.write(2, &v * &b2 + (&g * &g) * &a2)?;
                let p = buffers.write(0, &p * &keep - &m * &step / (v.sqrt() + &eps))?;
                buffers.finish(params, p, [m, v])
            },
            |(buffers, params, grad)| {
                // The passes above as one expression of three results.
                let mut u = Update::new(2);
                let [b1, a1, b2, a2, keep, step, eps] = u.constants();
                let (p, g, m, v) = (u.params(), u.gradient(), u.state(0), u.state(1));
                let (m_kept, m_new) = (u.mul(m, b1), u.mul(g, a1));
                let m = u.add(m_kept, m_new);
                let (v_kept, g2) = (u.mul(v, b2), u.mul(g, g));
                let v_new = u.mul(g2, a2);
                let v = u.add(v_kept, v_new);
                let root = u.sqrt(v);
                let denominator = u.add(root, eps);
                let (shrunk, moved) = (u.mul(p, keep), u.mul(m, step));
                let change = u.div(moved, denominator);
                let p = u.sub(shrunk, change);
                buffers.update(params, grad, u, [p, m, v], constants)
            },
        )
    }
}

/// `grad` scaled so that its global L2 norm — over every parameter at once — is at most
/// `max_norm`, and the norm it had (PyTorch's `clip_grad_norm_`: the scale is
/// `max_norm / (norm + 1e-6)` where the norm is larger). One reduction over the gradient
/// buffer, read back to the host, and one scaling pass only when it clips.
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
    let g = flat(grad.storage_for(params.arena())?.clone());
    let norm = (&g * &g).sum_all()?.to_f64().sqrt();
    if norm.is_nan() || norm <= max_norm {
        return Ok((grad, norm));
    }
    let scale = T::from_f64(max_norm / (norm + 1e-6));
    let scaled = (&g * Scalar(scale)).eval()?;
    Ok((grad.with_storage(scaled.storage().clone()), norm))
}

/// A learning rate that rises linearly from 0 over `warmup` steps to `peak`, then falls along
/// a cosine to `floor` at step `total` (and stays there).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::optim::WarmupCosine;
/// let schedule = WarmupCosine { peak: 1e-3, floor: 1e-4, warmup: 10, total: 110 };
/// assert_eq!(schedule.at(0), 1e-4 * 0.0 + 1e-3 * 0.1);       // the first step: 1/10 of the peak
/// assert_eq!(schedule.at(9), 1e-3);                          // the end of the warmup
/// assert!((schedule.at(60) - 5.5e-4).abs() < 1e-12);         // half way down
/// assert_eq!(schedule.at(500), 1e-4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupCosine {
    /// The rate at the end of the warmup.
    pub peak: f64,
    /// The rate at the end.
    pub floor: f64,
    /// Steps of the linear warmup.
    pub warmup: usize,
    /// The step at which the cosine reaches `floor`.
    pub total: usize,
}

impl WarmupCosine {
    /// The rate for step `step` (counted from 0).
    pub fn at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak * (step + 1) as f64 / self.warmup as f64;
        }
        let span = self.total.saturating_sub(self.warmup).max(1);
        let progress = ((step - self.warmup) as f64 / span as f64).min(1.0);
        self.floor
            + (self.peak - self.floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// An optimizer's update as one expression over the arena's elements: leaf 0 the
/// parameters, leaf 1 the gradient, then each state buffer, then each constant (one value
/// for every element).
struct Update {
    ir: Ir,
    states: usize,
}

impl Update {
    /// An update reading `states` state buffers.
    fn new(states: usize) -> Self {
        let mut ir = Ir::default();
        for _ in 0..2 + states {
            ir.leaf();
        }
        Update { ir, states }
    }

    fn params(&self) -> usize {
        0
    }

    fn gradient(&self) -> usize {
        1
    }

    fn state(&self, k: usize) -> usize {
        2 + k
    }

    /// `N` constants, as leaves after the state buffers.
    fn constants<const N: usize>(&mut self) -> [usize; N] {
        std::array::from_fn(|_| self.ir.leaf())
    }

    fn binary(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        self.ir.push(IrNode::Binary(op, a, b))
    }

    fn add(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Add, a, b)
    }

    fn sub(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Sub, a, b)
    }

    fn mul(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Mul, a, b)
    }

    fn div(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Div, a, b)
    }

    fn sqrt(&mut self, a: usize) -> usize {
        self.ir.push(IrNode::Unary(UnaryOp::Sqrt, a))
    }
}

/// An optimizer's buffers, each laid out like the parameter arena: its state (velocity,
/// moments), and the buffers the last step replaced, which the next step writes into.
#[derive(Clone, Debug)]
struct Buffers<T> {
    state: Vec<Storage<T>>,
    /// The parameters' previous buffer first, then each state's.
    spare: Vec<Option<Storage<T>>>,
}

impl<T> Default for Buffers<T> {
    fn default() -> Self {
        Buffers {
            state: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl<T: Float> Buffers<T> {
    /// Makes `count` state buffers of zeros for `params` unless they are there already, on
    /// the parameters' device; whether it made them (the optimizer starts over).
    fn prepare(&mut self, params: &Params<T>, count: usize) -> Result<bool> {
        let arena = params.arena();
        let fits = |s: &Storage<T>| s.len() == arena.len() && s.device() == arena.device();
        if self.state.len() == count && self.state.iter().all(fits) {
            return Ok(false);
        }
        self.state = (0..count)
            .map(|_| filled(arena.device(), arena.len(), T::zero()))
            .collect::<Result<_>>()?;
        self.spare = vec![None; count + 1];
        Ok(true)
    }

    /// `values` as tensors of no axes, on the parameters' device (one buffer for all):
    /// operands that change between steps without changing the kernels that read them.
    fn constants<const N: usize>(
        &self,
        params: &Params<T>,
        values: [f64; N],
    ) -> Result<[Tensor<T, ()>; N]> {
        let mut buffer = crate::storage::with_capacity(N)?;
        buffer.extend(values.map(T::from_f64));
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
    fn state(&self, k: usize) -> Flat<T> {
        flat(self.state[k].clone())
    }

    /// `expr` evaluated into spare buffer `k` (the parameters' first, then each state's)
    /// when nothing else holds it, else into a new buffer.
    fn write<E>(&mut self, k: usize, expr: E) -> Result<Flat<T>>
    where
        E: IntoExpr,
        E::Expr: Expr<Elem = T, Axes = (ArenaElement,)>,
    {
        match self.spare[k].take().filter(Storage::is_unique) {
            Some(buffer) => {
                let mut into = flat(buffer);
                into.assign(expr)?;
                Ok(into)
            }
            None => expr.into_expr().eval(),
        }
    }

    /// Puts `p` in place of the parameters and `state` in place of the state, keeping the
    /// buffers they replace for the next step.
    fn finish<const N: usize>(
        &mut self,
        params: &mut Params<T>,
        p: Flat<T>,
        state: [Flat<T>; N],
    ) -> Result<()> {
        let p = p.storage().clone();
        self.spare[0] = Some(params.arena_mut().replace_storage(p)?);
        for (k, next) in state.into_iter().enumerate() {
            let next = next.storage().clone();
            self.spare[k + 1] = Some(std::mem::replace(&mut self.state[k], next));
        }
        Ok(())
    }

    /// Runs `update` over the arena, its nodes `roots` being the next parameters and then
    /// the next value of each state buffer, with `constants` (placed on the parameters'
    /// device in one buffer: operands that change between steps without changing the
    /// kernel that reads them). Each result is written into the buffer it replaced last
    /// step when nothing else holds that buffer, else into a new one; then the results take
    /// the places of the parameters and the state.
    fn update<const R: usize, const N: usize>(
        &mut self,
        params: &mut Params<T>,
        grad: &Gradient<T>,
        update: Update,
        roots: [usize; R],
        constants: [f64; N],
    ) -> Result<()> {
        debug_assert_eq!(R, update.states + 1);
        let arena = params.arena();
        // Operands on two devices are an error of the job itself.
        let grad = grad.storage_for(arena)?;
        let len = arena.len();
        let flat = Layout::row_major(&[len]);
        let values = placed(
            crate::storage::copied(&constants.map(T::from_f64))?,
            params.device(),
        )?;
        let mut inputs = vec![
            Input::new(arena.storage(), &flat, &[0], 1)?,
            Input::new(grad, &flat, &[0], 1)?,
        ];
        for state in &self.state {
            inputs.push(Input::new(state, &flat, &[0], 1)?);
        }
        let at = |k: usize| Layout::new(&[], &[], k, N).expect("inside the buffer");
        let constant_layouts: Vec<Layout> = (0..N).map(at).collect();
        for layout in &constant_layouts {
            inputs.push(Input::new(&values, layout, &[], 1)?);
        }
        let outputs = (roots.iter().enumerate())
            .map(|(k, &root)| {
                let output = Output::new(root, vec![0], ReduceOp::Sum);
                match self.spare[k].take().filter(Storage::is_unique) {
                    Some(buffer) => output.written_into(buffer, flat),
                    None => output,
                }
            })
            .collect();
        let mut results = run_outputs(&update.ir, &[len], &inputs, outputs)?.into_iter();
        drop(inputs);
        let (p, _) = results.next().expect("one result per root");
        self.spare[0] = Some(params.arena_mut().replace_storage(p)?);
        for (k, (next, _)) in results.enumerate() {
            self.spare[k + 1] = Some(std::mem::replace(&mut self.state[k], next));
        }
        Ok(())
    }
}

/// One element of a parameter arena: the axis an optimizer's passes run along.
#[derive(Axis)]
struct ArenaElement;

/// A buffer laid out like a parameter arena, as a tensor.
type Flat<T> = Tensor<T, (ArenaElement,)>;

/// `storage`, as a flat tensor over all its elements.
fn flat<T: Float>(storage: Storage<T>) -> Flat<T> {
    let layout = Layout::row_major(&[storage.len()]);
    Tensor::from_parts(storage, layout).expect("a buffer fits itself")
}
