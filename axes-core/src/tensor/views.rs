//! Views: new descriptions of the same storage, never a copy (unless a method says so).
//!
//! Reorder ([`Tensor::axes_with_order`]), broadcast, cast, slice, index, pad, transpose,
//! flatten and unflatten all map one [`Layout`] to another over the same buffer.

use std::any::TypeId;
use std::ops::{Bound, RangeBounds};

use super::Tensor;
use crate::axis::{At, Axis};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::Flat;
use crate::list::{
    AxisList, AxisSet, Concat, ConcatWith, Difference, DifferenceWith, HasAxis, MAX_RANK, SameAxes,
    SameCount, SubsetOf, TransposeAxes, Transposed, find_positions,
};
use crate::named::NamedLengths;
use crate::storage::{ElementBuffer, HostVec, Storage};

/// The axes after `flatten::<L>()`: the other axes of `A` in order, then `Flat<L>`.
pub type Flattened<A, L> = Concat<Difference<A, L>, (Flat<L>,)>;

/// The axes after `rename::<X, Y>()`: the axes of `A` but `X` in order, then `Y`.
pub type Renamed<A, X, Y> = Concat<Difference<A, (X,)>, (Y,)>;

/// The axes after `unflatten::<L>()`: the axes of `A` but `Flat<L>` in order, then `L`.
pub type Unflattened<A, L> = Concat<Difference<A, (Flat<L>,)>, L>;

/// `start..end` of a range over an axis of length `len`, checked.
pub(crate) fn resolve_range<X: Axis>(
    range: &impl RangeBounds<usize>,
    len: usize,
) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::RangeOutOfBounds {
            axis: X::name().into_owned(),
            start,
            end,
            len,
        });
    }
    Ok((start, end))
}

/// The order of `rank` axes with axis `axis` moved last: `rename`'s layout.
fn moved_last(rank: usize, axis: usize) -> Vec<usize> {
    (0..rank).filter(|&a| a != axis).chain([axis]).collect()
}

/// Checks lengths given to axes with `#[axis(len = N)]`.
fn check_fixed<L: AxisList>(lens: &[usize]) -> Result<()> {
    let names = L::names();
    for (axis, (&len, fixed)) in lens.iter().zip(L::FIXED_LENS).enumerate() {
        if let Some(fixed) = fixed
            && fixed != len
        {
            return Err(Error::FixedLength {
                axis: names[axis].to_string(),
                fixed,
                got: len,
            });
        }
    }
    Ok(())
}

