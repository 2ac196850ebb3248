//! The work a backend runs.

use super::{Backend, DeviceMemory};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::ir::{Ir, IrNode, ReduceOp};

/// One leaf of a [`Job`]: its whole device buffer, and where its elements are for each
/// iteration axis (kept axes, then reduced ones; stride 0 where it is broadcast).
#[derive(Clone, Debug)]
pub struct JobLeaf<'a> {
    /// The element type.
    pub dtype: DType,
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The position of the element at index 0 on every axis.
    pub offset: usize,
    /// One stride per iteration axis, in elements.
    pub strides: Vec<isize>,
}

/// Work for a device: compute `ir` over the kept axes (row-major result of `out` elements),
/// combining over the reduced axes with `reduce` when there are any.
#[derive(Clone, Debug)]
pub struct Job<'a> {
    /// The expression; leaf `k` reads `leaves[k]`.
    pub ir: Ir,
    /// The leaves.
    pub leaves: Vec<JobLeaf<'a>>,
    /// The lengths of the result's axes, in its order.
    pub kept: Vec<usize>,
    /// The lengths of the reduced axes (empty for an element-wise job).
    pub reduced: Vec<usize>,
    /// How reduced elements combine.
    pub reduce: ReduceOp,
    /// The result's element type.
    pub out: DType,
}

/// One operand of a [`MatmulJob`]: its device buffer and the strides of its two dimensions.
#[derive(Clone, Copy, Debug)]
pub struct MatrixSide<'a> {
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The position of element (0, 0) of the first matrix.
    pub offset: usize,
    /// Stride between matrices of the batch, in elements.
    pub batch_stride: isize,
    /// Stride between rows, in elements.
    pub row_stride: isize,
    /// Stride between columns, in elements.
    pub col_stride: isize,
}

/// A batch of matrix products for a device: `lhs` (`m`×`k`) times `rhs` (`k`×`n`) for each of
/// `batch` pairs; the result is row-major `[batch, m, n]`.
#[derive(Clone, Copy, Debug)]
pub struct MatmulJob<'a> {
    /// The element type of both operands and the result.
    pub dtype: DType,
    /// The number of products.
    pub batch: usize,
    /// Rows of the result.
    pub m: usize,
    /// Columns of the result.
    pub n: usize,
    /// The contracted length.
    pub k: usize,
    /// The left operand.
    pub lhs: MatrixSide<'a>,
    /// The right operand.
    pub rhs: MatrixSide<'a>,
}

/// Work with several results over one iteration space: each result is a node of one
/// expression, kept over some of the iteration axes (row-major, in its own order) and
/// combined over the others, optionally onto existing values. Autodiff's backward is one:
/// every input's gradient at once, each summed over the axes that input was broadcast along,
/// each added to what earlier steps accumulated.
#[derive(Clone, Debug)]
pub struct MultiJob<'a> {
    /// The expression; leaf `k` reads `leaves[k]`.
    pub ir: Ir,
    /// The leaves, with one stride per iteration axis.
    pub leaves: Vec<JobLeaf<'a>>,
    /// The lengths of the iteration axes.
    pub lens: Vec<usize>,
    /// The element type of every result.
    pub out: DType,
    /// The results.
    pub outputs: Vec<JobOutput<'a>>,
}

/// One result of a [`MultiJob`].
#[derive(Clone, Debug)]
pub struct JobOutput<'a> {
    /// The IR node it holds.
    pub root: usize,
    /// The iteration axes it keeps (indices into [`MultiJob::lens`]), in its row-major order.
    pub kept: Vec<usize>,
    /// How values meeting at one element combine: over the axes not kept, and with `start`.
    pub reduce: ReduceOp,
    /// The values it starts from (else the identity of `reduce`): a leaf read over the
    /// iteration axes, stride 0 on those not kept.
    pub start: Option<JobLeaf<'a>>,
}

impl MultiJob<'_> {
    /// The element count of each result, or an error naming the lengths that overflow.
    pub fn output_counts(&self) -> Result<Vec<usize>> {
        (self.outputs.iter())
            .map(|output| {
                (output.kept.iter())
                    .map(|&a| self.lens.get(a).copied())
                    .try_fold(1usize, |n, len| len.and_then(|l| n.checked_mul(l)))
                    .ok_or_else(|| Error::SizeOverflow {
                        lengths: format!("{:?} kept {:?}", self.lens, output.kept),
                    })
            })
            .collect()
    }
}

/// Runs `job` on `backend` one result at a time, each as a [`Job`]: the expression pruned to
/// that result's node, the iteration axes ordered kept-then-reduced, and its starting values
/// combined in (inside the same kernel when nothing is reduced, else by a second job).
pub fn run_each_output<B: Backend + ?Sized>(
    backend: &B,
    job: &MultiJob<'_>,
) -> Result<Vec<DeviceMemory>> {
    job.output_counts()?;
    let mut results = Vec::with_capacity(job.outputs.len());
    for output in &job.outputs {
        let rest = (0..job.lens.len()).filter(|a| !output.kept.contains(a));
        let order: Vec<usize> = output.kept.iter().copied().chain(rest).collect();
        let permute = |strides: &[isize]| order.iter().map(|&a| strides[a]).collect::<Vec<_>>();
        let mut ir = job.ir.pruned(output.root);
        let mut leaves: Vec<JobLeaf<'_>> = (job.leaves.iter())
            .map(|leaf| JobLeaf {
                strides: permute(&leaf.strides),
                ..leaf.clone()
            })
            .collect();
        let reduced: Vec<usize> = order[output.kept.len()..]
            .iter()
            .map(|&a| job.lens[a])
            .collect();
        let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
        let start = output.start.as_ref().map(|start| JobLeaf {
            strides: permute(&start.strides)[..kept.len()].to_vec(),
            ..start.clone()
        });
        let combine = output.reduce.combine_op();
        let fused_start = reduced.is_empty() && start.is_some();
        if let (true, Some(start)) = (fused_start, &start) {
            let root = ir.nodes.len() - 1;
            let from = ir.push(IrNode::Leaf(leaves.len()));
            ir.push(IrNode::Binary(combine, from, root));
            leaves.push(JobLeaf {
                strides: start.strides.clone(),
                ..start.clone()
            });
        }
        let memory = backend.run(&Job {
            ir,
            leaves,
            kept: kept.clone(),
            reduced,
            reduce: output.reduce,
            out: job.out,
        })?;
        let memory = match start {
            Some(start) if !fused_start => {
                let mut ir = Ir::default();
                let (from, fresh) = (ir.leaf(), ir.leaf());
                ir.push(IrNode::Binary(combine, from, fresh));
                let fresh_leaf = JobLeaf {
                    dtype: job.out,
                    memory: &memory,
                    offset: 0,
                    strides: row_major_strides(&kept),
                };
                backend.run(&Job {
                    ir,
                    leaves: vec![start, fresh_leaf],
                    kept,
                    reduced: Vec::new(),
                    reduce: output.reduce,
                    out: job.out,
                })?
            }
            _ => memory,
        };
        results.push(memory);
    }
    Ok(results)
}

/// Row-major strides (in elements) over `lens`.
pub fn row_major_strides(lens: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; lens.len()];
    let mut step = 1isize;
    for (s, &len) in strides.iter_mut().zip(lens).rev() {
        *s = step;
        step = step.saturating_mul(len as isize);
    }
    strides
}
