//! ndarray interop: view a tensor as an `ndarray::ArrayViewD` in a chosen axis order, and
//! make a typed tensor from an `ndarray::Array` without copying.

use ndarray::{ArrayViewD, Dimension, IxDyn, ShapeBuilder};

use super::Tensor;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::storage::Storage;

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The tensor as an ndarray view whose axis `i` is axis `i` of `O` (any order of `A`'s
    /// axes). No copy: negative strides become inverted axes, broadcast axes stride 0.
    /// A padded tensor has no such view: make it [`contiguous`](Tensor::contiguous) first.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<f64, (Row, Col)>::from_vec((Row.len(2), Col.len(3)), vec![1., 2., 3., 4., 5., 6.])?;
    /// let v = x.as_ndarray::<(Col, Row)>()?;
    /// assert_eq!(v.shape(), &[3, 2]);
    /// assert_eq!(v[[2, 1]], 6.0);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn as_ndarray<O: AxisSet>(&self) -> Result<ArrayViewD<'_, T>>
    where
        A: SameAxes<O>,
    {
        let view = self.axes_with_order::<O>();
        let layout = view.layout;
        if layout.is_padded() {
            return Err(Error::Padded {
                lengths: self.describe_lengths(),
            });
        }
        let data = self.storage.as_slice();
        let lens = layout.lens();
        if lens.contains(&0) {
            return Ok(ArrayViewD::from_shape(IxDyn(lens), &[])
                .expect("an empty shape fits an empty slice"));
        }
        // The lowest buffer position the view reaches: the ndarray view starts there and
        // walks with the absolute strides; axes with negative strides are then inverted.
        let back: isize = lens
            .iter()
            .zip(layout.strides())
            .filter(|(_, s)| **s < 0)
            .map(|(&len, &s)| (len as isize - 1) * s)
            .sum();
        let lowest = (layout.offset() as isize + back) as usize;
        let strides: Vec<usize> = layout.strides().iter().map(|s| s.unsigned_abs()).collect();
        let shape = IxDyn(lens).strides(IxDyn(&strides));
        let mut out = ArrayViewD::from_shape(shape, &data[lowest..])
            .expect("a layout checked against its buffer is a valid ndarray view");
        for (axis, &stride) in layout.strides().iter().enumerate() {
            if stride < 0 {
                out.invert_axis(ndarray::Axis(axis));
            }
        }
        Ok(out)
    }

    /// A tensor over the elements of `array`, whose axis `i` becomes axis `i` of `A`. No copy:
    /// the tensor keeps the array's buffer and strides.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let a = ndarray::array![[1, 2, 3], [4, 5, 6]];
    /// let t = Tensor::<i32, (Col, Row)>::from_ndarray(a.reversed_axes())?;
    /// assert_eq!(t.get((Row.at(1), Col.at(0)))?, 4);
    /// assert!(Tensor::<i32, (Row,)>::from_ndarray(ndarray::array![[1]]).is_err());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn from_ndarray<D: Dimension>(array: ndarray::Array<T, D>) -> Result<Self> {
        if array.ndim() != A::RANK {
            return Err(Error::RankMismatch {
                axes: format!("({})", A::names().join(", ")),
                expected: A::RANK,
                got: array.ndim(),
            });
        }
        let lens = array.shape().to_vec();
        Self::checked_shape(&lens)?;
        let strides = array.strides().to_vec();
        let (data, offset) = array.into_raw_vec_and_offset();
        let layout = Layout::new(&lens, &strides, offset.unwrap_or(0), data.len())
            .expect("an ndarray array stays inside its own buffer");
        Ok(Tensor::new_unchecked(Storage::new(data), layout))
    }
}
