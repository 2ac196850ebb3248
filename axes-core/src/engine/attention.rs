//! Fused attention on the CPU: `softmax(scale · q·kᵀ + mask) · v` for every batch entry,
//! without writing the query × key probabilities anywhere.
//!
//! The scheme is FlashAttention-2's. Queries go in blocks of [`BLOCK`] rows; keys and values
//! stream through in blocks of [`BLOCK`] positions, packed in `T::Wide`, and each block's
//! products (scores, probabilities times values, and the backward's four) run on `gemm`; an
//! online softmax keeps each query's running maximum and sum, rescaling its output row when
//! the maximum grows. Only each query's log-sum-exp is kept
//! for the backward pass, which first takes `D = rowsum(dO ∘ O)`, then recomputes the
//! probabilities block by block from the log-sum-exp: with many batch entries, a task per entry
//! writes all three gradients in one pass over its key blocks; with few, one pass over key
//! blocks writes the key and value gradients and another over query blocks the query
//! gradients. Either way every element of every result is summed by one task in one order (no
//! float atomics, the same bits on any thread count). Under a causal mask (query `i` sees keys `0..=i`), key blocks wholly after a
//! query block are skipped in every pass.
//!
//! Elements are computed in `T::Wide` (f32 for the half types). A query that sees no key (a
//! fully masked row) gets a zero output and passes no gradient.

use rayon::prelude::*;

use super::{cost, exec, threads};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::num::{Float, Num};
use crate::protocol::AttentionShape;
use crate::storage::{self, HostVec};

/// Rows per query block and positions per key block.
pub const BLOCK: usize = 64;

/// From this many batch entries, the backward pass runs a task per entry (one pass, the
/// probabilities recomputed once); with fewer, a task per key block and then one per query
/// block, so that a few long sequences still fill the threads. Chosen by the shape alone, so
/// the bits never depend on the thread count.
const ONE_PASS_MIN_BATCH: usize = 8;

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
    /// Element (`b`, `i`, `c`); the offsets were checked against the buffer by the caller, so
    /// an index out of range is a bug (the slice's bounds check panics).
    #[inline(always)]
    fn at(&self, b: usize, i: usize, c: usize) -> T {
        self.data[(self.batch[b] + i as isize * self.row + self.cols[c]) as usize]
    }

    /// Row `i` of batch entry `b` as a slice, where its columns are contiguous.
    #[inline(always)]
    fn row_slice(&self, b: usize, i: usize) -> Option<&[T]> {
        let first = *self.cols.first()?;
        let contiguous = (self.cols.iter().enumerate()).all(|(c, &o)| o == first + c as isize);
        let start = (self.batch[b] + i as isize * self.row + first) as usize;
        contiguous.then(|| &self.data[start..start + self.cols.len()])
    }
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
}

// SAFETY: tasks on other threads write through the pointer only at the offsets of their own
// rows (see `RowsOut::write`), so sharing it shares no element.
unsafe impl<T: Send> Send for RowsOut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for RowsOut<'_, T> {}

impl<'a, T: Copy> RowsOut<'a, T> {
    /// Writes into `data` at the offsets `batch`, `row`, `cols`, which the caller guarantees
    /// to be distinct for distinct (batch entry, row, column) and inside `data`.
    pub fn new(data: &'a mut [T], batch: &'a [isize], row: isize, cols: &'a [isize]) -> Self {
        RowsOut {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            batch,
            row,
            cols,
        }
    }

    /// Writes row `i` of batch entry `b`.
    ///
    /// Tasks call it for rows no other task writes, so no two writes touch one element.
    fn write(&self, b: usize, i: usize, values: impl Iterator<Item = T>) {
        let start = self.batch[b] + i as isize * self.row;
        for (&col, value) in self.cols.iter().zip(values) {
            let at = (start + col) as usize;
            assert!(at < self.len, "a result's offsets stay inside its buffer");
            // SAFETY: `at` is inside the buffer (checked above), the buffer is borrowed
            // mutably for `'a`, and the element belongs to this row of this batch entry, which
            // only the calling task writes (the offsets are distinct, `RowsOut::new`).
            unsafe { self.ptr.add(at).write(value) };
        }
    }
}

/// A fresh result, row-major `[batch][position][column]`: zeros, and the offsets of its
/// batch entries and columns.
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
            data: storage::filled(count, T::zero())?,
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

