//! Attention masks.

use crate::axis::{Axis, Len};
use crate::error::Result;
use crate::list::{HasAxis, SameAxes};
use crate::num::Float;
use crate::tensor::Tensor;

/// The causal mask over two position axes, added to attention scores before the softmax over
/// `Key`: 0 where the key's position is at most the query's, −∞ after it. It has only the two
/// position axes (`len`² elements) and broadcasts over Batch and Head.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::nn::causal_mask;
/// #[derive(Axis)] struct Query;
/// #[derive(Axis)] struct Key;
/// let mask = causal_mask::<f32, Query, Key>(Query.len(3), Key.len(3))?;
/// let inf = f32::NEG_INFINITY;
/// assert_eq!(mask.to_vec(), [0., inf, inf, 0., 0., inf, 0., 0., 0.]);
/// // the softmax over Key of masked scores puts no weight on later positions
/// let p = (&mask + 1.0).eval()?.softmax::<Key>()?;
/// assert_eq!(p.to_vec()[..3], [1., 0., 0.]);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn causal_mask<T: Float, Q: Axis, K: Axis>(
    queries: Len<Q>,
    keys: Len<K>,
) -> Result<Tensor<T, (Q, K)>>
where
    (Q, K): SameAxes<(Q, K)> + HasAxis<Q> + HasAxis<K>,
{
    Tensor::from_fn((queries, keys), |ix| {
        if ix.of::<K>() <= ix.of::<Q>() {
            T::zero()
        } else {
            T::from_f64(f64::NEG_INFINITY)
        }
    })
}
