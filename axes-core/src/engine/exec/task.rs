//! One task's walk over its part of the plan: the outer axes by odometer, the innermost in
//! chunks (tiled where an operand is read transposed), each chunk evaluated and written,
//! streamed or combined into the destination, reductions into lanes of accumulators.

use std::ops::Range;

use super::{ChunkEval, Combine, Dest, LANES};
use crate::element::Element;
use crate::engine::plan::Plan;
#[cfg(target_arch = "x86_64")]
use crate::engine::simd::{stream_copy, stream_copy_lines};
use crate::list::MAX_RANK;

/// Elements evaluated into a stack buffer before they are streamed to the destination.
#[cfg(target_arch = "x86_64")]
const STREAM_PIECE: usize = 64;

/// Rows of the second-innermost axis evaluated together when an operand is gathered with a
/// large stride on the innermost axis (a transposed operand): the cache lines and pages it
/// touches for one chunk are then reused by the next rows instead of being evicted.
pub const TILE_ROWS: usize = 128;

/// Tile width in tiled loops: a tile of [`TILE_ROWS`] by up to this many elements of the
/// innermost axis (its rows are then computed [`CHUNK`](crate::engine::CHUNK) elements at a time).
/// Wide tiles let the operands read in place, and the destination, run along whole rows
/// like a plain loop; only the transposed operand is read in short runs (tile shapes measured
/// on the transposed add `x[h,w] + y[w,h]`: `benches/NOTES.md`).
pub const TILE_WIDTH: usize = 4096;

/// Tiles narrower than this many elements ask for each row's next chunk ahead: the hardware
/// prefetcher does not follow such short rows (`benches/NOTES.md`, the transposed add); on
/// wider ones the requests only crowd the memory system's queues.
const PREFETCHED_ROWS_BELOW: usize = 1024;

/// Evaluates one chunk and writes or combines it into the destination starting at `first`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn write_chunk<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
    dest: Dest<T>,
    streaming: bool,
    sink: S,
    eval: &mut E,
    outer: &[usize],
    start: usize,
    n: usize,
    first: isize,
    ds: isize,
) {
    eval.load(outer, start, n);
    #[cfg(target_arch = "x86_64")]
    if ds == 1 && streaming {
        write_streaming(dest, eval, n, first);
        return;
    }
    if ds == 1 {
        for i in 0..n {
            // SAFETY: i < n loaded; first + i lies inside the destination buffer because the
            // destination layout fits it and start + i is below the inner length.
            unsafe {
                let p = dest.ptr.offset(first + i as isize);
                *p = sink.combine(*p, eval.at(i));
            }
        }
    } else {
        for i in 0..n {
            // SAFETY: as above, with the destination's stride.
            unsafe {
                let p = dest.ptr.offset(first + i as isize * ds);
                *p = sink.combine(*p, eval.at(i));
            }
        }
    }
}

/// Writes the loaded chunk of `n` results over the contiguous destination run at `first`
/// with streaming stores, [`STREAM_PIECE`] at a time through a stack buffer (the results of
/// a plain assignment overwrite the destination, so no combining is needed): a cache line a
/// store where AVX-512 allows, so that each line is written whole by one store.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn write_streaming<T: Element, E: ChunkEval<Out = T>>(
    dest: Dest<T>,
    eval: &E,
    n: usize,
    first: isize,
) {
    /// On a cache line, so that the copy's loads never straddle two.
    #[repr(align(64))]
    struct Piece<T>([T; STREAM_PIECE]);
    let mut piece = Piece([T::zero(); STREAM_PIECE]);
    // Whole lines a store where the CPU has AVX-512 (`std` caches the answer).
    let lines = std::arch::is_x86_feature_detected!("avx512f");
    let mut done = 0;
    while done < n {
        let m = STREAM_PIECE.min(n - done);
        for (i, slot) in piece.0[..m].iter_mut().enumerate() {
            // SAFETY: done + i < n, loaded by the caller.
            *slot = unsafe { eval.at(done + i) };
        }
        let to = dest.ptr.wrapping_offset(first + done as isize);
        if lines {
            // SAFETY: first + done .. first + done + m lies inside the destination buffer, as
            // every position of the chunk does (see `write_chunk`); the piece holds m
            // elements; AVX-512F is present (checked above).
            unsafe { stream_copy_lines(to, piece.0.as_ptr(), m) };
        } else {
            // SAFETY: as above, without AVX-512.
            unsafe { stream_copy(to, piece.0.as_ptr(), m) };
        }
        done += m;
    }
}

