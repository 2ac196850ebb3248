//! The chunk loader of a tensor leaf: a pointer into the tensor where a chunk is contiguous,
//! else the chunk gathered (or a tile transposed) into a buffer of the evaluator.

use std::ops::Range;
use std::ptr;

use super::CHUNK;
use super::exec::ChunkEval;
use super::plan::{Access, FLAT_LEAF, Padding, Plan};
#[cfg(target_arch = "x86_64")]
use super::simd::{prefetch_bytes, transpose_4byte_avx2};
use crate::element::Element;
use crate::storage::HostVec;

/// Loads the chunks of one tensor: a pointer into the tensor where the chunk is contiguous,
/// else the chunk gathered into a scratch buffer of its own (allocated at the first gather).
pub struct LeafEval<'a, T: Element> {
    data: &'a [T],
    access: &'a Access,
    /// Where the stored part lies, for a padded leaf.
    padding: Option<&'a Padding>,
    rank: usize,
    current: *const T,
    /// Gathered chunks; allocated on the first gather, so in-place leaves cost nothing.
    scratch: Vec<T>,
    /// The transposed tile, once `prepare_tile` made one (boxed: most leaves never do, and
    /// the evaluator stays small to build).
    tile: Option<Box<Tile<T>>>,
}

/// A transposed tile (see `prepare_tile`): rows `rows`, positions `start..start + n` of the
/// innermost axis, row-major with rows `stride` elements apart.
struct Tile<T> {
    elements: HostVec<T>,
    rows: Range<usize>,
    start: usize,
    n: usize,
    stride: usize,
}

impl<'a, T: Element> LeafEval<'a, T> {
    /// The loader of leaf number `leaf` of `plan`, a tensor whose elements are `data` and
    /// whose layout starts at `offset`.
    #[inline(always)]
    pub(crate) fn new(data: &'a [T], offset: usize, plan: &'a Plan, leaf: usize) -> Self {
        if plan.flat {
            return LeafEval {
                data: &data[offset..],
                access: &FLAT_LEAF,
                padding: None,
                rank: 1,
                current: ptr::null(),
                scratch: Vec::new(),
                tile: None,
            };
        }
        let access = &plan.access[leaf + 1];
        LeafEval {
            data,
            access,
            padding: access.padded.then(|| &plan.padding[leaf + 1]),
            rank: plan.rank,
            current: ptr::null(),
            scratch: Vec::new(),
            tile: None,
        }
    }

    /// Buffer position of index 0 on the innermost axis at `outer` on the others (unpadded).
    #[inline(always)]
    fn outer_base(&self, outer: &[usize]) -> isize {
        let a = self.access;
        (outer.iter().zip(&a.strides))
            .fold(a.offset, |base, (&i, &stride)| base + i as isize * stride)
    }

    fn ensure_scratch(&mut self) {
        if self.scratch.is_empty() {
            self.scratch = vec![T::zero(); CHUNK];
        }
    }

    /// Reads the element at buffer position `pos` (checked).
    #[inline(always)]
    fn read(&self, pos: isize) -> T {
        self.data[pos as usize]
    }

    /// Gathers a chunk of a padded operand element by element.
    #[cold]
    fn load_padded(&mut self, outer: &[usize], start: usize, n: usize) {
        assert!(
            n <= CHUNK,
            "the plan keeps gathered chunks within the scratch buffer"
        );
        self.ensure_scratch();
        let a = self.access;
        let p = self.padding.expect("a padded leaf has its padding");
        let inner = self.rank - 1;
        let stored = |axis: usize, i: usize| i.wrapping_sub(p.pad_before[axis]) < p.stored[axis];
        let outer_stored = outer.iter().enumerate().all(|(axis, &i)| stored(axis, i));
        let mut base = a.offset;
        for (axis, &i) in outer.iter().enumerate() {
            base += (i as isize - p.pad_before[axis] as isize) * a.strides[axis];
        }
        for k in 0..n {
            let i = start + k;
            self.scratch[k] = if outer_stored && stored(inner, i) {
                self.read(base + (i as isize - p.pad_before[inner] as isize) * a.strides[inner])
            } else {
                T::zero()
            };
        }
        self.current = self.scratch.as_ptr();
    }
}

