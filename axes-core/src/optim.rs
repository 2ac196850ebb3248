//! Optimizers: each updates every parameter of a [`Params`] arena with one job over the flat
//! buffer (parameters, gradient and optimizer state side by side), on the parameters' device.
//!
//! A step writes the next parameters and state into buffers the optimizer keeps — those the
//! previous step replaced — so nothing is allocated once training runs, and tensors taken
//! out of the arena earlier keep the values they had.

use crate::dispatch::{Input, Output, filled, placed, run_outputs};
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp, UnaryOp};
use crate::layout::Layout;
use crate::nn::{Gradient, Params};
use crate::num::Float;
use crate::storage::Storage;

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

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]) in one job.
    pub fn step(&mut self, params: &mut Params<T>, grad: &Gradient<T>) -> Result<()> {
        self.buffers.prepare(params, 1)?;
        // Leaves: parameters, gradient, velocity, then the constants μ and lr.
        let mut ir = Ir::default();
        let [p, g, v, mu, lr] = [(); 5].map(|()| ir.leaf());
        let mut op = |op, a, b| ir.push(IrNode::Binary(op, a, b));
        let momentum = op(BinaryOp::Mul, mu, v);
        let v = op(BinaryOp::Add, momentum, g);
        let change = op(BinaryOp::Mul, lr, v);
        let p = op(BinaryOp::Sub, p, change);
        let constants = [self.momentum, self.lr];
        self.buffers
            .update(params, grad, &ir, &[p, v], &constants.map(T::from_f64))
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

    /// Updates every parameter from `grad` (see [`crate::nn::Bound::gradient`]) in one job.
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
        // Leaves: parameters, gradient, first and second moments, then the constants.
        let mut ir = Ir::default();
        let [p, g, m, v] = [(); 4].map(|()| ir.leaf());
        let [b1, a1, b2, a2, keep, step, eps] = [(); 7].map(|()| ir.leaf());
        let mut op = |op, a, b| ir.push(IrNode::Binary(op, a, b));
        let (kept, added) = (op(BinaryOp::Mul, b1, m), op(BinaryOp::Mul, a1, g));
        let m = op(BinaryOp::Add, kept, added);
        let g2 = op(BinaryOp::Mul, g, g);
        let (kept, added) = (op(BinaryOp::Mul, b2, v), op(BinaryOp::Mul, a2, g2));
        let v = op(BinaryOp::Add, kept, added);
        let root = ir.push(IrNode::Unary(UnaryOp::Sqrt, v));
        let mut op = |op, a, b| ir.push(IrNode::Binary(op, a, b));
        let denominator = op(BinaryOp::Add, root, eps);
        let ratio = op(BinaryOp::Div, m, denominator);
        let change = op(BinaryOp::Mul, step, ratio);
        let decayed = op(BinaryOp::Mul, keep, p);
        let p = op(BinaryOp::Sub, decayed, change);
        self.buffers
            .update(params, grad, &ir, &[p, m, v], &constants.map(T::from_f64))
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

    /// Runs `ir` over the arena — leaf 0 the parameters, 1 the gradient, then the state
    /// buffers, then one leaf per constant — and puts result `roots[0]` in place of the
    /// parameters and `roots[1 + k]` in place of state `k`.
    fn update(
        &mut self,
        params: &mut Params<T>,
        grad: &Gradient<T>,
        ir: &Ir,
        roots: &[usize],
        constants: &[T],
    ) -> Result<()> {
        let arena = params.arena();
        let (len, device) = (arena.len(), arena.device());
        let grad = grad.storage_for(arena)?;
        if grad.device() != device {
            return Err(Error::DeviceMismatch {
                left: device.to_string(),
                right: grad.device().to_string(),
            });
        }
        let constants = placed(constants.to_vec(), device)?;
        let flat = Layout::row_major(&[len]);
        let buffers = [arena.storage(), grad].into_iter().chain(&self.state);
        let mut inputs = buffers
            .map(|storage| Input::new(storage, &flat, &[0], 1))
            .collect::<Result<Vec<_>>>()?;
        for c in 0..constants.len() {
            let every = Layout::new(&[len], &[0], c, constants.len()).expect("inside");
            inputs.push(Input::new(&constants, &every, &[0], 1)?);
        }
        let outputs = (roots.iter().zip(&mut self.spare))
            .map(|(&root, spare)| {
                let output = Output::new(root, vec![0], ReduceOp::Sum);
                // A buffer something else still views is left to it; the result gets a new one.
                match spare.take().filter(Storage::is_unique) {
                    Some(buffer) => output.written_into(buffer, flat),
                    None => output,
                }
            })
            .collect();
        let results = run_outputs(ir, &[len], &inputs, outputs)?;
        drop(inputs);
        let mut results = results.into_iter().map(|(storage, _)| storage);
        let next = results.next().expect("one result per root");
        self.spare[0] = Some(params.arena_mut().replace_storage(next));
        for (k, next) in results.enumerate() {
            self.spare[k + 1] = Some(std::mem::replace(&mut self.state[k], next));
        }
        Ok(())
    }
}
