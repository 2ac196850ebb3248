//! Layer and RMS normalisation in host memory, row by row: each row along the normalised
//! axis is read for its statistics and again, from the cache, for its result, so the forward
//! is one pass over the input and the backward one over the input and the result's gradient
//! (the general path, jobs of the IR interpreter, takes three and two).
//!
//! Rows go in fixed chunks, on the pool where that pays; the gain's and the bias's gradients
//! (sums across rows) are summed per chunk and the chunks' sums added in order, so the bits do
//! not depend on the thread count. Elements are computed in `T::Wide` (f32 for the half types).

use rayon::prelude::*;

use super::{cost, exec, threads};
use crate::element::Element;
use crate::error::Result;
use crate::ir::OpWeights;
use crate::layout::Layout;
use crate::num::{Float, Num};
use crate::storage::{self, HostVec};

/// Rows per chunk of work (and per partial sum of the parameters' gradients).
const CHUNK: usize = 32;

/// A tensor's rows along one axis: row `r`'s element `j` is `data[starts[r] + j·step]`.
pub(crate) struct RowsOf<'a, T> {
    data: &'a [T],
    starts: Vec<isize>,
    step: isize,
    len: usize,
}

impl<'a, T: Element> RowsOf<'a, T> {
    /// The rows of `data` viewed by `layout` (unpadded) along `axis`, in the row-major order
    /// of the other axes.
    pub(crate) fn new(data: &'a [T], layout: &Layout, axis: usize) -> Self {
        let (lens, strides) = (layout.lens(), layout.strides());
        let mut starts = vec![layout.offset() as isize];
        for other in (0..lens.len()).filter(|&a| a != axis) {
            let stride = strides[other];
            starts = (starts.iter())
                .flat_map(|&s| (0..lens[other] as isize).map(move |i| s + i * stride))
                .collect();
        }
        RowsOf {
            data,
            starts,
            step: strides[axis],
            len: lens[axis],
        }
    }

    /// Row `r` widened into `out`.
    #[inline(always)]
    pub(crate) fn read(&self, r: usize, out: &mut [T::Wide])
    where
        T: Float,
    {
        let start = self.starts[r];
        let widen = |v: T| v.to_wide();
        if self.step == 1 {
            let row = &self.data[start as usize..start as usize + self.len];
            for (o, &v) in out.iter_mut().zip(row) {
                *o = widen(v);
            }
        } else {
            for (j, o) in out.iter_mut().enumerate() {
                *o = widen(self.data[(start + j as isize * self.step) as usize]);
            }
        }
    }
}

/// The result's layout: the input's lengths, the normalised axis contiguous and the others
/// row-major around it (the order [`RowsOf::new`] numbers rows in).
pub(crate) fn rows_layout(lens: &[usize], axis: usize) -> Layout {
    let mut strides = vec![0isize; lens.len()];
    let mut step = lens[axis] as isize;
    strides[axis] = 1;
    for other in (0..lens.len()).rev().filter(|&a| a != axis) {
        strides[other] = step;
        step *= lens[other] as isize;
    }
    let count = lens.iter().product();
    Layout::new(lens, &strides, 0, count).expect("row-major strides fit their buffer")
}

/// What one normalisation is: centred (layer norm) or not (RMS norm), and its `eps`.
#[derive(Clone, Copy)]
pub(crate) struct Norm {
    pub(crate) centre: bool,
    pub(crate) eps: f64,
}

/// The backward's results: the input's gradient (when asked for), and the sums across rows
/// of `dy · x̂` and of `dy` (the gain's and the bias's gradients).
pub(crate) struct Gradients<T, W> {
    pub(crate) dx: Option<HostVec<T>>,
    pub(crate) gain: Vec<W>,
    pub(crate) bias: Vec<W>,
}

/// Each row's mean (0 when not centring) and `1 / √(var + eps)`, kept for the backward.
pub(crate) struct Statistics<W> {
    mean: Vec<W>,
    rstd: Vec<W>,
}

