//! How the attention kernel reads and writes its operands: rows described by offsets into a
//! buffer ([`Rows`], [`MaskRows`], [`RowsOut`]), and each operand as the block products read
//! it ([`Operand`]): in place, or copied once per call where its elements are not `W` or a
//! row's columns are not next to each other.

use rayon::prelude::*;

use crate::element::Element;
use crate::engine::{cost, exec, threads};
use crate::error::{Error, Result};
use crate::ir::OpWeights;
use crate::num::Float;
use crate::storage::{self, HostVec};

use super::Block;

/// Where an operand's elements are: `data[batch[b] + i·row + cols[c]]` is row `i` (a query or
/// key position), column `c` (a width position) of batch entry `b`.
#[derive(Clone, Copy)]
pub struct Rows<'a, T> {
    /// The operand's buffer.
    pub data: &'a [T],
    /// The offset of each batch entry's row 0, column 0.
    pub batch: &'a [isize],
    /// The step from one row to the next.
    pub row: isize,
    /// The offset of each column within a row.
    pub cols: &'a [isize],
}

impl<T: Copy> Rows<'_, T> {
    /// The first element of row `i` of batch entry `b` when the columns are contiguous (the
    /// offsets were checked against the buffer by the caller, so a row out of range is a bug,
    /// and the slice's bounds check panics).
    #[inline(always)]
    fn contiguous_row(&self, b: usize, i: usize) -> &[T] {
        let start = (self.batch[b] + i as isize * self.row + self.cols[0]) as usize;
        &self.data[start..start + self.cols.len()]
    }

    /// Element (`b`, `i`, `c`), checked as [`Rows::contiguous_row`].
    #[inline(always)]
    pub(super) fn at(&self, b: usize, i: usize, c: usize) -> T {
        self.data[(self.batch[b] + i as isize * self.row + self.cols[c]) as usize]
    }

    /// Each row's dot product with the same row of `other` (rows `0..positions` of every
    /// batch entry, batch-major), summed in `W` in column order; on the pool where that pays.
    pub(super) fn row_dots<W: Float>(
        &self,
        other: &Operand<'_, W>,
        positions: usize,
    ) -> Result<Vec<W>>
    where
        T: Float<Wide = W>,
    {
        let mut dots = storage::try_vec(self.batch.len() * positions)?;
        dots.resize(self.batch.len() * positions, W::zero());
        if positions == 0 {
            return Ok(dots);
        }
        let contiguous = self.has_contiguous_rows();
        let entry = |(b, dots): (usize, &mut [W])| {
            exec::on_widest_simd(
                #[inline(always)]
                || {
                    for (i, dot) in dots.iter_mut().enumerate() {
                        let theirs = other.row(b, i);
                        let widened = |(x, &y): (T, &W)| x.to_wide().mul(y);
                        *dot = if contiguous {
                            let ours = self.contiguous_row(b, i).iter().copied();
                            ours.zip(theirs)
                                .map(widened)
                                .fold(W::zero(), |t, p| t.add(p))
                        } else {
                            let ours = (0..self.cols.len()).map(|c| self.at(b, i, c));
                            ours.zip(theirs)
                                .map(widened)
                                .fold(W::zero(), |t, p| t.add(p))
                        };
                    }
                },
            )
        };
        let bytes = std::mem::size_of::<T>() + std::mem::size_of::<W>();
        let work = cost::element_wise_ns(dots.len() * self.cols.len(), bytes, OpWeights::NONE);
        if self.batch.len() > 1 && cost::COMPILED.pays(work) {
            threads::install(|| dots.par_chunks_mut(positions).enumerate().for_each(entry));
        } else {
            dots.chunks_mut(positions).enumerate().for_each(entry);
        }
        Ok(dots)
    }

    /// Whether each row's columns lie next to each other, in order.
    fn has_contiguous_rows(&self) -> bool {
        next_to_each_other(self.cols)
    }

    /// The batch entries in groups whose rows interleave in the buffer (entries sorted by
    /// offset, each group's within one row step of its first, as the heads of one sequence
    /// are): reading a group row by row, entry by entry, walks the buffer forwards.
    fn interleaved_groups(&self) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.batch.len()).collect();
        order.sort_by_key(|&b| self.batch[b]);
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for b in order {
            match groups.last_mut() {
                Some(group) if self.batch[b] - self.batch[group[0]] < self.row => group.push(b),
                _ => groups.push(vec![b]),
            }
        }
        groups
    }
}

/// Whether the column offsets `cols` are consecutive, in order.
fn next_to_each_other(cols: &[isize]) -> bool {
    let first = cols.first().copied().unwrap_or(0);
    (cols.iter().enumerate()).all(|(c, &o)| o == first + c as isize)
}

