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
    let mut order: Vec<i64> = crate::storage::try_vec(count)?;
    order.extend(0..count as i64);
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    order
        .chunks(batch)
        .map(|chunk| Tensor::from_vec(Len::<B>::new(chunk.len()), chunk.to_vec()))
        .collect()
}

/// Batches made on a thread of their own one step ahead of the loop that uses them: while a
/// step runs, `make` builds the next batch (gathers its rows, copies it to its device), and
/// [`Iterator::next`] hands it over. At most two batches exist beyond the one in use (one
/// waiting, one being made), and their buffers come back through the memory pool, so the
/// loop allocates nothing new. An error of `make` ends the batches with that error; dropping
/// the `Prefetch` stops the thread after the batch it is making. Batches of one layout can be
/// swapped into a [`Swappable`](crate::memory::Swappable), so that views of them are built
/// once (`examples/gpt.rs` does that with each step's windows of text).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::nn::{Prefetch, minibatches};
/// #[derive(Axis)] struct Sample;
/// #[derive(Axis)] struct Batch;
/// let data = Tensor::<f32, (Sample,)>::arange(Sample.len(10))?;
/// let batches = minibatches::<Batch>(10, 4, 1)?;
/// let mut total = 0.0;
/// for batch in Prefetch::new(batches, move |rows| data.gather::<Sample, _, _>(&rows)) {
///     total += batch?.to_vec().iter().sum::<f32>();
/// }
/// assert_eq!(total, 45.0);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Prefetch<B> {
    batches: std::sync::mpsc::Receiver<Result<B>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl<B: Send + 'static> Prefetch<B> {
    /// Makes `make(item)` for each of `items`, in order, on another thread.
    pub fn new<I, F>(items: I, mut make: F) -> Prefetch<B>
    where
        I: IntoIterator + Send + 'static,
        I::IntoIter: Send,
        F: FnMut(I::Item) -> Result<B> + Send + 'static,
    {
        let (sender, batches) = std::sync::mpsc::sync_channel(1);
        let worker = std::thread::spawn(move || {
            for item in items {
                let made = make(item);
                let failed = made.is_err();
                // The receiver is gone: nobody wants more batches.
                if sender.send(made).is_err() || failed {
                    return;
                }
            }
        });
        Prefetch {
            batches,
            worker: Some(worker),
        }
    }
}

impl<B> Iterator for Prefetch<B> {
    type Item = Result<B>;

    fn next(&mut self) -> Option<Result<B>> {
        match self.batches.recv() {
            Ok(batch) => Some(batch),
            Err(_) => {
                // The thread ended: its items ran out, or `make` panicked.
                let worker = self.worker.take()?;
                match worker.join() {
                    Ok(()) => None,
                    Err(_) => Some(Err(Error::Unsupported {
                        what: "the thread making the batches panicked".into(),
                    })),
                }
            }
        }
    }
}

impl<B> Drop for Prefetch<B> {
    fn drop(&mut self) {
        // Unblocks a thread waiting to send, then waits for it.
        let (_, closed) = std::sync::mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.batches, closed));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetched_items_come_in_order_and_stop_at_the_first_error() {
        let made: Vec<Result<usize>> = Prefetch::new(0..5, |k| {
            if k == 3 {
                Err(Error::EmptyReduction {
                    reduction: "maximum",
                    axis: "K".into(),
                })
            } else {
                Ok(k * 10)
            }
        })
        .collect();
        assert_eq!(made.len(), 4, "nothing after the error");
        assert_eq!(
            made[..3]
                .iter()
                .map(|m| *m.as_ref().unwrap())
                .collect::<Vec<_>>(),
            [0, 10, 20]
        );
        assert!(matches!(made[3], Err(Error::EmptyReduction { .. })));
    }

    #[test]
    fn dropping_a_prefetch_early_stops_its_thread_and_a_panic_is_an_error() {
        let mut first = Prefetch::new(0.., Ok::<u64, Error>);
        assert_eq!(first.next().unwrap().unwrap(), 0);
        drop(first); // an endless source: returns only because the thread stops
        let mut panicking = Prefetch::new(0..3, |k: i32| -> Result<i32> {
            assert!(k < 1, "a failing batch");
            Ok(k)
        });
        assert_eq!(panicking.next().unwrap().unwrap(), 0);
        let error = panicking.next().unwrap().unwrap_err().to_string();
        assert!(error.contains("panicked"), "{error}");
        assert!(panicking.next().is_none());
    }
}
