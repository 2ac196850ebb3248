//! Swappable storage: one layout whose buffer is exchanged, with views built once over it.

use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock};

use super::{FlatParts, Tensor};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::storage::Storage;

/// A tensor whose buffer can be swapped for another of the same layout, and views over it
/// ([`SwapView`]) that follow every swap without being built again — double-buffered input:
/// the next batch is made elsewhere (another thread, an asynchronous copy to the device)
/// while the current one is read, then swapped in.
///
/// Cloning a `Swappable` gives another handle on the same slot. A tensor taken from it
/// ([`current`](Self::current), [`SwapView::get`]) keeps the buffer it was taken from, so a
/// swap never changes a computation already running.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::memory::Swappable;
/// #[derive(Axis)] struct Row;
/// #[derive(Axis)] struct Token;
/// let window = |first: i64| Tensor::<i64, (Row, Token)>::from_fn(
///     (Row.len(2), Token.len(4)), |ix| first + (10 * ix.of::<Row>() + ix.of::<Token>()) as i64);
/// let slot = Swappable::new(window(0)?);
/// // Built once: the inputs are each row's first three tokens, the targets its last three.
/// let inputs = slot.view(|w| w.slice::<Token>(0..3, 1))?;
/// let targets = slot.view(|w| w.slice::<Token>(1.., 1))?;
/// assert_eq!(inputs.get().to_vec(), [0, 1, 2, 10, 11, 12]);
/// let previous = slot.swap(window(100)?)?;
/// assert_eq!(targets.get().to_vec(), [101, 102, 103, 111, 112, 113]);
/// assert_eq!(previous.to_vec()[..4], [0, 1, 2, 3]);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Swappable<T: Element, A: AxisSet>(SwapView<T, A>);

impl<T: Element, A: AxisSet> Clone for Swappable<T, A> {
    /// Another handle on the same slot.
    fn clone(&self) -> Self {
        Swappable(self.0.clone())
    }
}

/// A view over a [`Swappable`]'s buffer, built once: [`get`](Self::get) gives it over
/// whichever buffer the slot holds now.
pub struct SwapView<T: Element, B: AxisSet> {
    slot: Arc<RwLock<Storage<T>>>,
    layout: Layout,
    flat_parts: FlatParts,
    _axes: PhantomData<fn() -> B>,
}

impl<T: Element, B: AxisSet> Clone for SwapView<T, B> {
    fn clone(&self) -> Self {
        SwapView {
            slot: Arc::clone(&self.slot),
            layout: self.layout,
            flat_parts: self.flat_parts.clone(),
            _axes: PhantomData,
        }
    }
}

/// The buffer in `slot` (a panic while swapping leaves a whole buffer in it, never half of
/// one, so a poisoned lock's value is still good).
fn read<T: Element>(slot: &RwLock<Storage<T>>) -> Storage<T> {
    slot.read().unwrap_or_else(PoisonError::into_inner).clone()
}

impl<T: Element, A: AxisSet> Swappable<T, A> {
    /// A slot holding `tensor`'s buffer; every buffer swapped in later must have its layout.
    pub fn new(tensor: Tensor<T, A>) -> Swappable<T, A> {
        Swappable(SwapView {
            slot: Arc::new(RwLock::new(tensor.storage)),
            layout: tensor.layout,
            flat_parts: tensor.flat_parts,
            _axes: PhantomData,
        })
    }

    /// The tensor over the buffer the slot holds now.
    pub fn current(&self) -> Tensor<T, A> {
        self.0.get()
    }

    /// Puts `next`'s buffer in the slot and returns the tensor over the one it held. `next`
    /// must have the slot's lengths (an error names the axis and both lengths), layout,
    /// buffer length and device: make it like the first (a contiguous tensor for a
    /// contiguous first one).
    pub fn swap(&self, next: Tensor<T, A>) -> Result<Tensor<T, A>> {
        let mut slot = self.0.slot.write().unwrap_or_else(PoisonError::into_inner);
        let names = A::names();
        for (axis, (&held, &got)) in names
            .iter()
            .zip(self.0.layout.lens().iter().zip(next.lens()))
        {
            if held != got {
                return Err(Error::LengthMismatch {
                    axis: axis.to_string(),
                    left: held,
                    right: got,
                });
            }
        }
        let needed = slot.len();
        if next.storage.len() > needed && next.element_count() <= needed {
            return Err(Error::ViewOfLargerBuffer {
                lengths: next.describe_lengths(),
                buffer: next.storage.len(),
                needed,
            });
        }
        slot.check_replacement(&next.storage, &next.describe_lengths())?;
        if next.layout != self.0.layout {
            return Err(Error::Unsupported {
                what: format!(
                    "swapping in a buffer laid out with strides {:?} and offset {} for one \
                     with strides {:?} and offset {}; lay it out like the slot's first \
                     (e.g. `.contiguous()`)",
                    next.layout.strides(),
                    next.layout.offset(),
                    self.0.layout.strides(),
                    self.0.layout.offset()
                ),
            });
        }
        let previous = std::mem::replace(&mut *slot, next.storage);
        Ok(Tensor::new_unchecked(previous, self.0.layout)
            .with_flat_parts(self.0.flat_parts.clone()))
    }

