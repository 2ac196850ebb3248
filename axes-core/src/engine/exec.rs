//! The executor: runs a [`Plan`] with a monomorphised chunk evaluator.
//!
//! Each task walks the outer axes with an odometer and evaluates the innermost axis in
//! chunks (see [`Plan::chunk`]): the expression's evaluator loads each leaf's chunk (a
//! pointer into the tensor when contiguous, else gathered into a stack buffer), then one
//! loop computes every element of the chunk and writes or combines it into the destination.
//! The loop body is the whole expression inlined, so it vectorises; the task body is compiled
//! three times (baseline x86-64, AVX2+FMA, AVX-512) and the best one the CPU supports is
//! picked at run time.

use super::plan::Plan;
use super::threads;
use crate::element::Element;
use crate::list::MAX_RANK;

/// Below this many iterations an evaluation runs on the calling thread (handing work to the
/// pool costs about 12 µs here; a 4096-element fused op takes about 1 µs).
pub const PARALLEL_MIN_ELEMENTS: usize = 1 << 17;

/// Fixed work split of reductions over the outermost axis: blocks of at least this many
/// iterations, at most [`MAX_BLOCKS`] of them, whatever the thread count.
const BLOCK_MIN_ELEMENTS: usize = 1 << 16;
const MAX_BLOCKS: usize = 64;

/// Accumulators kept per reduction: sums over long axes stay accurate and vectorise.
const LANES: usize = 16;

/// A per-thread evaluator of an expression over the chunks of a plan.
///
/// # Safety
/// Implementations must make `at(i)` valid for every `i < n` after `load(.., n)`.
pub unsafe trait ChunkEval {
    /// The element type produced.
    type Out: Element;
    /// Prepares the chunk of `n` elements starting at `start` on the innermost axis, at
    /// `outer` on the other axes.
    fn load(&mut self, outer: &[usize], start: usize, n: usize);
    /// Prepares a tile: the rows `rows` of the second-innermost axis (at `outer` on the axes
    /// before it), positions `start..start + n` of the innermost one. Leaves that read the
    /// innermost axis with a large stride but the second-innermost one contiguously (a
    /// transposed operand) copy the tile into a local buffer reading along their contiguous
    /// axis, so the following `load`s of these rows read from the buffer.
    #[inline(always)]
    fn prepare_tile(
        &mut self,
        outer: &[usize],
        rows: std::ops::Range<usize>,
        start: usize,
        n: usize,
    ) {
        let _ = (outer, rows, start, n);
    }
    /// Element `i` of the chunk loaded last.
    ///
    /// # Safety
    /// `i` is below the `n` of the last `load`, and `self` has not moved since.
    unsafe fn at(&self, i: usize) -> Self::Out;
}

/// How results reach the destination.
pub trait Sink<T: Element>: Copy + Send + Sync {
    /// Value the destination starts from in a reduction (unused for assignment).
    fn identity(self) -> T;
    /// Combines two partial results.
    fn combine(self, a: T, b: T) -> T;
    /// Whether results combine into the destination rather than overwrite it.
    const REDUCES: bool;
    /// How a device combines results (`None`: they overwrite).
    fn device_kind(self) -> Option<crate::device::ReduceKind>;
}

/// Writes each result over the destination element.
#[derive(Clone, Copy)]
pub struct Assign;

impl<T: Element> Sink<T> for Assign {
    fn identity(self) -> T {
        T::zero()
    }
    #[inline(always)]
    fn combine(self, _: T, b: T) -> T {
        b
    }
    const REDUCES: bool = false;
    fn device_kind(self) -> Option<crate::device::ReduceKind> {
        None
    }
}

/// An associative reduction operator with an identity, as a zero-sized type so the
/// reduction loop inlines it.
pub trait ReduceOp<T>: Copy + Send + Sync {
    /// The identity (`combine(identity, x) == x`).
    fn identity() -> T;
    /// Combines two partial results.
    fn combine(a: T, b: T) -> T;
    /// The same operator on a device.
    const KIND: crate::device::ReduceKind;
}

/// Combines results into the destination with a reduction operator.
#[derive(Clone, Copy)]
pub struct Reduce<Op>(pub Op);

impl<T: Element, Op: ReduceOp<T>> Sink<T> for Reduce<Op> {
    fn identity(self) -> T {
        Op::identity()
    }
    #[inline(always)]
    fn combine(self, a: T, b: T) -> T {
        Op::combine(a, b)
    }
    const REDUCES: bool = true;
    fn device_kind(self) -> Option<crate::device::ReduceKind> {
        Some(Op::KIND)
    }
}

