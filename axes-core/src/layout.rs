//! Layouts: the one stride description behind every view.
//!
//! A layout holds, per axis, a length, a signed stride (in elements) and zero padding
//! before and after the stored part, plus the buffer offset of the first stored element.
//! Its axes are in the order of the tensor's type. Every view (reorder, broadcast, cast,
//! slice, index, flatten, pad, transpose) is a function from layout to layout; none copies.
//! Every layout a tensor holds has been checked to stay inside its buffer.

use crate::list::MAX_RANK;

/// Lengths, signed strides (in elements), padding and an offset, for up to [`MAX_RANK`] axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    rank: usize,
    /// Logical lengths: stored part plus padding.
    lens: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    /// Zero elements before the stored part of each axis.
    pad_before: [usize; MAX_RANK],
    /// Length of the stored part of each axis.
    stored: [usize; MAX_RANK],
    /// Buffer position of the first stored element.
    offset: usize,
}

impl Layout {
    /// The layout of a single element (no axes) at position 0.
    pub(crate) const SCALAR: Layout = Layout {
        rank: 0,
        lens: [0; MAX_RANK],
        strides: [0; MAX_RANK],
        pad_before: [0; MAX_RANK],
        stored: [0; MAX_RANK],
        offset: 0,
    };

    fn empty(rank: usize, offset: usize) -> Layout {
        assert!(rank <= MAX_RANK, "at most {MAX_RANK} axes");
        Layout {
            rank,
            lens: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            pad_before: [0; MAX_RANK],
            stored: [0; MAX_RANK],
            offset,
        }
    }

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
        let mut layout = Layout::empty(lens.len(), 0);
        let mut stride: isize = 1;
        for axis in (0..lens.len()).rev() {
            layout.set_axis(axis, lens[axis], stride);
            stride = stride.saturating_mul(lens[axis].max(1) as isize);
        }
        layout
    }

    /// A dense layout of `lens` whose axes lie in memory in the order of `like`'s strides
    /// (the largest outermost, ties in axis order): a fresh buffer written in that order is
    /// read as `like` is, row by row.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Layout;
    /// let transposed = Layout::row_major(&[3, 2]).permuted(&[1, 0]);
    /// assert_eq!(Layout::dense_in_order_of(&[4, 5], &transposed).strides(), &[1, 4]);
    /// ```
    pub fn dense_in_order_of(lens: &[usize], like: &Layout) -> Layout {
        assert_eq!(lens.len(), like.rank, "one length per axis of `like`");
        Layout::dense_by_stride(lens, |a| like.strides[a].unsigned_abs())
    }

    /// A dense layout of `lens` whose axes lie in memory by decreasing `stride(axis)` (ties
    /// in axis order): the axis with the largest outermost.
    pub(crate) fn dense_by_stride(lens: &[usize], stride: impl Fn(usize) -> usize) -> Layout {
        let mut order: Vec<usize> = (0..lens.len()).collect();
        order.sort_by_key(|&a| std::cmp::Reverse(stride(a)));
        let stored: Vec<usize> = order.iter().map(|&a| lens[a]).collect();
        let mut back = vec![0; lens.len()];
        for (at, &axis) in order.iter().enumerate() {
            back[axis] = at;
        }
        Layout::row_major(&stored).permuted(&back)
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
        let mut layout = Layout::empty(lens.len(), offset);
        for axis in 0..lens.len() {
            layout.set_axis(axis, lens[axis], strides[axis]);
        }
        layout.fits(buffer_len).then_some(layout)
    }

    fn set_axis(&mut self, axis: usize, len: usize, stride: isize) {
        self.lens[axis] = len;
        self.stored[axis] = len;
        self.strides[axis] = stride;
        self.pad_before[axis] = 0;
    }

    /// Whether every stored element this layout reaches lies in `0..buffer_len` (a layout
    /// with nothing stored reaches nothing and always fits).
    pub fn fits(&self, buffer_len: usize) -> bool {
        within(self.offset, self.stored_lens(), self.strides(), buffer_len)
    }

    /// Whether no two indices reach one buffer position and nothing is padded: the layout
    /// can be written element by element in any order. (Checks a sufficient condition:
    /// sorted by |stride|, each axis steps past everything the inner ones reach.)
    pub fn is_injective(&self) -> bool {
        self.is_dense() || (!self.is_padded() && injective(self.lens(), self.strides()))
    }

    /// Whether the layout is unpadded and row-major over its lengths: its elements are the
    /// buffer positions `offset..offset + count` in index order (strides of length-1 axes
    /// do not matter).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Layout;
    /// assert!(Layout::row_major(&[2, 3]).is_dense());
    /// assert!(!Layout::new(&[2, 3], &[1, 2], 0, 6).unwrap().is_dense());
    /// ```
    pub fn is_dense(&self) -> bool {
        let mut expected: isize = 1;
        for axis in (0..self.rank).rev() {
            let len = self.lens[axis];
            if len != 1 && self.strides[axis] != expected {
                return false;
            }
            expected = expected.saturating_mul(len as isize);
        }
        !self.is_padded()
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The per-axis lengths (padding included).
    pub fn lens(&self) -> &[usize] {
        &self.lens[..self.rank]
    }

    /// The per-axis strides, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides[..self.rank]
    }

    /// The lengths of the stored (unpadded) part of each axis.
    pub fn stored_lens(&self) -> &[usize] {
        &self.stored[..self.rank]
    }

    /// The zero padding before the stored part of each axis.
    pub fn pad_before(&self) -> &[usize] {
        &self.pad_before[..self.rank]
    }

    /// Whether any axis has padding.
    pub fn is_padded(&self) -> bool {
        // Element by element: a slice comparison calls `memcmp`, and this runs on every
        // evaluation.
        (self.lens().iter().zip(self.stored_lens())).any(|(len, stored)| len != stored)
    }

    /// The buffer position of the first stored element.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The number of elements, or `None` if it overflows `usize`.
    pub fn element_count(&self) -> Option<usize> {
        if self.lens().contains(&0) {
            return Some(0);
        }
        self.lens()
            .iter()
            .try_fold(1usize, |n, &len| n.checked_mul(len))
    }

    /// The buffer position of the element at `index` (one entry per axis, each in range), or
    /// `None` where the index falls in the padding (the element is zero).
    pub fn position(&self, index: &[usize]) -> Option<usize> {
        debug_assert!(index.iter().zip(self.lens()).all(|(i, len)| i < len));
        let mut pos = self.offset as isize;
        for (axis, &i) in index.iter().enumerate() {
            let stored = i.wrapping_sub(self.pad_before[axis]);
            if stored >= self.stored[axis] {
                return None;
            }
            pos += stored as isize * self.strides[axis];
        }
        Some(pos as usize)
    }

    /// The same view with its axes reordered: axis `i` of the result is axis `order[i]` of
    /// `self`. `order` must be a permutation of `0..rank`.
    pub fn permuted(&self, order: &[usize]) -> Layout {
        debug_assert_eq!(order.len(), self.rank);
        let mut out = *self;
        for (to, &from) in order.iter().enumerate() {
            out.lens[to] = self.lens[from];
            out.strides[to] = self.strides[from];
            out.pad_before[to] = self.pad_before[from];
            out.stored[to] = self.stored[from];
        }
        out
    }

    /// A layout of `rank` axes whose axis `i` is `self`'s axis `from[i]`, or a new axis of
    /// length `new_lens[i]` and stride 0 where `from[i]` is `None` (broadcasting).
    pub fn broadcast(&self, from: &[Option<usize>], new_lens: &[usize]) -> Layout {
        let mut out = Layout::empty(from.len(), self.offset);
        for (to, source) in from.iter().enumerate() {
            match *source {
                Some(axis) => {
                    out.lens[to] = self.lens[axis];
                    out.strides[to] = self.strides[axis];
                    out.pad_before[to] = self.pad_before[axis];
                    out.stored[to] = self.stored[axis];
                }
                None => out.set_axis(to, new_lens[to], 0),
            }
        }
        out
    }

    /// Axis `axis` restricted to the positions `start..end` taken every `step` (from the end
    /// when `step` is negative). The caller has checked `start <= end <= len` and `step != 0`.
    pub fn sliced(&self, axis: usize, start: usize, end: usize, step: isize) -> Layout {
        let mut out = *self;
        let span = end - start;
        let by = step.unsigned_abs();
        let count = span.div_ceil(by);
        // The logical positions taken are first, first ± by, ... (count of them).
        let first = if step > 0 {
            start
        } else {
            end.saturating_sub(1)
        };
        let logical = |k: usize| -> isize { first as isize + k as isize * step };
        // The stored part is the run of k whose logical position is stored.
        let (before, stored) = (self.pad_before[axis] as isize, self.stored[axis] as isize);
        let is_stored = |k: usize| (before..before + stored).contains(&logical(k));
        let k0 = (0..count).find(|&k| is_stored(k)).unwrap_or(count);
        let k1 = (k0..count).find(|&k| !is_stored(k)).unwrap_or(count);
        out.lens[axis] = count;
        out.pad_before[axis] = k0;
        out.stored[axis] = k1 - k0;
        if k1 > k0 {
            let first_stored = logical(k0) - before;
            out.offset = (self.offset as isize + first_stored * self.strides[axis]) as usize;
        }
        out.strides[axis] = self.strides[axis] * step;
        out
    }

    /// The layout without axis `axis`, fixed at position `index` (in range); `None` when that
    /// position is padding (every element of the result is zero).
    pub fn indexed(&self, axis: usize, index: usize) -> Option<Layout> {
        let stored = index.wrapping_sub(self.pad_before[axis]);
        if stored >= self.stored[axis] {
            return None;
        }
        let mut out = Layout::empty(self.rank - 1, self.offset);
        out.offset = (self.offset as isize + stored as isize * self.strides[axis]) as usize;
        for (to, from) in (0..self.rank).filter(|&a| a != axis).enumerate() {
            out.lens[to] = self.lens[from];
            out.strides[to] = self.strides[from];
            out.pad_before[to] = self.pad_before[from];
            out.stored[to] = self.stored[from];
        }
        Some(out)
    }

    /// Axis `axis` with `before` and `after` more zeros around it, or `None` if its length
    /// would overflow.
    pub fn padded(&self, axis: usize, before: usize, after: usize) -> Option<Layout> {
        let mut out = *self;
        out.lens[axis] = self.lens[axis].checked_add(before)?.checked_add(after)?;
        out.pad_before[axis] = self.pad_before[axis] + before;
        Some(out)
    }

    /// Merges `axes` (in that order, the last varying fastest) into one axis placed last,
    /// keeping the other axes in order; `None` when the strides do not allow a view (or an
    /// axis involved is padded).
    pub fn merged(&self, axes: &[usize]) -> Option<Layout> {
        let empty = axes.iter().any(|&a| self.lens[a] == 0);
        let mut len = 1usize;
        let mut stride = 1isize;
        let mut expected: Option<isize> = None;
        for &axis in axes.iter().rev() {
            if self.lens[axis] != self.stored[axis] {
                return None;
            }
            // An empty merge reaches nothing, so any stride will do.
            if empty || self.lens[axis] == 1 {
                continue;
            }
            match expected {
                None => stride = self.strides[axis],
                Some(e) if e == self.strides[axis] => {}
                Some(_) => return None,
            }
            expected = Some(self.strides[axis] * self.lens[axis] as isize);
            len *= self.lens[axis];
        }
        if empty {
            len = 0;
        }
        let kept: Vec<usize> = (0..self.rank).filter(|a| !axes.contains(a)).collect();
        let mut out = Layout::empty(kept.len() + 1, self.offset);
        for (to, &from) in kept.iter().enumerate() {
            out.lens[to] = self.lens[from];
            out.strides[to] = self.strides[from];
            out.pad_before[to] = self.pad_before[from];
            out.stored[to] = self.stored[from];
        }
        out.set_axis(kept.len(), len, stride);
        Some(out)
    }

    /// Splits axis `axis` (unpadded, of length the product of `parts`) into `parts`, appended
    /// last in that order (the last varying fastest); the other axes keep their order.
    pub fn split(&self, axis: usize, parts: &[usize]) -> Layout {
        let mut out = Layout::empty(self.rank - 1 + parts.len(), self.offset);
        let mut to = 0;
        for from in (0..self.rank).filter(|&a| a != axis) {
            out.lens[to] = self.lens[from];
            out.strides[to] = self.strides[from];
            out.pad_before[to] = self.pad_before[from];
            out.stored[to] = self.stored[from];
            to += 1;
        }
        let mut stride = self.strides[axis];
        for (k, &len) in parts.iter().enumerate().rev() {
            out.set_axis(to + k, len, stride);
            stride *= len.max(1) as isize;
        }
        out
    }

    /// Every element of the view in row-major order of its axes (last axis fastest): its
    /// buffer position, or `None` where it is padding.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// let l = axes::Layout::new(&[2, 2], &[1, 2], 0, 4).unwrap();
    /// assert_eq!(l.positions().collect::<Vec<_>>(), [Some(0), Some(2), Some(1), Some(3)]);
    /// ```
    pub fn positions(&self) -> Positions {
        let mut next = self.offset as isize;
        for axis in 0..self.rank {
            next -= self.pad_before[axis] as isize * self.strides[axis];
        }
        Positions {
            layout: *self,
            padded: self.is_padded(),
            index: [0; MAX_RANK],
            next,
            remaining: self.element_count().unwrap_or(0),
        }
    }
}

