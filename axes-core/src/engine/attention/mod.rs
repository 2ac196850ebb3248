//! Fused attention on the CPU: `softmax(scale · q·kᵀ + mask) · v` for every batch entry,
//! without writing the query × key probabilities anywhere.
//!
//! The scheme is FlashAttention-2's. Queries go in blocks of [`BLOCK`] rows; keys and values
//! stream through in blocks of [`BLOCK`] positions, and each block's products (scores,
//! probabilities times values, and the backward's five) run on `gemm`, reading f32 and f64
//! operands in place (rows of `width` contiguous elements at any step; the scale applied by
//! the products and to the gradients as they are written) and the half types from a copy in
//! `T::Wide` made once per call. An online softmax keeps each query's running maximum and
//! sum, rescaling its output row when the maximum grows. Only each query's log-sum-exp is
//! kept for the backward pass, which first takes `D = rowsum(dO ∘ O)`, then recomputes the
//! probabilities block by block from the log-sum-exp: with many batch entries, a task per
//! entry writes all three gradients in one pass over its key blocks; with few, one pass over
//! key blocks writes the key and value gradients and another over query blocks the query
//! gradients. Either way every element of every result is summed by one task in one order (no
//! float atomics, the same bits on any thread count). Under a causal mask (query `i` sees keys
//! `0..=i`), key blocks wholly after a query block are skipped in every pass, and within a
//! block no `exp` is taken of a hidden score.
//!
//! Elements are computed in `T::Wide` (f32 for the half types). A query that sees no key (a
//! fully masked row) gets a zero output and passes no gradient.

mod rows;

use rayon::prelude::*;

use super::{cost, exec, threads};
use crate::element::Element;
use crate::error::Result;
use crate::num::{Float, Num};
use crate::protocol::AttentionShape;
use rows::Operand;
pub(crate) use rows::RowMajorRows;
pub use rows::{MaskRows, Rows, RowsOut};

/// Rows per query block and positions per key block.
pub const BLOCK: usize = 64;

/// From this many batch entries, the backward pass runs a task per entry (one pass, the
/// probabilities recomputed once); with fewer, a task per key block and then one per query
/// block, so that a few long sequences still fill the threads. Chosen by the shape alone, so
/// the bits never depend on the thread count.
const ONE_PASS_MIN_BATCH: usize = 8;

impl AttentionShape {
    /// The keys of the key block that starts at `key0` that queries `q0..q1` may see: the
    /// block's end, cut where the causal mask hides the rest (`None`: none of them).
    fn visible_keys(&self, q1: usize, key0: usize) -> Option<usize> {
        let end = (key0 + BLOCK).min(self.keys);
        if !self.causal {
            return Some(end);
        }
        (key0 < q1).then(|| end.min(q1))
    }

    /// The queries of query block `block`.
    fn query_block(&self, block: usize) -> (usize, usize) {
        let q0 = block * BLOCK;
        (q0, (q0 + BLOCK).min(self.queries))
    }

    /// Multiply-adds of one pass (each score, and each product with a value).
    fn macs(&self) -> usize {
        let pairs = self.queries * self.keys;
        let pairs = if self.causal { pairs / 2 } else { pairs };
        self.batch * pairs * (self.width + self.value_width)
    }

    /// Runs `task(b, block)` for every batch entry and block of `positions` positions, on the
    /// pool where the work pays for it.
    fn for_each_block(&self, positions: usize, passes: usize, task: impl Fn(usize, usize) + Sync) {
        let blocks = positions.div_ceil(BLOCK);
        let tasks = self.batch * blocks;
        let run = |t: usize| {
            exec::on_widest_simd(
                #[inline(always)]
                || task(t / blocks, t % blocks),
            )
        };
        if tasks > 1 && cost::PRODUCTS.pays(cost::products_ns(self.macs() * passes)) {
            threads::install(|| (0..tasks).into_par_iter().for_each(run));
        } else {
            (0..tasks).for_each(run);
        }
    }
}

/// A matrix of `rows × cols` elements of `data`, element (i, j) at `i·row + j·col`.
#[derive(Clone, Copy)]
struct Block<'a, W> {
    data: &'a [W],
    rows: usize,
    cols: usize,
    row: usize,
    col: usize,
}