/// The pieces `(start, length)` that cover `range`, `len` long but the last.
#[inline(always)]
pub(super) fn pieces(range: Range<usize>, len: usize) -> impl Iterator<Item = (usize, usize)> {
    let end = range.end;
    range
        .step_by(len)
        .map(move |start| (start, len.min(end - start)))
}

/// Folds the whole inner range `lo..hi` into the one destination element at `at`, with
/// four groups of [`LANES`] accumulators carried across chunks (each group one vector
/// register at AVX-512, so that consecutive adds do not wait on each other: one register's
/// chain of adds held a 1,024-element sum to its latency).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_row<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
    dest: Dest<T>,
    sink: S,
    eval: &mut E,
    outer: &[usize],
    lo: usize,
    hi: usize,
    at: isize,
    chunk: usize,
) {
    // The four groups are separate arrays and take a piece of values evaluated first: in one
    // array of 64, or fed by `eval.at` directly, LLVM kept them on the stack or stopped
    // vectorising (benches/NOTES.md).
    let mut lanes = [sink.identity(); LANES];
    let (mut b, mut c, mut d) = (lanes, lanes, lanes);
    let mut tail = sink.identity();
    for (start, n) in pieces(lo..hi, chunk) {
        eval.load(outer, start, n);
        let groups_end = n / (4 * LANES) * (4 * LANES);
        for j in (0..groups_end).step_by(4 * LANES) {
            let mut piece = [sink.identity(); 4 * LANES];
            for (i, value) in piece.iter_mut().enumerate() {
                // SAFETY: j + i < groups_end <= n, loaded just above.
                *value = unsafe { eval.at(j + i) };
            }
            let (p0, rest) = piece.split_at(LANES);
            let (p1, rest) = rest.split_at(LANES);
            let (p2, p3) = rest.split_at(LANES);
            for l in 0..LANES {
                lanes[l] = sink.combine(lanes[l], p0[l]);
                b[l] = sink.combine(b[l], p1[l]);
                c[l] = sink.combine(c[l], p2[l]);
                d[l] = sink.combine(d[l], p3[l]);
            }
        }
        let full = n / LANES * LANES;
        for j in (groups_end..full).step_by(LANES) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                // SAFETY: j + l < full <= n, loaded just above.
                *lane = sink.combine(*lane, unsafe { eval.at(j + l) });
            }
        }
        for i in full..n {
            // SAFETY: i < n.
            tail = sink.combine(tail, unsafe { eval.at(i) });
        }
    }
    for group in [b, c, d] {
        for (lane, value) in lanes.iter_mut().zip(group) {
            *lane = sink.combine(*lane, value);
        }
    }
    let total = sink.combine(tail, fold_lanes(sink, lanes));
    // SAFETY: `at` is a destination position inside its buffer (plan invariant).
    unsafe {
        let p = dest.ptr.offset(at);
        *p = sink.combine(*p, total);
    }
}

/// Combines the [`LANES`] accumulators of a reduction pairwise (lane `l` with `l + 8`, then
/// `+ 4`, …): four steps of vector adds instead of a chain of sixteen scalar ones. Not
/// inlined: where LLVM saw the lanes folded as a tree, it vectorised the loop that fills
/// them two lanes wide instead of sixteen.
#[inline(never)]
fn fold_lanes<T: Element, S: Combine<T>>(sink: S, mut lanes: [T; LANES]) -> T {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            lanes[l] = sink.combine(lanes[l], lanes[l + width]);
        }
        width /= 2;
    }
    lanes[0]
}