/// The destination buffer, shared by tasks that write disjoint elements.
#[derive(Clone, Copy)]
struct Dest<T>(*mut T, usize);

// SAFETY: tasks given the same `Dest` write disjoint sets of elements (they cover disjoint
// ranges of an axis along which the destination has a nonzero stride, on a destination
// layout that is injective), so sharing the pointer across threads is race-free.
unsafe impl<T: Send> Send for Dest<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Dest<T> {}

/// Runs `plan`, writing or combining every result into `dest` (the destination buffer,
/// laid out by the plan's operand 0). `make_eval` makes one evaluator per task.
///
/// The destination's layout must be injective (no two indices at one position) when the
/// plan has more than one iteration per destination element only along axes where the
/// destination has stride 0.
pub fn run<T, E, S>(plan: &Plan, dest: &mut [T], sink: S, make_eval: &(dyn Fn() -> E + Sync))
where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Sink<T>,
{
    if plan.count == 0 {
        return;
    }
    let d = Dest(dest.as_mut_ptr(), dest.len());
    let parallel = plan.count >= PARALLEL_MIN_ELEMENTS && threads::threads() > 1;
    let outer_kept = plan.rank == 0 || plan.access[0].strides[0] != 0;
    if outer_kept {
        let len0 = if plan.rank == 0 { 1 } else { plan.lens[0] };
        if !parallel || len0 < 2 {
            run_task(plan, d, sink, make_eval, 0, len0);
            return;
        }
        threads::install(|| {
            let tasks = (threads::threads() * 4).min(len0);
            rayon::scope(|scope| {
                for t in 0..tasks {
                    let (lo, hi) = (len0 * t / tasks, len0 * (t + 1) / tasks);
                    scope.spawn(move |_| run_task(plan, d, sink, make_eval, lo, hi));
                }
            });
        });
        return;
    }
    // The outermost axis is reduced: fixed blocks, each into its own partial destination,
    // combined in block order (the same bits for every thread count).
    let len0 = plan.lens[0];
    let blocks = (plan.count / BLOCK_MIN_ELEMENTS)
        .clamp(1, MAX_BLOCKS)
        .min(len0);
    if blocks == 1 {
        run_task(plan, d, sink, make_eval, 0, len0);
        return;
    }
    let mut partials = vec![sink.identity(); blocks * d.1];
    let partial_dests: Vec<Dest<T>> = partials
        .chunks_mut(d.1)
        .map(|p| Dest(p.as_mut_ptr(), p.len()))
        .collect();
    let block = |b: usize| {
        run_task(
            plan,
            partial_dests[b],
            sink,
            make_eval,
            len0 * b / blocks,
            len0 * (b + 1) / blocks,
        )
    };
    if parallel {
        threads::install(|| {
            rayon::scope(|scope| {
                for b in 0..blocks {
                    let block = &block;
                    scope.spawn(move |_| block(b));
                }
            })
        });
    } else {
        (0..blocks).for_each(block);
    }
    for partial in partials.chunks(d.1) {
        for (out, &p) in dest.iter_mut().zip(partial) {
            *out = sink.combine(*out, p);
        }
    }
}

/// Runs the positions `lo..hi` of the outermost axis, picking the widest SIMD the CPU has.
fn run_task<T, E, S>(
    plan: &Plan,
    dest: Dest<T>,
    sink: S,
    make_eval: &(dyn Fn() -> E + Sync),
    lo: usize,
    hi: usize,
) where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Sink<T>,
{
    let mut eval = make_eval();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            unsafe { run_task_avx512(plan, dest, sink, &mut eval, lo, hi) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            unsafe { run_task_avx2(plan, dest, sink, &mut eval, lo, hi) };
            return;
        }
    }
    run_task_body(plan, dest, sink, &mut eval, lo, hi);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
