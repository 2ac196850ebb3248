//! Layouts: per-axis lengths and signed strides (in elements) plus an offset into a buffer.
//!
//! A layout describes one tensor's view of a buffer; its axes are in the order of the tensor's
//! type. Every layout a tensor holds has been checked to stay inside its buffer.

use crate::list::MAX_RANK;

/// Lengths, signed strides (in elements) and an offset, for up to [`MAX_RANK`] axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    rank: usize,
    lens: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    offset: usize,
}

impl Layout {
    /// The row-major (last axis fastest) layout of `lens` at offset 0.
    ///
    /// The caller has checked that the element count fits in `isize`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// let l = axes::Layout::row_major(&[2, 3, 4]);
    /// assert_eq!(l.strides(), &[12, 4, 1]);
    /// ```
    pub fn row_major(lens: &[usize]) -> Layout {
        assert!(lens.len() <= MAX_RANK, "at most {MAX_RANK} axes");
        let mut layout = Layout {
            rank: lens.len(),
            lens: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            offset: 0,
        };
        let mut stride: isize = 1;
        for axis in (0..lens.len()).rev() {
            layout.lens[axis] = lens[axis];
            layout.strides[axis] = stride;
            stride = stride.saturating_mul(lens[axis].max(1) as isize);
        }
        layout
    }

    /// A layout from its parts, or `None` unless every element it reaches lies in
    /// `0..buffer_len`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Layout;
    /// assert!(Layout::new(&[2, 3], &[1, 2], 0, 6).is_some());
    /// assert!(Layout::new(&[2, 3], &[1, 2], 1, 6).is_none()); // reaches element 6
    /// assert!(Layout::new(&[2, 3], &[-3, 1], 3, 6).is_some()); // rows reversed
    /// ```
    pub fn new(
        lens: &[usize],
        strides: &[isize],
        offset: usize,
        buffer_len: usize,
    ) -> Option<Layout> {
        if lens.len() != strides.len() || lens.len() > MAX_RANK {
            return None;
        }
        let mut layout = Layout {
            rank: lens.len(),
            lens: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            offset,
        };
        layout.lens[..lens.len()].copy_from_slice(lens);
        layout.strides[..lens.len()].copy_from_slice(strides);
        layout.fits(buffer_len).then_some(layout)
    }

    /// Whether every element this layout reaches lies in `0..buffer_len` (an empty layout
    /// reaches nothing and always fits).
    pub fn fits(&self, buffer_len: usize) -> bool {
        if self.element_count() == Some(0) {
            return true;
        }
        let mut low = self.offset as i128;
        let mut high = self.offset as i128;
        for axis in 0..self.rank {
            let reach = (self.lens[axis] as i128 - 1) * self.strides[axis] as i128;
            if reach < 0 {
                low += reach;
            } else {
                high += reach;
            }
        }
        low >= 0 && high < buffer_len as i128
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The per-axis lengths.
    pub fn lens(&self) -> &[usize] {
        &self.lens[..self.rank]
    }

    /// The per-axis strides, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides[..self.rank]
    }

    /// The buffer position of the element at index 0 on every axis.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The number of elements, or `None` if it overflows `usize`.
    pub fn element_count(&self) -> Option<usize> {
        self.lens()
            .iter()
            .try_fold(1usize, |n, &len| n.checked_mul(len))
    }

    /// The buffer position of the element at `index` (one entry per axis, each in range).
    pub fn position(&self, index: &[usize]) -> usize {
        debug_assert!(index.iter().zip(self.lens()).all(|(i, len)| i < len));
        let pos = index
            .iter()
            .zip(self.strides())
            .fold(self.offset as isize, |pos, (&i, &stride)| {
                pos + i as isize * stride
            });
        pos as usize
    }

    /// The same view with its axes reordered: axis `i` of the result is axis `order[i]` of
    /// `self`. `order` must be a permutation of `0..rank`.
    pub fn permuted(&self, order: &[usize]) -> Layout {
        debug_assert_eq!(order.len(), self.rank);
        let mut out = *self;
        for (to, &from) in order.iter().enumerate() {
            out.lens[to] = self.lens[from];
            out.strides[to] = self.strides[from];
        }
        out
    }

    /// Every buffer position of the view, in row-major order of its axes (last axis fastest).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// let l = axes::Layout::new(&[2, 2], &[1, 2], 0, 4).unwrap();
    /// assert_eq!(l.positions().collect::<Vec<_>>(), [0, 2, 1, 3]);
    /// ```
    pub fn positions(&self) -> Positions {
        let count = self.element_count().unwrap_or(0);
        Positions {
            layout: *self,
            index: [0; MAX_RANK],
            next: self.offset as isize,
            remaining: count,
        }
    }
}

/// Iterator over the buffer positions of a [`Layout`], from [`Layout::positions`].
#[derive(Clone, Debug)]
pub struct Positions {
    layout: Layout,
    index: [usize; MAX_RANK],
    next: isize,
    remaining: usize,
}

impl Iterator for Positions {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next as usize;
        // Odometer step: advance the last axis, carrying into earlier ones.
        for axis in (0..self.layout.rank).rev() {
            self.index[axis] += 1;
            self.next += self.layout.strides[axis];
            if self.index[axis] < self.layout.lens[axis] {
                break;
            }
            self.next -= self.layout.strides[axis] * self.layout.lens[axis] as isize;
            self.index[axis] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Positions {}
