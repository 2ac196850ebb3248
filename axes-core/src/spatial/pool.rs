//! [`Pool`]: the maximum or the mean of every window of the input.

use super::PerRole;
use super::axes::{SpatialAxes, SpatialRole};
use super::windows::{
    WindowAxis, fold_leaves, offset_reads, padded_input, window_layout, window_sums,
};
use crate::dispatch::{Input, Output, placed, run_output, run_outputs};
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// What a pooling takes of each window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolOp {
    /// The largest element; its gradient goes to the first largest in the window's order
    /// (outer spatial axis first), as PyTorch's `max_pool`. Padding is −∞.
    Max,
    /// The mean over the window, padding (zeros) counted, as PyTorch's `avg_pool` with
    /// `count_include_pad`.
    Mean,
}

/// A pooling along the input's spatial axes, found by role ([`SpatialAxes`]: the axis with
/// the role `Width`; `Height` and `Width`; or `Depth`, `Height` and `Width`): each window's
/// maximum or mean. The result has the input's axes, the spatial ones as long as the windows
/// that fit. The stride is the window's length unless set (as in PyTorch); padding is 0.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::spatial::Pool;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
/// #[derive(Axis)] #[axis(role = Width)] struct Cols;
/// let x = Tensor::<f32, (Rows, Cols)>::from_vec((Rows.len(2), Cols.len(4)), vec![
///     1., 5., 2., 0.,
///     3., 4., 7., 6.])?;
/// assert_eq!(Pool::max(2).run(&x)?.to_vec(), [5., 7.]);
/// assert_eq!(Pool::mean(2).run(&x)?.to_vec(), [3.25, 3.75]);
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    op: PoolOp,
    kernel: PerRole,
    stride: Option<PerRole>,
    padding: PerRole,
}

/// The plan of one call: each window.
pub(crate) struct PoolPlan {
    pub(crate) windows: Vec<WindowAxis>,
}

impl Pool {
    /// The maximum over windows `kernel` long along every spatial axis.
    pub const fn max(kernel: usize) -> Self {
        Pool {
            op: PoolOp::Max,
            kernel: [kernel; 3],
            stride: None,
            padding: [0; 3],
        }
    }

    /// The mean over windows `kernel` long along every spatial axis.
    pub const fn mean(kernel: usize) -> Self {
        Pool {
            op: PoolOp::Mean,
            ..Pool::max(kernel)
        }
    }

    /// What it takes of each window.
    pub const fn op(&self) -> PoolOp {
        self.op
    }

    /// The window's length along the axis with the role `role`.
    pub const fn kernel_along(mut self, role: SpatialRole, kernel: usize) -> Self {
        self.kernel[role.index()] = kernel;
        self
    }

    /// The step between windows, along every spatial axis.
    pub const fn stride(mut self, stride: usize) -> Self {
        self.stride = Some([stride; 3]);
        self
    }

    /// The step between windows along the axis with the role `role` (the others keep theirs).
    pub const fn stride_along(mut self, role: SpatialRole, stride: usize) -> Self {
        let mut strides = match self.stride {
            Some(s) => s,
            None => self.kernel,
        };
        strides[role.index()] = stride;
        self.stride = Some(strides);
        self
    }

    /// Positions added at both ends of every spatial axis.
    pub const fn padding(mut self, padding: usize) -> Self {
        self.padding = [padding; 3];
        self
    }

    /// Positions added at both ends of the axis with the role `role`.
    pub const fn padding_along(mut self, role: SpatialRole, padding: usize) -> Self {
        self.padding[role.index()] = padding;
        self
    }

    /// The pooling of `input`, on its device.
    pub fn run<T: Float, A: SpatialAxes>(&self, input: &Tensor<T, A>) -> Result<Tensor<T, A>> {
        let plan = self.plan(input)?;
        let (padded, layout) = self.padded(input, &plan)?;
        let ((storage, layout), _) = self.forward(&plan, &padded, &layout, false)?;
        Ok(Tensor::from_parts(storage, layout).expect("a fresh result fits its buffer"))
    }