impl<'a, W> Block<'a, W> {
    /// Rows of `cols` elements `stride` apart.
    fn rows(data: &'a [W], rows: usize, cols: usize, stride: usize) -> Self {
        Block {
            data,
            rows,
            cols,
            row: stride,
            col: 1,
        }
    }

    /// The transpose.
    fn t(self) -> Self {
        Block {
            rows: self.cols,
            cols: self.rows,
            row: self.col,
            col: self.row,
            ..self
        }
    }

    /// Whether every element lies inside `len` elements.
    fn inside(rows: usize, cols: usize, row: usize, col: usize, len: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * row + (cols - 1) * col < len
    }
}

/// `dst (rows of dst_row) = [dst +] scale · lhs · rhs`, by `gemm` on this thread (`W` is f32
/// or f64).
#[inline(always)]
fn product<W: Float>(
    dst: &mut [W],
    (dst_row, accumulate): (usize, bool),
    scale: W,
    lhs: Block<'_, W>,
    rhs: Block<'_, W>,
) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    let id = std::any::TypeId::of::<W>();
    assert!(id == std::any::TypeId::of::<f32>() || id == std::any::TypeId::of::<f64>());
    assert!(
        rhs.rows == k
            && Block::<W>::inside(m, k, lhs.row, lhs.col, lhs.data.len())
            && Block::<W>::inside(k, n, rhs.row, rhs.col, rhs.data.len())
            && Block::<W>::inside(m, n, dst_row, 1, dst.len()),
        "a block product's operands lie in their buffers"
    );
    // SAFETY: W is f32 or f64 (asserted), which gemm supports; every element the three
    // matrices reach lies in their slices (asserted over their whole extents, strides being
    // non-negative); `dst` is borrowed mutably, so nothing else reads or writes it meanwhile,
    // and it is initialised (gemm reads it only when `accumulate` asks).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_row as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col as isize,
            lhs.row as isize,
            rhs.data.as_ptr(),
            rhs.col as isize,
            rhs.row as isize,
            W::one(),
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// How many of the keys `k0..k0 + nk` query `query` sees: all of them, or under the causal
/// mask those up to its own position.
#[inline(always)]
fn seen(shape: &AttentionShape, query: usize, k0: usize, nk: usize) -> usize {
    if shape.causal {
        (query + 1).saturating_sub(k0).min(nk)
    } else {
        nk
    }
}

/// Scores of queries `q0..q1` against keys `k0..k1`, into `s` (rows of [`BLOCK`]): the
/// scaled products of the queries `qs` and the keys `kb`, the mask added. Scores the causal
/// mask hides are left as they come (every reader stops at [`seen`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn scores<T: Float>(
    shape: &AttentionShape,
    b: usize,
    (q0, q1): (usize, usize),
    (k0, k1): (usize, usize),
    qs: Block<'_, T::Wide>,
    kb: Block<'_, T::Wide>,
    mask: Option<&MaskRows<'_, T>>,
    s: &mut [T::Wide],
) {
    let (nq, nk) = (q1 - q0, k1 - k0);
    let scale = T::Wide::from_f64(shape.scale);
    product(s, (BLOCK, false), scale, qs, kb.t());
    if let Some(mask) = mask {
        for i in 0..nq {
            let row = &mut s[i * BLOCK..i * BLOCK + nk];
            let start = mask.batch[b] + (q0 + i) as isize * mask.query;
            for (j, r) in row.iter_mut().enumerate() {
                let m = mask.data[(start + (k0 + j) as isize * mask.key) as usize];
                *r = r.add(m.to_wide());
            }
        }
    }
}

