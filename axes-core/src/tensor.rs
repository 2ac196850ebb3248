//! [`Tensor`]: a typed view (layout) of a shared buffer (storage).

mod access;
mod construct;
mod display;
mod interop;
mod join;
mod swap;
mod views;

pub use join::{Gathered, IndexElement};
pub use swap::{SwapView, Swappable};
pub use views::{Flattened, Renamed, Unflattened};
pub(crate) use views::{read_layout, resolve_range};

use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::element::Element;
use crate::layout::Layout;
use crate::list::{AxisSet, HasAxis, MAX_RANK, SameAxes};
use crate::storage::Storage;

/// A tensor of `T` whose axes are the tuple `A`, e.g. `Tensor<f32, (Batch, Hidden)>`
/// (also written `tensor![f32; Batch, Hidden]`).
///
/// A tensor is a [`Layout`] (lengths, signed strides, offset) over a shared [`Storage`]:
/// several tensors may view one buffer. The order of `A` is the layout's axis order, a
/// preference only: operations pair axes by type, never by position.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Hidden;
///
/// let x: tensor![f32; Batch, Hidden] =
///     Tensor::from_vec((Batch.len(2), Hidden.len(3)), vec![1., 2., 3., 4., 5., 6.])?;
/// assert_eq!(x.len_of::<Hidden>(), 3);
/// assert_eq!(x.get((Hidden.at(2), Batch.at(1)))?, 6.0);
/// // the same values stored Hidden-major compare equal
/// let y = Tensor::<f32, (Hidden, Batch)>::from_vec(
///     (Hidden.len(3), Batch.len(2)), vec![1., 4., 2., 5., 3., 6.])?;
/// assert_eq!(x, y);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Tensor<T: Element, A: AxisSet> {
    storage: Storage<T>,
    layout: Layout,
    flat_parts: FlatParts,
    _axes: PhantomData<fn() -> A>,
}

// A tensor can be used again after a panic caught while it was borrowed: its elements change
// only through a buffer nobody else holds (copy-on-write, or a device buffer written in place
// when unique), and the one lazily filled field, a device buffer's host copy, is a `OnceLock`
// that is either set whole or not at all. What keeps the auto traits off is the device
// backend behind a `&'static dyn Backend` and a device buffer's `dyn Any` handle, neither of
// which a tensor's methods leave half-changed.
impl<T: Element, A: AxisSet> std::panic::UnwindSafe for Tensor<T, A> {}
impl<T: Element, A: AxisSet> std::panic::RefUnwindSafe for Tensor<T, A> {}

/// The part lengths of the `Flat` axes a tensor was flattened into, keyed by the `Flat`
/// axis type, so that `unflatten` needs no lengths. Shared by all views of the tensor, and
/// carried into the results computed from it (`unflatten` checks them against the length).
#[doc(hidden)]
#[derive(Clone, Default, Debug)]
pub struct FlatParts(Option<Arc<PartsByAxis>>);

/// The flatten records of an expression's leaves (inline up to four: no allocation).
#[doc(hidden)]
pub type FlatPartsList<'a> = smallvec::SmallVec<[&'a FlatParts; 4]>;

/// `(TypeId of Flat<L>, lengths of L)` for each flatten, newest last.
type PartsByAxis = Vec<(TypeId, Vec<usize>)>;

impl FlatParts {
    fn get(&self, axis: TypeId) -> Option<&[usize]> {
        let parts = self.0.as_deref()?;
        parts
            .iter()
            .rev()
            .find(|(id, _)| *id == axis)
            .map(|(_, lens)| &lens[..])
    }

    fn with(&self, axis: TypeId, lens: Vec<usize>) -> FlatParts {
        let mut parts = self.0.as_deref().cloned().unwrap_or_default();
        parts.push((axis, lens));
        FlatParts(Some(Arc::new(parts)))
    }

    /// The parts all of `sources` agree on: an axis two of them split differently is left
    /// out (its parts are then unknown, an error for `unflatten`, never a wrong split).
    pub(crate) fn merged(sources: &[&FlatParts]) -> FlatParts {
        let mut known: Vec<&PartsByAxis> = sources.iter().filter_map(|s| s.0.as_deref()).collect();
        match known.len() {
            0 => return FlatParts::default(),
            1 => return (*sources.iter().find(|s| s.0.is_some()).unwrap()).clone(),
            _ => {}
        }
        let mut parts: PartsByAxis = Vec::new();
        let mut conflicting: Vec<TypeId> = Vec::new();
        for list in known.drain(..) {
            for (axis, lens) in list {
                match parts.iter().rev().find(|(id, _)| id == axis) {
                    Some((_, seen)) if seen != lens => conflicting.push(*axis),
                    Some(_) => {}
                    None => parts.push((*axis, lens.clone())),
                }
            }
        }
        parts.retain(|(axis, _)| !conflicting.contains(axis));
        FlatParts((!parts.is_empty()).then(|| Arc::new(parts)))
    }
}

