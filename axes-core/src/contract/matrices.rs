//! A contraction as (batched) matrices: the axes of each matrix dimension merged where the
//! strides allow (else the operand is packed once), run on a device as a
//! where the operands live (see [`dispatch::matmul`]).

use std::borrow::Cow;

use super::roles::Roles;
use crate::dispatch::{self, MatrixOperand};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::num::Num;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// One operand of a contraction: a buffer, the view of it that is contracted (of any rank:
/// a convolution contracts a window view that no axis list names), and its axes' names for
/// messages.
pub(crate) struct Operand<'a, T> {
    pub(crate) storage: &'a Storage<T>,
    pub(crate) layout: Layout,
    pub(crate) names: fn() -> Vec<Cow<'static, str>>,
}

impl<'a, T: crate::element::Element> Operand<'a, T> {
    /// The tensor `t` as an operand.
    pub(crate) fn of<A: AxisSet>(t: &'a Tensor<T, A>) -> Self {
        Operand {
            storage: t.storage(),
            layout: *t.layout(),
            names: A::names,
        }
    }

    /// `name=len, …` for messages.
    fn describe_lengths(&self) -> String {
        ((self.names)().iter().zip(self.layout.lens()))
            .map(|(name, len)| format!("{name}={len}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

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

/// A matrix view of one operand: its batch axes, rows and columns each merged into one
/// (length, stride), over its own buffer or a packed copy.
struct MatrixView<T> {
    /// The operand packed into `[batch, rows, cols]` order, when its strides allow no view.
    packed: Option<Storage<T>>,
    offset: usize,
    batch: (usize, isize),
    rows: (usize, isize),
    cols: (usize, isize),
}

impl<T> MatrixView<T> {
    /// The operand as the matrix product reads it, over `storage` (the tensor's own) unless
    /// it was packed.
    fn operand<'a>(&'a self, storage: &'a Storage<T>) -> MatrixOperand<'a, T> {
        MatrixOperand {
            storage: self.packed.as_ref().unwrap_or(storage),
            offset: self.offset,
            batch_stride: self.batch.1,
            row_stride: self.rows.1,
            col_stride: self.cols.1,
        }
    }
}

/// Makes `t` a [batch..., rows..., cols...] matrix view, packing it (on its device) only
/// when its strides do not let each of the three groups of axes merge into one.
fn matrix_view<T: Num>(
    t: &Operand<'_, T>,
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
) -> Result<MatrixView<T>> {
    let layout = t.layout;
    if !layout.is_padded()
        && let (Some(b), Some(r), Some(c)) = (
            merge(&layout, batch),
            merge(&layout, rows),
            merge(&layout, cols),
        )
    {
        return Ok(MatrixView {
            packed: None,
            offset: layout.offset(),
            batch: b,
            rows: r,
            cols: c,
        });
    }
    // Pack into [batch, rows, cols] row-major order.
    #[cfg(feature = "test-hooks")]
    super::PACKED.with(|p| p.set(p.get() + 1));
    let order: Vec<usize> = batch.iter().chain(rows).chain(cols).copied().collect();
    let data = dispatch::packed(t.storage, &layout.permuted(&order))?;
    let lens: Vec<usize> = order.iter().map(|&a| layout.lens()[a]).collect();
    let packed = Layout::row_major(&lens);
    let (nb, nr) = (batch.len(), rows.len());
    let all: Vec<usize> = (0..order.len()).collect();
    let merged = |axes: &[usize]| merge(&packed, axes).expect("row-major axes merge");
    Ok(MatrixView {
        packed: Some(data),
        offset: 0,
        batch: merged(&all[..nb]),
        rows: merged(&all[nb..nb + nr]),
        cols: merged(&all[nb + nr..]),
    })
}

/// A contraction laid out as (batched) matrices: the axes of each matrix dimension, each
/// operand's matrix view, and the result's lengths in `[batch, m, n]` order.
pub(super) struct Matrices<T> {
    batch_x: Vec<usize>,
    m_axes: Vec<usize>,
    n_axes: Vec<usize>,
    lhs: MatrixView<T>,
    rhs: MatrixView<T>,
    comp_lens: Vec<usize>,
}

impl<T: Num> Matrices<T> {
    /// Checks the paired lengths and views `x` and `y` as matrices for `roles`.
    pub(super) fn new(x: &Operand<'_, T>, y: &Operand<'_, T>, roles: &Roles) -> Result<Self> {
        let (xl, yl) = (x.layout.lens(), y.layout.lens());
        for &(a, b) in roles.k.iter().chain(&roles.b) {
            if xl[a] != yl[b] {
                return Err(Error::LengthMismatch {
                    axis: (x.names)()[a].to_string(),
                    left: xl[a],
                    right: yl[b],
                });
            }
        }
        // Orders: m and k by x's strides, n by y's; batch in x's order.
        let m_axes = by_stride(&x.layout, &roles.m);
        let mut k_pairs = roles.k.clone();
        k_pairs.sort_by_key(|&(a, _)| std::cmp::Reverse(x.layout.strides()[a].unsigned_abs()));
        let n_axes = by_stride(&y.layout, &roles.n);
        let batch_x: Vec<usize> = roles.b.iter().map(|&(a, _)| a).collect();
        let batch_y: Vec<usize> = roles.b.iter().map(|&(_, b)| b).collect();
        let kx: Vec<usize> = k_pairs.iter().map(|&(a, _)| a).collect();
        let ky: Vec<usize> = k_pairs.iter().map(|&(_, b)| b).collect();
        let lhs = matrix_view(x, &batch_x, &m_axes, &kx)?;
        let rhs = matrix_view(y, &batch_y, &ky, &n_axes)?;
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

    /// Runs the product where `x` and `y` are: the result buffer, and its layout in the
    /// result type's axis order.
    pub(super) fn run(
        &self,
        x: &Operand<'_, T>,
        y: &Operand<'_, T>,
    ) -> Result<(Storage<T>, Layout)> {
        let (lhs, rhs) = (&self.lhs, &self.rhs);
        if self
            .comp_lens
            .iter()
            .try_fold(1usize, |n, &l| n.checked_mul(l))
            .is_none()
        {
            return Err(Error::SizeOverflow {
                lengths: format!("{} · {}", x.describe_lengths(), y.describe_lengths()),
            });
        }
        let dims = (lhs.rows.0, rhs.cols.0, lhs.cols.0);
        let storage = dispatch::matmul(
            lhs.batch.0,
            dims,
            &lhs.operand(x.storage),
            &rhs.operand(y.storage),
        )?;
        Ok((
            storage,
            self.result_layout(x.layout.rank(), y.layout.rank()),
        ))
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
