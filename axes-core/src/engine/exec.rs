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

use std::sync::atomic::{AtomicBool, Ordering};

use super::cost;
use super::plan::{LONG_CHUNK, Plan};
use super::threads;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::ir::{OpWeights, ReduceFn, ReduceOp};
use crate::num::take_division_by_zero;
pub use task::{TILE_ROWS, TILE_WIDTH};
use task::{pieces, reduce_row, run_task_body, write_chunk};

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

mod task;
#[cfg(test)]
mod tests;