impl<T: Element, A: AxisSet> Clone for Tensor<T, A> {
    /// Another handle on the same storage (no copy).
    fn clone(&self) -> Self {
        self.view(self.layout)
    }
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// A tensor over `storage` with `layout`, which must have `A`'s rank and stay inside the
    /// buffer (checked; `None` otherwise).
    pub fn from_parts(storage: Storage<T>, layout: Layout) -> Option<Self> {
        (layout.rank() == A::RANK && layout.fits(storage.len()))
            .then(|| Self::new_unchecked(storage, layout))
    }

    /// A tensor over `storage` with `layout`, already known to fit.
    pub(crate) fn new_unchecked(storage: Storage<T>, layout: Layout) -> Self {
        debug_assert!(layout.rank() == A::RANK && layout.fits(storage.len()));
        Tensor {
            storage,
            layout,
            flat_parts: FlatParts::default(),
            _axes: PhantomData,
        }
    }

    /// Another view of this tensor's storage, with axes `B` and `layout` (which the caller
    /// derived from this tensor's layout, so it stays inside the buffer).
    fn view<B: AxisSet>(&self, layout: Layout) -> Tensor<T, B> {
        debug_assert!(layout.rank() == B::RANK && layout.fits(self.storage.len()));
        Tensor {
            storage: self.storage.clone(),
            layout,
            flat_parts: self.flat_parts.clone(),
            _axes: PhantomData,
        }
    }

    /// The same view (layout, flatten parts) over another buffer of the same length.
    pub(crate) fn with_storage(&self, storage: Storage<T>) -> Tensor<T, A> {
        debug_assert_eq!(storage.len(), self.storage.len());
        Tensor {
            storage,
            layout: self.layout,
            flat_parts: self.flat_parts.clone(),
            _axes: PhantomData,
        }
    }

    /// A tensor over another buffer and layout (a copy of this one), keeping the flatten
    /// parts.
    pub(crate) fn with_parts(&self, storage: Storage<T>, layout: Layout) -> Tensor<T, A> {
        debug_assert!(layout.rank() == A::RANK && layout.fits(storage.len()));
        Tensor {
            storage,
            layout,
            flat_parts: self.flat_parts.clone(),
            _axes: PhantomData,
        }
    }

    /// The part lengths of the `Flat` axes this tensor came from.
    pub(crate) fn flat_parts(&self) -> &FlatParts {
        &self.flat_parts
    }

    /// This tensor with the part lengths `parts` for its `Flat` axes.
    pub(crate) fn with_flat_parts(mut self, parts: FlatParts) -> Self {
        self.flat_parts = parts;
        self
    }

    /// Replaces the buffer and layout (a result computed on a device), keeping the flatten
    /// parts.
    pub(crate) fn replace_parts(&mut self, storage: Storage<T>, layout: Layout) {
        debug_assert!(layout.rank() == A::RANK && layout.fits(storage.len()));
        self.storage = storage;
        self.layout = layout;
    }

    /// The view's layout, axes in the order of `A`.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The buffer this tensor views.
    pub fn storage(&self) -> &Storage<T> {
        &self.storage
    }

    /// The buffer, for writing (copy-on-write happens in `Storage::make_mut`).
    pub(crate) fn storage_mut(&mut self) -> &mut Storage<T> {
        &mut self.storage
    }

    /// Whether both tensors view one buffer.
    pub fn shares_storage_with<U: AxisSet>(&self, other: &Tensor<T, U>) -> bool {
        self.storage.same_buffer(&other.storage)
    }

    /// The lengths, in the order of `A`.
    pub fn lens(&self) -> &[usize] {
        self.layout.lens()
    }

    /// The length of axis `X`.
    pub fn len_of<X: crate::Axis>(&self) -> usize
    where
        A: HasAxis<X>,
    {
        self.layout.lens()[<A as HasAxis<X>>::POS]
    }

    /// The number of elements.
    pub fn element_count(&self) -> usize {
        // Checked when the tensor was made.
        self.layout.element_count().unwrap_or(0)
    }

    /// The axis names with their lengths, e.g. `Batch=2, Hidden=3`, for messages.
    pub fn describe_lengths(&self) -> String {
        construct::describe_lengths::<A>(self.lens())
    }

    /// The same elements with the axes in the order `O` (any order of `A`'s axes): a new
    /// layout over the same storage, no copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<u8, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1, 2, 3, 4])?;
    /// let t = x.axes_with_order::<(Col, Row)>();
    /// assert_eq!(t.to_vec(), [1, 3, 2, 4]);
    /// assert!(t.shares_storage_with(&x));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn axes_with_order<O: AxisSet>(&self) -> Tensor<T, O>
    where
        A: SameAxes<O>,
    {
        let order = <A as SameAxes<O>>::FROM;
        self.view(self.layout.permuted(&order[..A::RANK]))
    }
}

/// Reads `values`, given in the order of the list `S`, into the order of the list `A`.
fn reorder<S: SameAxes<A>, A: AxisSet>(values: [usize; MAX_RANK]) -> [usize; MAX_RANK] {
    let from = <S as SameAxes<A>>::FROM;
    let mut out = [0; MAX_RANK];
    for (i, slot) in out.iter_mut().enumerate().take(A::RANK) {
        *slot = values[from[i]];
    }
    out
}