/// The forward pass: the result into `out`, each query's log-sum-exp into `lse` (batch-major,
/// +∞ for a query that sees no key, so that recomputed probabilities are 0 there).
pub fn forward<T: Float>(
    shape: &AttentionShape,
    q: Rows<'_, T>,
    k: Rows<'_, T>,
    v: Rows<'_, T>,
    mask: Option<MaskRows<'_, T>>,
    out: &RowsOut<'_, T>,
    lse: &RowsOut<'_, T::Wide>,
) -> Result<()> {
    let (dv, one) = (shape.value_width, T::Wide::one());
    let minus_inf = T::Wide::from_f64(f64::NEG_INFINITY);
    let q = Operand::new(&q, shape.queries)?;
    let (k, v) = (Operand::new(&k, shape.keys)?, Operand::new(&v, shape.keys)?);
    shape.for_each_block(
        shape.queries,
        1,
        #[inline(always)]
        |b, block| {
            let (q0, q1) = shape.query_block(block);
            let nq = q1 - q0;
            let mut s = vec![T::Wide::zero(); BLOCK * BLOCK];
            let mut acc = vec![T::Wide::zero(); BLOCK * dv];
            let mut max = [minus_inf; BLOCK];
            let mut sum = [T::Wide::zero(); BLOCK];
            let qs = q.block(b, (q0, q1));
            for k0 in (0..shape.keys).step_by(BLOCK) {
                let Some(k1) = shape.visible_keys(q1, k0) else {
                    break;
                };
                let nk = k1 - k0;
                scores(
                    shape,
                    b,
                    (q0, q1),
                    (k0, k1),
                    qs,
                    k.block(b, (k0, k1)),
                    mask.as_ref(),
                    &mut s,
                );
                for i in 0..nq {
                    let row = &mut s[i * BLOCK..i * BLOCK + nk];
                    let (visible, hidden) = row.split_at_mut(seen(shape, q0 + i, k0, nk));
                    hidden.fill(T::Wide::zero());
                    let m = lane_max(visible, max[i]);
                    if m == minus_inf {
                        // Nothing seen yet: the row stays empty, and adds nothing below.
                        visible.fill(T::Wide::zero());
                        continue;
                    }
                    let rescale = max[i].sub(m).exp();
                    max[i] = m;
                    for x in visible.iter_mut() {
                        *x = x.sub(m).exp();
                    }
                    sum[i] = sum[i].mul(rescale).add(lane_sum(visible));
                    for x in acc[i * dv..(i + 1) * dv].iter_mut() {
                        *x = x.mul(rescale);
                    }
                }
                // acc += P · V
                let p = Block::rows(&s, nq, nk, BLOCK);
                product(&mut acc, (dv, true), one, p, v.block(b, (k0, k1)));
            }
            for i in 0..nq {
                let (l, o) = (sum[i], &acc[i * dv..(i + 1) * dv]);
                if l == T::Wide::zero() {
                    out.write(b, q0 + i, std::iter::repeat_n(T::zero(), dv));
                    lse.write(b, q0 + i, std::iter::once(T::Wide::from_f64(f64::INFINITY)));
                } else {
                    let r = T::Wide::one().div(l);
                    out.write(b, q0 + i, o.iter().map(|&x| T::from_wide(x.mul(r))));
                    lse.write(b, q0 + i, std::iter::once(max[i].add(l.ln())));
                }
            }
        },
    );
    Ok(())
}

/// The sum of `values` as eight interleaved partial sums combined in a fixed order: a loop
/// the compiler vectorises (a single running sum keeps the `exp` before it scalar too), with
/// the same bits on every run.
#[inline(always)]
fn lane_sum<W: Float>(values: &[W]) -> W {
    let mut lanes = [W::zero(); 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = lane.add(x);
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane = lane.add(x);
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    a.add(e).add(c.add(g)).add(b.add(f).add(d.add(h)))
}

/// The greatest of `values` and `start`, NaN passed over, as eight interleaved running
/// maxima (a loop the compiler vectorises, as [`lane_sum`]).
#[inline(always)]
fn lane_max<W: Float>(values: &[W], start: W) -> W {
    let larger = |a: W, b: W| if b > a { b } else { a };
    let mut lanes = [start; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = larger(*lane, x);
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane = larger(*lane, x);
    }
    lanes.into_iter().fold(start, larger)
}

/// What the backward pass reads besides the operands: the result, its gradient and the
/// forward's log-sum-exp (batch-major, one per query).
pub struct Saved<'a, T: Float> {
    /// The forward's result.
    pub out: Rows<'a, T>,
    /// The gradient of the result.
    pub grad: Rows<'a, T>,
    /// Each query's log-sum-exp.
    pub lse: &'a [T::Wide],
}

