//! `Display` and `Debug`: the axis names and lengths, then the values as nested lists.

use std::fmt;

use super::Tensor;
use crate::element::Element;
use crate::list::AxisSet;

/// Axes longer than this are shown as their first and last [`EDGE`] entries.
const ELIDE_ABOVE: usize = 8;
const EDGE: usize = 3;

impl<T: Element, A: AxisSet> Tensor<T, A> {
    fn write_values(
        &self,
        f: &mut fmt::Formatter<'_>,
        axis: usize,
        index: &mut Vec<usize>,
    ) -> fmt::Result {
        if axis == A::RANK {
            let value = self
                .layout
                .position(index)
                .map_or(T::zero(), |p| self.storage.as_slice()[p]);
            return write!(f, "{value}");
        }
        let len = self.lens()[axis];
        f.write_str("[")?;
        let shown: Vec<Option<usize>> = if len > ELIDE_ABOVE {
            (0..EDGE)
                .map(Some)
                .chain([None])
                .chain((len - EDGE..len).map(Some))
                .collect()
        } else {
            (0..len).map(Some).collect()
        };
        for (k, entry) in shown.iter().enumerate() {
            if k > 0 {
                if axis + 1 == A::RANK {
                    f.write_str(", ")?;
                } else {
                    write!(f, ",\n{:indent$}", "", indent = axis + 1)?;
                }
            }
            match entry {
                Some(i) => {
                    index.push(*i);
                    self.write_values(f, axis + 1, index)?;
                    index.pop();
                }
                None => f.write_str("...")?,
            }
        }
        f.write_str("]")
    }
}

/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Hidden;
/// let x = Tensor::<i32, (Batch, Hidden)>::from_vec((Batch.len(2), Hidden.len(3)), vec![1, 2, 3, 4, 5, 6])?;
/// assert_eq!(x.to_string(), "Tensor<i32, (Batch=2, Hidden=3)>\n[[1, 2, 3],\n [4, 5, 6]]");
/// # Ok::<(), axes::Error>(())
/// ```
impl<T: Element, A: AxisSet> fmt::Display for Tensor<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let axes = super::construct::describe_lengths::<A>(self.lens());
        writeln!(f, "Tensor<{}, ({axes})>", T::DTYPE.name())?;
        self.write_values(f, 0, &mut Vec::with_capacity(A::RANK))
    }
}

impl<T: Element, A: AxisSet> fmt::Debug for Tensor<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
