//! The executor: runs a [`Plan`] with a monomorphised chunk evaluator.
//!
//! Each task walks the outer axes with an odometer and evaluates the innermost axis in
//! chunks (see [`Plan::chunk`]): the expression's evaluator loads each leaf's chunk (a
//! pointer into the tensor when contiguous, else gathered into a buffer of the evaluator),
//! then one loop computes every element of the chunk and writes or combines it into the
//! destination (large plain assignments with streaming stores, see [`STREAM_MIN_BYTES`]).
//! The loop body is the whole expression inlined, so it vectorises; the task body is compiled
//! three times (baseline x86-64, AVX2+FMA, AVX-512) and the best one the CPU supports is
//! picked at run time.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use super::cost;
use super::plan::{LONG_CHUNK, Plan};
#[cfg(target_arch = "x86_64")]
use super::simd::{stream_copy, stream_copy_lines};
use super::threads;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::ir::{OpWeights, ReduceFn, ReduceOp};
use crate::list::MAX_RANK;
use crate::num::take_division_by_zero;

/// Fixed work split of reductions over the outermost axis: blocks of at least this many
/// iterations, at most [`MAX_BLOCKS`] of them, whatever the thread count.
const BLOCK_MIN_ELEMENTS: usize = 1 << 16;
const MAX_BLOCKS: usize = 64;

/// Accumulators kept per reduction: sums over long axes stay accurate and vectorise.
const LANES: usize = 16;

/// Assignments whose destination spans at least this many bytes write it with streaming
/// (non-temporal) stores on x86-64: a result this large leaves the caches before anything
/// reads it again, and streaming stores skip reading each destination line before
/// overwriting it, a quarter of the memory traffic of `a*x + b*y` (the streaming triad of
/// the `fused` benchmark is the peer: `benches/NOTES.md`).
pub const STREAM_MIN_BYTES: usize = 16 << 20;

/// Elements evaluated into a stack buffer before they are streamed to the destination.
#[cfg(target_arch = "x86_64")]
const STREAM_PIECE: usize = 64;

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
    /// axis, so the following `load`s of chunks within the tile read from the buffer.
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
    /// Asks the memory system for the chunk a later `load(outer, start, n)` will read: a hint
    /// for tiled loops, whose short rows are too brief for the hardware prefetcher to follow.
    #[inline(always)]
    fn prefetch(&self, outer: &[usize], start: usize, n: usize) {
        let _ = (outer, start, n);
    }
    /// Element `i` of the chunk loaded last.
    ///
    /// # Safety
    /// `i` is below the `n` of the last `load`, and `self` has not moved since.
    unsafe fn at(&self, i: usize) -> Self::Out;
}

/// How results reach the destination.
pub trait Combine<T: Element>: Copy + Send + Sync {
    /// Value the destination starts from in a reduction (unused for assignment).
    fn identity(self) -> T;
    /// Combines two partial results.
    fn combine(self, a: T, b: T) -> T;
    /// Whether results combine into the destination rather than overwrite it.
    const REDUCES: bool;
    /// Whether combining rounds (a sum or a product, not a maximum or minimum): f16 and bf16
    /// then combine in f32 (`dispatch::widened`), as a long half-precision sum stalls.
    const ROUNDS: bool;
    /// How a device combines results (`None`: they overwrite).
    fn reduce_op(self) -> Option<ReduceOp>;
}

/// Writes each result over the destination element.
#[derive(Clone, Copy)]
pub struct Assign;

impl<T: Element> Combine<T> for Assign {
    fn identity(self) -> T {
        T::zero()
    }
    #[inline(always)]
    fn combine(self, _: T, b: T) -> T {
        b
    }
    const REDUCES: bool = false;
    const ROUNDS: bool = false;
    fn reduce_op(self) -> Option<ReduceOp> {
        None
    }
}

/// Combines results into the destination with a reduction operator.
#[derive(Clone, Copy)]
pub struct Reduce<Op>(pub Op);