    /// A view of the slot's tensor, built once by `make` (a slice, an index, a reorder, a
    /// cast of axes, … of the tensor it is given), that follows every later swap. An error if
    /// `make` fails, or returns a tensor that is not a view of the one it was given (a
    /// computed result has a buffer of its own, which no swap would change).
    pub fn view<B: AxisSet>(
        &self,
        make: impl FnOnce(&Tensor<T, A>) -> Result<Tensor<T, B>>,
    ) -> Result<SwapView<T, B>> {
        let current = self.current();
        let view = make(&current)?;
        if !view.shares_storage_with(&current) {
            return Err(Error::Unsupported {
                what: format!(
                    "a swappable view of ({}) must be a view of it (slice, index, reorder, \
                     cast, …), not a computed result",
                    A::names().join(", ")
                ),
            });
        }
        Ok(SwapView {
            slot: Arc::clone(&self.0.slot),
            layout: view.layout,
            flat_parts: view.flat_parts,
            _axes: PhantomData,
        })
    }
}

impl<T: Element, B: AxisSet> SwapView<T, B> {
    /// The view over the buffer its slot holds now (no copy).
    pub fn get(&self) -> Tensor<T, B> {
        Tensor::new_unchecked(read(&self.slot), self.layout)
            .with_flat_parts(self.flat_parts.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axis::Axis as _;
    use axes_macros::Axis;

    #[derive(Axis)]
    struct Row;
    #[derive(Axis)]
    struct Col;

    fn grid(first: f32) -> Tensor<f32, (Row, Col)> {
        Tensor::from_fn((Row.len(3), Col.len(4)), |ix| {
            first + (4 * ix.of::<Row>() + ix.of::<Col>()) as f32
        })
        .unwrap()
    }

    #[test]
    fn views_follow_every_swap_and_taken_tensors_keep_their_buffer() {
        let slot = Swappable::new(grid(0.0));
        let column = slot.view(|g| g.index::<Col>(Col.at(2))).unwrap();
        let transposed = slot
            .view(|g| Ok(g.axes_with_order::<(Col, Row)>()))
            .unwrap();
        let taken = column.get();
        for round in 1..4 {
            let first = 100.0 * round as f32;
            let previous = slot.swap(grid(first)).unwrap();
            assert_eq!(previous.to_vec()[0], first - 100.0);
            assert_eq!(
                column.get().to_vec(),
                [first + 2.0, first + 6.0, first + 10.0]
            );
            assert_eq!(
                transposed.get().to_vec()[..3],
                [first, first + 4.0, first + 8.0]
            );
            assert_eq!(slot.current(), grid(first));
        }
        assert_eq!(taken.to_vec(), [2.0, 6.0, 10.0], "taken before the swaps");
    }

    #[test]
    fn a_buffer_of_other_lengths_or_layout_or_a_computed_view_is_refused() {
        let slot = Swappable::new(grid(0.0));
        let short = Tensor::<f32, (Row, Col)>::zeros((Row.len(3), Col.len(5))).unwrap();
        let error = slot.swap(short).unwrap_err();
        assert_eq!(
            error.to_string(),
            "axis `Col` has length 4 in one operand and 5 in the other"
        );
        let transposed = grid(1.0)
            .to_layout::<(Col, Row)>()
            .unwrap()
            .axes_with_order::<(Row, Col)>();
        let error = slot.swap(transposed).unwrap_err().to_string();
        assert!(error.contains("contiguous"), "{error}");
        let error = slot
            .view(|_| Tensor::<f32, (Row,)>::zeros(Row.len(3)))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("not a computed result"), "{error}");
        assert_eq!(slot.current(), grid(0.0), "nothing was swapped");
    }

    #[test]
    fn another_thread_swaps_while_this_one_reads() {
        let slot = Swappable::new(grid(0.0));
        let row = slot.view(|g| g.index::<Row>(Row.at(1))).unwrap();
        let swapper = slot.clone();
        let thread = std::thread::spawn(move || {
            for round in 1..=50 {
                swapper.swap(grid(round as f32)).unwrap();
            }
        });
        for _ in 0..200 {
            let values = row.get().to_vec();
            let first = values[0] - 4.0;
            assert_eq!(values, [first + 4.0, first + 5.0, first + 6.0, first + 7.0]);
        }
        thread.join().unwrap();
        assert_eq!(row.get().to_vec(), [54.0, 55.0, 56.0, 57.0]);
    }
}
