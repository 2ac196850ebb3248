//! Multi-head self-attention with a causal mask.

use super::{Batch, Head, HeadDim, Hidden, Key, Query, Scores, Stream, Token};
use crate::arena::Slot;
use crate::autodiff::{self, Var};
use crate::axis::{Axis, Len};
use crate::contract::{Attention, dot, dot_over};
use crate::error::Result;
use crate::eval::ExprExt;
use crate::expr::Scalar;
use crate::ir::BinaryOp;
use crate::list::{AxisSet, Includes};
use crate::nn::masks::causal_mask;
use crate::nn::params::{Bound, Init, Params, ParamsBuilder};
use crate::num::Float;
use crate::protocol::{Device, FUSED_ATTENTION_MAX_WIDTH};
use crate::tensor::Tensor;

/// The heads' mixed values, in the order the output projection reads them.
type Mixed = (Batch, Query, Head, HeadDim);

/// A projection from the stream to the heads: its weight and its bias.
pub type Projection = (Slot<(Hidden, Head, HeadDim)>, Slot<(Head, HeadDim)>);

/// Causal multi-head self-attention over the [`Token`] axis: each head projects the stream to
/// queries, keys and values `(Batch, Token, Head, HeadDim)`, renames [`Token`] to [`Query`] and
/// [`Key`], scores `q·k / √len(HeadDim)` contracting only [`HeadDim`], masks later keys, takes
/// the softmax along [`Key`], and mixes the values; the heads are then projected back to
/// [`Hidden`] (contracting [`Head`] and [`HeadDim`]). The scores, mask, softmax and mix are
/// one fused [`Attention`] call that never writes the probabilities — on a device, for heads up
/// to [`FUSED_ATTENTION_MAX_WIDTH`] wide; wider ones are composed there from `dot_over` and
/// `softmax`.
/// Parameters `{name}.{query,key,value,out}.{weight,bias}`.
#[derive(Clone)]
pub struct MultiHeadAttention {
    /// The query projection and its bias.
    pub query: Projection,
    /// The key projection and its bias.
    pub key: Projection,
    /// The value projection and its bias.
    pub value: Projection,
    /// The output projection.
    pub out: Slot<(Head, HeadDim, Hidden)>,
    /// The output projection's bias.
    pub out_bias: Slot<(Hidden,)>,
    /// The scores' scale, `1 / √len(HeadDim)`.
    scale: f64,
}

impl MultiHeadAttention {
    /// Reserves the projections, weights drawn from `init` (biases zero).
    pub fn new(
        params: &mut ParamsBuilder,
        name: &str,
        hidden: Len<Hidden>,
        heads: Len<Head>,
        head_dim: Len<HeadDim>,
        init: Init,
    ) -> Result<Self> {
        let (h, inner) = (hidden.get(), heads.get() * head_dim.get());
        let mut projection = |part: &str| -> Result<_> {
            Ok((
                params.add(
                    &format!("{name}.{part}.weight"),
                    (hidden, heads, head_dim),
                    init,
                    h,
                    inner,
                )?,
                params.add(
                    &format!("{name}.{part}.bias"),
                    (heads, head_dim),
                    Init::Zeros,
                    h,
                    inner,
                )?,
            ))
        };
        let (query, key, value) = (
            projection("query")?,
            projection("key")?,
            projection("value")?,
        );
        let out = params.add(
            &format!("{name}.out.weight"),
            (heads, head_dim, hidden),
            init,
            inner,
            h,
        )?;
        let out_bias = params.add(&format!("{name}.out.bias"), hidden, Init::Zeros, inner, h)?;
        Ok(MultiHeadAttention {
            query,
            key,
            value,
            out,
            out_bias,
            scale: 1.0 / (head_dim.get() as f64).sqrt(),
        })
    }

    /// The attention's output for the stream `x`, on the tape.
    pub fn forward<T: Float>(
        &self,
        p: &Bound<'_, T>,
        x: &Var<T, Stream>,
    ) -> Result<Var<T, Stream>> {
        self.attend::<T, ()>(p, x, None)
    }

    /// [`MultiHeadAttention::forward`] with `mask` added to the scores besides the causal mask
    /// (before the softmax): over any of the [`Scores`] axes, e.g. `(Batch, Key)` with −∞ at
    /// padding; a mask over another axis is a compile error naming the axes.
    pub fn forward_masked<T: Float, M: AxisSet>(
        &self,
        p: &Bound<'_, T>,
        x: &Var<T, Stream>,
        mask: &Tensor<T, M>,
    ) -> Result<Var<T, Stream>>
    where
        Scores: Includes<M>,
    {
        self.attend(p, x, Some(mask))
    }