/// The backward's operands: queries, keys, values, the result's gradient, and each query's
/// log-sum-exp and `D = rowsum(dO ∘ O)` (batch-major).
struct Operands<'a, T: Float> {
    shape: &'a AttentionShape,
    q: Operand<'a, T::Wide>,
    k: Operand<'a, T::Wide>,
    v: Operand<'a, T::Wide>,
    grad: Operand<'a, T::Wide>,
    mask: Option<MaskRows<'a, T>>,
    lse: &'a [T::Wide],
    delta: Vec<T::Wide>,
}

impl<'a, T: Float> Operands<'a, T> {
    fn new(
        shape: &'a AttentionShape,
        (q, k, v): (Rows<'a, T>, Rows<'a, T>, Rows<'a, T>),
        mask: Option<MaskRows<'a, T>>,
        saved: &Saved<'a, T>,
    ) -> Result<Self> {
        let grad = Operand::new(&saved.grad, shape.queries)?;
        let delta = saved.out.row_dots(&grad, shape.queries)?;
        Ok(Operands {
            shape,
            q: Operand::new(&q, shape.queries)?,
            k: Operand::new(&k, shape.keys)?,
            v: Operand::new(&v, shape.keys)?,
            grad,
            mask,
            lse: saved.lse,
            delta,
        })
    }

    /// The probabilities `P` of queries `q0..q1` against keys `k0..k1` of entry `b` (into
    /// `s`, from the saved log-sum-exp) and the scores' gradients `dS = P ∘ (dO·vᵀ − D)`
    /// (into `ds`), both 0 where the causal mask hides the key.
    #[inline(always)]
    fn recompute(
        &self,
        b: usize,
        (q0, q1): (usize, usize),
        (k0, k1): (usize, usize),
        s: &mut [T::Wide],
        ds: &mut [T::Wide],
    ) {
        let shape = self.shape;
        let (nq, nk) = (q1 - q0, k1 - k0);
        let (qs, kb) = (self.q.block(b, (q0, q1)), self.k.block(b, (k0, k1)));
        scores(shape, b, (q0, q1), (k0, k1), qs, kb, self.mask.as_ref(), s);
        // dP = dO · vᵀ
        let (grad, v) = (self.grad.block(b, (q0, q1)), self.v.block(b, (k0, k1)));
        product(ds, (BLOCK, false), T::Wide::one(), grad, v.t());
        let first = b * shape.queries + q0;
        for i in 0..nq {
            let visible = seen(shape, q0 + i, k0, nk);
            let (l, di) = (self.lse[first + i], self.delta[first + i]);
            let (p, hidden) = s[i * BLOCK..i * BLOCK + nk].split_at_mut(visible);
            hidden.fill(T::Wide::zero());
            for x in p.iter_mut() {
                *x = x.sub(l).exp();
            }
            let (dsv, hidden) = ds[i * BLOCK..i * BLOCK + nk].split_at_mut(visible);
            hidden.fill(T::Wide::zero());
            for (r, &pv) in dsv.iter_mut().zip(p.iter()) {
                *r = pv.mul(r.sub(di));
            }
        }
    }

    /// The key block from `k0` of entry `b`: dK and dV over the query blocks that see it,
    /// written out, and their share of dQ (unscaled) added into `dqa` (every query's rows)
    /// where given.
    #[inline(always)]
    fn key_block(
        &self,
        (s, ds): (&mut [T::Wide], &mut [T::Wide]),
        b: usize,
        k0: usize,
        (dk, dv): (&RowsOut<'_, T>, &RowsOut<'_, T>),
        mut dqa: Option<&mut [T::Wide]>,
    ) {
        let shape = self.shape;
        let (d, dvw) = (shape.width, shape.value_width);
        let (one, scale) = (T::Wide::one(), T::Wide::from_f64(shape.scale));
        let k1 = (k0 + BLOCK).min(shape.keys);
        let nk = k1 - k0;
        let mut dkb = vec![T::Wide::zero(); BLOCK * d];
        let mut dvb = vec![T::Wide::zero(); BLOCK * dvw];
        let first_block = if shape.causal { k0 / BLOCK } else { 0 };
        for q0 in (first_block * BLOCK..shape.queries).step_by(BLOCK) {
            let q1 = (q0 + BLOCK).min(shape.queries);
            let nq = q1 - q0;
            self.recompute(b, (q0, q1), (k0, k1), s, ds);
            // dV += Pᵀ · dO, dK += dSᵀ · q (scaled when written)
            let pt = Block::rows(s, nq, nk, BLOCK).t();
            product(&mut dvb, (dvw, true), one, pt, self.grad.block(b, (q0, q1)));
            let dst = Block::rows(ds, nq, nk, BLOCK).t();
            product(&mut dkb, (d, true), one, dst, self.q.block(b, (q0, q1)));
            if let Some(dqa) = dqa.as_deref_mut() {
                // dQ += dS · k (scaled when written)
                let ds = Block::rows(ds, nq, nk, BLOCK);
                let kb = self.k.block(b, (k0, k1));
                product(&mut dqa[q0 * d..q1 * d], (d, true), one, ds, kb);
            }
        }
        let narrow = |x: &T::Wide| T::from_wide(*x);
        let scaled = |x: &T::Wide| T::from_wide(x.mul(scale));
        for j in 0..nk {
            dk.write(b, k0 + j, dkb[j * d..(j + 1) * d].iter().map(scaled));
            dv.write(b, k0 + j, dvb[j * dvw..(j + 1) * dvw].iter().map(narrow));
        }
    }
}

/// The backward pass: the gradients of the queries, keys and values into `dq`, `dk`, `dv`.
#[allow(clippy::too_many_arguments)]
pub fn backward<'a, T: Float>(
    shape: &'a AttentionShape,
    q: Rows<'a, T>,
    k: Rows<'a, T>,
    v: Rows<'a, T>,
    mask: Option<MaskRows<'a, T>>,
    saved: &Saved<'a, T>,
    dq: &RowsOut<'_, T>,
    dk: &RowsOut<'_, T>,
    dv: &RowsOut<'_, T>,
) -> Result<()> {
    let (d, one) = (shape.width, T::Wide::one());
    let scale = T::Wide::from_f64(shape.scale);
    let narrow = |x: &T::Wide| T::from_wide(x.mul(scale));
    let ops = Operands::new(shape, (q, k, v), mask, saved)?;
    let blocks = || {
        let zeros = || vec![T::Wide::zero(); BLOCK * BLOCK];
        (zeros(), zeros())
    };
    if shape.batch >= ONE_PASS_MIN_BATCH {
        // A task per batch entry: one pass over its key blocks writes all three gradients
        // (the entry's dQ accumulates in the task), so the probabilities are recomputed once.
        shape.for_each_block(
            BLOCK,
            2,
            #[inline(always)]
            |b, _| {
                let (mut s, mut ds) = blocks();
                let mut dqa = vec![T::Wide::zero(); shape.queries * d];
                for k0 in (0..shape.keys).step_by(BLOCK) {
                    ops.key_block((&mut s, &mut ds), b, k0, (dk, dv), Some(&mut dqa));
                }
                for i in 0..shape.queries {
                    dq.write(b, i, dqa[i * d..(i + 1) * d].iter().map(narrow));
                }
            },
        );
        return Ok(());
    }
    // Few batch entries: a pass per key block (dK, dV), then a pass per query block (dQ), so
    // that long sequences still split across threads.
    shape.for_each_block(
        shape.keys,
        2,
        #[inline(always)]
        |b, block| {
            let (mut s, mut ds) = blocks();
            ops.key_block((&mut s, &mut ds), b, block * BLOCK, (dk, dv), None)
        },
    );
    // Queries: a task per query block, over the key blocks it sees.
    shape.for_each_block(
        shape.queries,
        2,
        #[inline(always)]
        |b, block| {
            let (q0, q1) = shape.query_block(block);
            let nq = q1 - q0;
            let (mut s, mut ds) = blocks();
            let mut dqb = vec![T::Wide::zero(); BLOCK * d];
            for k0 in (0..shape.keys).step_by(BLOCK) {
                let Some(k1) = shape.visible_keys(q1, k0) else {
                    break;
                };
                let nk = k1 - k0;
                ops.recompute(b, (q0, q1), (k0, k1), &mut s, &mut ds);
                // dQ += dS · k (scaled when written)
                let dsb = Block::rows(&ds, nq, nk, BLOCK);
                product(&mut dqb, (d, true), one, dsb, ops.k.block(b, (k0, k1)));
            }
            for i in 0..nq {
                dq.write(b, q0 + i, dqb[i * d..(i + 1) * d].iter().map(narrow));
            }
        },
    );
    Ok(())
}