impl Layout {
    /// For a view without padding: the buffer position of each row's first element (every
    /// index of the axes but the last, in row-major order), and the last axis's length and
    /// stride, so that a walk over the view reads whole rows. A view of no axes is one row of
    /// one element.
    pub(crate) fn row_starts(&self) -> (impl Iterator<Item = usize> + use<>, usize, isize) {
        debug_assert!(!self.is_padded());
        let (outer, len, stride) = match self.rank {
            0 => (*self, 1, 0),
            rank => {
                let mut outer = *self;
                outer.rank = rank - 1;
                (outer, self.lens[rank - 1], self.strides[rank - 1])
            }
        };
        let rows = if len == 0 { 0 } else { usize::MAX };
        (outer.positions().flatten().take(rows), len, stride)
    }
}

/// Iterator over the elements of a [`Layout`], from [`Layout::positions`].
#[derive(Clone, Debug)]
pub struct Positions {
    layout: Layout,
    padded: bool,
    index: [usize; MAX_RANK],
    /// Buffer position of `index` as if the padding were stored.
    next: isize,
    remaining: usize,
}

impl Iterator for Positions {
    type Item = Option<usize>;

    fn next(&mut self) -> Option<Option<usize>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let l = &self.layout;
        let stored = !self.padded
            || (0..l.rank).all(|a| self.index[a].wrapping_sub(l.pad_before[a]) < l.stored[a]);
        let current = stored.then_some(self.next as usize);
        // Odometer step: advance the last axis, carrying into earlier ones.
        for axis in (0..l.rank).rev() {
            self.index[axis] += 1;
            self.next += l.strides[axis];
            if self.index[axis] < l.lens[axis] {
                break;
            }
            self.next -= l.strides[axis] * l.lens[axis] as isize;
            self.index[axis] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Positions {}

/// Whether no two indices over `lens` reach one position through `strides` (a sufficient
/// condition: sorted by |stride|, each axis steps past everything the inner ones reach).
#[inline]
pub(crate) fn injective(lens: &[usize], strides: &[isize]) -> bool {
    let mut axes: smallvec::SmallVec<[usize; MAX_RANK]> =
        (0..lens.len()).filter(|&a| lens[a] > 1).collect();
    axes.sort_unstable_by_key(|&a| strides[a].unsigned_abs());
    let mut reach = 0usize;
    for &a in &axes {
        let stride = strides[a].unsigned_abs();
        if stride <= reach {
            return false;
        }
        reach = reach.saturating_add(stride.saturating_mul(lens[a] - 1));
    }
    true
}

/// Whether every position `offset` + Σ iₐ·stridesₐ (iₐ < lensₐ) lies in `0..buffer_len`:
/// true when some length is 0 (nothing is reached), false when the ranks differ.
#[inline]
pub(crate) fn within(offset: usize, lens: &[usize], strides: &[isize], buffer_len: usize) -> bool {
    if lens.contains(&0) {
        return true;
    }
    if lens.len() != strides.len() {
        return false;
    }
    // Checked: a public job may carry any lengths and strides; overflow means outside.
    let (mut low, mut high) = (Some(offset as i128), Some(offset as i128));
    for (&len, &stride) in lens.iter().zip(strides) {
        let reach = (len as i128 - 1).checked_mul(stride as i128);
        match reach {
            Some(r) if r < 0 => low = low.and_then(|l| l.checked_add(r)),
            Some(r) => high = high.and_then(|h| h.checked_add(r)),
            None => return false,
        }
    }
    matches!((low, high), (Some(l), Some(h)) if l >= 0 && h < buffer_len as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_a_padded_axis_keeps_the_stored_run() {
        // stored [10, 11, 12] with 2 zeros before and 1 after: 0 0 10 11 12 0
        let l = Layout::new(&[3], &[1], 10, 13)
            .unwrap()
            .padded(0, 2, 1)
            .unwrap();
        let values = |l: &Layout| l.positions().map(|p| p.unwrap_or(0)).collect::<Vec<_>>();
        assert_eq!(values(&l), [0, 0, 10, 11, 12, 0]);
        assert_eq!(values(&l.sliced(0, 1, 6, 2)), [0, 11, 0]);
        assert_eq!(values(&l.sliced(0, 0, 6, -1)), [0, 12, 11, 10, 0, 0]);
        assert_eq!(values(&l.sliced(0, 0, 2, 1)), [0, 0]);
        assert_eq!(values(&l.sliced(0, 3, 5, -3)), [12]);
    }
}