/// Named lengths put in the order of the list `N`.
fn lengths_in<N: AxisList, S: NamedLengths<Axes: SameAxes<N>>>(lengths: &S) -> [usize; MAX_RANK] {
    let from = <S::Axes as SameAxes<N>>::FROM;
    let values = lengths.values();
    std::array::from_fn(|i| if i < N::RANK { values[from[i]] } else { 0 })
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// This tensor seen with the axes `O`, a superset of `A` in any order: each new axis gets
    /// the length given for it in `new_lengths` and stride 0 (every position along it reads
    /// the same element). No copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Hidden;
    /// let bias = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(3), vec![1., 2., 3.])?;
    /// let b = bias.broadcast::<(Batch, Hidden)>(Batch.len(2))?;
    /// assert_eq!(b.to_vec(), [1., 2., 3., 1., 2., 3.]);
    /// assert_eq!(b.layout().strides(), [0, 1]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn broadcast<O>(
        &self,
        new_lengths: impl NamedLengths<Axes: SameAxes<Difference<O, A>>>,
    ) -> Result<Tensor<T, O>>
    where
        O: AxisSet + DifferenceWith<A>,
        A: SubsetOf<O>,
    {
        let new = lengths_in::<Difference<O, A>, _>(&new_lengths);
        check_fixed::<Difference<O, A>>(&new[..<Difference<O, A>>::RANK])?;
        let in_self = find_positions::<O, A>();
        let in_new = find_positions::<O, Difference<O, A>>();
        let mut from = [None; MAX_RANK];
        let mut lens = [0; MAX_RANK];
        for axis in 0..O::RANK {
            if in_self[axis] < A::RANK {
                from[axis] = Some(in_self[axis]);
            } else {
                lens[axis] = new[in_new[axis]];
            }
        }
        Ok(self.view(self.layout.broadcast(&from[..O::RANK], &lens[..O::RANK])))
    }

    /// The same elements with the axes renamed to `B`, position by position (`A`'s first axis
    /// becomes `B`'s first, and so on). `B` must have as many axes (checked at compile time);
    /// an axis of `B` with a fixed length must get that length (checked here). No copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Hidden;
    /// #[derive(Axis)] struct Embedding;
    /// let h = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(2), vec![1., 2.])?;
    /// let e: Tensor<f32, (Embedding,)> = h.cast_axes()?;
    /// assert_eq!(e.to_vec(), [1., 2.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn cast_axes<B: AxisSet>(&self) -> Result<Tensor<T, B>>
    where
        A: SameCount<B>,
    {
        check_fixed::<B>(self.lens())?;
        Ok(self.view(self.layout))
    }

    /// The same elements with the axis `X` called `Y` (no copy): how one sequence axis
    /// becomes attention's Query and Key axes. `Y` comes last in the result's order (order
    /// carries no meaning); a `Y` already among the axes is a compile error, and a fixed
    /// length of `Y` is checked here.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Token;
    /// #[derive(Axis)] struct Hidden;
    /// #[derive(Axis)] struct Key;
    /// let x = Tensor::<f32, (Token, Hidden)>::from_vec((Token.len(2), Hidden.len(3)), vec![1., 2., 3., 4., 5., 6.])?;
    /// let k: Tensor<f32, (Hidden, Key)> = x.rename::<Token, Key>()?;
    /// assert_eq!(k.to_vec_in::<(Key, Hidden)>(), x.to_vec());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn rename<X: Axis, Y: Axis>(&self) -> Result<Tensor<T, Renamed<A, X, Y>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: ConcatWith<(Y,)>,
    {
        let axis = <A as HasAxis<X>>::POS;
        check_fixed::<(Y,)>(&[self.lens()[axis]])?;
        Ok(self.view(self.layout.permuted(&moved_last(A::RANK, axis))))
    }

    /// The positions `range` of axis `X`, every `step`-th (counted from the end of the range
    /// when `step` is negative, so `step = -1` reverses). No copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// let t = Tensor::<i32, (Time,)>::from_vec(Time.len(6), vec![0, 1, 2, 3, 4, 5])?;
    /// assert_eq!(t.slice::<Time>(1..6, 2)?.to_vec(), [1, 3, 5]);
    /// assert_eq!(t.slice::<Time>(.., -1)?.to_vec(), [5, 4, 3, 2, 1, 0]);
    /// assert_eq!(t.slice::<Time>(0..5, -2)?.to_vec(), [4, 2, 0]);
    /// assert!(t.slice::<Time>(2..9, 1).is_err());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn slice<X: Axis>(&self, range: impl RangeBounds<usize>, step: isize) -> Result<Self>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        if step == 0 {
            return Err(Error::ZeroStep {
                axis: X::name().into_owned(),
            });
        }
        let (start, end) = resolve_range::<X>(&range, self.lens()[axis])?;
        let layout = self.layout.sliced(axis, start, end, step);
        check_fixed::<A>(layout.lens())?;
        Ok(self.view(layout))
    }

    /// The tensor at one position of axis `X`, without that axis. No copy, except where the
    /// position lies in the padding of a padded view: then the result is a fresh tensor of
    /// zeros.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Hidden;
    /// let x = Tensor::<i32, (Batch, Hidden)>::from_vec((Batch.len(2), Hidden.len(2)), vec![1, 2, 3, 4])?;
    /// let row: Tensor<i32, (Hidden,)> = x.index(Batch.at(1))?;
    /// assert_eq!(row.to_vec(), [3, 4]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn index<X: Axis>(&self, at: At<X>) -> Result<Tensor<T, Difference<A, (X,)>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let (index, len) = (at.get(), self.lens()[axis]);
        if index >= len {
            return Err(Error::IndexOutOfRange {
                axis: X::name().into_owned(),
                index,
                len,
            });
        }
        Ok(match self.layout.indexed(axis, index) {
            Some(layout) => self.view(layout),
            None => {
                let mut lens: Vec<usize> = self.lens().to_vec();
                lens.remove(axis);
                let zeros = vec![T::zero(); lens.iter().product()];
                Tensor::new_unchecked(Storage::new(zeros), Layout::row_major(&lens))
            }
        })
    }

    /// `before` zeros before and `after` zeros after axis `X`, read through the view: nothing
    /// is stored for them until the tensor is copied (`contiguous`, `to_vec`, a write).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// let t = Tensor::<f32, (Time,)>::from_vec(Time.len(2), vec![1., 2.])?;
    /// let p = t.pad::<Time>(2, 1)?;
    /// assert_eq!(p.to_vec(), [0., 0., 1., 2., 0.]);
    /// assert!(p.shares_storage_with(&t));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn pad<X: Axis>(&self, before: usize, after: usize) -> Result<Self>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let len = self.lens()[axis];
        let layout = self
            .layout
            .padded(axis, before, after)
            .filter(|l| l.element_count().is_some())
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{}={len}+{before}+{after}", X::name()),
            })?;
        check_fixed::<A>(layout.lens())?;
        Ok(self.view(layout))
    }

    /// Every axis `A` mapped to `Dual<A>` and every `Dual<A>` back to `A`, with the same
    /// elements. No copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct In;
    /// #[derive(Axis)] struct Out;
    /// let w = Tensor::<f32, (Dual<In>, Out)>::zeros((Len::<Dual<In>>::new(2), Out.len(3)))?;
    /// let t: Tensor<f32, (In, Dual<Out>)> = w.transpose();
    /// assert!(t.shares_storage_with(&w));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn transpose(&self) -> Tensor<T, Transposed<A>>
    where
        A: TransposeAxes,
    {
        self.view(self.layout)
    }

    /// The axes `L` (a subset of `A`) merged into one axis `Flat<L>` whose positions run
    /// through `L` row-major (the last axis of `L` fastest); the other axes keep their order
    /// and `Flat<L>` comes last. The lengths of `L` are remembered for [`Tensor::unflatten`].
    ///
    /// A view when the strides allow it (as for any contiguous tensor with `L` in storage
    /// order); otherwise, or when an axis of `L` is padded, the elements are copied into a
    /// fresh buffer first. [`Tensor::shares_storage_with`] tells which happened.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct N;
    /// #[derive(Axis)] struct H;
    /// #[derive(Axis)] struct W;
    /// let x = Tensor::<u8, (N, H, W)>::from_fn((N.len(2), H.len(2), W.len(3)), |ix| ix.of::<W>() as u8)?;
    /// let f: Tensor<u8, (N, Flat<(H, W)>)> = x.flatten::<(H, W)>()?;
    /// assert!(f.shares_storage_with(&x));
    /// assert_eq!(f.len_of::<Flat<(H, W)>>(), 6);
    /// let back: Tensor<u8, (N, H, W)> = f.unflatten::<(H, W)>()?;
    /// assert_eq!(back, x);
    /// // W before H is not a view of this storage: it is copied
    /// assert!(!x.flatten::<(W, H)>()?.shares_storage_with(&x));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn flatten<L>(&self) -> Result<Tensor<T, Flattened<A, L>>>
    where
        L: AxisSet + SubsetOf<A>,
        A: DifferenceWith<L>,
        Difference<A, L>: ConcatWith<(Flat<L>,)>,
        Flat<L>: Axis,
    {
        let in_self = find_positions::<L, A>();
        let merged_axes = &in_self[..L::RANK];
        let parts: Vec<usize> = merged_axes.iter().map(|&a| self.lens()[a]).collect();
        let parts_record = self.flat_parts.with(TypeId::of::<Flat<L>>(), parts);
        if let Some(layout) = self.layout.merged(merged_axes) {
            let mut out = self.view(layout);
            out.flat_parts = parts_record;
            check_fixed::<Flattened<A, L>>(out.lens())?;
            return Ok(out);
        }
        // Copy with the kept axes first and L last, in L's order: then L merges.
        let kept = (0..A::RANK).filter(|a| !merged_axes.contains(a));
        let order: Vec<usize> = kept.chain(merged_axes.iter().copied()).collect();
        let data = self.packed_in(&order)?;
        let lens: Vec<usize> = order.iter().map(|&a| self.lens()[a]).collect();
        let first_merged = A::RANK - L::RANK;
        let layout = Layout::row_major(&lens)
            .merged(&(first_merged..A::RANK).collect::<Vec<_>>())
            .expect("a row-major layout merges its trailing axes");
        let mut out = Tensor::new_unchecked(data, layout);
        out.flat_parts = parts_record;
        check_fixed::<Flattened<A, L>>(out.lens())?;
        Ok(out)
    }

    /// The axis `Flat<L>` split back into the axes `L`, with the lengths remembered by
    /// [`Tensor::flatten`]; `L` comes last, the other axes keep their order. A view, unless
    /// `Flat<L>` is padded (then it is copied first).
    ///
    /// Fails when this tensor's `Flat<L>` axis did not come from `flatten` (its part lengths
    /// are unknown) or no longer has their product as its length (after a slice).
    pub fn unflatten<L>(&self) -> Result<Tensor<T, Unflattened<A, L>>>
    where
        L: AxisSet,
        Flat<L>: Axis,
        A: HasAxis<Flat<L>> + DifferenceWith<(Flat<L>,)>,
        Difference<A, (Flat<L>,)>: ConcatWith<L>,
    {
        let axis = <A as HasAxis<Flat<L>>>::POS;
        let name = || <Flat<L>>::name().into_owned();
        let parts = self
            .flat_parts
            .get(TypeId::of::<Flat<L>>())
            .ok_or_else(|| Error::UnknownFlatParts { axis: name() })?;
        let len = self.lens()[axis];
        let product: usize = parts.iter().product();
        if product != len {
            return Err(Error::FlatLengthMismatch {
                axis: name(),
                len,
                parts: crate::tensor::construct::describe_lengths::<L>(parts),
                product,
            });
        }
        let source = if self.layout.is_padded() {
            self.contiguous()?
        } else {
            self.clone()
        };
        Ok(source.view(source.layout.split(axis, parts)))
    }

    /// The elements of `layout` (a view of this tensor's storage), row-major (see
    /// [`read_layout_into`]).
    pub(crate) fn read_in(&self, layout: &Layout) -> Result<HostVec<T>> {
        read_layout(self.storage.host()?, layout)
    }

    /// [`Tensor::read_in`] into `out`, a buffer with room for the elements.
    pub(crate) fn read_into<B: ElementBuffer<T>>(&self, layout: &Layout, out: B) -> Result<B> {
        read_layout_into(self.storage.host()?, layout, out)
    }
}