fn run_task_avx512<T: Element, E: ChunkEval<Out = T>, S: Sink<T>>(
    plan: &Plan,
    dest: Dest<T>,
    sink: S,
    eval: &mut E,
    lo: usize,
    hi: usize,
) {
    run_task_body(plan, dest, sink, eval, lo, hi);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_task_avx2<T: Element, E: ChunkEval<Out = T>, S: Sink<T>>(
    plan: &Plan,
    dest: Dest<T>,
    sink: S,
    eval: &mut E,
    lo: usize,
    hi: usize,
) {
    run_task_body(plan, dest, sink, eval, lo, hi);
}

/// Rows of the second-innermost axis evaluated together when an operand is gathered with a
/// large stride on the innermost axis (a transposed operand): the cache lines and pages it
/// touches for one chunk are then reused by the next rows instead of being evicted.
pub const TILE_ROWS: usize = 64;

/// Chunk length in tiled loops: a tile of [`TILE_ROWS`] by this many elements. Measured on
/// `x[h,w] + y[w,h]` at 4096² (W3): 256 ran at 0.29–0.37 of the triad bandwidth, 64 at
/// 0.21–0.26 (fewer, longer chunks amortise the per-chunk work; the tile stays in L2).
pub const TILE_CHUNK: usize = 256;

/// Evaluates one chunk and writes or combines it into the destination starting at `first`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn write_chunk<T: Element, E: ChunkEval<Out = T>, S: Sink<T>>(
    dest: Dest<T>,
    sink: S,
    eval: &mut E,
    outer: &[usize],
    start: usize,
    n: usize,
    first: isize,
    ds: isize,
) {
    eval.load(outer, start, n);
    if ds == 1 {
        for i in 0..n {
            // SAFETY: i < n loaded; first + i lies inside the destination buffer because the
            // destination layout fits it and start + i is below the inner length.
            unsafe {
                let p = dest.0.offset(first + i as isize);
                *p = sink.combine(*p, eval.at(i));
            }
        }
    } else {
        for i in 0..n {
            // SAFETY: as above, with the destination's stride.
            unsafe {
                let p = dest.0.offset(first + i as isize * ds);
                *p = sink.combine(*p, eval.at(i));
            }
        }
    }
}

/// Folds the whole inner range `lo..hi` into the one destination element at `at`, with
/// [`LANES`] accumulators carried across chunks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn reduce_row<T: Element, E: ChunkEval<Out = T>, S: Sink<T>>(
    dest: Dest<T>,
    sink: S,
    eval: &mut E,
    outer: &[usize],
    lo: usize,
    hi: usize,
    at: isize,
    chunk: usize,
) {
    let mut lanes = [sink.identity(); LANES];
    let mut tail = sink.identity();
    let mut start = lo;
    while start < hi {
        let n = chunk.min(hi - start);
        eval.load(outer, start, n);
        let full = n / LANES * LANES;
        for j in (0..full).step_by(LANES) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                // SAFETY: j + l < full <= n, loaded just above.
                *lane = sink.combine(*lane, unsafe { eval.at(j + l) });
            }
        }
        for i in full..n {
            // SAFETY: i < n.
            tail = sink.combine(tail, unsafe { eval.at(i) });
        }
        start += n;
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] = sink.combine(lanes[l], lanes[l + width]);
        }
    }
    let total = sink.combine(lanes[0], tail);
    // SAFETY: `at` is a destination position inside its buffer (plan invariant).
    unsafe {
        let p = dest.0.offset(at);
        *p = sink.combine(*p, total);
    }
}

#[inline(always)]
fn run_task_body<T: Element, E: ChunkEval<Out = T>, S: Sink<T>>(
    plan: &Plan,
    dest: Dest<T>,
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
            let p = dest.0.offset(d.offset);
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
        && (1..plan.operands).any(|op| plan.access[op].strides[inner].unsigned_abs() > 1);
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
    for _ in 0..outer_count {
        let (inner_lo, inner_hi) = range(inner);
        if tiled {
            let mid = inner - 1;
            let (mid_lo, mid_hi) = range(mid);
            let mut block = mid_lo;
            while block < mid_hi {
                let block_end = (block + TILE_ROWS).min(mid_hi);
                let mut start = inner_lo;
                while start < inner_hi {
                    let n = TILE_CHUNK.min(plan.chunk).min(inner_hi - start);
                    eval.prepare_tile(&index[..mid], block..block_end, start, n);
                    for m in block..block_end {
                        index[mid] = m;
                        let first = position(&index) + start as isize * ds;
                        write_chunk(dest, sink, eval, &index[..inner], start, n, first, ds);
                    }
                    start += n;
                }
                block = block_end;
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
            let mut start = inner_lo;
            while start < inner_hi {
                let n = plan.chunk.min(inner_hi - start);
                write_chunk(
                    dest,
                    sink,
                    eval,
                    &index[..inner],
                    start,
                    n,
                    base + start as isize * ds,
                    ds,
                );
                start += n;
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
