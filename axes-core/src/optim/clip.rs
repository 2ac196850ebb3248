//! Gradient clipping by the global norm, computed and applied on the gradient's device, and
//! the checks for values that are not finite.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::Scalar;
use crate::nn::params::{ArenaElement, Flat, flat};
use crate::nn::{Gradient, Params};
use crate::num::Float;
use crate::tensor::Tensor;

use super::{check_setting, finite_at_least_0, wide};

/// The global L2 norm of the gradient of parameters of type `T`, as a tensor of no axes on
/// their device, in their [`Float::Wide`] type.
pub type Norm<T> = Tensor<<T as Float>::Wide, ()>;

/// `grad` scaled so that its global L2 norm — over every parameter at once — is at most
/// `max_norm`, and the norm it had, as a tensor on the gradient's device. As PyTorch's
/// `clip_grad_norm_`, the scale `min(1, max_norm / (norm + 1e-6))` is always applied (1
/// leaves the gradient as it is), so no value is read back to the host and no step branches
/// on one: two reductions (the largest magnitude, then the sum of squares scaled by it, so
/// that no square overflows) and one pass over the gradient. A NaN or infinite gradient
/// gives a NaN norm and passes on its NaN and infinite elements; [`clip_grad_norm_checked`]
/// makes that an error.
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
/// assert_eq!(norm.to_vec(), [5.0]);
/// let clipped = clipped.to_vec()?;
/// assert!((clipped[at[0]] - 0.6).abs() < 1e-6 && (clipped[at[1]] - 0.8).abs() < 1e-6);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn clip_grad_norm<T: Float>(
    params: &Params<T>,
    grad: Gradient<T>,
    max_norm: f64,
) -> Result<(Gradient<T>, Norm<T>)> {
    check_setting(
        "clip_grad_norm::max_norm",
        max_norm,
        finite_at_least_0(max_norm),
        "finite and ≥ 0",
    )?;
    let g = flat(grad.storage_for(params.arena())?.clone());
    let norm = global_norm(&g)?;
    let wide_of = |v: f64| Scalar(T::Wide::from_f64(v));
    let scale = ((&norm + wide_of(1e-6)).recip() * wide_of(max_norm)).min(wide_of(1.0));
    let clipped = (wide(&g) * scale).cast::<T>().eval()?;
    Ok((grad.with_storage(clipped.storage().clone()), norm))
}

/// The L2 norm of `g` as a tensor on its device, with no square overflowing or
/// underflowing: the largest magnitude `m` first, then `m √Σ (g/m)²` summed in the wide type
/// (0 for a gradient of zeros, NaN where an element is NaN or infinite).
fn global_norm<T: Float>(g: &Flat<T>) -> Result<Tensor<T::Wide, ()>> {
    let largest = wide(g).abs().max_over::<(ArenaElement,)>()?;
    let tiny = Scalar(T::Wide::from_f64(f64::MIN_POSITIVE));
    let scaled = wide(g) * (&largest).max(tiny).recip();
    let squares = scaled.square().sum::<(ArenaElement,)>()?;
    (&largest * squares.sqrt()).eval()
}

/// [`clip_grad_norm`] with the norm read back to the host, and a NaN or infinite norm an
/// error naming the first parameter whose gradient is not finite (PyTorch's
/// `error_if_nonfinite=True`): the step that would follow is not taken silently with a
/// broken gradient.
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
    let unclipped = grad.with_storage(grad.storage_for(params.arena())?.clone());
    let (grad, norm) = clip_grad_norm(params, grad, max_norm)?;
    let norm = norm.try_to_vec()?[0].to_f64();
    if norm.is_finite() {
        return Ok((grad, norm));
    }
    first_non_finite(
        params,
        &[("the gradient of parameter", &unclipped.to_vec()?)],
    )?;
    // Every element finite, yet no finite norm: a NaN in the gaps between parameters.
    Err(Error::NonFinite {
        what: "the gradient, between parameters".into(),
        value: norm.to_string(),
    })
}

/// An error naming the first parameter whose gradient or value is NaN or infinite: one
/// reduction over the arena (`0 g + 0 p` is 0 exactly where both are finite), and only
/// where it finds one, a search for the parameter on the host.
pub(super) fn check_finite<T: Float>(params: &Params<T>, grad: &Gradient<T>) -> Result<()> {
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
