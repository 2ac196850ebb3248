//! Gathering along an axis by a tensor of indices, and its adjoint (adding values back to the
//! positions they were gathered from), as one-hot reductions: every position of the gathered
//! axis is compared with the index, and the matching value kept. Both are ordinary jobs, so
//! they run on every device, and they add in a fixed order — no atomics, the same sums on
//! every run (OpenCL 1.2 has no atomic float add). Each costs the gathered axis's length per
//! element: made for small vocabularies (characters, bytes, classes).

use crate::element::{DType, Element};
use crate::error::Result;
use crate::ir::{CompareOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::num::Num;
use crate::storage::Storage;

use super::{Input, Output, placed, run_output, run_outputs};

/// How a gathered result's axes relate to its source and its indices.
pub(crate) struct GatherAxes {
    /// For each result axis, its position among the source's axes (`None`: an axis of the
    /// indices only).
    pub(crate) in_source: Vec<Option<usize>>,
    /// For each result axis, its position among the indices' axes.
    pub(crate) in_indices: Vec<Option<usize>>,
    /// The gathered axis's position among the source's axes.
    pub(crate) axis: usize,
}

/// A tensor's buffer and its layout (no padding).
pub(crate) type Parts<'a, T> = (&'a Storage<T>, &'a Layout);

/// Appends to `ir` (leaves 0 and 1 are taken) `index == position ? value : 0`, where leaf 0 is
/// the value, leaf 2 the index and leaf 3 the position along the gathered axis.
fn one_hot_pick(ir: &mut Ir, value: usize) -> usize {
    let (index, position) = (ir.leaf(), ir.leaf());
    let index = ir.push(IrNode::Cast(DType::I64, index));
    let hit = ir.push(IrNode::Compare(CompareOp::Equal, index, position));
    let zero = ir.push(IrNode::Scalar(0.0));
    ir.push(IrNode::Select(hit, value, zero))
}

/// The positions `0..len` along an axis, as a buffer on `like`'s device.
fn positions<T: Element>(len: usize, like: &Storage<T>) -> Result<Storage<i64>> {
    placed((0..len as i64).collect(), like.device())
}

/// `source` gathered along `axes.axis` by `indices` into a result of lengths `lens` (row-major),
/// on their device. The indices must be in range (see [`index_range`]).
pub(crate) fn gathered<T: Num, Ix: Element>(
    source: Parts<'_, T>,
    indices: Parts<'_, Ix>,
    axes: &GatherAxes,
    lens: &[usize],
) -> Result<(Storage<T>, Layout)> {
    // Iteration axes: the result's, then the gathered axis (reduced).
    let rank = lens.len();
    let len = source.1.lens()[axes.axis];
    let result_axis = |at: &[Option<usize>], j| {
        at.iter()
            .position(|&p| p == Some(j))
            .expect("every axis but the gathered one is a result axis")
    };
    let source_axes: Vec<usize> = (0..source.1.rank())
        .map(|j| {
            if j == axes.axis {
                rank
            } else {
                result_axis(&axes.in_source, j)
            }
        })
        .collect();
    let index_axes: Vec<usize> = (0..indices.1.rank())
        .map(|j| result_axis(&axes.in_indices, j))
        .collect();
    let iota = positions(len, source.0)?;
    let mut ir = Ir::default();
    let value = ir.leaf();
    let picked = one_hot_pick(&mut ir, value);
    let mut all = lens.to_vec();
    all.push(len);
    let inputs = [
        Input::new(source.0, source.1, &source_axes, rank + 1)?,
        Input::new(indices.0, indices.1, &index_axes, rank + 1)?,
        Input::new(&iota, &Layout::row_major(&[len]), &[rank], rank + 1)?,
    ];
    let output = Output::new(picked, (0..rank).collect(), ReduceOp::Sum);
    run_output(&ir, &all, &inputs, output)
}

/// The adjoint of [`gathered`]: `grad` (the result's axes) added back to the positions of a
/// source of lengths `source_lens` it was gathered from (row-major in the source's order),
/// positions gathered more than once receiving the sum, added in a fixed order.
pub(crate) fn scattered<T: Num, Ix: Element>(
    grad: Parts<'_, T>,
    indices: Parts<'_, Ix>,
    axes: &GatherAxes,
    source_lens: &[usize],
) -> Result<(Storage<T>, Layout)> {
    // Iteration axes: the source's (kept), then the result's axes from the indices only
    // (reduced).
    let rank = source_lens.len();
    let mut all = source_lens.to_vec();
    let grad_axes: Vec<usize> = (axes.in_source.iter().enumerate())
        .map(|(o, at)| match at {
            Some(j) => *j,
            None => {
                all.push(grad.1.lens()[o]);
                all.len() - 1
            }
        })
        .collect();
    let index_axes: Vec<usize> = (0..indices.1.rank())
        .map(|j| {
            let o = (axes.in_indices.iter())
                .position(|&p| p == Some(j))
                .expect("every axis of the indices is a result axis");
            grad_axes[o]
        })
        .collect();
    let len = source_lens[axes.axis];
    let iota = positions(len, grad.0)?;
    let mut ir = Ir::default();
    let value = ir.leaf();
    let picked = one_hot_pick(&mut ir, value);
    let inputs = [
        Input::new(grad.0, grad.1, &grad_axes, all.len())?,
        Input::new(indices.0, indices.1, &index_axes, all.len())?,
        Input::new(&iota, &Layout::row_major(&[len]), &[axes.axis], all.len())?,
    ];
    let output = Output::new(picked, (0..rank).collect(), ReduceOp::Sum);
    run_output(&ir, &all, &inputs, output)
}

/// The smallest and largest of `indices` (`None` when there are none), found by one job: in
/// host memory when the indices are there or keep a copy there (as small tensors copied to a
/// device do), so the check waits for nothing queued on a device; else on their device, whose
/// result the host then waits for.
pub(crate) fn index_range<Ix: Element>(indices: Parts<'_, Ix>) -> Result<Option<(i64, i64)>> {
    let (storage, layout) = indices;
    if layout.lens().contains(&0) {
        return Ok(None);
    }
    let mut ir = Ir::default();
    let index = ir.leaf();
    let wide = ir.push(IrNode::Cast(DType::I64, index));
    let axes: Vec<usize> = (0..layout.rank()).collect();
    let input = match storage.host_now() {
        Some(values) => Input::host(values, layout, &axes, axes.len())?,
        None => Input::new(storage, layout, &axes, axes.len())?,
    };
    let bound = |reduce| Output::<i64>::new(wide, Vec::new(), reduce);
    let bounds = run_outputs(
        &ir,
        layout.lens(),
        &[input],
        vec![bound(ReduceOp::Min), bound(ReduceOp::Max)],
    )?;
    let value = |(storage, _): &(Storage<i64>, Layout)| -> Result<i64> { Ok(storage.host()?[0]) };
    Ok(Some((value(&bounds[0])?, value(&bounds[1])?)))
}

/// The first index outside `0..len` in `range` (from [`index_range`]), if any.
pub(crate) fn out_of_range(range: Option<(i64, i64)>, len: usize) -> Option<i64> {
    let (lowest, highest) = range?;
    if lowest < 0 {
        Some(lowest)
    } else {
        (highest >= len as i64).then_some(highest)
    }
}
