//! Tensors as the leaves of expressions, and their chunk evaluator.

use std::ops::Range;
use std::ptr;

use super::{Expr, Ir};
use crate::element::Element;
use crate::engine::CHUNK;
use crate::engine::exec::ChunkEval;
use crate::engine::plan::{Access, LeafLayout, Leaves, Padding, Plan};
use crate::list::{AxisList, AxisSet};
use crate::protocol::{Buffers, LeafBuffer};
use crate::tensor::Tensor;

/// Loads the chunks of one tensor: a pointer into the tensor where the chunk is contiguous,
/// else the chunk gathered into a stack buffer.
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
    elements: Vec<T>,
    rows: Range<usize>,
    start: usize,
    n: usize,
    stride: usize,
}

impl<'a, T: Element> LeafEval<'a, T> {
    pub(crate) fn new(data: &'a [T], plan: &'a Plan, leaf: usize) -> Self {
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
                elements: Vec::new(),
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

fn operand<T: Element, A: AxisSet>(t: &Tensor<T, A>) -> LeafLayout<'_> {
    LeafLayout {
        ids: A::IDS,
        layout: t.layout(),
        names: <A as AxisList>::names,
    }
}

impl<T: Element, A: AxisSet> Expr for Tensor<T, A> {
    type Elem = T;
    type Axes = A;
    type Eval<'a>
        = LeafEval<'a, T>
    where
        Self: 'a;

    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        out.push(operand(self));
    }

    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        out.push(LeafBuffer {
            dtype: T::DTYPE,
            data: self.storage().leaf_data(),
        });
    }

    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> LeafEval<'a, T> {
        *next_leaf += 1;
        LeafEval::new(self.storage().as_slice(), plan, *next_leaf - 1)
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        ir.leaf()
    }
}

/// A reference to an expression is an expression (it borrows the leaves).
impl<E: Expr> Expr for &E {
    type Elem = E::Elem;
    type Axes = E::Axes;
    type Eval<'a>
        = E::Eval<'a>
    where
        Self: 'a;

    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        (**self).operands(out);
    }

    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        (**self).buffers(out);
    }

    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> E::Eval<'a> {
        (**self).evaluator(plan, next_leaf)
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        (**self).describe(ir)
    }
}

/// Asks the memory system for the cache lines holding the `bytes` bytes from `first`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_bytes(first: *const i8, bytes: usize) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    if bytes == 0 {
        return;
    }
    for byte in (0..bytes).step_by(64).chain([bytes - 1]) {
        // SAFETY: a prefetch is a hint: it reads nothing and never faults, and the address
        // is formed with wrapping arithmetic.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(byte)) };
    }
}

/// How many source columns ahead [`transpose_4byte_avx2`] prefetches. Measured on the
/// 4096² transposed add (W3) as a fraction of the triad, paired in one process over seven
/// runs: median 0.52 without, 0.55 with 16 columns ahead (transposing alone: 27 ms without,
/// 16–18 ms 8 or 16 ahead, 21 ms 32 ahead).
#[cfg(target_arch = "x86_64")]
const TRANSPOSE_PREFETCH: usize = 16;

/// Copies the `rows × n` block whose element `(r, k)` is at `src + r + k * across` into `dst`
/// row-major (`dst[r * stride + k]`), moving 8×8 blocks through registers; the last `rows % 8`
/// rows are left to the caller. Elements are moved bit for bit (any 4-byte type). Eight
/// source columns are walked down all the rows before the next eight, so each column is read
/// front to back while its cache lines are still in L1.
///
/// # Safety
/// AVX2 must be available; every `src + r + k * across` (r < rows − rows % 8, k < n) must be
/// readable and `dst` must hold `rows * stride` elements, `stride >= n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_4byte_avx2(
    src: *const f32,
    across: isize,
    dst: *mut f32,
    stride: usize,
    rows: usize,
    n: usize,
) {
    use std::arch::x86_64::*;
    let full_rows = rows - rows % 8;
    let full_cols = n - n % 8;
    for k0 in (0..full_cols).step_by(8) {
        // The source columns a few blocks ahead, whole: a column is a few cache lines, too
        // short for the hardware prefetcher (past the last column this reaches into the next
        // tile's first ones, which it reads next).
        for j in 0..8 {
            let column = (k0 + TRANSPOSE_PREFETCH + j) as isize * across;
            prefetch_bytes(src.wrapping_offset(column).cast(), rows * 4);
        }
        for r0 in (0..full_rows).step_by(8) {
            // SAFETY: column k0 + j, rows r0..r0 + 8: readable by the caller's contract.
            let column = |j: usize| unsafe {
                _mm256_loadu_ps(src.offset((k0 + j) as isize * across + r0 as isize))
            };
            let (v0, v1, v2, v3) = (column(0), column(1), column(2), column(3));
            let (v4, v5, v6, v7) = (column(4), column(5), column(6), column(7));
            let t0 = _mm256_unpacklo_ps(v0, v1);
            let t1 = _mm256_unpackhi_ps(v0, v1);
            let t2 = _mm256_unpacklo_ps(v2, v3);
            let t3 = _mm256_unpackhi_ps(v2, v3);
            let t4 = _mm256_unpacklo_ps(v4, v5);
            let t5 = _mm256_unpackhi_ps(v4, v5);
            let t6 = _mm256_unpacklo_ps(v6, v7);
            let t7 = _mm256_unpackhi_ps(v6, v7);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let rows_out = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (i, row) in rows_out.into_iter().enumerate() {
                // SAFETY: (r0 + i) * stride + k0 + 8 <= rows * stride, inside dst.
                unsafe { _mm256_storeu_ps(dst.add((r0 + i) * stride + k0), row) };
            }
        }
    }
    // The columns past the last full block, for the rows the blocks covered.
    for k in full_cols..n {
        for r in 0..full_rows {
            // SAFETY: as above, element by element.
            unsafe { *dst.add(r * stride + k) = *src.offset(k as isize * across + r as isize) };
        }
    }
}
