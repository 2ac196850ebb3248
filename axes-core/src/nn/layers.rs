//! Typed layers.

use super::params::{Bound, Init, Params, ParamsBuilder};
use crate::arena::Slot;
use crate::autodiff::{self, IntoVar, VarExpr};
use crate::axis::{Axis, Dual, Len, PrimalAxis};
use crate::contract::dot;
use crate::error::Result;
use crate::eval::ExprExt;
use crate::list::{AxisSet, Broadcast, BroadcastWith, DotAxes, DotWith, HasAxis, SameAxes};
use crate::num::Float;
use crate::tensor::Tensor;

/// An affine layer `x·w + b` from the axis `In` to the axis `Out`: weight `(In, Out)`, bias
/// `(Out,)`. It applies to any input that has the axis `In` (the other axes are kept), and
/// an input without it is a compile error naming the axes.
pub struct Linear<In: Axis, Out: Axis> {
    /// The weight.
    pub weight: Slot<(In, Out)>,
    /// The bias.
    pub bias: Slot<(Out,)>,
}

impl<In: Axis, Out: Axis> Clone for Linear<In, Out> {
    fn clone(&self) -> Self {
        Linear {
            weight: self.weight,
            bias: self.bias,
        }
    }
}

impl<In: Axis, Out: Axis> Linear<In, Out>
where
    (In, Out): AxisSet + SameAxes<(In, Out)>,
    (Out,): AxisSet + SameAxes<(Out,)>,
{
    /// Reserves the layer's parameters `{name}.weight` (initialised by `init`) and
    /// `{name}.bias` (zeros).
    pub fn new(
        params: &mut ParamsBuilder,
        name: &str,
        input: Len<In>,
        output: Len<Out>,
        init: Init,
    ) -> Result<Self> {
        let (fan_in, fan_out) = (input.get(), output.get());
        Ok(Linear {
            weight: params.add(
                &format!("{name}.weight"),
                (input, output),
                init,
                fan_in,
                fan_out,
            )?,
            bias: params.add(
                &format!("{name}.bias"),
                output,
                Init::Zeros,
                fan_in,
                fan_out,
            )?,
        })
    }

    /// `x·w + b` (the contraction over `In`, then the bias in a fused expression, so an
    /// activation applied to the result fuses with the bias).
    #[allow(clippy::type_complexity)]
    pub fn forward<T, X, V>(
        &self,
        params: &Bound<'_, T>,
        x: V,
    ) -> Result<VarExpr<T, Broadcast<DotAxes<X, (In, Out)>, (Out,)>>>
    where
        T: Float,
        V: IntoVar<Elem = T, Axes = X>,
        X: AxisSet + HasAxis<In> + DotWith<(In, Out)>,
        DotAxes<X, (In, Out)>: BroadcastWith<(Out,)>,
        Broadcast<DotAxes<X, (In, Out)>, (Out,)>: AxisSet,
    {
        let h = autodiff::dot(x, params.var(&self.weight)?)?;
        Ok(h + &params.var(&self.bias)?)
    }

    /// `x·w + b` without a tape (inference): the values of [`Linear::forward`].
    #[allow(clippy::type_complexity)]
    pub fn infer<T, X>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, X>,
    ) -> Result<Tensor<T, Broadcast<DotAxes<X, (In, Out)>, (Out,)>>>
    where
        T: Float,
        X: AxisSet + HasAxis<In> + DotWith<(In, Out)>,
        DotAxes<X, (In, Out)>: BroadcastWith<(Out,)>,
        Broadcast<DotAxes<X, (In, Out)>, (Out,)>: AxisSet,
    {
        let h = dot(x, &params.tensor(&self.weight)?)?;
        (&h + &params.tensor(&self.bias)?).eval()
    }
}

/// A square layer `x·w + b` on one axis `H`: weight `(Dual<H>, H)` (its `Dual<H>` contracts
/// the input's `H`), bias `(H,)`; the result has the input's axes.
pub struct Square<H: PrimalAxis> {
    /// The weight.
    pub weight: Slot<(Dual<H>, H)>,
    /// The bias.
    pub bias: Slot<(H,)>,
}

impl<H: PrimalAxis> Clone for Square<H> {
    fn clone(&self) -> Self {
        Square {
            weight: self.weight,
            bias: self.bias,
        }
    }
}

impl<H: PrimalAxis> Square<H>
where
    (Dual<H>, H): AxisSet + SameAxes<(Dual<H>, H)>,
    (H,): AxisSet + SameAxes<(H,)>,
{
    /// Reserves the layer's parameters `{name}.weight` and `{name}.bias` (zeros).
    pub fn new(params: &mut ParamsBuilder, name: &str, len: Len<H>, init: Init) -> Result<Self> {
        let n = len.get();
        Ok(Square {
            weight: params.add(
                &format!("{name}.weight"),
                (Len::<Dual<H>>::new(n), len),
                init,
                n,
                n,
            )?,
            bias: params.add(&format!("{name}.bias"), len, Init::Zeros, n, n)?,
        })
    }

    /// `x·w + b`, contracting `x`'s `H` with the weight's `Dual<H>`.
    #[allow(clippy::type_complexity)]
    pub fn forward<T, X, V>(
        &self,
        params: &Bound<'_, T>,
        x: V,
    ) -> Result<VarExpr<T, Broadcast<DotAxes<X, (Dual<H>, H)>, (H,)>>>
    where
        T: Float,
        V: IntoVar<Elem = T, Axes = X>,
        X: AxisSet + HasAxis<H> + DotWith<(Dual<H>, H)>,
        DotAxes<X, (Dual<H>, H)>: BroadcastWith<(H,)>,
        Broadcast<DotAxes<X, (Dual<H>, H)>, (H,)>: AxisSet,
    {
        let h = autodiff::dot(x, params.var(&self.weight)?)?;
        Ok(h + &params.var(&self.bias)?)
    }

    /// `x·w + b` without a tape (inference): the values of [`Square::forward`].
    #[allow(clippy::type_complexity)]
    pub fn infer<T, X>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, X>,
    ) -> Result<Tensor<T, Broadcast<DotAxes<X, (Dual<H>, H)>, (H,)>>>
    where
        T: Float,
        X: AxisSet + HasAxis<H> + DotWith<(Dual<H>, H)>,
        DotAxes<X, (Dual<H>, H)>: BroadcastWith<(H,)>,
        Broadcast<DotAxes<X, (Dual<H>, H)>, (H,)>: AxisSet,
    {
        let h = dot(x, &params.tensor(&self.weight)?)?;
        (&h + &params.tensor(&self.bias)?).eval()
    }
}