// SAFETY: `load` leaves `current` pointing at `n` readable elements: a subslice of `data`
// (bounds-checked), the first `n <= CHUNK` elements of `scratch` (CHUNK long once used), or
// `n` elements within a row of the tile.
unsafe impl<T: Element> ChunkEval for LeafEval<'_, T> {
    type Out = T;

    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        if self.rank == 0 {
            self.ensure_scratch();
            self.scratch[0] = self.read(self.access.offset);
            self.current = self.scratch.as_ptr();
            return;
        }
        if self.access.padded {
            self.load_padded(outer, start, n);
            return;
        }
        let a = self.access;
        let inner = self.rank - 1;
        if let Some(tile) = &self.tile
            && start >= tile.start
            && start + n <= tile.start + tile.n
            && tile.rows.contains(&outer[inner - 1])
        {
            let row = outer[inner - 1] - tile.rows.start;
            // SAFETY: the tile holds tile.rows.len() rows of tile.n elements, tile.stride
            // apart, and the chunk lies within a row.
            self.current =
                unsafe { (tile.elements.as_ptr()).add(row * tile.stride + (start - tile.start)) };
            return;
        }
        let base = self.outer_base(outer);
        let stride = a.strides[inner];
        let first = base + start as isize * stride;
        match stride {
            1 => self.current = self.data[first as usize..first as usize + n].as_ptr(),
            0 => {
                assert!(
                    n <= CHUNK,
                    "the plan keeps gathered chunks within the scratch buffer"
                );
                self.ensure_scratch();
                let value = self.read(first);
                self.scratch[..n].fill(value);
                self.current = self.scratch.as_ptr();
            }
            _ => {
                assert!(
                    n <= CHUNK,
                    "the plan keeps gathered chunks within the scratch buffer"
                );
                self.ensure_scratch();
                // The positions are monotone in k: checking both ends checks them all.
                let last = first + (n as isize - 1) * stride;
                let in_range = |p: isize| p >= 0 && (p as usize) < self.data.len();
                assert!(
                    n == 0 || (in_range(first) && in_range(last)),
                    "chunk outside its buffer"
                );
                for k in 0..n {
                    // SAFETY: first + k*stride lies between first and last, both checked above.
                    self.scratch[k] =
                        unsafe { *self.data.as_ptr().offset(first + k as isize * stride) };
                }
                self.current = self.scratch.as_ptr();
            }
        }
    }

    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let a = self.access;
            if a.padded || a.strides[self.rank - 1] != 1 {
                return;
            }
            let first = self.outer_base(outer) + start as isize;
            let bytes = n * std::mem::size_of::<T>();
            prefetch_bytes(self.data.as_ptr().wrapping_offset(first).cast(), bytes);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (outer, start, n);
    }

    fn prepare_tile(&mut self, outer: &[usize], rows: Range<usize>, start: usize, n: usize) {
        let a = self.access;
        let inner = self.rank - 1;
        let mid = inner - 1;
        let (along, across) = (a.strides[mid], a.strides[inner]);
        // Only a leaf that is contiguous across rows and strided along them gains.
        if a.padded
            || along.unsigned_abs() != 1
            || across.unsigned_abs() <= 1
            || n == 0
            || rows.is_empty()
        {
            if let Some(tile) = &mut self.tile {
                tile.rows = 0..0;
            }
            return;
        }
        let base = self.outer_base(outer) + rows.start as isize * along + start as isize * across;
        let count = rows.len();
        // Check the tile's corners: every position lies between them.
        let corners = [
            base,
            base + (count as isize - 1) * along + (n as isize - 1) * across,
        ];
        let reach_lo = corners
            .iter()
            .copied()
            .min()
            .unwrap_or(0)
            .min(base + (count as isize - 1) * along)
            .min(base + (n as isize - 1) * across);
        let reach_hi = corners
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(base + (count as isize - 1) * along)
            .max(base + (n as isize - 1) * across);
        assert!(
            reach_lo >= 0 && (reach_hi as usize) < self.data.len(),
            "tile outside its buffer"
        );
        // Rows one cache line longer than the tile: with a power-of-two width, rows a
        // multiple of 4 KiB apart would all fall into the same L1 set.
        let stride = n + (64 / std::mem::size_of::<T>().max(1)).max(1);
        let made = self.tile.get_or_insert_with(|| {
            Box::new(Tile {
                elements: HostVec::new(),
                rows: 0..0,
                start: 0,
                n: 0,
                stride: 0,
            })
        });
        made.elements.resize(count * stride, T::zero());
        let data = self.data.as_ptr();
        let tile = made.elements.as_mut_ptr();
        let mut done_rows = 0;
        #[cfg(target_arch = "x86_64")]
        if std::mem::size_of::<T>() == 4
            && along == 1
            && std::arch::is_x86_feature_detected!("avx2")
        {
            // SAFETY: AVX2 is present (checked); T is 4 bytes, moved bit for bit; the source
            // positions lie within the tile's reach (checked above) and the destination holds
            // count × stride elements, stride >= n.
            unsafe {
                transpose_4byte_avx2(
                    data.offset(base).cast::<f32>(),
                    across,
                    tile.cast::<f32>(),
                    stride,
                    count,
                    n,
                );
            }
            done_rows = count - count % 8;
        }
        // The rows the 8×8 blocks did not cover (all of them without AVX2).
        for k in 0..n {
            let column = base + k as isize * across;
            for r in done_rows..count {
                // SAFETY: the position lies within the tile's reach (checked above), and
                // r * stride + k < count * stride, the tile's length.
                unsafe { *tile.add(r * stride + k) = *data.offset(column + r as isize * along) };
            }
        }
        made.rows = rows;
        made.start = start;
        made.n = n;
        made.stride = stride;
    }

    #[inline(always)]
    unsafe fn at(&self, i: usize) -> T {
        // SAFETY: the caller keeps i below the n of the last load, which left `current`
        // pointing at n readable elements (and `self` has not moved since).
        unsafe { *self.current.add(i) }
    }
}