    /// The attention on the tape: fused ([`Attention`]), or composed from `dot_over`, the masks
    /// and `softmax` where [`MultiHeadAttention::fused_on`] says the device does not fuse it.
    fn attend<T: Float, M: AxisSet>(
        &self,
        p: &Bound<'_, T>,
        x: &Var<T, Stream>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<Var<T, Stream>>
    where
        Scores: Includes<M>,
    {
        let project = |(w, b): &Projection| (autodiff::dot(x, p.var(w)?)? + &p.var(b)?).eval();
        let q = project(&self.query)?.rename::<Token, Query>()?;
        let k = project(&self.key)?.rename::<Token, Key>()?;
        let v = project(&self.value)?.rename::<Token, Key>()?;
        let mixed: Var<T, Mixed> =
            if Self::fused_on(&x.value().device(), q.value().len_of::<HeadDim>()) {
                let attention = Attention::<Query, Key, HeadDim>::causal().with_scale(self.scale);
                match mask {
                    Some(mask) => attention.run_var_masked(&q, &k, &v, mask)?,
                    None => attention.run_var(&q, &k, &v)?,
                }
                .axes_with_order()
            } else {
                let causal = p.tape().constant(self.mask(x.value())?);
                let scores = autodiff::dot_over::<(HeadDim,), _, _, _, _, _>(&q, &k)?;
                let scores = (scores.expr().with_scalar(BinaryOp::Mul, self.scale, false)
                    + &causal)
                    .eval()?
                    .axes_with_order::<Scores>();
                let scores = match mask {
                    Some(mask) => (scores.expr() + &p.tape().constant(mask.clone())).eval()?,
                    None => scores,
                };
                let weights = scores.softmax::<Key>()?;
                autodiff::dot_over::<(Key,), _, _, _, _, _>(&weights, &v)?.axes_with_order()
            };
        let out = (autodiff::dot(&mixed, p.var(&self.out)?)? + &p.var(&self.out_bias)?).eval()?;
        Ok(out.rename::<Query, Token>()?.axes_with_order())
    }

    /// The attention's output for the stream `x`, without a tape (inference): the values of
    /// [`MultiHeadAttention::forward`].
    pub fn infer<T: Float>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, Stream>,
    ) -> Result<Tensor<T, Stream>> {
        self.attend_tensors::<T, ()>(params, x, None)
    }

    /// [`MultiHeadAttention::forward_masked`] without a tape.
    pub fn infer_masked<T: Float, M: AxisSet>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, Stream>,
        mask: &Tensor<T, M>,
    ) -> Result<Tensor<T, Stream>>
    where
        Scores: Includes<M>,
    {
        self.attend_tensors(params, x, Some(mask))
    }

    /// [`MultiHeadAttention::attend`] without a tape.
    fn attend_tensors<T: Float, M: AxisSet>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, Stream>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<Tensor<T, Stream>>
    where
        Scores: Includes<M>,
    {
        let project =
            |(w, b): &Projection| (&dot(x, &params.tensor(w)?)? + &params.tensor(b)?).eval();
        let q = project(&self.query)?.rename::<Token, Query>()?;
        let k = project(&self.key)?.rename::<Token, Key>()?;
        let v = project(&self.value)?.rename::<Token, Key>()?;
        let mixed: Tensor<T, Mixed> = if Self::fused_on(&x.device(), q.len_of::<HeadDim>()) {
            let attention = Attention::<Query, Key, HeadDim>::causal().with_scale(self.scale);
            match mask {
                Some(mask) => attention.run_masked(&q, &k, &v, mask)?,
                None => attention.run(&q, &k, &v)?,
            }
            .axes_with_order()
        } else {
            let scores = dot_over::<(HeadDim,), _, _, _>(&q, &k)?;
            let scores = (&scores * Scalar(T::from_f64(self.scale)) + &self.mask(x)?)
                .eval()?
                .axes_with_order::<Scores>();
            let scores = match mask {
                Some(mask) => (&scores + mask).eval()?,
                None => scores,
            };
            let weights = scores.softmax::<Key>()?;
            dot_over::<(Key,), _, _, _>(&weights, &v)?.axes_with_order()
        };
        let out =
            (&dot(&mixed, &params.tensor(&self.out)?)? + &params.tensor(&self.out_bias)?).eval()?;
        Ok(out.rename::<Query, Token>()?.axes_with_order())
    }

    /// Whether attention with heads `head_width` wide runs fused on `device`: in host memory
    /// always, on a device for heads up to [`FUSED_ATTENTION_MAX_WIDTH`] wide.
    fn fused_on(device: &Device, head_width: usize) -> bool {
        device.is_host() || head_width <= FUSED_ATTENTION_MAX_WIDTH
    }

    /// The causal mask for `x`'s tokens, on `x`'s device.
    fn mask<T: Float>(&self, x: &Tensor<T, Stream>) -> Result<Tensor<T, (Query, Key)>> {
        let n = x.len_of::<Token>();
        causal_mask::<T, Query, Key>(Query.len(n), Key.len(n))?.to(&x.device())
    }
}