/// `dst (rows of dst_row) = [dst +] lhs · rhs`, by `gemm` on this thread (`W` is f32 or f64).
#[inline(always)]
fn product<W: Float>(
    dst: &mut [W],
    dst_row: usize,
    accumulate: bool,
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
            W::one(),
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// Scores of queries `q0..q1` against keys `k0..k1`, into `s` (rows of [`BLOCK`]):
/// `qs` holds the queries scaled (rows of `width`), `kb` the keys (rows of `width`). Masked
/// and causally hidden scores are −∞.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn scores<T: Float>(
    shape: &AttentionShape,
    b: usize,
    (q0, q1): (usize, usize),
    (k0, k1): (usize, usize),
    qs: &[T::Wide],
    kb: &[T::Wide],
    mask: Option<&MaskRows<'_, T>>,
    s: &mut [T::Wide],
) {
    let (d, nq, nk) = (shape.width, q1 - q0, k1 - k0);
    let minus_inf = T::Wide::from_f64(f64::NEG_INFINITY);
    product(
        s,
        BLOCK,
        false,
        Block::rows(qs, nq, d, d),
        Block::rows(kb, nk, d, d).t(),
    );
    for i in 0..nq {
        let row = &mut s[i * BLOCK..i * BLOCK + nk];
        if let Some(mask) = mask {
            let start = mask.batch[b] + (q0 + i) as isize * mask.query;
            for (j, r) in row.iter_mut().enumerate() {
                let m = mask.data[(start + (k0 + j) as isize * mask.key) as usize];
                *r = r.add(T::Wide::from_f64(m.to_f64()));
            }
        }
        if shape.causal {
            // Keys after query q0 + i are hidden.
            let first_hidden = (q0 + i + 1).saturating_sub(k0).min(nk);
            row[first_hidden..].fill(minus_inf);
        }
    }
}