/// An additive mask over the scores: `data[batch[b] + i·query + j·key]` is added to the score
/// of query `i` and key `j` of batch entry `b` (−∞ hides the key).
#[derive(Clone, Copy)]
pub struct MaskRows<'a, T> {
    /// The mask's buffer.
    pub data: &'a [T],
    /// The offset of each batch entry's (0, 0).
    pub batch: &'a [isize],
    /// The step along the queries.
    pub query: isize,
    /// The step along the keys.
    pub key: isize,
}

/// Where a result's elements go: as [`Rows`], in a buffer of `len` elements written only
/// through this description.
pub struct RowsOut<'a, T> {
    ptr: *mut T,
    len: usize,
    batch: &'a [isize],
    row: isize,
    cols: &'a [isize],
    /// The least and the greatest column offset.
    span: (isize, isize),
    /// Whether each row's columns lie next to each other, in order.
    contiguous: bool,
}

// SAFETY: tasks on other threads write through the pointer only at the offsets of their own
// rows (see `RowsOut::write`), so sharing it shares no element.
unsafe impl<T: Send> Send for RowsOut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for RowsOut<'_, T> {}

impl<'a, T: Copy> RowsOut<'a, T> {
    /// Writes into `data` at the offsets `batch`, `row`, `cols`, which the caller guarantees
    /// to be distinct for distinct (batch entry, row, column).
    pub fn new(data: &'a mut [T], batch: &'a [isize], row: isize, cols: &'a [isize]) -> Self {
        let span = (cols.iter().copied().min(), cols.iter().copied().max());
        RowsOut {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            batch,
            row,
            cols,
            span: (span.0.unwrap_or(0), span.1.unwrap_or(0)),
            contiguous: next_to_each_other(cols),
        }
    }

    /// Writes row `i` of batch entry `b`.
    ///
    /// Tasks call it for rows no other task writes, so no two writes touch one element.
    #[inline(always)]
    pub(super) fn write(&self, b: usize, i: usize, values: impl Iterator<Item = T>) {
        let start = self.batch[b] + i as isize * self.row;
        let (first, last) = (start + self.span.0, start + self.span.1);
        assert!(
            self.cols.is_empty() || (first >= 0 && (last as usize) < self.len),
            "a result's offsets stay inside its buffer"
        );
        if self.contiguous && !self.cols.is_empty() {
            // SAFETY: the row's elements are `first..=last` (its columns lie next to each
            // other, in order), inside the buffer (checked above); the buffer is borrowed
            // mutably for `'a`, and only the calling task writes this row, so for as long as
            // the slice lives nothing else reads or writes its elements.
            let row =
                unsafe { std::slice::from_raw_parts_mut(self.ptr.offset(first), self.cols.len()) };
            for (element, value) in row.iter_mut().zip(values) {
                *element = value;
            }
            return;
        }
        for (&col, value) in self.cols.iter().zip(values) {
            // SAFETY: `start + col` lies between the row's least and greatest offsets, inside
            // the buffer (checked above); the buffer is borrowed mutably for `'a`, and the
            // element belongs to this row of this batch entry, which only the calling task
            // writes (the offsets are distinct, `RowsOut::new`).
            unsafe { self.ptr.offset(start + col).write(value) };
        }
    }
}

/// A fresh result, row-major `[batch][position][column]`, for the kernel to write every row
/// of (its values unspecified until then), and the offsets of its batch entries and columns.
pub(crate) struct RowMajorRows<T> {
    pub(crate) data: HostVec<T>,
    pub(crate) batch: Vec<isize>,
    pub(crate) cols: Vec<isize>,
}

impl<T: Element> RowMajorRows<T> {
    /// An error naming the lengths when their product overflows or the host has no room.
    pub(crate) fn new(batch: usize, positions: usize, width: usize) -> Result<Self> {
        let count = (batch.checked_mul(positions))
            .and_then(|n| n.checked_mul(width))
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{batch} × {positions} × {width}"),
            })?;
        Ok(RowMajorRows {
            data: storage::for_overwrite(count)?,
            batch: (0..batch)
                .map(|b| (b * positions * width) as isize)
                .collect(),
            cols: (0..width as isize).collect(),
        })
    }

    /// The step from one row to the next.
    pub(crate) fn row(&self) -> isize {
        self.cols.len() as isize
    }

    /// Distinct offsets for distinct (batch entry, position, column), inside the buffer.
    pub(crate) fn out(&mut self) -> RowsOut<'_, T> {
        let row = self.row();
        RowsOut::new(&mut self.data, &self.batch, row, &self.cols)
    }
}

