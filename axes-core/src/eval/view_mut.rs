//! Writable views: part of a tensor (a slice along an axis, or one position of an axis) that
//! `assign`, `fill` and `add_sum` write into, in the tensor's own buffer.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use crate::axis::{At, Axis};
use crate::dispatch::evaluate_into;
use crate::element::Element;
use crate::engine::exec::Assign;
use crate::error::{Error, Result};
use crate::expr::{Cast, Expr, IntoExpr, Reduced, Reducible, Scalar};
use crate::layout::Layout;
use crate::list::{AxisSet, Difference, DifferenceWith, HasAxis, SameAxes};
use crate::num::Num;
use crate::storage::Storage;
use crate::tensor::Tensor;

use super::reduce;

/// Part of a tensor with axes `A`, seen with axes `B`, for writing: made by
/// [`Tensor::slice_mut`] and [`Tensor::index_mut`] (and narrowed by the same methods on the
/// view), it writes into the tensor it came from, which it borrows mutably until dropped.
///
/// Making one gives the tensor a buffer of its own first (a copy when another tensor shares
/// its buffer, as copy-on-write does for every write; a broadcast or padded view is written
/// out), so no other tensor sees the writes and no operand of the expression written can
/// read the elements being written.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Row;
/// #[derive(Axis)] struct Col;
/// let mut x = Tensor::<f32, (Row, Col)>::from_fn((Row.len(2), Col.len(3)), |ix| {
///     (ix.of::<Row>() * 3 + ix.of::<Col>()) as f32
/// })?;
/// let before = x.clone();
/// x.index_mut(Col.at(1))?.fill(0.0)?; // x[:, 1] = 0
/// assert_eq!(x.to_vec(), [0., 0., 2., 3., 0., 5.]);
/// let ones = Tensor::<f32, (Row, Col)>::ones((Row.len(2), Col.len(2)))?;
/// x.slice_mut::<Col>(1..3, 1)?.assign(&ones * 7.0)?; // x[:, 1:3] = 7
/// assert_eq!(x.to_vec(), [0., 7., 7., 3., 7., 7.]);
/// assert_eq!(before.to_vec(), [0., 1., 2., 3., 4., 5.]); // a copy shares nothing
/// # Ok::<(), axes::Error>(())
/// ```
pub struct ViewMut<'a, T: Element, A: AxisSet, B: AxisSet> {
    parent: &'a mut Tensor<T, A>,
    /// The view's layout in the parent's buffer.
    layout: Layout,
    _axes: PhantomData<B>,
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// A writable view of the positions `range` (every `step`-th, backwards for a negative
    /// step, as in [`Tensor::slice`]) along axis `X`; see [`ViewMut`].
    pub fn slice_mut<X: Axis>(
        &mut self,
        range: impl RangeBounds<usize>,
        step: isize,
    ) -> Result<ViewMut<'_, T, A, A>>
    where
        A: HasAxis<X>,
    {
        self.own_buffer()?;
        let layout = *self.slice::<X>(range, step)?.layout();
        Ok(ViewMut::new(self, layout))
    }

    /// A writable view of position `at` of axis `X`, without that axis; see [`ViewMut`].
    pub fn index_mut<X: Axis>(
        &mut self,
        at: At<X>,
    ) -> Result<ViewMut<'_, T, A, Difference<A, (X,)>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
    {
        self.own_buffer()?;
        let layout = *self.index::<X>(at)?.layout();
        Ok(ViewMut::new(self, layout))
    }

    /// Makes this tensor's buffer its own (not shared) and every element a distinct stored
    /// one (no broadcast or padding), copying where needed.
    fn own_buffer(&mut self) -> Result<()> {
        let layout = self.layout();
        if !self.storage().is_unique() || !layout.is_injective() || layout.is_padded() {
            *self = self.contiguous()?;
        }
        Ok(())
    }
}

impl<'a, T: Element, A: AxisSet, B: AxisSet> ViewMut<'a, T, A, B> {
    fn new(parent: &'a mut Tensor<T, A>, layout: Layout) -> Self {
        ViewMut {
            parent,
            layout,
            _axes: PhantomData,
        }
    }

    /// The lengths, in the order of `B`.
    pub fn lens(&self) -> &[usize] {
        self.layout.lens()
    }

    /// A copy of the elements the view covers (a tensor of its own).
    pub fn to_tensor(&self) -> Result<Tensor<T, B>> {
        self.read_view().contiguous()
    }

