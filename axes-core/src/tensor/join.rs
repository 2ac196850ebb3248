//! Stacking, splitting and iterating along a named axis (views where they can be). Concat
//! and gather run where the tensors are, so they live in `dispatch/join.rs`.

use super::{FlatParts, Tensor};
use crate::axis::{At, Axis};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::{
    AxisList, AxisSet, Concat, ConcatWith, Difference, DifferenceWith, HasAxis, MAX_RANK, Union,
    UnionWith, find_positions,
};
use crate::storage::Storage;

/// The axes after `gather::<X, ..>` with an index tensor over `I`: `A` without `X`, then the
/// axes of `I` that `A` lacks.
pub type Gathered<A, X, I> = Union<Difference<A, (X,)>, I>;

/// Element types that can index an axis (in `gather`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot index an axis: indices (token ids, labels) are integers",
    label = "indices of `{Self}`",
    note = "indices are `i64`, `i32` or `u8`; convert others first, e.g. `ids.cast::<i64>()`"
)]
pub trait IndexElement: Element {
    /// The value as a signed index.
    fn to_index(self) -> i64;
}

impl IndexElement for i64 {
    fn to_index(self) -> i64 {
        self
    }
}

impl IndexElement for i32 {
    fn to_index(self) -> i64 {
        i64::from(self)
    }
}

impl IndexElement for u8 {
    fn to_index(self) -> i64 {
        i64::from(self)
    }
}

