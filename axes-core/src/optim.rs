//! Optimizers: each updates every parameter of a [`Params`] arena in one fused pass over
//! the flat buffer (parameters, gradient and optimizer state side by side).

use crate::error::{Error, Result};
use crate::nn::Params;
use crate::num::Float;

fn check_len<T: Float>(params: &Params<T>, grad: &[T]) -> Result<()> {
    if grad.len() != params.arena().len() {
        return Err(Error::ElementCount {
            lengths: "the parameter arena".into(),
            expected: params.arena().len(),
            got: grad.len(),
        });
    }
    Ok(())
}

/// Stochastic gradient descent with momentum: `v = μ v + g; p -= lr v`.
#[derive(Clone, Debug)]
pub struct Sgd<T: Float> {
    /// The learning rate.
    pub lr: f64,
    /// The momentum μ (0 for plain SGD).
    pub momentum: f64,
    velocity: Vec<T>,
}

impl<T: Float> Sgd<T> {
    /// SGD with learning rate `lr` and momentum `momentum`.
    pub fn new(lr: f64, momentum: f64) -> Self {
        Sgd {
            lr,
            momentum,
            velocity: Vec::new(),
        }
    }

    /// Updates every parameter from `grad` (laid out like the arena, see
    /// [`crate::nn::Bound::gradient`]) in one pass.
    pub fn step(&mut self, params: &mut Params<T>, grad: &[T]) -> Result<()> {
        check_len(params, grad)?;
        if self.velocity.len() != grad.len() {
            self.velocity = vec![T::zero(); grad.len()];
        }
        let (lr, mu) = (T::from_f64(self.lr), T::from_f64(self.momentum));
        let flat = params.arena_mut().flat_mut();
        for ((p, v), &g) in flat.iter_mut().zip(&mut self.velocity).zip(grad) {
            *v = mu.mul_add(*v, g);
            *p = p.sub(lr.mul(*v));
        }
        Ok(())
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
    m: Vec<T>,
    v: Vec<T>,
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
            m: Vec::new(),
            v: Vec::new(),
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

    /// Updates every parameter from `grad` (laid out like the arena, see
    /// [`crate::nn::Bound::gradient`]) in one pass.
    pub fn step(&mut self, params: &mut Params<T>, grad: &[T]) -> Result<()> {
        check_len(params, grad)?;
        if self.m.len() != grad.len() {
            self.m = vec![T::zero(); grad.len()];
            self.v = vec![T::zero(); grad.len()];
            self.steps = 0;
        }
        self.steps += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        // Bias corrections folded into the step size and epsilon.
        let c1 = 1.0 - b1.powi(self.steps);
        let c2 = 1.0 - b2.powi(self.steps);
        let step = T::from_f64(self.lr * c2.sqrt() / c1);
        let eps = T::from_f64(self.eps * c2.sqrt());
        let (b1, b2) = (T::from_f64(b1), T::from_f64(b2));
        let (a1, a2) = (T::one().sub(b1), T::one().sub(b2));
        let keep = T::from_f64(1.0 - self.lr * self.weight_decay);
        let flat = params.arena_mut().flat_mut();
        for (((p, m), v), &g) in flat.iter_mut().zip(&mut self.m).zip(&mut self.v).zip(grad) {
            *m = b1.mul(*m).add(a1.mul(g));
            *v = b2.mul(*v).add(a2.mul(g.mul(g)));
            *p = keep.mul(*p).sub(step.mul(m.div(v.sqrt().add(eps))));
        }
        Ok(())
    }
}