/// `f(chunk, rows)` for each chunk of `rows` rows of `len` elements (its part of `out`), on
/// the pool when `work_ns` pays for it; the results in chunk order. `f` runs inside the
/// widest-SIMD wrapper only where it is inlined there: give it `#[inline(always)]` (else it is
/// compiled, and runs, as baseline x86-64 code).
fn chunked<T: Send, R: Send>(
    out: &mut [T],
    rows: usize,
    len: usize,
    work_ns: f64,
    f: impl Fn(usize, &mut [T]) -> R + Sync,
) -> Vec<R> {
    let size = (CHUNK * len).max(1);
    let run = |(c, o): (usize, &mut [T])| {
        let mut result = None;
        exec::on_widest_simd(
            #[inline(always)]
            || result = Some(f(c, o)),
        );
        result.expect("the chunk ran")
    };
    if rows > CHUNK && cost::COMPILED.pays(work_ns) {
        threads::install(|| out.par_chunks_mut(size).enumerate().map(run).collect())
    } else {
        out.chunks_mut(size).enumerate().map(run).collect()
    }
}

/// One core's time for a pass over `count` elements reading and writing `bytes` each.
fn work_ns(count: usize, bytes: usize) -> f64 {
    let ops = OpWeights {
        simple: 6,
        division: 1,
        transcendental: 0,
    };
    cost::element_wise_ns(count, bytes, ops)
}

impl Norm {
    /// `x̂ · gain + bias` row by row, in the layout of [`rows_layout`], and the statistics.
    pub(crate) fn forward<T: Float>(
        self,
        x: &RowsOf<'_, T>,
        gain: Option<&[T::Wide]>,
        bias: Option<&[T::Wide]>,
    ) -> Result<(HostVec<T>, Statistics<T::Wide>)> {
        let (rows, len) = (x.starts.len(), x.len);
        let mut out = storage::for_overwrite::<T>(rows * len)?;
        let inverse_len = T::Wide::from_f64(1.0 / len as f64);
        let eps = T::Wide::from_f64(self.eps);
        let work = work_ns(rows * len, 2 * std::mem::size_of::<T>());
        let parts = chunked(
            &mut out,
            rows,
            len,
            work,
            #[inline(always)]
            |c, out| {
                let mut row = vec![T::Wide::zero(); len];
                let mut stats = Vec::with_capacity(CHUNK);
                for (i, y) in out.chunks_mut(len.max(1)).enumerate() {
                    x.read(c * CHUNK + i, &mut row);
                    let mean = if self.centre {
                        dot(&row, None).mul(inverse_len)
                    } else {
                        T::Wide::zero()
                    };
                    for v in row.iter_mut() {
                        *v = v.sub(mean);
                    }
                    let var = dot(&row, Some(&row)).mul(inverse_len);
                    let rstd = T::Wide::one().div(var.add(eps).sqrt());
                    scale_and_shift(y, &row, rstd, gain, bias);
                    stats.push((mean, rstd));
                }
                stats
            },
        );
        let (mean, rstd) = parts.into_iter().flatten().unzip();
        Ok((out, Statistics { mean, rstd }))
    }