#[inline(always)]
pub(super) fn run_task_body<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
    plan: &Plan,
    dest: Dest<T>,
    streaming: bool,
    sink: S,
    eval: &mut E,
    lo: usize,
    hi: usize,
) {
    let rank = plan.rank;
    let d = &plan.access[0];
    if rank == 0 {
        eval.load(&[], 0, 1);
        // SAFETY: one element loaded; the destination offset is in its buffer (plan
        // invariant: every destination layout fits its buffer).
        unsafe {
            let p = dest.ptr.offset(d.offset);
            *p = sink.combine(*p, eval.at(0));
        }
        return;
    }
    let inner = rank - 1;
    let ds = d.strides[inner];
    let reduce_inner = S::REDUCES && ds == 0;
    // Tile when an operand reads the innermost axis with a large stride.
    let tiled = rank >= 2
        && !reduce_inner
        && plan.access[1..]
            .iter()
            .any(|op| op.strides[inner].unsigned_abs() > 1);
    // The axes walked by the odometer: all but the innermost (and, when tiled, the
    // second-innermost, which is walked in blocks). The task's range applies to axis 0.
    let walked = if tiled { inner - 1 } else { inner };
    let range = |axis: usize| {
        if axis == 0 {
            (lo, hi)
        } else {
            (0, plan.lens[axis])
        }
    };
    let mut index = [0usize; MAX_RANK];
    index[0] = lo;
    let outer_count: usize = (0..walked).map(|a| range(a).1 - range(a).0).product();
    let position = |index: &[usize]| {
        d.offset
            + (0..inner)
                .map(|a| index[a] as isize * d.strides[a])
                .sum::<isize>()
    };
    // Evaluates the chunk `start..start + n` at `outer` into the destination from `first`.
    let write = |eval: &mut E, outer: &[usize], start: usize, n: usize, first: isize| {
        write_chunk(dest, streaming, sink, eval, outer, start, n, first, ds)
    };
    for _ in 0..outer_count {
        let (inner_lo, inner_hi) = range(inner);
        if tiled {
            let mid = inner - 1;
            let (mid_lo, mid_hi) = range(mid);
            for (block, rows) in pieces(mid_lo..mid_hi, TILE_ROWS) {
                let block_end = block + rows;
                for (tile_start, width) in pieces(inner_lo..inner_hi, TILE_WIDTH) {
                    eval.prepare_tile(&index[..mid], block..block_end, tile_start, width);
                    let short_rows = width < PREFETCHED_ROWS_BELOW;
                    for m in block..block_end {
                        index[mid] = m;
                        let row = position(&index);
                        for (start, n) in pieces(tile_start..tile_start + width, plan.chunk) {
                            // The next row's chunk, while this one is computed, where the
                            // tile's rows are too short for the hardware prefetcher.
                            if short_rows && m + 1 < block_end {
                                index[mid] = m + 1;
                                eval.prefetch(&index[..inner], start, n);
                                index[mid] = m;
                            }
                            write(eval, &index[..inner], start, n, row + start as isize * ds);
                        }
                    }
                }
            }
        } else if reduce_inner {
            reduce_row(
                dest,
                sink,
                eval,
                &index[..inner],
                inner_lo,
                inner_hi,
                position(&index),
                plan.chunk,
            );
        } else {
            let base = position(&index);
            for (start, n) in pieces(inner_lo..inner_hi, plan.chunk) {
                write(eval, &index[..inner], start, n, base + start as isize * ds);
            }
        }
        // Odometer over the walked axes.
        for a in (0..walked).rev() {
            index[a] += 1;
            if index[a] < range(a).1 || a == 0 {
                break;
            }
            index[a] = range(a).0;
        }
    }
}