/// Packs rows `r0..r1` of batch entry `b`, times `scale`, as rows of `width`.
#[inline(always)]
fn pack_rows<T: Float>(
    x: &Rows<'_, T>,
    b: usize,
    (r0, r1): (usize, usize),
    width: usize,
    scale: T::Wide,
    out: &mut [T::Wide],
) {
    let widen = |v: T| T::Wide::from_f64(v.to_f64()).mul(scale);
    for i in 0..r1 - r0 {
        let row = &mut out[i * width..(i + 1) * width];
        match x.row_slice(b, r0 + i) {
            Some(values) => {
                for (o, &v) in row.iter_mut().zip(values) {
                    *o = widen(v);
                }
            }
            None => {
                for (c, o) in row.iter_mut().enumerate() {
                    *o = widen(x.at(b, r0 + i, c));
                }
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
) {
    let (d, dv) = (shape.width, shape.value_width);
    let scale = T::Wide::from_f64(shape.scale);
    let minus_inf = T::Wide::from_f64(f64::NEG_INFINITY);
    shape.for_each_block(
        shape.queries,
        1,
        #[inline(always)]
        |b, block| {
            let q0 = block * BLOCK;
            let q1 = (q0 + BLOCK).min(shape.queries);
            let nq = q1 - q0;
            let mut qs = vec![T::Wide::zero(); BLOCK * d];
            let mut kb = vec![T::Wide::zero(); BLOCK * d];
            let mut vb = vec![T::Wide::zero(); BLOCK * dv];
            let mut s = vec![T::Wide::zero(); BLOCK * BLOCK];
            let mut acc = vec![T::Wide::zero(); BLOCK * dv];
            let mut max = [minus_inf; BLOCK];
            let mut sum = [T::Wide::zero(); BLOCK];
            pack_rows(&q, b, (q0, q1), d, scale, &mut qs);
            for k0 in (0..shape.keys).step_by(BLOCK) {
                let Some(k1) = shape.visible_keys(q1, k0) else {
                    break;
                };
                let nk = k1 - k0;
                pack_rows(&k, b, (k0, k1), d, T::Wide::one(), &mut kb);
                pack_rows(&v, b, (k0, k1), dv, T::Wide::one(), &mut vb);
                scores(
                    shape,
                    b,
                    (q0, q1),
                    (k0, k1),
                    &qs,
                    &kb,
                    mask.as_ref(),
                    &mut s,
                );
                for i in 0..nq {
                    let row = &mut s[i * BLOCK..i * BLOCK + nk];
                    let mut m = max[i];
                    for &x in row.iter() {
                        if x > m {
                            m = x;
                        }
                    }
                    if m == minus_inf {
                        // Nothing seen yet: the row stays empty, and adds nothing below.
                        row.fill(T::Wide::zero());
                        continue;
                    }
                    let rescale = max[i].sub(m).exp();
                    max[i] = m;
                    for x in row.iter_mut() {
                        *x = x.sub(m).exp();
                    }
                    sum[i] = sum[i].mul(rescale).add(lane_sum(row));
                    for x in acc[i * dv..(i + 1) * dv].iter_mut() {
                        *x = x.mul(rescale);
                    }
                }
                // acc += P · V
                product(
                    &mut acc,
                    dv,
                    true,
                    Block::rows(&s, nq, nk, BLOCK),
                    Block::rows(&vb, nk, dv, dv),
                );
            }
            for i in 0..nq {
                let (l, o) = (sum[i], &acc[i * dv..(i + 1) * dv]);
                if l == T::Wide::zero() {
                    out.write(b, q0 + i, std::iter::repeat_n(T::zero(), dv));
                    lse.write(b, q0 + i, std::iter::once(T::Wide::from_f64(f64::INFINITY)));
                } else {
                    let r = T::Wide::one().div(l);
                    out.write(b, q0 + i, o.iter().map(|&x| T::from_f64(x.mul(r).to_f64())));
                    lse.write(b, q0 + i, std::iter::once(max[i].add(l.ln())));
                }
            }
        },
    );
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

/// `D = rowsum(dO ∘ O)` of every query, batch-major.
fn row_products<T: Float>(
    shape: &AttentionShape,
    out: &Rows<'_, T>,
    grad: &Rows<'_, T>,
) -> Vec<T::Wide> {
    let dv = shape.value_width;
    let (mut o, mut g) = (vec![T::Wide::zero(); dv], vec![T::Wide::zero(); dv]);
    let mut delta = Vec::with_capacity(shape.batch * shape.queries);
    for b in 0..shape.batch {
        for i in 0..shape.queries {
            pack_rows(out, b, (i, i + 1), dv, T::Wide::one(), &mut o);
            pack_rows(grad, b, (i, i + 1), dv, T::Wide::one(), &mut g);
            let total = (o.iter().zip(&g)).fold(T::Wide::zero(), |t, (&x, &y)| t.add(x.mul(y)));
            delta.push(total);
        }
    }
    delta
}

/// One backward task's blocks: queries (scaled), keys and values (transposed), the output's
/// gradient and `D = rowsum(dO ∘ O)` of a query block, and the recomputed probabilities and
/// scores' gradients of a (query block, key block) pair.
struct Workspace<W> {
    qs: Vec<W>,
    kb: Vec<W>,
    vb: Vec<W>,
    dob: Vec<W>,
    delta: [W; BLOCK],
    s: Vec<W>,
    ds: Vec<W>,
}

impl<W: Float> Workspace<W> {
    fn new(shape: &AttentionShape) -> Self {
        let (d, dv) = (shape.width, shape.value_width);
        Workspace {
            qs: vec![W::zero(); BLOCK * d],
            kb: vec![W::zero(); BLOCK * d],
            vb: vec![W::zero(); BLOCK * dv],
            dob: vec![W::zero(); BLOCK * dv],
            delta: [W::zero(); BLOCK],
            s: vec![W::zero(); BLOCK * BLOCK],
            ds: vec![W::zero(); BLOCK * BLOCK],
        }
    }

    /// Packs the queries `q0..q1` of batch entry `b` (scaled), their output gradients and
    /// their `D = rowsum(dO ∘ O)` (from `delta`, every query's, batch-major).
    #[inline(always)]
    fn load_queries<T: Float<Wide = W>>(
        &mut self,
        shape: &AttentionShape,
        q: &Rows<'_, T>,
        saved: &Saved<'_, T>,
        delta: &[W],
        b: usize,
        (q0, q1): (usize, usize),
    ) {
        let (d, dv) = (shape.width, shape.value_width);
        pack_rows(q, b, (q0, q1), d, W::from_f64(shape.scale), &mut self.qs);
        pack_rows(&saved.grad, b, (q0, q1), dv, W::one(), &mut self.dob);
        let first = b * shape.queries + q0;
        self.delta[..q1 - q0].copy_from_slice(&delta[first..first + q1 - q0]);
    }

    /// Packs the keys and values `k0..k1` of batch entry `b`.
    #[inline(always)]
    fn load_keys<T: Float<Wide = W>>(
        &mut self,
        shape: &AttentionShape,
        (k, v): (&Rows<'_, T>, &Rows<'_, T>),
        b: usize,
        keys: (usize, usize),
    ) {
        pack_rows(k, b, keys, shape.width, W::one(), &mut self.kb);
        pack_rows(v, b, keys, shape.value_width, W::one(), &mut self.vb);
    }

    /// `dV += Pᵀ · dO` and `dK += dSᵀ · (scale · q)` for the loaded `nq` queries and `nk` keys.
    #[inline(always)]
    fn accumulate_key_gradients(
        &self,
        shape: &AttentionShape,
        (nq, nk): (usize, usize),
        dkb: &mut [W],
        dvb: &mut [W],
    ) {
        let (d, dv) = (shape.width, shape.value_width);
        product(
            dvb,
            dv,
            true,
            Block::rows(&self.s, nq, nk, BLOCK).t(),
            Block::rows(&self.dob, nq, dv, dv),
        );
        product(
            dkb,
            d,
            true,
            Block::rows(&self.ds, nq, nk, BLOCK).t(),
            Block::rows(&self.qs, nq, d, d),
        );
    }

    /// The probabilities `P` of the loaded queries against the loaded keys (in `s`, from the
    /// saved log-sum-exp) and the scores' gradients `dS = P ∘ (dO·vᵀ − D)` (in `ds`).
    #[inline(always)]
    fn recompute<T: Float<Wide = W>>(
        &mut self,
        shape: &AttentionShape,
        b: usize,
        (q0, q1): (usize, usize),
        (k0, k1): (usize, usize),
        mask: Option<&MaskRows<'_, T>>,
        lse: &[W],
    ) {
        let (dv, nq, nk) = (shape.value_width, q1 - q0, k1 - k0);
        scores(
            shape,
            b,
            (q0, q1),
            (k0, k1),
            &self.qs,
            &self.kb,
            mask,
            &mut self.s,
        );
        // dP = dO · vᵀ
        product(
            &mut self.ds,
            BLOCK,
            false,
            Block::rows(&self.dob, nq, dv, dv),
            Block::rows(&self.vb, nk, dv, dv).t(),
        );
        for i in 0..nq {
            let l = lse[b * shape.queries + q0 + i];
            let p = &mut self.s[i * BLOCK..i * BLOCK + nk];
            for x in p.iter_mut() {
                *x = x.sub(l).exp();
            }
            let di = self.delta[i];
            for (r, &pv) in self.ds[i * BLOCK..i * BLOCK + nk].iter_mut().zip(p.iter()) {
                *r = pv.mul(r.sub(di));
            }
        }
    }
}

/// The backward's work on one key block: what it reads, and where dK and dV go.
struct KeyBlocks<'a, T: Float> {
    shape: &'a AttentionShape,
    q: &'a Rows<'a, T>,
    keys: (&'a Rows<'a, T>, &'a Rows<'a, T>),
    mask: Option<&'a MaskRows<'a, T>>,
    saved: &'a Saved<'a, T>,
    delta: &'a [T::Wide],
    dk: &'a RowsOut<'a, T>,
    dv: &'a RowsOut<'a, T>,
}

impl<T: Float> KeyBlocks<'_, T> {
    /// The key block from `k0` of entry `b`: dK and dV over the query blocks that see it,
    /// written out, and their share of dQ added into `dqa` (every query's rows) where given.
    #[inline(always)]
    fn run(
        &self,
        work: &mut Workspace<T::Wide>,
        b: usize,
        k0: usize,
        mut dqa: Option<&mut [T::Wide]>,
    ) {
        let shape = self.shape;
        let (d, dv) = (shape.width, shape.value_width);
        let k1 = (k0 + BLOCK).min(shape.keys);
        let nk = k1 - k0;
        let mut dkb = vec![T::Wide::zero(); BLOCK * d];
        let mut dvb = vec![T::Wide::zero(); BLOCK * dv];
        work.load_keys(shape, self.keys, b, (k0, k1));
        let first_block = if shape.causal { k0 / BLOCK } else { 0 };
        for q0 in (first_block * BLOCK..shape.queries).step_by(BLOCK) {
            let q1 = (q0 + BLOCK).min(shape.queries);
            let nq = q1 - q0;
            work.load_queries(shape, self.q, self.saved, self.delta, b, (q0, q1));
            work.recompute(shape, b, (q0, q1), (k0, k1), self.mask, self.saved.lse);
            work.accumulate_key_gradients(shape, (nq, nk), &mut dkb, &mut dvb);
            if let Some(dqa) = dqa.as_deref_mut() {
                // dQ += dS · k (scaled when written)
                product(
                    &mut dqa[q0 * d..q1 * d],
                    d,
                    true,
                    Block::rows(&work.ds, nq, nk, BLOCK),
                    Block::rows(&work.kb, nk, d, d),
                );
            }
        }
        let narrow = |x: &T::Wide| T::from_f64(x.to_f64());
        for j in 0..nk {
            self.dk
                .write(b, k0 + j, dkb[j * d..(j + 1) * d].iter().map(narrow));
            self.dv
                .write(b, k0 + j, dvb[j * dv..(j + 1) * dv].iter().map(narrow));
        }
    }
}

/// The backward pass: the gradients of the queries, keys and values into `dq`, `dk`, `dv`.
#[allow(clippy::too_many_arguments)]
pub fn backward<T: Float>(
    shape: &AttentionShape,
    q: Rows<'_, T>,
    k: Rows<'_, T>,
    v: Rows<'_, T>,
    mask: Option<MaskRows<'_, T>>,
    saved: &Saved<'_, T>,
    dq: &RowsOut<'_, T>,
    dk: &RowsOut<'_, T>,
    dv_out: &RowsOut<'_, T>,
) {
    let d = shape.width;
    let scale = T::Wide::from_f64(shape.scale);
    let narrow = |x: &T::Wide| T::from_f64(x.to_f64());
    let delta = row_products(shape, &saved.out, &saved.grad);
    let pass = KeyBlocks {
        shape,
        q: &q,
        keys: (&k, &v),
        mask: mask.as_ref(),
        saved,
        delta: &delta,
        dk,
        dv: dv_out,
    };
    if shape.batch >= ONE_PASS_MIN_BATCH {
        // A task per batch entry: one pass over its key blocks writes all three gradients
        // (the entry's dQ accumulates in the task), so the probabilities are recomputed once.
        shape.for_each_block(
            BLOCK,
            2,
            #[inline(always)]
            |b, _| {
                let mut work = Workspace::new(shape);
                let mut dqa = vec![T::Wide::zero(); shape.queries * d];
                for k0 in (0..shape.keys).step_by(BLOCK) {
                    pass.run(&mut work, b, k0, Some(&mut dqa));
                }
                for i in 0..shape.queries {
                    let row = dqa[i * d..(i + 1) * d].iter();
                    dq.write(b, i, row.map(|x| narrow(&x.mul(scale))));
                }
            },
        );
        return;
    }
    // Few batch entries: a pass per key block (dK, dV), then a pass per query block (dQ), so
    // that long sequences still split across threads.
    shape.for_each_block(
        shape.keys,
        2,
        #[inline(always)]
        |b, block| pass.run(&mut Workspace::new(shape), b, block * BLOCK, None),
    );
    // Queries: a task per query block, over the key blocks it sees.
    shape.for_each_block(
        shape.queries,
        2,
        #[inline(always)]
        |b, block| {
            let q0 = block * BLOCK;
            let q1 = (q0 + BLOCK).min(shape.queries);
            let nq = q1 - q0;
            let mut work = Workspace::new(shape);
            let mut dqb = vec![T::Wide::zero(); BLOCK * d];
            work.load_queries(shape, &q, saved, &delta, b, (q0, q1));
            for k0 in (0..shape.keys).step_by(BLOCK) {
                let Some(k1) = shape.visible_keys(q1, k0) else {
                    break;
                };
                let nk = k1 - k0;
                work.load_keys(shape, (&k, &v), b, (k0, k1));
                work.recompute(shape, b, (q0, q1), (k0, k1), mask.as_ref(), saved.lse);
                // dQ += dS · k (scaled when written)
                product(
                    &mut dqb,
                    d,
                    true,
                    Block::rows(&work.ds, nq, nk, BLOCK),
                    Block::rows(&work.kb, nk, d, d),
                );
            }
            for i in 0..nq {
                dq.write(
                    b,
                    q0 + i,
                    dqb[i * d..(i + 1) * d]
                        .iter()
                        .map(|x| narrow(&x.mul(scale))),
                );
            }
        },
    );
}