/// The elements of `data` that `layout` reaches, row-major (see [`read_layout_into`]).
pub(crate) fn read_layout<T: Element>(data: &[T], layout: &Layout) -> Result<HostVec<T>> {
    let count = layout.element_count().ok_or_else(|| Error::SizeOverflow {
        lengths: format!("{:?}", layout.lens()),
    })?;
    read_layout_into(data, layout, crate::storage::with_capacity(count)?)
}

/// The elements of `data` that `layout` reaches, appended to `out` row-major: row by row of
/// the innermost axis (one slice copy where it is contiguous), element by element only where
/// the view is padded.
pub(crate) fn read_layout_into<T: Element, B: ElementBuffer<T>>(
    data: &[T],
    layout: &Layout,
    mut out: B,
) -> Result<B> {
    let count = layout.element_count().unwrap_or(0);
    if layout.is_padded() || layout.rank() == 0 {
        out.extend((layout.positions()).map(|pos| pos.map_or(T::zero(), |pos| data[pos])));
        return Ok(out);
    }
    if count == 0 {
        return Ok(out);
    }
    // Axes of length 1 dropped and neighbours that are one run merged: rows as long as the
    // view allows.
    let (mut lens, mut strides) = (Vec::new(), Vec::new());
    for (&len, &stride) in layout.lens().iter().zip(layout.strides()) {
        if len == 1 {
            continue;
        }
        match (lens.last_mut(), strides.last_mut()) {
            (Some(outer_len), Some(outer_stride)) if *outer_stride == stride * len as isize => {
                *outer_len *= len;
                *outer_stride = stride;
            }
            _ => {
                lens.push(len);
                strides.push(stride);
            }
        }
    }
    if lens.is_empty() {
        (lens, strides) = (vec![1], vec![1]);
    }
    let last = lens.len() - 1;
    let (row, step) = (lens[last], strides[last]);
    let mut index = vec![0usize; last];
    let mut start = layout.offset() as isize;
    loop {
        if step == 1 {
            out.extend_from_slice(&data[start as usize..start as usize + row]);
        } else {
            out.extend((0..row as isize).map(|k| data[(start + k * step) as usize]));
        }
        // The next row: the outer axes counted like an odometer.
        let mut axis = last;
        loop {
            if axis == 0 {
                return Ok(out);
            }
            axis -= 1;
            index[axis] += 1;
            start += strides[axis];
            if index[axis] < lens[axis] {
                break;
            }
            start -= strides[axis] * lens[axis] as isize;
            index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Views with axes of length 1, axes that merge into one run, reversed and strided axes
    /// read in the order `positions` gives.
    #[test]
    fn read_layout_follows_positions() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let data: Vec<i32> = (0..4096).collect();
        for _ in 0..200 {
            let rank = rng.random_range(1..=5);
            let lens: Vec<usize> = (0..rank)
                .map(|_| [1, 1, 2, 3, 4][rng.random_range(0..5)])
                .collect();
            let mut layout = Layout::row_major(&lens);
            let mut order: Vec<usize> = (0..rank).collect();
            if rng.random_bool(0.5) {
                order.reverse();
            }
            layout = layout.permuted(&order);
            for axis in 0..rank {
                let len = layout.lens()[axis];
                if len > 1 && rng.random_bool(0.3) {
                    layout = layout.sliced(axis, 0, len, if rng.random_bool(0.5) { -1 } else { 2 });
                }
            }
            let want: Vec<i32> = layout
                .positions()
                .map(|p| data[p.expect("no padding")])
                .collect();
            let got = read_layout(&data, &layout).unwrap();
            assert_eq!(&got[..], &want[..], "{layout:?}");
        }
    }
}