impl<T: Element, Op: ReduceFn<T>> Combine<T> for Reduce<Op> {
    fn identity(self) -> T {
        Op::identity()
    }
    #[inline(always)]
    fn combine(self, a: T, b: T) -> T {
        Op::combine(a, b)
    }
    const REDUCES: bool = true;
    const ROUNDS: bool = matches!(Op::OP, ReduceOp::Sum | ReduceOp::Prod);
    fn reduce_op(self) -> Option<ReduceOp> {
        Some(Op::OP)
    }
}

/// The destination buffer, shared by tasks that write disjoint elements.
///
/// Whether it is written with streaming stores travels beside it as a separate argument:
/// `Dest` stays two words, because a third field passes it through memory and the write
/// loop stops vectorising (`benches/NOTES.md` has the figures).
#[derive(Clone, Copy)]
struct Dest<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: tasks given the same `Dest` write disjoint sets of elements (they cover disjoint
// ranges of an axis along which the destination has a nonzero stride, on a destination
// layout that is injective), so sharing the pointer across threads is race-free.
unsafe impl<T: Send> Send for Dest<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Dest<T> {}

/// Runs `plan`, writing or combining every result into `dest` (the destination buffer,
/// laid out by the plan's operand 0). `make_eval` makes one evaluator per task; `ops` are
/// the element-wise ops it computes per element (what a thread split is weighed by,
/// [`cost`]).
///
/// The destination's layout must be injective (no two indices at one position) when the
/// plan has more than one iteration per destination element only along axes where the
/// destination has stride 0.
///
/// An integer division by zero is [`Error::DivisionByZero`], with `dest` partly written.
pub fn run<T, E, S>(
    plan: &Plan,
    dest: &mut [T],
    sink: S,
    make_eval: &(dyn Fn() -> E + Sync),
    ops: OpWeights,
) -> Result<()>
where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Combine<T>,
{
    let divided = AtomicBool::new(false);
    let task = |dest: Dest<T>, streaming: bool, lo: usize, hi: usize| {
        run_task(plan, dest, streaming, sink, make_eval, lo, hi, &divided)
    };
    run_tasks(plan, dest, sink, &task, ops);
    if divided.load(Ordering::Relaxed) {
        return Err(Error::DivisionByZero);
    }
    Ok(())
}

/// One task of [`run_tasks`]: the positions `lo..hi` of the outermost axis into a
/// destination, with streaming stores or not.
type Task<'a, T> = dyn Fn(Dest<T>, bool, usize, usize) + Sync + 'a;

/// Splits `plan` into tasks and runs them, on the pool where it pays. Not generic over the
/// expression (`task` is): the scheduling code is compiled once per element type and sink,
/// not once per expression.
fn run_tasks<T: Element, S: Combine<T>>(
    plan: &Plan,
    dest: &mut [T],
    sink: S,
    task: &Task<'_, T>,
    ops: OpWeights,
) {
    if plan.count == 0 {
        return;
    }
    let d = Dest {
        ptr: dest.as_mut_ptr(),
        len: dest.len(),
    };
    let streaming = streams::<T, S>(plan);
    let parallel = split_pays::<T>(plan.count, plan.streams, ops);
    let outer_kept = plan.rank == 0 || plan.access[0].strides[0] != 0;
    if outer_kept {
        let len0 = if plan.rank == 0 { 1 } else { plan.lens[0] };
        if !parallel || len0 < 2 {
            task(d, streaming, 0, len0);
            return;
        }
        threads::install(|| {
            let tasks = (threads::threads() * 4).min(len0);
            rayon::scope(|scope| {
                for t in 0..tasks {
                    let (lo, hi) = (len0 * t / tasks, len0 * (t + 1) / tasks);
                    scope.spawn(move |_| task(d, streaming, lo, hi));
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
        task(d, streaming, 0, len0);
        return;
    }
    let mut partials = vec![sink.identity(); blocks * d.len];
    let partial_dests: Vec<Dest<T>> = partials
        .chunks_mut(d.len)
        .map(|p| Dest {
            ptr: p.as_mut_ptr(),
            len: p.len(),
        })
        .collect();
    let block = |b: usize| {
        task(
            partial_dests[b],
            false,
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
    for partial in partials.chunks(d.len) {
        for (out, &p) in dest.iter_mut().zip(partial) {
            *out = sink.combine(*out, p);
        }
    }
}

/// Whether `count` iterations over `streams` moving operands run sooner split across the
/// pool: their work (the bytes they stream, the ops they compute) weighed against a hand-off
/// ([`cost::COMPILED`]).
fn split_pays<T>(count: usize, streams: usize, ops: OpWeights) -> bool {
    // No expression this small is worth a hand-off; checked first, so small calls skip the
    // rest (the thread count, behind a lock, last).
    const FLOOR: usize = 1 << 12;
    if count < FLOOR {
        return false;
    }
    let work = cost::element_wise_ns(count, streams * std::mem::size_of::<T>(), ops);
    cost::COMPILED.pays(work) && threads::threads() > 1
}

/// Where the results of a flat evaluation go (see [`Plan::flat`]).
#[derive(Clone, Copy, Debug)]
pub enum FlatTarget {
    /// All of them combined into the destination's first element.
    IntoOne,
    /// Result `i` to the destination's element `offset + i`.
    Along {
        /// The destination's position of result 0.
        offset: usize,
    },
}

impl FlatTarget {
    /// Whether [`run`] would run a flat evaluation of `count` iterations over `leaves`
    /// leaves as one task on the calling thread, so that [`run_flat`] gives the same
    /// results: a reduction below two of its fixed blocks, an assignment whose work does
    /// not pay for a split.
    pub fn runs_alone<T>(self, count: usize, leaves: usize, ops: OpWeights) -> bool {
        match self {
            FlatTarget::IntoOne => count < 2 * BLOCK_MIN_ELEMENTS,
            FlatTarget::Along { .. } => !split_pays::<T>(count, leaves + 1, ops),
        }
    }
}

/// Runs a flat evaluation of `count` iterations (every leaf dense, read along one axis from
/// its own offset: [`Plan::flat_count`]) on this thread into `dest` — what [`run`] does for
/// such a plan when it [runs alone](FlatTarget::runs_alone), without a plan's set-up: a small
/// call's fixed cost.
///
/// An integer division by zero is [`Error::DivisionByZero`], with `dest` partly written.
///
/// # Panics
/// If `dest` is too short for `to` (a bug in the caller).
pub fn run_flat<T, E, S>(
    dest: &mut [T],
    to: FlatTarget,
    count: usize,
    sink: S,
    eval: &mut E,
) -> Result<()>
where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Combine<T>,
{
    let needed = match to {
        FlatTarget::IntoOne => 1,
        FlatTarget::Along { offset } => offset.saturating_add(count),
    };
    assert!(
        needed <= dest.len(),
        "a flat destination holds every result"
    );
    let dest = Dest {
        ptr: dest.as_mut_ptr(),
        len: dest.len(),
    };
    let size = std::mem::size_of::<T>();
    let streaming = cfg!(target_arch = "x86_64")
        && !S::REDUCES
        && matches!(to, FlatTarget::Along { .. })
        && size > 0
        && 16 % size == 0
        && count.saturating_mul(size) >= STREAM_MIN_BYTES;
    take_division_by_zero();
    on_widest_simd(
        #[inline(always)]
        || match to {
            FlatTarget::IntoOne => reduce_row(dest, sink, eval, &[], 0, count, 0, LONG_CHUNK),
            FlatTarget::Along { offset } => {
                for (start, n) in pieces(0..count, LONG_CHUNK) {
                    let first = (offset + start) as isize;
                    write_chunk(dest, streaming, sink, eval, &[], start, n, first, 1);
                }
            }
        },
    );
    #[cfg(target_arch = "x86_64")]
    if streaming {
        // SAFETY: SSE is part of x86-64. The fence orders the streaming stores before
        // whatever the thread does next.
        unsafe { std::arch::x86_64::_mm_sfence() };
    }
    if take_division_by_zero() {
        return Err(Error::DivisionByZero);
    }
    Ok(())
}

/// Runs `body` compiled for the widest vector instructions this CPU has (AVX-512, AVX2 with
/// FMA, else baseline x86-64): `body` is inlined into a function compiled for each.
#[inline(always)]
pub(crate) fn on_widest_simd<F: FnOnce()>(body: F) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            unsafe { with_avx512(body) };
        } else if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            unsafe { with_avx2(body) };
        } else {
            body();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    body();
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
fn with_avx512<F: FnOnce()>(body: F) {
    body();
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn with_avx2<F: FnOnce()>(body: F) {
    body();
}

/// Whether `plan`'s destination is written with streaming stores: a plain assignment (no
/// combining), contiguous along the innermost axis, of at least [`STREAM_MIN_BYTES`], with
/// elements that tile 16-byte stores.
fn streams<T: Element, S: Combine<T>>(plan: &Plan) -> bool {
    let size = std::mem::size_of::<T>();
    cfg!(target_arch = "x86_64")
        && !S::REDUCES
        && plan.rank > 0
        && plan.access[0].strides[plan.rank - 1] == 1
        && size > 0
        && 16 % size == 0
        && plan.count.saturating_mul(size) >= STREAM_MIN_BYTES
}

/// Runs the positions `lo..hi` of the outermost axis, picking the widest SIMD the CPU has.
#[allow(clippy::too_many_arguments)]
fn run_task<T, E, S>(
    plan: &Plan,
    dest: Dest<T>,
    streaming: bool,
    sink: S,
    make_eval: &(dyn Fn() -> E + Sync),
    lo: usize,
    hi: usize,
    divided: &AtomicBool,
) where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Combine<T>,
{
    take_division_by_zero();
    run_task_on_cpu(plan, dest, streaming, sink, make_eval, lo, hi);
    if take_division_by_zero() {
        divided.store(true, Ordering::Relaxed);
    }
}

/// [`run_task`] with the widest vector instructions this CPU has.
fn run_task_on_cpu<T, E, S>(
    plan: &Plan,
    dest: Dest<T>,
    streaming: bool,
    sink: S,
    make_eval: &(dyn Fn() -> E + Sync),
    lo: usize,
    hi: usize,
) where
    T: Element,
    E: ChunkEval<Out = T>,
    S: Combine<T>,
{
    let mut eval = make_eval();
    on_widest_simd(
        #[inline(always)]
        || run_task_body(plan, dest, streaming, sink, &mut eval, lo, hi),
    );
    #[cfg(target_arch = "x86_64")]
    if streaming {
        // SAFETY: SSE is part of x86-64. The fence orders this task's streaming stores
        // before whatever the thread does next (signalling the task done included).
        unsafe { std::arch::x86_64::_mm_sfence() };
    }
}

/// Rows of the second-innermost axis evaluated together when an operand is gathered with a
/// large stride on the innermost axis (a transposed operand): the cache lines and pages it
/// touches for one chunk are then reused by the next rows instead of being evicted.
pub const TILE_ROWS: usize = 128;

/// Tile width in tiled loops: a tile of [`TILE_ROWS`] by up to this many elements of the
/// innermost axis (its rows are then computed [`CHUNK`](super::CHUNK) elements at a time).
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
fn write_chunk<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
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
fn pieces(range: Range<usize>, len: usize) -> impl Iterator<Item = (usize, usize)> {
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
fn reduce_row<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
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
fn run_task_body<T: Element, E: ChunkEval<Out = T>, S: Combine<T>>(
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

#[cfg(test)]
mod tests;
