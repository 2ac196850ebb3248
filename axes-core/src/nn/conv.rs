//! [`Conv`]: a convolution layer whose axes are found by role.

use super::params::{Bound, Init, Params, ParamsBuilder};
use crate::arena::Slot;
use crate::autodiff::{IntoVar, VarExpr};
use crate::axis::Axis;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::list::{AxisSet, Broadcast, BroadcastWith, HasAxis, SameAxes};
use crate::named::NamedLengths;
use crate::num::Float;
use crate::spatial::{ConvAxes, Convolution, ConvolveWith};
use crate::tensor::Tensor;

/// A convolution layer: a filter over the axes `F` — the input's Channel axis, the output
/// channels `Out` (role `Channelout`) and one kernel axis per spatial role — and a bias over
/// `Out`, applied by [`Convolution`] (which finds the input's axes by role, in any order).
/// PyTorch's `Conv1d`/`Conv2d`/`Conv3d` without groups: parameters `{name}.weight` and
/// `{name}.bias`, both uniform on `±1/√fan_in` (`fan_in` the filter's elements per output
/// channel), as PyTorch starts them; listing `F` as (Out, In, kernel…) lays the weight out as
/// PyTorch's.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Conv, ParamsBuilder};
/// use axes::spatial::Convolution;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Channel)] struct Gray;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
/// #[derive(Axis)] #[axis(role = Width)] struct Cols;
/// #[derive(Axis)] #[axis(role = Channelout)] struct Maps;
/// #[derive(Axis)] #[axis(role = Height)] struct KRows;
/// #[derive(Axis)] #[axis(role = Width)] struct KCols;
///
/// let mut builder = ParamsBuilder::new();
/// let conv = Conv::<(Maps, Gray, KRows, KCols), Maps>::new(
///     &mut builder, "conv", (Maps.len(4), Gray.len(1), KRows.len(3), KCols.len(3)),
///     Convolution::new().padding(1))?;
/// let params = builder.build::<f32>(0)?;
/// let images = Tensor::<f32, (Batch, Gray, Rows, Cols)>::ones((Batch.len(2), Gray.len(1), Rows.len(8), Cols.len(8)))?;
/// let maps: Tensor<f32, (Batch, Rows, Cols, Maps)> = conv.infer(&params, &images)?;
/// let tape = Tape::new();
/// let taped = conv.forward(&params.bind(&tape), &tape.constant(images))?.relu().eval()?;
/// assert_eq!(taped.value().len_of::<Maps>(), 4);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Conv<F: AxisSet, Out: Axis> {
    /// The filter.
    pub weight: Slot<F>,
    /// The bias.
    pub bias: Slot<(Out,)>,
    /// Stride, padding and dilation.
    pub options: Convolution,
}

impl<F: AxisSet, Out: Axis> Clone for Conv<F, Out> {
    fn clone(&self) -> Self {
        Conv {
            weight: self.weight,
            bias: self.bias,
            options: self.options,
        }
    }
}

impl<F, Out> Conv<F, Out>
where
    F: AxisSet + SameAxes<F> + HasAxis<Out>,
    Out: Axis,
    (Out,): AxisSet + SameAxes<(Out,)>,
{
    /// Reserves the layer's parameters `{name}.weight` (the filter, of the lengths given) and
    /// `{name}.bias`.
    pub fn new(
        params: &mut ParamsBuilder,
        name: &str,
        lengths: impl NamedLengths<Axes: SameAxes<F>> + Clone,
        options: Convolution,
    ) -> Result<Self> {
        let lens = Tensor::<f32, F>::checked_lens(&lengths)?;
        let outputs = lens[<F as HasAxis<Out>>::POS];
        let fan_in = lens.iter().product::<usize>() / outputs.max(1);
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        let weight = params.add(
            &format!("{name}.weight"),
            lengths,
            Init::Uniform(bound),
            fan_in,
            outputs,
        )?;
        let bias = params.add(
            &format!("{name}.bias"),
            crate::axis::Len::<Out>::new(outputs),
            Init::Uniform(bound),
            fan_in,
            outputs,
        )?;
        Ok(Conv {
            weight,
            bias,
            options,
        })
    }

    /// The convolution of `x` plus the bias, on the tape (an activation applied to the result
    /// fuses with the bias).
    #[allow(clippy::type_complexity)]
    pub fn forward<T, X, V>(
        &self,
        params: &Bound<'_, T>,
        x: V,
    ) -> Result<VarExpr<T, Broadcast<ConvAxes<X, F>, (Out,)>>>
    where
        T: Float,
        V: IntoVar<Elem = T, Axes = X>,
        X: ConvolveWith<F, Out = Out>,
        ConvAxes<X, F>: BroadcastWith<(Out,)>,
        Broadcast<ConvAxes<X, F>, (Out,)>: AxisSet,
    {
        ungrouped::<X, F>()?;
        let y = self.options.run_var(x, params.var(&self.weight)?)?;
        Ok(y.expr() + &params.var(&self.bias)?)
    }

    /// The values of [`Conv::forward`] without a tape (inference).
    #[allow(clippy::type_complexity)]
    pub fn infer<T, X>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, X>,
    ) -> Result<Tensor<T, Broadcast<ConvAxes<X, F>, (Out,)>>>
    where
        T: Float,
        X: ConvolveWith<F, Out = Out>,
        ConvAxes<X, F>: BroadcastWith<(Out,)>,
        Broadcast<ConvAxes<X, F>, (Out,)>: AxisSet,
    {
        ungrouped::<X, F>()?;
        let y = self.options.run(x, &params.tensor(&self.weight)?)?;
        (&y + &params.tensor(&self.bias)?).eval()
    }
}

/// An error where the filter shares a batch axis with the input (a grouped convolution):
/// the layer's bias and initial bound are per output channel of an ungrouped filter, so a
/// grouped one would silently differ from PyTorch's `groups`; [`Convolution`] runs it with
/// parameters of the caller's.
fn ungrouped<X: ConvolveWith<F>, F: AxisSet>() -> Result<()> {
    let shared = X::positions().shared;
    if shared.is_empty() {
        return Ok(());
    }
    let names = F::names();
    let axes: Vec<&str> = shared.iter().map(|s| names[s.1].as_ref()).collect();
    Err(Error::Unsupported {
        what: format!(
            "`nn::Conv` with a filter that shares the input's batch axis `{}` (groups): run \
             `spatial::Convolution` with a filter and bias of your own",
            axes.join("`, `")
        ),
    })
}