    /// Plans a call on `input`.
    pub(crate) fn plan<T: Float, A: SpatialAxes>(&self, input: &Tensor<T, A>) -> Result<PoolPlan> {
        let names = A::names();
        let stride = self.stride.unwrap_or(self.kernel);
        let windows = (A::spatial().into_iter())
            .map(|(role, axis)| {
                let r = role.index();
                WindowAxis::new(
                    &names[axis],
                    axis,
                    input.lens()[axis],
                    self.kernel[r],
                    [stride[r], self.padding[r], 1],
                )
            })
            .collect::<Result<_>>()?;
        Ok(PoolPlan { windows })
    }

    /// The input padded (−∞ for the maximum, zeros for the mean), written out where padded.
    pub(crate) fn padded<T: Float, A: SpatialAxes>(
        &self,
        input: &Tensor<T, A>,
        plan: &PoolPlan,
    ) -> Result<(Storage<T>, Layout)> {
        let fill = match self.op {
            PoolOp::Max => T::from_f64(f64::NEG_INFINITY),
            PoolOp::Mean => T::zero(),
        };
        padded_input(input.storage(), input.layout(), &plan.windows, fill)
    }

    /// The number of elements in one window.
    fn window_size(plan: &PoolPlan) -> usize {
        plan.windows.iter().map(|w| w.kernel).product()
    }

    /// The pooling of the padded input: one job over the result's positions, a leaf per
    /// element of the window, combined in one order whatever the axes' order. With `keep`, the
    /// maximum also gives each window's first largest offset (the tape's, for the backward).
    #[allow(clippy::type_complexity)]
    pub(crate) fn forward<T: Float>(
        &self,
        plan: &PoolPlan,
        padded: &Storage<T>,
        layout: &Layout,
        keep: bool,
    ) -> Result<((Storage<T>, Layout), Option<(Storage<T>, Layout)>)> {
        let view = window_layout(layout, padded.len(), &plan.windows)?;
        let rank = layout.rank();
        let reads = offset_reads(&view, plan.windows.len(), padded.len());
        let count = reads.len();
        let op = match self.op {
            PoolOp::Max => BinaryOp::Max,
            PoolOp::Mean => BinaryOp::Add,
        };
        let mut ir = fold_leaves(count, op);
        let mut root = ir.nodes.len() - 1;
        if self.op == PoolOp::Mean {
            let scale = ir.push(IrNode::Scalar(1.0 / count as f64));
            root = ir.push(IrNode::Binary(BinaryOp::Mul, root, scale));
        }
        let axes: Vec<usize> = (0..rank).collect();
        let mut outputs = vec![Output::new(root, axes.clone(), ReduceOp::Sum)];
        let keep = keep && self.op == PoolOp::Max;
        if keep {
            // The first offset k whose element equals the maximum (`count` where none does:
            // a NaN maximum).
            let leaves: Vec<usize> = (ir.nodes.iter().enumerate())
                .filter_map(|(i, node)| matches!(node, IrNode::Leaf(_)).then_some(i))
                .collect();
            let mut first = ir.push(IrNode::Scalar(count as f64));
            for k in (0..count).rev() {
                let at = ir.push(IrNode::Compare(CompareOp::Equal, leaves[k], root));
                let offset = ir.push(IrNode::Scalar(k as f64));
                first = ir.push(IrNode::Select(at, offset, first));
            }
            outputs.push(Output::new(first, axes.clone(), ReduceOp::Sum));
        }
        let inputs = (reads.iter())
            .map(|read| Input::new(padded, read, &axes, rank))
            .collect::<Result<Vec<_>>>()?;
        let mut results = run_outputs(&ir, &view.lens()[..rank], &inputs, outputs)?.into_iter();
        let value = results.next().expect("one result per output");
        Ok((value, results.next()))
    }