/// An operand as the block products read it: row `i` of batch entry `b` is `width` contiguous
/// elements from `starts[b] + i·row`. Read in place where its elements are already `W` and each
/// row's columns lie next to each other at a non-negative row step (f32 and f64 operands as
/// the projections make them); otherwise copied once, entry-major and widened, reading the
/// operand in its own memory order (the entries whose rows interleave, row by row) on the pool
/// where that pays.
pub(super) struct Operand<'a, W> {
    data: Source<'a, W>,
    starts: Vec<usize>,
    row: usize,
    width: usize,
}

/// Where an [`Operand`]'s elements are.
enum Source<'a, W> {
    InPlace(&'a [W]),
    Copied(HostVec<W>),
}

impl<'a, W: Float> Operand<'a, W> {
    /// `positions` rows of each batch entry of `x`.
    pub(super) fn new<T: Float<Wide = W>>(x: &Rows<'a, T>, positions: usize) -> Result<Self> {
        let width = x.cols.len();
        if let Some(data) = T::as_wide(x.data)
            && x.has_contiguous_rows()
            && x.row >= 0
        {
            let first = x.cols.first().copied().unwrap_or(0);
            // Row 0, column 0 of an entry with rows lies inside the buffer (the caller
            // checked every offset), so it is not negative; an entry of no rows is not read.
            let start = |&b: &isize| usize::try_from(b + first).unwrap_or(0);
            return Ok(Operand {
                data: Source::InPlace(data),
                starts: x.batch.iter().map(start).collect(),
                row: x.row as usize,
                width,
            });
        }
        let per_entry = positions * width;
        Ok(Operand {
            data: Source::Copied(Self::copy(x, positions)?),
            starts: (0..x.batch.len()).map(|b| b * per_entry).collect(),
            row: width,
            width,
        })
    }

    /// `positions` rows of each batch entry of `x`, widened, entry after entry.
    fn copy<T: Float<Wide = W>>(x: &Rows<'_, T>, positions: usize) -> Result<HostVec<W>> {
        let width = x.cols.len();
        let per_entry = positions * width;
        let count = x.batch.len() * per_entry;
        // Every element is written below: each batch entry is in one group.
        let mut data = storage::for_overwrite(count)?;
        if per_entry == 0 {
            return Ok(data);
        }
        let contiguous = x.has_contiguous_rows();
        let widen = |v: T| v.to_wide();
        let mut entries: Vec<Option<&mut [W]>> = data.chunks_mut(per_entry).map(Some).collect();
        let groups: Vec<Vec<(usize, &mut [W])>> = (x.interleaved_groups().into_iter())
            .map(|group| {
                let rows = group.into_iter().map(|b| (b, entries[b].take()));
                rows.map(|(b, dst)| (b, dst.expect("each entry is in one group")))
                    .collect()
            })
            .collect();
        let copy = |mut group: Vec<(usize, &mut [W])>| {
            exec::on_widest_simd(
                #[inline(always)]
                || {
                    for i in 0..positions {
                        for (b, dst) in group.iter_mut() {
                            let dst = &mut dst[i * width..(i + 1) * width];
                            if contiguous {
                                let src = x.contiguous_row(*b, i);
                                for (o, &v) in dst.iter_mut().zip(src) {
                                    *o = widen(v);
                                }
                            } else {
                                for (c, o) in dst.iter_mut().enumerate() {
                                    *o = widen(x.at(*b, i, c));
                                }
                            }
                        }
                    }
                },
            )
        };
        let bytes = std::mem::size_of::<T>() + std::mem::size_of::<W>();
        let work = cost::element_wise_ns(count, bytes, OpWeights::NONE);
        if groups.len() > 1 && cost::COMPILED.pays(work) {
            threads::install(|| groups.into_par_iter().for_each(copy));
        } else {
            groups.into_iter().for_each(copy);
        }
        Ok(data)
    }

    fn data(&self) -> &[W] {
        match &self.data {
            Source::InPlace(data) => data,
            Source::Copied(data) => data,
        }
    }

    /// Rows `r0..r1` of batch entry `b`, as a matrix of `r1 - r0` rows and `width` columns.
    #[inline(always)]
    pub(super) fn block(&self, b: usize, (r0, r1): (usize, usize)) -> Block<'_, W> {
        let rows = r1 - r0;
        if rows == 0 {
            return Block::rows(&[], 0, self.width, self.row);
        }
        let start = self.starts[b] + r0 * self.row;
        let end = start + (rows - 1) * self.row + self.width;
        Block::rows(&self.data()[start..end], rows, self.width, self.row)
    }

    /// Row `i` of batch entry `b`.
    #[inline(always)]
    pub(super) fn row(&self, b: usize, i: usize) -> &[W] {
        let start = self.starts[b] + i * self.row;
        &self.data()[start..start + self.width]
    }
}
