//! Element access by named index, export to a `Vec` in any axis order, and equality.

use super::{Tensor, reorder};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::list::{AxisSet, MAX_RANK, SameAxes};
use crate::named::NamedIndex;

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// Checks a named index against the lengths and returns its buffer position.
    fn position_of<I>(&self, index: &I) -> Result<Option<usize>>
    where
        I: NamedIndex,
        I::Axes: SameAxes<A>,
    {
        let at: [usize; MAX_RANK] = reorder::<I::Axes, A>(index.values());
        for (axis, (&i, &len)) in at.iter().zip(self.lens()).enumerate() {
            if i >= len {
                return Err(Error::IndexOutOfRange {
                    axis: A::names()[axis].to_string(),
                    index: i,
                    len,
                });
            }
        }
        Ok(self.layout.position(&at[..A::RANK]))
    }

    /// The element at a named index (every axis named once, in any order).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<i64, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1, 2, 3, 4])?;
    /// assert_eq!(x.get((Col.at(0), Row.at(1)))?, 3);
    /// assert_eq!(x.get((Row.at(2), Col.at(0))).unwrap_err().to_string(),
    ///            "index 2 is out of range for axis `Row` of length 2");
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn get<I>(&self, index: I) -> Result<T>
    where
        I: NamedIndex,
        I::Axes: SameAxes<A>,
    {
        let pos = self.position_of(&index)?;
        match pos {
            Some(pos) => Ok(self.storage.host()?[pos]),
            None => Ok(T::zero()),
        }
    }

    /// Writes the element at a named index. If other tensors share this tensor's buffer, the
    /// buffer is copied first (copy-on-write), so they keep their values. Writing into the
    /// padding of a padded view, or into a broadcast axis, first makes the tensor contiguous.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// let mut x = Tensor::<f32, (Row,)>::zeros(Row.len(3))?;
    /// let before = x.clone();
    /// x.set(Row.at(1), 5.0)?;
    /// assert_eq!(x.to_vec(), [0.0, 5.0, 0.0]);
    /// assert_eq!(before.to_vec(), [0.0, 0.0, 0.0]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn set<I>(&mut self, index: I, value: T) -> Result<()>
    where
        I: NamedIndex,
        I::Axes: SameAxes<A>,
    {
        self.require_host("`set`")?;
        let writable = !self.layout.is_padded() && !self.layout.strides().contains(&0);
        if !writable {
            *self = self.contiguous()?;
        }
        let pos = self
            .position_of(&index)?
            .expect("a contiguous layout has no padding");
        self.storage.try_make_mut()?[pos] = value;
        Ok(())
    }

    /// A fresh row-major tensor of `lens` (in `A`'s order, already checked) whose element at
    /// each index is `f(index)`.
    pub(crate) fn from_index_fn(
        lens: &[usize],
        mut f: impl FnMut(&[usize]) -> T,
    ) -> crate::error::Result<Self> {
        let count: usize = lens.iter().product();
        let mut data = crate::storage::with_capacity(count)?;
        let mut index = vec![0usize; lens.len()];
        for _ in 0..count {
            data.push(f(&index));
            for axis in (0..lens.len()).rev() {
                index[axis] += 1;
                if index[axis] < lens[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
        Ok(Tensor::new_unchecked(
            crate::storage::Storage::from_host_vec(data),
            crate::layout::Layout::row_major(lens),
        ))
    }

    /// The elements, row-major in the order of `A` (last axis fastest).
    ///
    /// # Panics
    /// On a device, when copying the elements to the host fails (a lost device);
    /// [`Tensor::try_to_vec`] returns that error instead.
    pub fn to_vec(&self) -> Vec<T> {
        self.try_to_vec()
            .unwrap_or_else(|e| panic!("reading a tensor on {}: {e}", self.storage.device()))
    }

    /// [`Tensor::to_vec`], with a failed copy from a device as an error.
    pub fn try_to_vec(&self) -> Result<Vec<T>> {
        let count = self.layout.element_count().unwrap_or(0);
        self.read_into(&self.layout, crate::storage::try_vec(count)?)
    }

    /// The elements, row-major in the axis order `O` (any order of `A`'s axes).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<u8, (Row, Col)>::from_vec((Row.len(2), Col.len(3)), vec![1, 2, 3, 4, 5, 6])?;
    /// assert_eq!(x.to_vec_in::<(Col, Row)>(), [1, 4, 2, 5, 3, 6]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn to_vec_in<O: AxisSet>(&self) -> Vec<T>
    where
        A: SameAxes<O>,
    {
        self.axes_with_order::<O>().to_vec()
    }
}

/// Equality by axis name: two tensors are equal when they have the same axis set, the same
/// length on each axis and the same value at each named index, whatever their axis orders
/// and strides. (Floats compare as floats: NaN is never equal.)
impl<T: Element, A: AxisSet, B: AxisSet> PartialEq<Tensor<T, B>> for Tensor<T, A>
where
    B: SameAxes<A>,
{
    fn eq(&self, other: &Tensor<T, B>) -> bool {
        let other = other.axes_with_order::<A>();
        if self.lens() != other.lens() {
            return false;
        }
        let (mine, theirs) = (self.storage.as_slice(), other.storage.as_slice());
        let read = |data: &[T], pos: Option<usize>| pos.map_or(T::zero(), |pos| data[pos]);
        self.layout
            .positions()
            .zip(other.layout.positions())
            .all(|(p, q)| read(mine, p) == read(theirs, q))
    }
}

#[cfg(test)]
mod tests {
    use crate as axes;
    use crate::prelude::*;

    #[derive(Axis)]
    struct Row;
    #[derive(Axis)]
    struct Col;

    #[test]
    fn equality_needs_equal_lengths() -> axes::Result<()> {
        let a = Tensor::<f32, (Row, Col)>::zeros((Row.len(2), Col.len(3)))?;
        let b = Tensor::<f32, (Col, Row)>::zeros((Row.len(3), Col.len(2)))?;
        assert_ne!(a, b);
        assert_eq!(a, a.axes_with_order::<(Col, Row)>());
        Ok(())
    }

    #[test]
    fn derive_paths_resolve_inside_the_core_crate() {
        assert_eq!(<Row as Axis>::name(), "Row");
        assert_eq!(<(Row, Col) as AxisList>::RANK, 2);
    }
}
