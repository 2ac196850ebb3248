//! The CPU's matrix products: f32 and f64 on the `gemm` crate (mid-sized products split by
//! rows across the thread pool, this thread taking the first part; large ones on `gemm`'s
//! own threads), f16 and bf16 computed in f32, integers by a plain loop (wrapping
//! arithmetic).

use std::any::TypeId;
use std::mem::MaybeUninit;

use half::{bf16, f16};

use super::{cost, threads};
use crate::element::{narrow_from_f32, widen_to_f32};
use crate::error::{Error, Result};
use crate::layout::within;
use crate::num::Num;
use smallvec::SmallVec;

/// One operand of a batched matrix product in host memory: element (0, 0) of the first
/// matrix at `offset`, a stride per batch axis, and the strides of rows and columns.
pub(crate) struct HostMatrix<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) offset: usize,
    pub(crate) batch_strides: &'a [isize],
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

impl<T> HostMatrix<'_, T> {
    /// Whether every position of the `rows`×`cols` matrices of a batch `batch_lens` long
    /// lies in the buffer.
    fn fits(&self, batch_lens: &[usize], rows: usize, cols: usize) -> bool {
        let lens: SmallVec<[usize; 4]> = batch_lens.iter().copied().chain([rows, cols]).collect();
        let strides: SmallVec<[isize; 4]> = (self.batch_strides.iter().copied())
            .chain([self.row_stride, self.col_stride])
            .collect();
        within(self.offset, &lens, &strides, self.data.len())
    }

    /// The position of element (0, 0) of the matrix at `index` of the batch.
    fn origin(&self, index: &[usize]) -> isize {
        self.offset as isize
            + index
                .iter()
                .zip(self.batch_strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>()
    }
}

/// `out` (row-major `[batch..., m, n]`) = `lhs` (`m`×`k`) · `rhs` (`k`×`n`) for every index
/// of the batch axes, `batch_lens` long. An operand that reaches outside its buffer, or an
/// `out` of another length, is an error.
pub(crate) fn batched_matmul<T: Num>(
    out: &mut [T],
    batch_lens: &[usize],
    shape: (usize, usize, usize),
    lhs: &HostMatrix<'_, T>,
    rhs: &HostMatrix<'_, T>,
) -> Result<()> {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, and what is written through the view
    // is an initialised `T` (the view is never used to de-initialise an element).
    let out = unsafe { &mut *(std::ptr::from_mut(out) as *mut [MaybeUninit<T>]) };
    batched_matmul_into(out, batch_lens, shape, lhs, rhs)
}

/// [`batched_matmul`] into memory not yet initialised (as a `Vec`'s spare capacity): every
/// element of `out` is written when it returns `Ok`, none read.
pub(crate) fn batched_matmul_into<T: Num>(
    out: &mut [MaybeUninit<T>],
    batch_lens: &[usize],
    (m, n, k): (usize, usize, usize),
    lhs: &HostMatrix<'_, T>,
    rhs: &HostMatrix<'_, T>,
) -> Result<()> {
    let batches: usize = batch_lens.iter().product();
    if batches.checked_mul(m).and_then(|bm| bm.checked_mul(n)) != Some(out.len()) {
        return Err(Error::Unsupported {
            what: format!(
                "a result of {} elements for {batches} products of {m}×{n}",
                out.len()
            ),
        });
    }
    if batches == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for o in out.iter_mut() {
            o.write(T::zero());
        }
        return Ok(());
    }
    if !lhs.fits(batch_lens, m, k) || !rhs.fits(batch_lens, k, n) {
        return Err(Error::Unsupported {
            what: "a matrix operand that leaves its buffer".into(),
        });
    }
    let threads = threads::threads();
    let parts = threads.min(batches);
    if parts < 2
        || !split_pays(
            m.saturating_mul(n)
                .saturating_mul(k)
                .saturating_mul(batches),
        )
    {
        matmul_batches(out, 0..batches, batch_lens, (m, n, k), lhs, rhs, threads);
        return Ok(());
    }
    // Whole products to each thread, one thread each: every product is computed as on one
    // thread (the row split gives the same bits), so the result is the same for every count.
    let mut rest = out;
    let mut ranges = (0..parts).map(|p| batches * p / parts..batches * (p + 1) / parts);
    let first = ranges.next().expect("two parts or more");
    let (first_out, tail) = rest.split_at_mut(first.len() * m * n);
    rest = tail;
    threads::in_place_scope(|scope| {
        for range in ranges {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(range.len() * m * n);
            rest = tail;
            scope.spawn(move |_| matmul_batches(part, range, batch_lens, (m, n, k), lhs, rhs, 1));
        }
        matmul_batches(first_out, first, batch_lens, (m, n, k), lhs, rhs, 1);
    });
    Ok(())
}