    /// The input's gradient (when `dx` is asked for; in the layout of [`rows_layout`]) and
    /// the sums across rows of `dy · x̂` and `dy` (the gain's and the bias's gradients), from
    /// the result's gradient `dy` (rows numbered as `x`'s).
    pub(crate) fn backward<T: Float>(
        self,
        x: &RowsOf<'_, T>,
        stats: &Statistics<T::Wide>,
        gain: Option<&[T::Wide]>,
        dy: &RowsOf<'_, T>,
        dx: bool,
    ) -> Result<Gradients<T, T::Wide>> {
        let (rows, len) = (x.starts.len(), x.len);
        let mut out = storage::for_overwrite::<T>(if dx { rows * len } else { 0 })?;
        let inverse_len = T::Wide::from_f64(1.0 / len as f64);
        let work = work_ns(rows * len, 3 * std::mem::size_of::<T>());
        // Inlined into the widest-SIMD wrapper (see `chunked`).
        let task = {
            #[inline(always)]
            |c: usize, out: &mut [T]| {
                let (mut xr, mut gr) = (vec![T::Wide::zero(); len], vec![T::Wide::zero(); len]);
                let (mut d_gain, mut d_bias) =
                    (vec![T::Wide::zero(); len], vec![T::Wide::zero(); len]);
                let first = c * CHUNK;
                for r in first..(first + CHUNK).min(rows) {
                    x.read(r, &mut xr);
                    dy.read(r, &mut gr);
                    let (mean, rstd) = (stats.mean[r], stats.rstd[r]);
                    let sums = d_gain.iter_mut().zip(d_bias.iter_mut());
                    for ((x, &g), (d_gain, d_bias)) in xr.iter_mut().zip(&gr).zip(sums) {
                        *x = x.sub(mean).mul(rstd);
                        *d_gain = d_gain.add(g.mul(*x));
                        *d_bias = d_bias.add(g);
                    }
                    if !dx {
                        continue;
                    }
                    if let Some(gain) = gain {
                        for (g, &k) in gr.iter_mut().zip(gain) {
                            *g = g.mul(k);
                        }
                    }
                    let a = if self.centre {
                        dot(&gr, None).mul(inverse_len)
                    } else {
                        T::Wide::zero()
                    };
                    let c = dot(&gr, Some(&xr)).mul(inverse_len);
                    let row = &mut out[(r - first) * len..(r - first + 1) * len];
                    for (o, (&g, &x)) in row.iter_mut().zip(gr.iter().zip(&xr)) {
                        *o = T::from_wide(g.sub(a).sub(x.mul(c)).mul(rstd));
                    }
                }
                (d_gain, d_bias)
            }
        };
        let parts = if dx {
            chunked(&mut out, rows, len, work, task)
        } else {
            // A byte per row, for the chunks' count.
            let mut rows_only = vec![0u8; rows];
            chunked(
                &mut rows_only,
                rows,
                1,
                work,
                #[inline(always)]
                |c, _| task(c, &mut []),
            )
        };
        let (mut d_gain, mut d_bias) = (vec![T::Wide::zero(); len], vec![T::Wide::zero(); len]);
        for (g, b) in parts {
            for (total, part) in d_gain.iter_mut().zip(g).chain(d_bias.iter_mut().zip(b)) {
                *total = total.add(part);
            }
        }
        Ok(Gradients {
            dx: dx.then_some(out),
            gain: d_gain,
            bias: d_bias,
        })
    }
}

/// `y = row · rstd · gain + bias` (each factor where given), narrowed to `T`: a loop per
/// combination, so that none tests an `Option` per element and each vectorises.
#[inline(always)]
fn scale_and_shift<T: Float>(
    y: &mut [T],
    row: &[T::Wide],
    rstd: T::Wide,
    gain: Option<&[T::Wide]>,
    bias: Option<&[T::Wide]>,
) {
    let narrow = |v: T::Wide| T::from_wide(v);
    let normalised = y.iter_mut().zip(row);
    match (gain, bias) {
        (Some(gain), Some(bias)) => {
            for ((o, &v), (&g, &b)) in normalised.zip(gain.iter().zip(bias)) {
                *o = narrow(v.mul(rstd).mul(g).add(b));
            }
        }
        (Some(gain), None) => {
            for ((o, &v), &g) in normalised.zip(gain) {
                *o = narrow(v.mul(rstd).mul(g));
            }
        }
        (None, Some(bias)) => {
            for ((o, &v), &b) in normalised.zip(bias) {
                *o = narrow(v.mul(rstd).add(b));
            }
        }
        (None, None) => {
            for (o, &v) in normalised {
                *o = narrow(v.mul(rstd));
            }
        }
    }
}

/// `Σ a_j b_j` (`Σ a_j` without `b`) in eight interleaved partial sums combined in a fixed
/// order: loops the compiler vectorises, the same bits on every run.
#[inline(always)]
fn dot<W: Float>(a: &[W], b: Option<&[W]>) -> W {
    let mut lanes = [W::zero(); 8];
    let whole = a.len() / 8 * 8;
    match b {
        Some(b) => {
            for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
                for ((lane, &x), &y) in lanes.iter_mut().zip(x).zip(y) {
                    *lane = lane.add(x.mul(y));
                }
            }
            for ((lane, &x), &y) in lanes.iter_mut().zip(&a[whole..]).zip(&b[whole..]) {
                *lane = lane.add(x.mul(y));
            }
        }
        None => {
            for x in a.chunks_exact(8) {
                for (lane, &x) in lanes.iter_mut().zip(x) {
                    *lane = lane.add(x);
                }
            }
            for (lane, &x) in lanes.iter_mut().zip(&a[whole..]) {
                *lane = lane.add(x);
            }
        }
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    a.add(e).add(c.add(g)).add(b.add(f).add(d.add(h)))
}