    /// The input's gradient given the result's (`grad`): the padded input's lengths and, for
    /// the maximum, each window's first largest offset (from [`Pool::forward`]). Windows that
    /// do not overlap get their gradient written straight over a buffer of zeros, in one job;
    /// overlapping ones are summed back onto the input.
    pub(crate) fn backward<T: Float, A: SpatialAxes>(
        &self,
        plan: &PoolPlan,
        padded_lens: &[usize],
        first: Option<&(Storage<T>, Layout)>,
        grad: &Tensor<T, A>,
    ) -> Result<Tensor<T, A>> {
        let grad = crate::dispatch::unpadded(grad)?;
        let whole = Layout::row_major(padded_lens);
        let count = whole.element_count().unwrap_or(0);
        let view = window_layout(&whole, count, &plan.windows)?;
        let (rank, all) = (A::RANK, view.rank());
        let axes: Vec<usize> = (0..all).collect();
        let kernel_lens = &view.lens()[rank..];
        // A tensor over the result's axes seen over the window view (stride 0 along the
        // kernel axes).
        let spread = |layout: &Layout| {
            let from: Vec<Option<usize>> = (0..all).map(|a| (a < rank).then_some(a)).collect();
            layout.broadcast(&from, view.lens())
        };
        let mut ir = Ir::default();
        let g = ir.leaf();
        let mut inputs = vec![Input::new(
            grad.storage(),
            &spread(grad.layout()),
            &axes,
            all,
        )?];
        let offsets;
        match (self.op, first) {
            (PoolOp::Max, Some((first, first_layout))) => {
                // The gradient where the window offset is the first largest, zero elsewhere.
                let size = kernel_lens.iter().product::<usize>();
                let numbers: Vec<T> = (0..size).map(|k| T::from_f64(k as f64)).collect();
                offsets = placed(crate::storage::copied(&numbers)?, grad.device())?;
                let offsets_layout = {
                    let row = Layout::row_major(kernel_lens);
                    let from: Vec<Option<usize>> = (0..all).map(|a| a.checked_sub(rank)).collect();
                    row.broadcast(&from, view.lens())
                };
                let (first_at, offset) = (ir.leaf(), ir.leaf());
                let zero = ir.push(IrNode::Scalar(0.0));
                let is_first = ir.push(IrNode::Compare(CompareOp::Equal, offset, first_at));
                ir.push(IrNode::Select(is_first, g, zero));
                inputs.push(Input::new(first, &spread(first_layout), &axes, all)?);
                inputs.push(Input::new(&offsets, &offsets_layout, &axes, all)?);
            }
            (PoolOp::Max, None) => {
                return Err(Error::Unsupported {
                    what: "a max pooling's gradient without its forward's offsets".into(),
                });
            }
            (PoolOp::Mean, _) => {
                let scale = ir.push(IrNode::Scalar(1.0 / Self::window_size(plan) as f64));
                ir.push(IrNode::Binary(BinaryOp::Mul, g, scale));
            }
        }
        let root = ir.nodes.len() - 1;
        let output = Output::new(root, axes.clone(), ReduceOp::Sum);
        let apart = (plan.windows.iter()).all(|w| w.stride > w.dilation * (w.kernel - 1));
        let (summed, layout) = if apart {
            let zeros = crate::dispatch::filled(grad.device(), count, T::zero())?;
            let output = output.written_into(zeros, view);
            (run_output(&ir, view.lens(), &inputs, output)?.0, whole)
        } else {
            let (window_grad, window_layout) = run_output(&ir, view.lens(), &inputs, output)?;
            window_sums(&window_grad, &window_layout, &plan.windows)?
        };
        let mut cut = layout;
        for w in &plan.windows {
            cut = cut.sliced(w.axis, w.padding, w.padding + w.len, 1);
        }
        Ok(Tensor::from_parts(summed, cut).expect("a view of the summed gradient"))
    }
}
