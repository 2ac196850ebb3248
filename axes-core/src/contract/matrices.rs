//! A contraction as (batched) matrices: the axes of each matrix dimension merged where the
//! strides allow (else the operand is packed once), run on a device as a
//! [`MatmulJob`](crate::protocol::MatmulJob) or on the CPU by the engine's GEMM.

use super::PACKED;
use super::roles::Roles;
use crate::dispatch;
use crate::element::Element;
use crate::engine::matmul::{HostMatrix, batched_matmul};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::num::Num;
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// One matrix dimension of an operand: merged length and stride, if its axes merge.
fn merge(layout: &Layout, axes: &[usize]) -> Option<(usize, isize)> {
    let (lens, strides) = (layout.lens(), layout.strides());
    if axes.iter().any(|&a| lens[a] == 0) {
        return Some((0, 1));
    }
    let mut len = 1usize;
    let mut stride = 0isize;
    let mut next: Option<isize> = None;
    for &a in axes.iter().rev() {
        if lens[a] == 1 {
            continue;
        }
        if strides[a] < 0 {
            return None;
        }
        match next {
            Some(expected) if expected != strides[a] => return None,
            None => stride = strides[a],
            _ => {}
        }
        next = Some(strides[a] * lens[a] as isize);
        len *= lens[a];
    }
    Some((len, if len <= 1 { 1 } else { stride }))
}

/// Orders axes by decreasing |stride| of `layout` (the order in which they merge).
fn by_stride(layout: &Layout, axes: &[usize]) -> Vec<usize> {
    let mut sorted = axes.to_vec();
    sorted.sort_by_key(|&a| std::cmp::Reverse(layout.strides()[a].unsigned_abs()));
    sorted
}

/// A matrix view of one operand: buffer, offset of each batch entry, and strides of the two
/// merged dimensions.
struct MatrixOperand<T> {
    /// The operand packed into `[batch, rows, cols]` order, when its strides allow no view.
    packed: Option<Storage<T>>,
    offset: usize,
    batch_strides: Vec<isize>,
    /// The batch axes merged into one (length, stride), where they merge.
    batch: Option<(usize, isize)>,
    rows: (usize, isize),
    cols: (usize, isize),
}

impl<T: Element> MatrixOperand<T> {
    /// The operand in host memory, over `storage` (the tensor's own) unless it was packed.
    fn in_host<'a>(&'a self, storage: &'a Storage<T>) -> HostMatrix<'a, T> {
        HostMatrix {
            data: self.packed.as_ref().unwrap_or(storage).as_slice(),
            offset: self.offset,
            batch_strides: &self.batch_strides,
            row_stride: self.rows.1,
            col_stride: self.cols.1,
        }
    }
}

/// Makes `t` a [batch..., rows..., cols...] matrix operand, packing it (on its device) only
/// when its strides do not allow a view. On a device the batch axes must merge into one too.
fn matrix_operand<T: Element, A: AxisSet>(
    t: &Tensor<T, A>,
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
) -> Result<MatrixOperand<T>> {
    let layout = *t.layout();
    let on_device = !t.device().is_cpu();
    if !layout.is_padded()
        && let (Some(r), Some(c)) = (merge(&layout, rows), merge(&layout, cols))
        && (!on_device || merge(&layout, batch).is_some())
    {
        return Ok(MatrixOperand {
            packed: None,
            offset: layout.offset(),
            batch_strides: batch.iter().map(|&a| layout.strides()[a]).collect(),
            batch: merge(&layout, batch),
            rows: r,
            cols: c,
        });
    }
    // Pack into [batch, rows, cols] row-major order.
    PACKED.with(|p| p.set(p.get() + 1));
    let order: Vec<usize> = batch.iter().chain(rows).chain(cols).copied().collect();
    let data = t.packed_in(&order)?;
    let lens: Vec<usize> = order.iter().map(|&a| layout.lens()[a]).collect();
    let packed = Layout::row_major(&lens);
    let nb = batch.len();
    let all: Vec<usize> = (0..order.len()).collect();
    let r = merge(&packed, &all[nb..nb + rows.len()]).expect("row-major axes merge");
    let c = merge(&packed, &all[nb + rows.len()..]).expect("row-major axes merge");
    Ok(MatrixOperand {
        packed: Some(data),
        offset: 0,
        batch_strides: packed.strides()[..nb].to_vec(),
        batch: merge(&packed, &all[..nb]),
        rows: r,
        cols: c,
    })
}

/// A contraction laid out as (batched) matrices: the axes of each matrix dimension, each
/// operand's matrix view, and the result's lengths in `[batch, m, n]` order.
pub(super) struct Matrices<T> {
    batch_x: Vec<usize>,
    m_axes: Vec<usize>,
    n_axes: Vec<usize>,
    lhs: MatrixOperand<T>,
    rhs: MatrixOperand<T>,
    comp_lens: Vec<usize>,
}

