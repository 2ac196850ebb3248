//! Joining tensors along an axis ([`Tensor::concat`]) and gathering along an axis by a tensor
//! of indices ([`Tensor::gather`]), where the tensors are.
//!
//! On a device, gathering and its adjoint (adding values back to the positions they were
//! gathered from) are one-hot reductions: every position of the gathered axis is compared
//! with the index, and the matching value kept. Both are ordinary jobs, so they run on every
//! device, and they add in a fixed order — no atomics, the same sums on every run (OpenCL 1.2
//! has no atomic float add). Each costs the gathered axis's length per element: made for
//! small vocabularies (characters, bytes, classes). In host memory both read or add each
//! element once, in row-major order.

use crate::axis::Axis;
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::ir::{CompareOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::{
    AxisList, AxisSet, Difference, DifferenceWith, HasAxis, MAX_RANK, UnionWith, find_positions,
};
use crate::num::Num;
use crate::storage::{self, Storage};
use crate::tensor::{FlatParts, Gathered, IndexElement, Tensor};

use super::{Input, Output, common_device, copied_into, filled, placed, run_output, run_outputs};

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

/// Where each axis of `Gathered<A, X, I>` is in `A` and in `I`, and where `X` is in `A`.
pub(crate) fn gather_axes<A, X, I>() -> GatherAxes
where
    X: Axis,
    I: AxisSet,
    A: HasAxis<X> + DifferenceWith<(X,)>,
    Difference<A, (X,)>: UnionWith<I>,
{
    let rank = <Gathered<A, X, I>>::RANK;
    let at = |p: [usize; MAX_RANK], n| p[..rank].iter().map(|&j| (j < n).then_some(j)).collect();
    GatherAxes {
        in_source: at(find_positions::<Gathered<A, X, I>, A>(), A::RANK),
        in_indices: at(find_positions::<Gathered<A, X, I>, I>(), I::RANK),
        axis: <A as HasAxis<X>>::POS,
    }
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
    if grad.0.device().is_host() && indices.0.device().is_host() {
        return scattered_on_host(grad, indices, axes, source_lens);
    }
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

/// [`scattered`] in host memory: one pass over the gradient in row-major order, each element
/// added to the position its index picked (the same order on every run).
fn scattered_on_host<T: Num, Ix: Element>(
    grad: Parts<'_, T>,
    indices: Parts<'_, Ix>,
    axes: &GatherAxes,
    source_lens: &[usize],
) -> Result<(Storage<T>, Layout)> {
    let lens = grad.1.lens();
    let source = Layout::row_major(source_lens);
    // Where each gradient element's index is, and its position in the source but along the
    // gathered axis, as views over the gradient's axes.
    let at_index = indices.1.broadcast(&axes.in_indices, lens);
    let at_source = source.broadcast(&axes.in_source, lens);
    let stride = source.strides()[axes.axis];
    let mut out = storage::filled(source_lens.iter().product(), T::zero())?;
    let (values, ids) = (grad.0.host()?, indices.0.host()?);
    if !grad.1.is_padded() && !indices.1.is_padded() {
        // Row by row, in the same order: each row's elements a fixed step apart in all three.
        let (grads, row_len, grad_step) = grad.1.row_starts();
        let (picks, _, pick_step) = at_index.row_starts();
        let (bases, _, base_step) = at_source.row_starts();
        for ((g, pick), base) in grads.zip(picks).zip(bases) {
            let (g, pick, base) = (g as isize, pick as isize, base as isize);
            for j in 0..row_len as isize {
                let row = ids[(pick + j * pick_step) as usize].to_i64() as isize;
                let to = (base + j * base_step + row * stride) as usize;
                out[to] = out[to].add(values[(g + j * grad_step) as usize]);
            }
        }
        return Ok((Storage::from_host_vec(out), source));
    }
    let positions = grad
        .1
        .positions()
        .zip(at_index.positions())
        .zip(at_source.positions());
    for ((value, id), base) in positions {
        let (Some(value), Some(id), Some(base)) = (value, id, base) else {
            continue;
        };
        let row = ids[id].to_i64();
        let to = (base as isize + row as isize * stride) as usize;
        out[to] = out[to].add(values[value]);
    }
    Ok((Storage::from_host_vec(out), source))
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

impl<T: Num, A: AxisSet> Tensor<T, A> {
    /// The tensors joined end to end along axis `X`; every other axis must have the same
    /// length in all of them. Copies into a fresh buffer, on the parts' device.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// #[derive(Axis)] struct Feature;
    /// let a = Tensor::<i32, (Time, Feature)>::from_vec((Time.len(1), Feature.len(2)), vec![1, 2])?;
    /// let b = Tensor::<i32, (Feature, Time)>::from_vec((Time.len(2), Feature.len(2)), vec![3, 4, 5, 6])?
    ///     .axes_with_order::<(Time, Feature)>();
    /// let ab = Tensor::concat::<Time>(&[&a, &b])?;
    /// assert_eq!(ab.to_vec(), [1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn concat<X: Axis>(parts: &[&Self]) -> Result<Self>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let lens = Self::concat_lengths::<X>(parts)?;
        let device = common_device(parts.iter().map(|p| p.device()))?;
        let Some(device) = device.filter(|d| !d.is_host()) else {
            return Self::concat_on_host::<X>(parts, &lens);
        };
        // One copy job per part, into its stretch of a buffer on the device.
        let layout = Layout::row_major(&lens);
        let mut out = filled(device, lens.iter().product(), T::zero())?;
        let mut start = 0;
        for part in parts {
            let part = unpadded(part)?;
            let len = part.lens()[axis];
            let stretch = layout.sliced(axis, start, start + len, 1);
            out = copied_into(part.storage(), part.layout(), out, stretch)?.0;
            start += len;
        }
        let flat: Vec<&FlatParts> = parts.iter().map(|p| p.flat_parts()).collect();
        Ok(Tensor::from_parts(out, layout)
            .expect("a fresh buffer fits its row-major layout")
            .with_flat_parts(FlatParts::merged(&flat)))
    }

    /// Elements picked along axis `X` by an index tensor: the result has `A`'s other axes and
    /// the index tensor's axes; at each position, axis `X` is read at the index found there.
    /// Axes that `A` and the index tensor share are matched (label lookup:
    /// `(Batch, Class)` gathered by labels `(Batch,)` gives `(Batch,)`); the index tensor's
    /// other axes are new (embedding lookup: `(Vocab, Emb)` by ids `(Batch, Seq)` gives
    /// `(Emb, Batch, Seq)`).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Class;
    /// let logits = Tensor::<f32, (Batch, Class)>::from_vec((Batch.len(2), Class.len(3)), vec![0., 1., 2., 3., 4., 5.])?;
    /// let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![2, 0])?;
    /// let picked: Tensor<f32, (Batch,)> = logits.gather::<Class, _, _>(&labels)?;
    /// assert_eq!(picked.to_vec(), [2., 3.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    ///
    /// On a device it is one job per call that compares every position of `X` with each index
    /// (a one-hot reduction, no atomics): its cost grows with the length of `X`, so it suits
    /// small vocabularies; in host memory each element is read directly.
    pub fn gather<X, I, Ix>(&self, indices: &Tensor<Ix, I>) -> Result<Tensor<T, Gathered<A, X, I>>>
    where
        X: Axis,
        I: AxisSet,
        Ix: IndexElement,
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: UnionWith<I>,
    {
        let lens = self.gather_lengths::<X, I, Ix>(indices)?;
        let device = common_device([self.device(), indices.device()])?;
        if device.is_none_or(|d| d.is_host()) {
            return self.gather_on_host::<X, I, Ix>(indices, &lens);
        }
        let len = self.len_of::<X>();
        let (source, indices) = (unpadded(self)?, unpadded(indices)?);
        let range = index_range((indices.storage(), indices.layout()))?;
        if let Some(index) = out_of_range(range, len) {
            return Err(Error::GatherIndex {
                axis: X::name().into_owned(),
                index,
                len,
            });
        }
        let (storage, layout) = gathered(
            (source.storage(), source.layout()),
            (indices.storage(), indices.layout()),
            &gather_axes::<A, X, I>(),
            &lens,
        )?;
        Ok(Tensor::from_parts(storage, layout).expect("a job's result fits its layout"))
    }
}

/// `tensor`, or a copy without padding where it is padded (a job's operand has none).
pub(crate) fn unpadded<T: Element, A: AxisSet>(tensor: &Tensor<T, A>) -> Result<Tensor<T, A>> {
    if tensor.layout().is_padded() {
        tensor.contiguous()
    } else {
        Ok(tensor.clone())
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The gradient of a `(J, K, L)` gather from a `(vocab, J)` table by `(K, L)` indices,
    /// the gradient and the indices laid out in every axis order, sliced and padded, against
    /// a plain loop over the gradient in row-major order of its axes (integer values, so the
    /// sums are exact).
    #[test]
    fn scattered_adds_rows_back_from_any_layout() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let axes = GatherAxes {
            in_source: vec![Some(1), None, None],
            in_indices: vec![None, Some(0), Some(1)],
            axis: 0,
        };
        for round in 0..200 {
            let vocab = rng.random_range(1..5);
            let lens = [0, 1, 2].map(|_| rng.random_range(1..5usize));
            // The gradient: stored in a random axis order, one axis sliced with step 2 or -1.
            let (grad_storage, grad) = {
                let order = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]][round % 4];
                let axis = rng.random_range(0..3);
                let mut stored = lens;
                stored[axis] = lens[axis] * 2;
                let in_order: Vec<usize> = order.iter().map(|&a| stored[a]).collect();
                let count: usize = stored.iter().product();
                let data: Vec<f64> = (0..count)
                    .map(|_| rng.random_range(-9..10) as f64)
                    .collect();
                let back: Vec<usize> = (0..3)
                    .map(|a| order.iter().position(|&o| o == a).unwrap())
                    .collect();
                let full = Layout::row_major(&in_order).permuted(&back);
                let view = match round % 3 {
                    0 => full.sliced(axis, 0, stored[axis], -2),
                    1 => full.sliced(axis, 0, stored[axis], 2),
                    _ => full.sliced(axis, 0, lens[axis], 1),
                };
                let view = match round % 5 {
                    0 => view.padded(axis, 1, 0).unwrap(),
                    _ => view,
                };
                (Storage::new(data), view)
            };
            let glens = grad.lens().to_vec();
            // The indices, stored transposed on odd rounds.
            let ids: Vec<i64> = (0..glens[1] * glens[2])
                .map(|_| rng.random_range(0..vocab) as i64)
                .collect();
            let index_layout = match round % 2 {
                0 => Layout::row_major(&glens[1..]),
                _ => Layout::row_major(&[glens[2], glens[1]]).permuted(&[1, 0]),
            };
            let (out, layout) = scattered(
                (&grad_storage, &grad),
                (&Storage::new(ids.clone()), &index_layout),
                &axes,
                &[vocab, glens[0]],
            )
            .unwrap();
            let got = out.host().unwrap().to_vec();
            assert_eq!(layout, Layout::row_major(&[vocab, glens[0]]));
            let values = grad_storage.host().unwrap();
            let mut expected = vec![0.0; vocab * glens[0]];
            for j in 0..glens[0] {
                for k in 0..glens[1] {
                    for l in 0..glens[2] {
                        let id = ids[index_layout.position(&[k, l]).unwrap()] as usize;
                        let value = grad.position(&[j, k, l]).map_or(0.0, |p| values[p]);
                        expected[id * glens[0] + j] += value;
                    }
                }
            }
            assert_eq!(got, expected, "round {round}: {grad:?}");
        }
    }
}
