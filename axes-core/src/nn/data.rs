//! Minibatches.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::axis::{Axis, Len};
use crate::error::{Error, Result};
use crate::list::{AxisSet, SameAxes};
use crate::tensor::Tensor;

/// The sample indices `0..count` shuffled (reproducibly from `seed`) and cut into batches of
/// `batch` along the axis `B` (the last one shorter when `batch` does not divide `count`);
/// gather each batch's rows with [`Tensor::gather`].
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// let batches = axes::nn::minibatches::<Batch>(10, 4, 1)?;
/// assert_eq!(batches.iter().map(|b| b.len_of::<Batch>()).collect::<Vec<_>>(), [4, 4, 2]);
/// let mut all: Vec<i64> = batches.iter().flat_map(|b| b.to_vec()).collect();
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<i64>>());
/// # Ok::<(), axes::Error>(())
/// ```
pub fn minibatches<B: Axis>(count: usize, batch: usize, seed: u64) -> Result<Vec<Tensor<i64, (B,)>>>
where
    (B,): AxisSet + SameAxes<(B,)>,
{
    if batch == 0 {
        return Err(Error::InvalidRange {
            low: "batches of 0".into(),
            high: format!("{count} samples"),
        });
    }
    let mut order: Vec<i64> = crate::storage::with_capacity(count)?;
    order.extend(0..count as i64);
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    order
        .chunks(batch)
        .map(|chunk| Tensor::from_vec(Len::<B>::new(chunk.len()), chunk.to_vec()))
        .collect()
}