/// The products `batches` (indices into the batch, row-major over `batch_lens`) into `out`,
/// one after another, each on up to `threads` threads.
fn matmul_batches<T: Num>(
    out: &mut [MaybeUninit<T>],
    batches: std::ops::Range<usize>,
    batch_lens: &[usize],
    (m, n, k): (usize, usize, usize),
    lhs: &HostMatrix<'_, T>,
    rhs: &HostMatrix<'_, T>,
    threads: usize,
) {
    let mut index: SmallVec<[usize; 4]> = smallvec::smallvec![0; batch_lens.len()];
    let mut at = batches.start;
    for axis in (0..index.len()).rev() {
        index[axis] = at % batch_lens[axis];
        at /= batch_lens[axis];
    }
    for (dst, _) in out.chunks_mut(m * n).zip(batches) {
        let (lo, ro) = (lhs.origin(&index), rhs.origin(&index));
        matmul(
            dst,
            (m, n, k),
            (lhs.data, lo, lhs.row_stride, lhs.col_stride),
            (rhs.data, ro, rhs.row_stride, rhs.col_stride),
            threads,
        );
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < batch_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// Whether products of `macs` multiply-adds in all run sooner split across threads (by the
/// [`cost`] model: from 2^22 on the measured host; at 2^21, the MLP training step's products,
/// a split cost more than it saved).
fn split_pays(macs: usize) -> bool {
    cost::PRODUCTS.pays(cost::products_ns(macs))
}

/// From this many multiply-adds on, `gemm`'s own threads (which share the packed operands)
/// take the product; below, our split by rows. On 2 cores the rows were as fast or faster
/// below 2^30 (0.98–1.0 of the time for squares of 512 and 768 and the GPT step's products;
/// 0.62 for a 128 × 73 result summed over 4,096, where `gemm` finds few blocks to share),
/// and 1024³ ran alike on both.
const SPLIT_MAX_MACS: usize = 1 << 30;

/// Rows per part start at multiples of this, a multiple of `gemm`'s register tile for f32
/// and f64, so every part is tiled as the whole product would be.
const ROW_ALIGN: usize = 16;

/// Up to this many rows and columns, `gemm` takes a path of its own for small products.
const GEMM_SMALL: usize = 64;

/// An f32 or f64 matrix in a buffer: element (0, 0) at `offset`, and its strides.
struct Operand<'a, T> {
    data: &'a [T],
    offset: isize,
    row_stride: isize,
    col_stride: isize,
}

/// The rows of each part when an `m`×`n` product is split by rows across `threads`, or
/// `None` where a split could change the result: `gemm`'s order of additions depends on the
/// depth and on whether the product is small (both sides at most [`GEMM_SMALL`]), so every
/// part must be small exactly when the whole is. Then each element is summed in the same
/// order as by one call, and results are bitwise the same for every thread count.
fn rows_per_part(m: usize, n: usize, threads: usize) -> Option<usize> {
    let parts = threads.min(m / ROW_ALIGN);
    if parts < 2 {
        return None;
    }
    let rows = m.div_ceil(parts).next_multiple_of(ROW_ALIGN);
    let last = m - (m.div_ceil(rows) - 1) * rows;
    let small = |rows: usize| rows <= GEMM_SMALL && n <= GEMM_SMALL;
    // One row is a matrix-vector product to `gemm`, summed in another order.
    (small(rows) == small(m) && small(last) == small(m) && last > 1).then_some(rows)
}

/// `dst` = rows `rows` of `lhs · rhs`, `n` columns each, by `gemm` (f32 or f64 only).
fn gemm_rows<T: Num>(
    dst: &mut [MaybeUninit<T>],
    rows: std::ops::Range<usize>,
    n: usize,
    k: usize,
    lhs: &Operand<'_, T>,
    rhs: &Operand<'_, T>,
    parallelism: gemm::Parallelism,
) {
    let id = TypeId::of::<T>();
    assert!(id == TypeId::of::<f32>() || id == TypeId::of::<f64>());
    assert_eq!(dst.len(), rows.len() * n);
    let start = lhs.offset + rows.start as isize * lhs.row_stride;
    let inside = |data: &[T], o: isize, rows: usize, rs: isize, cols: usize, cs: isize| {
        usize::try_from(o).is_ok_and(|o| within(o, &[rows, cols], &[rs, cs], data.len()))
    };
    assert!(
        inside(
            lhs.data,
            start,
            rows.len(),
            lhs.row_stride,
            k,
            lhs.col_stride
        ) && inside(rhs.data, rhs.offset, k, rhs.row_stride, n, rhs.col_stride),
        "operands inside their buffers"
    );
    // SAFETY: T is f32 or f64 (asserted above), which gemm supports; every position the
    // operands reach lies in their buffers (asserted above over the whole ranges read,
    // whatever the strides' signs); `dst` holds `rows.len()`×n elements with row stride n
    // and column stride 1, and is borrowed mutably, so nothing else writes it meanwhile;
    // with alpha 0 gemm writes every element of `dst` without reading it, so it may start
    // uninitialised.
    unsafe {
        gemm::gemm(
            rows.len(),
            n,
            k,
            dst.as_mut_ptr().cast::<T>(),
            1,
            n as isize,
            false,
            lhs.data.as_ptr().offset(start),
            lhs.col_stride,
            lhs.row_stride,
            rhs.data.as_ptr().offset(rhs.offset),
            rhs.col_stride,
            rhs.row_stride,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `dst (m×n, row-major) = lhs (m×k) · rhs (k×n)`, each operand given by buffer, offset and
/// (row, column) strides that keep every element inside its buffer, on up to `threads`
/// threads (the same bits on any number).
fn matmul<T: Num>(
    dst: &mut [MaybeUninit<T>],
    (m, n, k): (usize, usize, usize),
    (lhs, lo, l_rs, l_cs): (&[T], isize, isize, isize),
    (rhs, ro, r_rs, r_cs): (&[T], isize, isize, isize),
    threads: usize,
) {
    // Every position an operand reaches, checked once against its buffer.
    let inside = |data: &[T], o: isize, rows: usize, rs: isize, cols: usize, cs: isize| {
        usize::try_from(o).is_ok_and(|o| within(o, &[rows, cols], &[rs, cs], data.len()))
    };
    assert!(
        inside(lhs, lo, m, l_rs, k, l_cs) && inside(rhs, ro, k, r_rs, n, r_cs),
        "operands inside their buffers"
    );
    assert_eq!(dst.len(), m * n);
    let id = TypeId::of::<T>();
    if id == TypeId::of::<f32>() || id == TypeId::of::<f64>() {
        let lhs = Operand {
            data: lhs,
            offset: lo,
            row_stride: l_rs,
            col_stride: l_cs,
        };
        let rhs = Operand {
            data: rhs,
            offset: ro,
            row_stride: r_rs,
            col_stride: r_cs,
        };
        let macs = m.saturating_mul(n).saturating_mul(k);
        if threads == 1 || !split_pays(macs) {
            gemm_rows(dst, 0..m, n, k, &lhs, &rhs, gemm::Parallelism::None);
        } else if let Some(rows) = rows_per_part(m, n, threads)
            && macs < SPLIT_MAX_MACS
        {
            // One part on this thread, the others on the pool: one hand-off, no waiting for
            // a pool thread to start the first part.
            let mut parts = dst.chunks_mut(rows * n).enumerate();
            let (_, first) = parts.next().expect("m > 0");
            threads::in_place_scope(|scope| {
                for (i, part) in parts {
                    let (lhs, rhs) = (&lhs, &rhs);
                    scope.spawn(move |_| {
                        let start = i * rows;
                        let end = (start + rows).min(m);
                        gemm_rows(part, start..end, n, k, lhs, rhs, gemm::Parallelism::None);
                    });
                }
                gemm_rows(
                    first,
                    0..rows.min(m),
                    n,
                    k,
                    &lhs,
                    &rhs,
                    gemm::Parallelism::None,
                );
            });
        } else {
            // Too large for the row split, or too few rows: on `gemm`'s own threads.
            let parallelism = gemm::Parallelism::Rayon(threads);
            threads::install(|| gemm_rows(dst, 0..m, n, k, &lhs, &rhs, parallelism));
        }
        return;
    }
    if id == TypeId::of::<f16>() || id == TypeId::of::<bf16>() {
        // Computed in f32: pack both operands as f32, multiply, round back.
        let (a, a_rs, a_cs) = widened(lhs, (lo, l_rs, l_cs), (m, k), threads);
        let (b, b_rs, b_cs) = widened(rhs, (ro, r_rs, r_cs), (k, n), threads);
        let mut c = Vec::with_capacity(m * n);
        let written = &mut c.spare_capacity_mut()[..m * n];
        let (a, b) = ((&a[..], 0, a_rs, a_cs), (&b[..], 0, b_rs, b_cs));
        matmul(written, (m, n, k), a, b, threads);
        // SAFETY: `matmul` wrote every one of the m×n elements.
        unsafe { c.set_len(m * n) };
        on_row_blocks(dst, &c, n, threads, |_, dst, c| {
            let mut rounded = vec![T::zero(); c.len()];
            narrow_from_f32(c, &mut rounded);
            for (d, v) in dst.iter_mut().zip(rounded) {
                d.write(v);
            }
        });
        return;
    }
    // Integers: a plain loop with the element type's (wrapping) arithmetic.
    for i in 0..m {
        for j in 0..n {
            let mut acc = T::zero();
            for p in 0..k {
                let a = lhs[(lo + i as isize * l_rs + p as isize * l_cs) as usize];
                let b = rhs[(ro + p as isize * r_rs + j as isize * r_cs) as usize];
                acc = acc.add(a.mul(b));
            }
            dst[i * n + j].write(acc);
        }
    }
}

/// Elements at or above which a half product's packing and rounding run on several threads.
const PARALLEL_CONVERSION: usize = 1 << 16;

/// The `rows`×`cols` operand at `(offset, row stride, column stride)` of `data`, widened to
/// f32, with its row and column strides there: row-major, or column-major where its columns
/// are contiguous (a transposed operand: read in order, not gathered), contiguous lines many
/// elements at a time, on up to `threads` threads.
fn widened<T: Num>(
    data: &[T],
    (offset, rs, cs): (isize, isize, isize),
    (rows, cols): (usize, usize),
    threads: usize,
) -> (Vec<f32>, isize, isize) {
    let mut out = vec![0.0; rows * cols];
    if cs != 1 && rs == 1 {
        on_row_blocks(&mut out, &[(); 0], rows, threads, |first_col, block, _| {
            for (j, column) in block.chunks_mut(rows).enumerate() {
                let start = (offset + (first_col + j) as isize * cs) as usize;
                widen_to_f32(&data[start..start + rows], column);
            }
        });
        return (out, 1, rows as isize);
    }
    on_row_blocks(&mut out, &[(); 0], cols, threads, |first_row, block, _| {
        let mut gathered = Vec::new();
        for (i, row) in block.chunks_mut(cols).enumerate() {
            let start = offset + (first_row + i) as isize * rs;
            if cs == 1 {
                widen_to_f32(&data[start as usize..start as usize + cols], row);
            } else {
                gathered.clear();
                gathered.extend((0..cols).map(|c| data[(start + c as isize * cs) as usize]));
                widen_to_f32(&gathered, row);
            }
        }
    });
    (out, cols as isize, 1)
}

/// Runs `f(first row, rows of out, the same rows of with)` over blocks of whole rows of `out`
/// (rows `cols` long; `with` empty or as long), on up to `threads` threads where `out` is
/// large.
fn on_row_blocks<O: Send, W: Sync>(
    out: &mut [O],
    with: &[W],
    cols: usize,
    threads: usize,
    f: impl Fn(usize, &mut [O], &[W]) + Sync,
) {
    if cols == 0 || out.is_empty() {
        return;
    }
    let rows = out.len() / cols;
    if threads == 1 || out.len() < PARALLEL_CONVERSION || rows < 2 {
        return f(0, out, with);
    }
    let block_rows = rows.div_ceil(threads);
    threads::install(|| {
        use rayon::prelude::*;
        let blocks = out.par_chunks_mut(block_rows * cols).enumerate();
        blocks.for_each(|(i, part)| {
            let from = (i * block_rows * cols).min(with.len());
            let to = (from + part.len()).min(with.len());
            f(i * block_rows, part, &with[from..to]);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Products large enough to be split across threads, in every layout of the operands,
    /// in f32 and f64: the same bits on one, two and three threads, and close to a plain
    /// triple loop.
    #[test]
    fn split_products_are_the_same_on_every_thread_count() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |below: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % below
        };
        // The smallest power of two of multiply-adds that is split.
        let least_split = (0..usize::BITS)
            .map(|s| 1usize << s)
            .find(|&macs| split_pays(macs))
            .expect("large products are split");
        for case in 0..18 {
            // Row counts around gemm's small-product bound and column counts on both sides
            // of it; depths past 512 are blocked by gemm. The first two: row counts that a
            // split into parts of whole register tiles would leave one row of (33 on two
            // threads, 65 on three).
            let (m, n) = match case {
                0 => (33, 200),
                1 => (65, 65),
                _ => (
                    [16, 48, 65, 100, 128, 129, 300][next(7)],
                    [10, 40, 64, 65, 200][next(5)],
                ),
            };
            let k = (least_split / (m * n)).max(1) + next(700);
            let lhs: Vec<f64> = (0..m * k).map(|_| next(2001) as f64 / 1e3 - 1.0).collect();
            let rhs: Vec<f64> = (0..k * n).map(|_| next(2001) as f64 / 1e3 - 1.0).collect();
            let lhs_strides = if case % 2 == 0 { (k, 1) } else { (1, m) };
            let rhs_strides = if case % 4 < 2 { (n, 1) } else { (1, k) };
            let shape = (m, n, k);
            if case % 8 < 4 {
                check(shape, &lhs, lhs_strides, &rhs, rhs_strides);
            } else {
                let narrow = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                check(
                    shape,
                    &narrow(&lhs),
                    lhs_strides,
                    &narrow(&rhs),
                    rhs_strides,
                );
            }
        }
    }

    /// Products of f16 and bf16 in every layout of the operands, large enough that their
    /// packing and rounding split across threads: the f32 product of the widened operands,
    /// rounded once, the same bits on one, two and three threads.
    #[test]
    fn half_products_are_f32_products_rounded() {
        fn case<T: Num>(lhs_transposed: bool, rhs_transposed: bool) {
            let (m, n, k) = (300, 230, 270);
            let value = |i: usize| T::from_f64(((i * 7919) % 2001) as f64 / 1e3 - 1.0);
            let lhs: Vec<T> = (0..m * k).map(value).collect();
            let rhs: Vec<T> = (0..k * n).map(|i| value(i + 13)).collect();
            let lhs_strides = if lhs_transposed { (1, m) } else { (k, 1) };
            let rhs_strides = if rhs_transposed { (1, k) } else { (n, 1) };
            let wide = |v: &[T]| v.iter().map(|x| x.to_f64() as f32).collect::<Vec<f32>>();
            let s = |(r, c): (usize, usize)| (r as isize, c as isize);
            let product = |threads: usize| {
                let mut out = Vec::with_capacity(m * n);
                let (l, r) = (s(lhs_strides), s(rhs_strides));
                let (lhs, rhs) = ((&lhs[..], 0, l.0, l.1), (&rhs[..], 0, r.0, r.1));
                matmul(
                    &mut out.spare_capacity_mut()[..m * n],
                    (m, n, k),
                    lhs,
                    rhs,
                    threads,
                );
                // SAFETY: `matmul` wrote every one of the m×n elements.
                unsafe { out.set_len(m * n) };
                out
            };
            let (wl, wr) = (wide(&lhs), wide(&rhs));
            let mut f32s: Vec<f32> = Vec::with_capacity(m * n);
            let (l, r) = (s(lhs_strides), s(rhs_strides));
            matmul(
                &mut f32s.spare_capacity_mut()[..m * n],
                (m, n, k),
                (&wl[..], 0, l.0, l.1),
                (&wr[..], 0, r.0, r.1),
                1,
            );
            // SAFETY: `matmul` wrote every one of the m×n elements.
            unsafe { f32s.set_len(m * n) };
            let want: Vec<T> = f32s.iter().map(|&v| T::from_f64(f64::from(v))).collect();
            for threads in [1, 2, 3] {
                assert!(
                    product(threads) == want,
                    "{threads} threads, {lhs_transposed} {rhs_transposed}"
                );
            }
        }
        for (l, r) in [(false, false), (true, false), (false, true), (true, true)] {
            case::<half::bf16>(l, r);
            case::<half::f16>(l, r);
        }
    }

    fn check<T: Num>(
        (m, n, k): (usize, usize, usize),
        lhs: &[T],
        (l_rs, l_cs): (usize, usize),
        rhs: &[T],
        (r_rs, r_cs): (usize, usize),
    ) {
        let product = |threads: usize| {
            super::threads::set_threads(threads).unwrap();
            let mut out = Vec::with_capacity(m * n);
            let s = |v: usize| v as isize;
            let (lo, ro) = (0, 0);
            matmul(
                &mut out.spare_capacity_mut()[..m * n],
                (m, n, k),
                (lhs, lo, s(l_rs), s(l_cs)),
                (rhs, ro, s(r_rs), s(r_cs)),
                threads,
            );
            // SAFETY: `matmul` wrote every one of the m×n elements.
            unsafe { out.set_len(m * n) };
            out
        };
        let one = product(1);
        assert!(one == product(2), "{m}×{n}×{k} on two threads");
        assert!(one == product(3), "{m}×{n}×{k} on three threads");
        for (at, got) in one.iter().enumerate() {
            let (i, j) = (at / n, at % n);
            let want: f64 = (0..k)
                .map(|p| lhs[i * l_rs + p * l_cs].to_f64() * rhs[p * r_rs + j * r_cs].to_f64())
                .sum();
            assert!(
                (got.to_f64() - want).abs() <= 1e-4 * k as f64,
                "{m}×{n}×{k} at {at}"
            );
        }
    }

    /// Batches of products, given to the threads whole: the same bits on one, two and three
    /// threads (five products over two or three threads: uneven parts), and close to a plain
    /// loop; the second operand is transposed and shared by every product (batch stride 0).
    #[test]
    fn batched_products_are_the_same_on_every_thread_count() {
        let (batches, m, n, k) = (5, 72, 40, 200);
        let lhs: Vec<f32> = (0..batches * m * k)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let rhs: Vec<f32> = (0..k * n)
            .map(|i| ((i * 53) % 97) as f32 / 48.0 - 1.0)
            .collect();
        let product = |threads: usize| {
            super::threads::set_threads(threads).unwrap();
            let lhs = HostMatrix {
                data: &lhs,
                offset: 0,
                batch_strides: &[(m * k) as isize],
                row_stride: k as isize,
                col_stride: 1,
            };
            let rhs = HostMatrix {
                data: &rhs,
                offset: 0,
                batch_strides: &[0],
                row_stride: 1,
                col_stride: k as isize,
            };
            let mut out = vec![0f32; batches * m * n];
            batched_matmul(&mut out, &[batches], (m, n, k), &lhs, &rhs).unwrap();
            out
        };
        let one = product(1);
        assert!(one == product(2) && one == product(3));
        for (at, got) in one.iter().enumerate() {
            let (b, i, j) = (at / (m * n), at / n % m, at % n);
            let want: f64 = (0..k)
                .map(|p| f64::from(lhs[b * m * k + i * k + p]) * f64::from(rhs[j * k + p]))
                .sum();
            assert!(
                (f64::from(*got) - want).abs() < 1e-3,
                "product {b} at ({i}, {j})"
            );
        }
        super::threads::set_threads(2).unwrap();
    }

    #[test]
    fn a_split_keeps_gemm_small_products_small() {
        assert_eq!(rows_per_part(128, 256, 2), Some(64));
        assert_eq!(rows_per_part(100, 200, 2), Some(64));
        assert_eq!(rows_per_part(300, 10, 2), Some(160));
        // 128 rows of 10 would become two small products of 64 rows.
        assert_eq!(rows_per_part(128, 10, 2), None);
        assert_eq!(rows_per_part(20, 256, 2), None);
        assert_eq!(rows_per_part(48, 40, 3), Some(16));
        // 33 rows on two threads, 65 on three, would leave a last part of one row.
        assert_eq!(rows_per_part(33, 200, 2), None);
        assert_eq!(rows_per_part(65, 65, 3), None);
    }
}
