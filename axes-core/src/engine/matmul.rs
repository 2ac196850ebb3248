//! The CPU's matrix products: f32 and f64 on the `gemm` crate (on the thread pool when
//! large), f16 and bf16 computed in f32, integers by a plain loop (wrapping arithmetic).

use std::any::TypeId;

use half::{bf16, f16};

use super::threads;
use crate::error::{Error, Result};
use crate::layout::within;
use crate::num::Num;

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
        let lens: Vec<usize> = batch_lens.iter().copied().chain([rows, cols]).collect();
        let strides: Vec<isize> = (self.batch_strides.iter().copied())
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
        out.fill(T::zero());
        return Ok(());
    }
    if !lhs.fits(batch_lens, m, k) || !rhs.fits(batch_lens, k, n) {
        return Err(Error::Unsupported {
            what: "a matrix operand that leaves its buffer".into(),
        });
    }
    let mut index = vec![0usize; batch_lens.len()];
    for b in 0..batches {
        let (lo, ro) = (lhs.origin(&index), rhs.origin(&index));
        let dst = &mut out[b * m * n..(b + 1) * m * n];
        matmul(
            dst,
            m,
            n,
            k,
            lhs.data,
            lo,
            lhs.row_stride,
            lhs.col_stride,
            rhs.data,
            ro,
            rhs.row_stride,
            rhs.col_stride,
        );
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < batch_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(())
}

/// `dst (m×n, row-major) = lhs (m×k) · rhs (k×n)`, each operand given by buffer, offset and
/// (row, column) strides that keep every element inside its buffer.
#[allow(clippy::too_many_arguments)]
fn matmul<T: Num>(
    dst: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    lhs: &[T],
    lo: isize,
    l_rs: isize,
    l_cs: isize,
    rhs: &[T],
    ro: isize,
    r_rs: isize,
    r_cs: isize,
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
    let parallelism = if threads::threads() > 1 && m * n * k >= 1 << 15 {
        gemm::Parallelism::Rayon(threads::threads())
    } else {
        gemm::Parallelism::None
    };
    if id == TypeId::of::<f32>() || id == TypeId::of::<f64>() {
        let parallel = matches!(parallelism, gemm::Parallelism::Rayon(_));
        let mut run = move || {
            // SAFETY: T is f32 or f64 (checked above), which gemm supports; every position
            // the operands reach lies in their buffers (asserted above over the whole m×k
            // and k×n ranges, whatever the strides' signs), and dst holds m×n elements with
            // row stride n and column stride 1. Nothing else writes dst meanwhile.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    lhs.as_ptr().offset(lo),
                    l_cs,
                    l_rs,
                    rhs.as_ptr().offset(ro),
                    r_cs,
                    r_rs,
                    T::zero(),
                    T::one(),
                    false,
                    false,
                    false,
                    parallelism,
                )
            }
        };
        // Only a parallel product needs the pool: entering it costs a thread hand-off.
        if parallel {
            threads::install(run);
        } else {
            run();
        }
        return;
    }
    if id == TypeId::of::<f16>() || id == TypeId::of::<bf16>() {
        // Computed in f32: pack both operands as f32, multiply, round back.
        let widen =
            |data: &[T], o: isize, rs: isize, cs: isize, rows: usize, cols: usize| -> Vec<f32> {
                let mut out = Vec::with_capacity(rows * cols);
                for r in 0..rows {
                    for c in 0..cols {
                        out.push(
                            data[(o + r as isize * rs + c as isize * cs) as usize].to_f64() as f32,
                        );
                    }
                }
                out
            };
        let a = widen(lhs, lo, l_rs, l_cs, m, k);
        let b = widen(rhs, ro, r_rs, r_cs, k, n);
        let mut c = vec![0f32; m * n];
        matmul(&mut c, m, n, k, &a, 0, k as isize, 1, &b, 0, n as isize, 1);
        for (d, v) in dst.iter_mut().zip(c) {
            *d = T::from_f64(f64::from(v));
        }
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
            dst[i * n + j] = acc;
        }
    }
}