    /// A narrower writable view: `range` along axis `X` of this one.
    pub fn slice_mut<X: Axis>(
        &mut self,
        range: impl RangeBounds<usize>,
        step: isize,
    ) -> Result<ViewMut<'_, T, A, B>>
    where
        B: HasAxis<X>,
    {
        let layout = *self.read_view().slice::<X>(range, step)?.layout();
        Ok(ViewMut::new(self.parent, layout))
    }

    /// A narrower writable view: position `at` of axis `X` of this one, without that axis.
    pub fn index_mut<X: Axis>(
        &mut self,
        at: At<X>,
    ) -> Result<ViewMut<'_, T, A, Difference<B, (X,)>>>
    where
        B: HasAxis<X> + DifferenceWith<(X,)>,
    {
        let layout = *self.read_view().index::<X>(at)?.layout();
        Ok(ViewMut::new(self.parent, layout))
    }

    /// Evaluates `expr` into the view (elements converted to `T`, as [`Tensor::assign`]);
    /// its axes must be the view's, in any order, with the same lengths.
    pub fn assign<E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        <E::Expr as Expr>::Axes: SameAxes<B>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        self.write(|view| evaluate_into(&expr, view, &[], Assign))
    }

    /// Sets every element of the view to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.write(|view| evaluate_into(&Scalar(value), view, &[], Assign))
    }

    /// Adds `expr` summed over the axes `Over` to the view (as [`Tensor::add_sum`]).
    pub fn add_sum<Over: AxisSet, E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        T: Num,
        <E::Expr as Expr>::Axes: Reducible<Over>,
        Reduced<E::Expr, Over>: SameAxes<B>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        if self.parent.device().is_host() {
            return self.write(|view| evaluate_into(&expr, view, Over::IDS, reduce::sum_sink()));
        }
        // A device combines into a fresh buffer: the new values are computed in a copy of the
        // view first, then written into it.
        let mut next = self.to_tensor()?;
        next.add_sum::<Over, _>(&expr)?;
        self.write(|view| evaluate_into(&&next, view, &[], Assign))
    }

    /// The view as a tensor sharing the parent's buffer, for reading (while it lives, the
    /// buffer is shared: drop it before writing).
    fn read_view(&self) -> Tensor<T, B> {
        Tensor::from_parts(self.parent.storage().clone(), self.layout)
            .expect("the view lies in its parent's buffer")
    }

    /// Runs `write` on the view as a tensor holding the parent's buffer as its only handle
    /// (so it writes in place), then gives the buffer back to the parent.
    fn write(&mut self, write: impl FnOnce(&mut Tensor<T, B>) -> Result<()>) -> Result<()> {
        let mut lent = Lent::new(self.parent.storage_mut(), self.layout);
        write(&mut lent.view)?;
        if lent.view.storage().id() != lent.id {
            return Err(Error::Unsupported {
                what: "a write through a view that did not stay in its tensor's buffer".into(),
            });
        }
        Ok(())
    }
}

/// A parent's buffer lent to a view; given back when dropped (also when a write fails or
/// panics). Should the view hold another buffer by then, the parent gets zeros of its
/// buffer's length instead, so it never views a buffer shorter than its layout.
struct Lent<'p, T: Element, B: AxisSet> {
    slot: &'p mut Storage<T>,
    view: Tensor<T, B>,
    id: usize,
    len: usize,
}

impl<'p, T: Element, B: AxisSet> Lent<'p, T, B> {
    fn new(slot: &'p mut Storage<T>, layout: Layout) -> Self {
        let buffer = std::mem::replace(slot, Storage::new(Vec::new()));
        let (id, len) = (buffer.id(), buffer.len());
        let view =
            Tensor::from_parts(buffer, layout).expect("the view lies in its parent's buffer");
        Lent {
            slot,
            view,
            id,
            len,
        }
    }
}

impl<T: Element, B: AxisSet> Drop for Lent<'_, T, B> {
    fn drop(&mut self) {
        let buffer = std::mem::replace(self.view.storage_mut(), Storage::new(Vec::new()));
        *self.slot = if buffer.id() == self.id {
            buffer
        } else {
            Storage::from_host_vec(std::iter::repeat_n(T::zero(), self.len).collect())
        };
    }
}

impl<T: Element, A: AxisSet, B: AxisSet> std::fmt::Debug for ViewMut<'_, T, A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ViewMut({:?} of {:?})",
            self.layout.lens(),
            self.parent.lens()
        )
    }
}
