//! Fused attention on the tape: [`Attention::run_var`] and [`Attention::run_var_masked`].

use super::{IntoVar, Var};
use crate::axis::Axis;
use crate::contract::{Attention, AttentionAxes, AttentionScores};
use crate::error::{Error, Result};
use crate::list::{
    AxisSet, ConcatWith, Difference, DifferenceWith, DotOverWith, HasAxis, Includes, SubsetOf,
};
use crate::num::Float;
use crate::tensor::Tensor;

// The result types name every axis list they are computed from.
#[allow(clippy::type_complexity)]
impl<Qx: Axis, Kx: Axis, W: Axis> Attention<Qx, Kx, W> {
    /// [`Attention::run`] on the tape: its backward recomputes the probabilities block by
    /// block from each query's log-sum-exp (saved by the forward), so neither pass keeps the
    /// query × key probabilities.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// use axes::contract::Attention;
    /// #[derive(Axis)] struct Query;
    /// #[derive(Axis)] struct Key;
    /// #[derive(Axis)] struct Dim;
    /// let tape = Tape::<f64>::new();
    /// let q = tape.var(Tensor::<f64, (Query, Dim)>::random_uniform((Query.len(3), Dim.len(4)), -1.0, 1.0, 0)?);
    /// let k = tape.var(Tensor::<f64, (Key, Dim)>::random_uniform((Key.len(3), Dim.len(4)), -1.0, 1.0, 1)?);
    /// let v = tape.var(Tensor::<f64, (Key, Dim)>::random_uniform((Key.len(3), Dim.len(4)), -1.0, 1.0, 2)?);
    /// let out = Attention::<Query, Key, Dim>::causal().run_var(&q, &k, &v)?;
    /// let grads = out.sum::<(Query, Dim)>()?.backward()?;
    /// // The first query sees only the first key: its output is that value, whatever q is.
    /// assert!(grads.get(&q)?.to_vec()[..4].iter().all(|g| g.abs() < 1e-12));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn run_var<T, LQ, LK, LV, X, Y, Z>(
        &self,
        q: X,
        k: Y,
        v: Z,
    ) -> Result<Var<T, AttentionAxes<LQ, LK, LV, Kx, W>>>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)> + HasAxis<Qx>,
        LK: AxisSet + HasAxis<Kx> + DifferenceWith<(Kx,)>,
        LV: AxisSet + HasAxis<Kx>,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)>,
        Difference<LK, (Kx,)>: SubsetOf<LQ>,
        (Kx,): ConcatWith<LQ> + AxisSet,
        (Qx,): ConcatWith<LV>,
        (W,): AxisSet,
        X: IntoVar<Elem = T, Axes = LQ>,
        Y: IntoVar<Elem = T, Axes = LK>,
        Z: IntoVar<Elem = T, Axes = LV>,
    {
        self.record::<T, LQ, LK, LV, ()>(q.into_var()?, k.into_var()?, v.into_var()?, None)
    }

    /// [`Attention::run_masked`] on the tape (the mask a constant).
    pub fn run_var_masked<T, LQ, LK, LV, M, X, Y, Z>(
        &self,
        q: X,
        k: Y,
        v: Z,
        mask: &Tensor<T, M>,
    ) -> Result<Var<T, AttentionAxes<LQ, LK, LV, Kx, W>>>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)> + HasAxis<Qx>,
        LK: AxisSet + HasAxis<Kx> + DifferenceWith<(Kx,)>,
        LV: AxisSet + HasAxis<Kx>,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)> + Includes<M>,
        Difference<LK, (Kx,)>: SubsetOf<LQ>,
        (Kx,): ConcatWith<LQ> + AxisSet,
        (Qx,): ConcatWith<LV>,
        (W,): AxisSet,
        M: AxisSet,
        X: IntoVar<Elem = T, Axes = LQ>,
        Y: IntoVar<Elem = T, Axes = LK>,
        Z: IntoVar<Elem = T, Axes = LV>,
    {
        self.record(q.into_var()?, k.into_var()?, v.into_var()?, Some(mask))
    }

    /// Runs the forward pass and records its backward.
    fn record<T, LQ, LK, LV, M>(
        &self,
        q: Var<T, LQ>,
        k: Var<T, LK>,
        v: Var<T, LV>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<Var<T, AttentionAxes<LQ, LK, LV, Kx, W>>>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)>,
        LK: AxisSet,
        LV: AxisSet,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)>,
        (Kx,): AxisSet,
        (W,): AxisSet,
        M: AxisSet,
    {
        if !(q.tape().same_as(k.tape()) && q.tape().same_as(v.tape())) {
            return Err(Error::Unsupported {
                what: "combining variables of different tapes".into(),
            });
        }
        let (out, lse) = self.forward(q.value(), k.value(), v.value(), mask)?;
        let needs = [q.needs_grad(), k.needs_grad(), v.needs_grad()];
        let ids = [q.id(), k.id(), v.id()];
        let (qv, kv, vv) = (q.value().clone(), k.value().clone(), v.value().clone());
        let (saved, mask, attention) = (out.clone(), mask.cloned(), *self);
        Ok(q.tape()
            .record(out, needs.iter().any(|&n| n), move |grads, id| {
                let Some(grad) = grads.tensor::<AttentionAxes<LQ, LK, LV, Kx, W>>(id) else {
                    return Ok(());
                };
                let (dq, dk, dv) =
                    attention.backward(&qv, &kv, &vv, mask.as_ref(), &saved, &grad, &lse)?;
                if needs[0] {
                    grads.accumulate(ids[0], dq)?;
                }
                if needs[1] {
                    grads.accumulate(ids[1], dk)?;
                }
                if needs[2] {
                    grads.accumulate(ids[2], dv)?;
                }
                Ok(())
            }))
    }
}