impl<T: Num> Matrices<T> {
    /// Checks the paired lengths and views `x` and `y` as matrices for `roles`.
    pub(super) fn new<L: AxisSet, R: AxisSet>(
        x: &Tensor<T, L>,
        y: &Tensor<T, R>,
        roles: &Roles,
    ) -> Result<Self> {
        let (xl, yl) = (x.lens(), y.lens());
        for &(a, b) in roles.k.iter().chain(&roles.b) {
            if xl[a] != yl[b] {
                return Err(Error::LengthMismatch {
                    axis: L::names()[a].to_string(),
                    left: xl[a],
                    right: yl[b],
                });
            }
        }
        // Orders: m and k by x's strides, n by y's; batch in x's order.
        let m_axes = by_stride(x.layout(), &roles.m);
        let mut k_pairs = roles.k.clone();
        k_pairs.sort_by_key(|&(a, _)| std::cmp::Reverse(x.layout().strides()[a].unsigned_abs()));
        let n_axes = by_stride(y.layout(), &roles.n);
        let batch_x: Vec<usize> = roles.b.iter().map(|&(a, _)| a).collect();
        let batch_y: Vec<usize> = roles.b.iter().map(|&(_, b)| b).collect();
        let kx: Vec<usize> = k_pairs.iter().map(|&(a, _)| a).collect();
        let ky: Vec<usize> = k_pairs.iter().map(|&(_, b)| b).collect();
        let lhs = matrix_operand(x, &batch_x, &m_axes, &kx)?;
        let rhs = matrix_operand(y, &batch_y, &ky, &n_axes)?;
        let comp_lens: Vec<usize> = (batch_x.iter().map(|&a| xl[a]))
            .chain(m_axes.iter().map(|&a| xl[a]))
            .chain(n_axes.iter().map(|&b| yl[b]))
            .collect();
        Ok(Matrices {
            batch_x,
            m_axes,
            n_axes,
            lhs,
            rhs,
            comp_lens,
        })
    }

    /// Runs the product on the CPU (both operands in host memory).
    pub(super) fn run_on_host<L: AxisSet, R: AxisSet>(
        &self,
        x: &Tensor<T, L>,
        y: &Tensor<T, R>,
    ) -> Result<(Storage<T>, Layout)> {
        let Matrices {
            batch_x,
            lhs,
            rhs,
            comp_lens,
            ..
        } = self;
        // The result, row-major in [batch, m, n] computation order.
        let batch_lens: Vec<usize> = batch_x.iter().map(|&a| x.lens()[a]).collect();
        let count = comp_lens
            .iter()
            .try_fold(1usize, |n, &l| n.checked_mul(l))
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{} · {}", x.describe_lengths(), y.describe_lengths()),
            })?;
        let (m, k, n) = (lhs.rows.0, lhs.cols.0, rhs.cols.0);
        let mut out = vec![T::zero(); count];
        let (lhs, rhs) = (lhs.in_host(x.storage()), rhs.in_host(y.storage()));
        batched_matmul(&mut out, &batch_lens, (m, n, k), &lhs, &rhs)?;
        let layout = self.result_layout(L::RANK, R::RANK);
        Ok((Storage::new(out), layout))
    }

    /// Runs the product on `backend`, where `x`, `y` and the packed operands are.
    pub(super) fn run_on<L: AxisSet, R: AxisSet>(
        &self,
        backend: &'static dyn crate::protocol::Backend,
        x: &Tensor<T, L>,
        y: &Tensor<T, R>,
    ) -> Result<(Storage<T>, Layout)> {
        let (lhs, rhs) = (&self.lhs, &self.rhs);
        let count = self
            .comp_lens
            .iter()
            .try_fold(1usize, |n, &l| n.checked_mul(l))
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{} · {}", x.describe_lengths(), y.describe_lengths()),
            })?;
        let layout = self.result_layout(L::RANK, R::RANK);
        let (m, k, n) = (lhs.rows.0, lhs.cols.0, rhs.cols.0);
        let memory = if count == 0 {
            backend.upload(&[])?
        } else {
            fn side<'s, T: Element>(
                op: &'s MatrixOperand<T>,
                storage: &'s Storage<T>,
                backend: &'static dyn crate::protocol::Backend,
            ) -> Result<crate::protocol::MatrixSide<'s>> {
                let storage = op.packed.as_ref().unwrap_or(storage);
                let memory = storage.memory().ok_or_else(|| Error::DeviceMismatch {
                    left: storage.device().to_string(),
                    right: Device::Accelerator(backend).to_string(),
                })?;
                Ok(crate::protocol::MatrixSide {
                    memory,
                    offset: op.offset,
                    batch_stride: op.batch.map_or(0, |b| b.1),
                    row_stride: op.rows.1,
                    col_stride: op.cols.1,
                })
            }
            let job = crate::protocol::MatmulJob {
                dtype: T::DTYPE,
                batch: lhs.batch.map_or(1, |b| b.0),
                m,
                n,
                k,
                lhs: side(lhs, x.storage(), backend)?,
                rhs: side(rhs, y.storage(), backend)?,
            };
            backend.matmul(&job)?
        };
        Ok((dispatch::device_storage(backend, memory, count)?, layout))
    }

    /// The row-major `[batch, m, n]` result viewed in the type's order: x's kept axes (batch
    /// and m) in x's order, then y's n axes in y's order.
    fn result_layout(&self, left_rank: usize, right_rank: usize) -> Layout {
        let nb = self.batch_x.len();
        let mut type_order: Vec<usize> = Vec::new();
        for a in 0..left_rank {
            if let Some(p) = self.batch_x.iter().position(|&b| b == a) {
                type_order.push(p);
            } else if let Some(p) = self.m_axes.iter().position(|&b| b == a) {
                type_order.push(nb + p);
            }
        }
        for b in 0..right_rank {
            if let Some(p) = self.n_axes.iter().position(|&c| c == b) {
                type_order.push(nb + self.m_axes.len() + p);
            }
        }
        Layout::row_major(&self.comp_lens).permuted(&type_order)
    }
}