/// Checks that two tensors give every axis they share the same length.
fn check_shared_lengths<A: AxisList, B: AxisList>(a: &[usize], b: &[usize]) -> Result<()> {
    let in_b = find_positions::<A, B>();
    for axis in 0..A::RANK {
        if in_b[axis] < B::RANK && a[axis] != b[in_b[axis]] {
            return Err(Error::LengthMismatch {
                axis: A::names()[axis].to_string(),
                left: a[axis],
                right: b[in_b[axis]],
            });
        }
    }
    Ok(())
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The tensors, all with the same lengths, stacked along a new axis `New` (placed first).
    /// Copies into a fresh buffer.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Feature;
    /// let a = Tensor::<i32, (Feature,)>::from_vec(Feature.len(2), vec![1, 2])?;
    /// let b = Tensor::<i32, (Feature,)>::from_vec(Feature.len(2), vec![3, 4])?;
    /// let s: Tensor<i32, (Batch, Feature)> = Tensor::stack::<Batch>(&[&a, &b])?;
    /// assert_eq!(s.get((Batch.at(1), Feature.at(0)))?, 3);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn stack<New: Axis>(parts: &[&Self]) -> Result<Tensor<T, Concat<(New,), A>>>
    where
        (New,): ConcatWith<A>,
    {
        for part in parts {
            part.require_host("`stack`")?;
        }
        let first = parts.first().ok_or_else(|| Error::NothingToJoin {
            axis: New::name().into_owned(),
        })?;
        for part in parts {
            check_shared_lengths::<A, A>(first.lens(), part.lens())?;
        }
        let mut lens = vec![parts.len()];
        lens.extend_from_slice(first.lens());
        <Tensor<T, Concat<(New,), A>>>::checked_shape(&lens)?;
        let data: Vec<T> = parts.iter().flat_map(|p| p.to_vec()).collect();
        let flat: Vec<&FlatParts> = parts.iter().map(|p| p.flat_parts()).collect();
        Ok(
            Tensor::new_unchecked(Storage::new(data), Layout::row_major(&lens))
                .with_flat_parts(FlatParts::merged(&flat)),
        )
    }

    /// Views of consecutive pieces of axis `X` with the given lengths, which must add up to
    /// its length. No copy.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// let t = Tensor::<u8, (Time,)>::from_vec(Time.len(5), vec![0, 1, 2, 3, 4])?;
    /// let pieces = t.split::<Time>(&[2, 3])?;
    /// assert_eq!(pieces[1].to_vec(), [2, 3, 4]);
    /// assert!(t.split::<Time>(&[2, 2]).is_err());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn split<X: Axis>(&self, lengths: &[usize]) -> Result<Vec<Self>>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let len = self.lens()[axis];
        let total = lengths
            .iter()
            .try_fold(0usize, |sum, &l| sum.checked_add(l));
        if total != Some(len) {
            return Err(Error::SplitLengths {
                axis: X::name().into_owned(),
                len,
                pieces: format!("{lengths:?}"),
            });
        }
        let mut start = 0;
        let mut out = Vec::with_capacity(lengths.len());
        for &piece in lengths {
            out.push(self.slice::<X>(start..start + piece, 1)?);
            start += piece;
        }
        Ok(out)
    }

    /// The views at each position of axis `X`, in order, each without that axis.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Feature;
    /// let x = Tensor::<i32, (Batch, Feature)>::from_vec((Batch.len(2), Feature.len(2)), vec![1, 2, 3, 4])?;
    /// let sums: Vec<i32> = x.iter_axis::<Feature>().map(|col| col.to_vec().iter().sum()).collect();
    /// assert_eq!(sums, [4, 6]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn iter_axis<X: Axis>(
        &self,
    ) -> impl ExactSizeIterator<Item = Tensor<T, Difference<A, (X,)>>> + '_
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
    {
        let len = self.lens()[<A as HasAxis<X>>::POS];
        (0..len).map(|i| {
            self.index(At::<X>::new(i))
                .expect("positions below the axis length are in range")
        })
    }

    /// The element count of `lens` (in `A`'s order), checked against overflow and fixed
    /// lengths.
    pub(crate) fn checked_shape(lens: &[usize]) -> Result<usize> {
        let mut values = [0; MAX_RANK];
        values[..lens.len()].copy_from_slice(lens);
        Ok(Self::shape_in_order(values)?.count)
    }
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The lengths of `parts` joined along `X`, checked (see `Tensor::concat`).
    pub(crate) fn concat_lengths<X: Axis>(parts: &[&Self]) -> Result<Vec<usize>>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let first = parts.first().ok_or_else(|| Error::NothingToJoin {
            axis: X::name().into_owned(),
        })?;
        let mut lens = first.lens().to_vec();
        lens[axis] = 0;
        for part in parts {
            for (other, (&mine, &theirs)) in first.lens().iter().zip(part.lens()).enumerate() {
                if other != axis && mine != theirs {
                    return Err(Error::LengthMismatch {
                        axis: A::names()[other].to_string(),
                        left: mine,
                        right: theirs,
                    });
                }
            }
            lens[axis] =
                lens[axis]
                    .checked_add(part.lens()[axis])
                    .ok_or_else(|| Error::SizeOverflow {
                        lengths: first.describe_lengths(),
                    })?;
        }
        Self::checked_shape(&lens)?;
        Ok(lens)
    }

    /// `parts` (in host memory) joined along `X` into a tensor of lengths `lens`.
    pub(crate) fn concat_on_host<X: Axis>(parts: &[&Self], lens: &[usize]) -> Result<Self>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        for part in parts {
            part.require_host("`concat`")?;
        }
        let shape = lens.iter().product();
        let out_layout = Layout::row_major(lens);
        let mut data = vec![T::zero(); shape];
        let mut start = 0;
        for part in parts {
            let len = part.lens()[axis];
            let block = out_layout.sliced(axis, start, start + len, 1);
            for (to, value) in block.positions().zip(part.to_vec()) {
                data[to.expect("a row-major layout has no padding")] = value;
            }
            start += len;
        }
        let flat: Vec<&FlatParts> = parts.iter().map(|p| p.flat_parts()).collect();
        Ok(Tensor::new_unchecked(Storage::new(data), out_layout)
            .with_flat_parts(FlatParts::merged(&flat)))
    }

    /// The lengths of this tensor gathered along `X` by `indices`, checked (see
    /// `Tensor::gather`).
    pub(crate) fn gather_lengths<X, I, Ix>(&self, indices: &Tensor<Ix, I>) -> Result<Vec<usize>>
    where
        X: Axis,
        I: AxisSet,
        Ix: Element,
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: UnionWith<I>,
    {
        check_shared_lengths::<A, I>(self.lens(), indices.lens())?;
        // For each output axis: where it is in self, and where in the index tensor.
        let in_self = find_positions::<Gathered<A, X, I>, A>();
        let in_indices = find_positions::<Gathered<A, X, I>, I>();
        let rank = <Gathered<A, X, I>>::RANK;
        let lens: Vec<usize> = (0..rank)
            .map(|o| {
                if in_self[o] < A::RANK {
                    self.lens()[in_self[o]]
                } else {
                    indices.lens()[in_indices[o]]
                }
            })
            .collect();
        <Tensor<T, Gathered<A, X, I>>>::checked_shape(&lens)?;
        Ok(lens)
    }

    /// This tensor (in host memory) gathered along `X` by `indices` into lengths `lens`.
    pub(crate) fn gather_on_host<X, I, Ix>(
        &self,
        indices: &Tensor<Ix, I>,
        lens: &[usize],
    ) -> Result<Tensor<T, Gathered<A, X, I>>>
    where
        X: Axis,
        I: AxisSet,
        Ix: IndexElement,
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: UnionWith<I>,
    {
        let axis = <A as HasAxis<X>>::POS;
        self.require_host("`gather`")?;
        indices.require_host("`gather`")?;
        let in_self = find_positions::<Gathered<A, X, I>, A>();
        let in_indices = find_positions::<Gathered<A, X, I>, I>();
        let rank = <Gathered<A, X, I>>::RANK;
        let count = lens.iter().product();
        let (src, idx) = (self.storage.as_slice(), indices.storage.as_slice());
        let len = self.lens()[axis];
        let checked = |raw: i64| {
            usize::try_from(raw)
                .ok()
                .filter(|&i| i < len)
                .ok_or_else(|| Error::GatherIndex {
                    axis: X::name().into_owned(),
                    index: raw,
                    len,
                })
        };
        if !self.layout.is_padded() && !indices.layout.is_padded() {
            // Row by row: both operands viewed over the result's axes (the source at index 0
            // of `X`), each row's elements a fixed step apart.
            let from = |at: &[usize], rank: usize| -> Vec<Option<usize>> {
                at.iter().map(|&j| (j < rank).then_some(j)).collect()
            };
            let in_source = from(&in_self[..rank], A::RANK);
            let in_picks = from(&in_indices[..rank], I::RANK);
            let (sources, row_len, source_step) =
                self.layout.broadcast(&in_source, lens).row_starts();
            let (picks, _, pick_step) = indices.layout.broadcast(&in_picks, lens).row_starts();
            let step = self.layout.strides()[axis];
            let mut data = crate::storage::try_vec(count)?;
            for (source, pick) in sources.zip(picks) {
                for j in 0..row_len as isize {
                    let at = checked(idx[(pick as isize + j * pick_step) as usize].to_index())?;
                    data.push(
                        src[(source as isize + j * source_step + at as isize * step) as usize],
                    );
                }
            }
            return Ok(Tensor::new_unchecked(
                Storage::new(data),
                Layout::row_major(lens),
            ));
        }
        let mut out_index = [0usize; MAX_RANK];
        let mut data = Vec::with_capacity(count);
        for _ in 0..count {
            let mut at_self = [0usize; MAX_RANK];
            let mut at_indices = [0usize; MAX_RANK];
            for o in 0..rank {
                if in_self[o] < A::RANK {
                    at_self[in_self[o]] = out_index[o];
                }
                if in_indices[o] < I::RANK {
                    at_indices[in_indices[o]] = out_index[o];
                }
            }
            let raw = indices
                .layout
                .position(&at_indices[..I::RANK])
                .map_or(Ix::zero(), |p| idx[p])
                .to_index();
            at_self[axis] = checked(raw)?;
            data.push(
                self.layout
                    .position(&at_self[..A::RANK])
                    .map_or(T::zero(), |p| src[p]),
            );
            for o in (0..rank).rev() {
                out_index[o] += 1;
                if out_index[o] < lens[o] {
                    break;
                }
                out_index[o] = 0;
            }
        }
        Ok(Tensor::new_unchecked(
            Storage::new(data),
            Layout::row_major(lens),
        ))
    }
}
