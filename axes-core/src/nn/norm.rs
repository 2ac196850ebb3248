//! Normalisation layers over a named axis.

use super::params::{Bound, Init, Params, ParamsBuilder};
use crate::arena::Slot;
use crate::autodiff::{IntoVar, Var, normalised, normalised_tensor};
use crate::axis::{Axis, Len};
use crate::error::Result;
use crate::list::{AxisSet, HasAxis, SameAxes};
use crate::num::Float;
use crate::tensor::Tensor;

/// Layer normalisation over the axis `F`: `(x - mean) / sqrt(var + eps) * gain + bias`, the
/// statistics taken along `F` for each position of the input's other axes (any, e.g.
/// (Batch, Token, F)). Parameters `{name}.weight` (the gain, ones) and `{name}.bias` (zeros),
/// PyTorch's names for `nn.LayerNorm`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{LayerNorm, ParamsBuilder};
/// #[derive(Axis)] struct Token;
/// #[derive(Axis)] struct Hidden;
/// let mut builder = ParamsBuilder::new();
/// let norm = LayerNorm::new(&mut builder, "ln", Hidden.len(4), 1e-5)?;
/// let params = builder.build::<f64>(0)?;
/// let x = Tensor::<f64, (Token, Hidden)>::from_vec((Token.len(1), Hidden.len(4)), vec![1., 2., 3., 4.])?;
/// let tape = Tape::new();
/// let y = norm.forward(&params.bind(&tape), tape.constant(x.clone()))?;
/// assert!(y.value().mean::<(Hidden,)>()?.to_vec()[0].abs() < 1e-12);
/// // without a tape: the same values, to rounding
/// let inferred = norm.infer(&params, &x)?.to_vec();
/// assert!(inferred.iter().zip(y.value().to_vec()).all(|(a, b)| (a - b).abs() < 1e-12));
/// # Ok::<(), axes::Error>(())
/// ```
pub struct LayerNorm<F: Axis> {
    /// The gain.
    pub gain: Slot<(F,)>,
    /// The bias.
    pub bias: Slot<(F,)>,
    /// Added to the variance.
    pub eps: f64,
}

impl<F: Axis> Clone for LayerNorm<F> {
    fn clone(&self) -> Self {
        LayerNorm {
            gain: self.gain,
            bias: self.bias,
            eps: self.eps,
        }
    }
}

impl<F: Axis> LayerNorm<F>
where
    (F,): SameAxes<(F,)> + HasAxis<F>,
{
    /// Reserves the layer's gain `{name}.weight` (ones) and bias `{name}.bias` (zeros).
    pub fn new(params: &mut ParamsBuilder, name: &str, len: Len<F>, eps: f64) -> Result<Self> {
        let n = len.get();
        Ok(LayerNorm {
            gain: params.add(&format!("{name}.weight"), len, Init::Ones, n, n)?,
            bias: params.add(&format!("{name}.bias"), len, Init::Zeros, n, n)?,
            eps,
        })
    }

    /// The normalised input, on the tape.
    pub fn forward<T, A, V>(&self, params: &Bound<'_, T>, x: V) -> Result<Var<T, A>>
    where
        T: Float,
        A: AxisSet + HasAxis<F>,
        V: IntoVar<Elem = T, Axes = A>,
    {
        let (gain, bias) = (params.var(&self.gain)?, params.var(&self.bias)?);
        normalised(&x.into_var()?, Some(&gain), Some(&bias), true, self.eps)
    }

    /// The normalised input computed without a tape (inference): the values of
    /// [`LayerNorm::forward`].
    pub fn infer<T, A>(&self, params: &Params<T>, x: &Tensor<T, A>) -> Result<Tensor<T, A>>
    where
        T: Float,
        A: AxisSet + HasAxis<F>,
    {
        let (gain, bias) = (params.tensor(&self.gain)?, params.tensor(&self.bias)?);
        normalised_tensor(x, Some(&gain), Some(&bias), true, self.eps)
    }
}

/// RMS normalisation over the axis `F`: `x / sqrt(mean(x²) + eps) * gain`, the mean taken along
/// `F` (no centring, no bias). Parameter `{name}.weight` (the gain, ones).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{ParamsBuilder, RmsNorm};
/// #[derive(Axis)] struct Token;
/// #[derive(Axis)] struct Hidden;
/// let mut builder = ParamsBuilder::new();
/// let norm = RmsNorm::new(&mut builder, "rms", Hidden.len(2), 0.0)?;
/// let params = builder.build::<f64>(0)?;
/// let x = Tensor::<f64, (Token, Hidden)>::from_vec((Token.len(1), Hidden.len(2)), vec![3., 4.])?;
/// let tape = Tape::new();
/// let y = norm.forward(&params.bind(&tape), tape.constant(x.clone()))?;
/// let rms = 12.5f64.sqrt();
/// assert!(y.value().to_vec().iter().zip([3. / rms, 4. / rms]).all(|(a, b)| (a - b).abs() < 1e-12));
/// # Ok::<(), axes::Error>(())
/// ```
pub struct RmsNorm<F: Axis> {
    /// The gain.
    pub gain: Slot<(F,)>,
    /// Added to the mean square.
    pub eps: f64,
}

impl<F: Axis> Clone for RmsNorm<F> {
    fn clone(&self) -> Self {
        RmsNorm {
            gain: self.gain,
            eps: self.eps,
        }
    }
}

impl<F: Axis> RmsNorm<F>
where
    (F,): SameAxes<(F,)> + HasAxis<F>,
{
    /// Reserves the layer's gain `{name}.weight` (ones).
    pub fn new(params: &mut ParamsBuilder, name: &str, len: Len<F>, eps: f64) -> Result<Self> {
        let n = len.get();
        Ok(RmsNorm {
            gain: params.add(&format!("{name}.weight"), len, Init::Ones, n, n)?,
            eps,
        })
    }

    /// The normalised input, on the tape.
    pub fn forward<T, A, V>(&self, params: &Bound<'_, T>, x: V) -> Result<Var<T, A>>
    where
        T: Float,
        A: AxisSet + HasAxis<F>,
        V: IntoVar<Elem = T, Axes = A>,
    {
        let gain = params.var(&self.gain)?;
        normalised(&x.into_var()?, Some(&gain), None, false, self.eps)
    }

    /// The normalised input computed without a tape (inference).
    pub fn infer<T, A>(&self, params: &Params<T>, x: &Tensor<T, A>) -> Result<Tensor<T, A>>
    where
        T: Float,
        A: AxisSet + HasAxis<F>,
    {
        let gain = params.tensor(&self.gain)?;
        normalised_tensor(x, Some(&gain), None, false, self.eps)
    }
}
