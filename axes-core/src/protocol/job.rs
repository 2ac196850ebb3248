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

impl JobLeaf<'_> {
    /// An error unless every element the leaf reads over `lens` (one per stride) lies in its
    /// buffer: backends check this before a kernel reads device memory.
    pub fn check_reach(&self, lens: &[usize]) -> Result<()> {
        check_reach(
            "an operand",
            self.dtype,
            self.memory,
            self.offset,
            &self.strides,
            lens,
        )
    }
}

/// Where a result of a [`Job`] goes instead of a new buffer ([`WriteTo::Into`]): a region of
/// an existing buffer, overwritten in place (the rest of the buffer keeps its values). Held
/// mutably, so no leaf of the job reads it.
#[derive(Debug)]
pub struct JobTarget<'a> {
    /// The buffer, on the job's device.
    pub memory: &'a mut DeviceMemory,
    /// The position of the result's element at index 0 on every kept axis.
    pub offset: usize,
    /// One stride per kept axis, in elements; no two indices may reach one position.
    pub strides: Vec<isize>,
}

impl JobTarget<'_> {
    /// An error unless the region over `kept` lengths lies in the buffer, one element of
    /// `dtype` per position, and no two of its indices reach one position.
    pub fn check(&self, dtype: DType, kept: &[usize]) -> Result<()> {
        check_reach(
            "a result",
            dtype,
            self.memory,
            self.offset,
            &self.strides,
            kept,
        )?;
        if !crate::layout::injective(kept, &self.strides) {
            return Err(Error::Unsupported {
                what: format!(
                    "writing a result of lengths {kept:?} through strides {:?}, which reach one \
                     position twice",
                    self.strides
                ),
            });
        }
        Ok(())
    }
}

/// An error unless `offset` + Σ iₐ·stridesₐ over `lens` lies in `memory`, read as `dtype`.
fn check_reach(
    what: &str,
    dtype: DType,
    memory: &DeviceMemory,
    offset: usize,
    strides: &[isize],
    lens: &[usize],
) -> Result<()> {
    let len = memory.bytes() / dtype.size();
    if !crate::layout::within(offset, lens, strides, len) {
        return Err(Error::Unsupported {
            what: format!(
                "{what} at offset {offset} with strides {strides:?} over lengths {lens:?}, \
                 outside its buffer of {len} {} elements",
                dtype.name()
            ),
        });
    }
    Ok(())
}

/// One result of a [`Job`] as work of its own, the form a backend plans a kernel of one
/// result from ([`Job::output_job`]): compute `ir` over the kept axes (a row-major result),
/// combining over the reduced axes with `reduce` when there are any. Made into a [`Job`]
/// with `.into()`.
#[derive(Clone, Debug)]
pub struct OutputJob<'a> {
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

impl<'a> OutputJob<'a> {
    /// The same work over as few axes as its strides allow, and `target`'s strides (one per
    /// kept axis) to match: length-1 axes dropped, and each kept (or reduced) axis merged
    /// into the next one where every leaf — and the target, for kept axes — steps over the
    /// inner axis exactly into the outer one. A contiguous operand of any rank becomes one
    /// axis, so a kernel pays one index division per element instead of one per axis.
    pub fn merged(&self, target: Option<&[isize]>) -> (OutputJob<'a>, Option<Vec<isize>>) {
        let lens: Vec<usize> = self.kept.iter().chain(&self.reduced).copied().collect();
        if lens.contains(&0) {
            return (self.clone(), target.map(<[isize]>::to_vec));
        }
        let mut job = OutputJob {
            leaves: (self.leaves.iter())
                .map(|leaf| JobLeaf {
                    strides: Vec::new(),
                    ..leaf.clone()
                })
                .collect(),
            kept: Vec::new(),
            reduced: Vec::new(),
            ..self.clone()
        };
        let mut merged_target = target.map(|_| Vec::new());
        // The last axis pushed, as (whether it is kept, its original index).
        let mut last: Option<(bool, usize)> = None;
        for (a, &len) in lens.iter().enumerate().filter(|&(_, &len)| len != 1) {
            let kept = a < self.kept.len();
            let steps_into = |strides: &[isize], outer: usize| {
                strides[outer] == strides[a].wrapping_mul(len as isize)
            };
            let mergeable = last.is_some_and(|(last_kept, outer)| {
                last_kept == kept
                    && self
                        .leaves
                        .iter()
                        .all(|leaf| steps_into(&leaf.strides, outer))
                    && (!kept || target.is_none_or(|t| steps_into(t, outer)))
            });
            let group = if kept {
                &mut job.kept
            } else {
                &mut job.reduced
            };
            if mergeable {
                *group.last_mut().expect("merged into the last axis") *= len;
                for (to, from) in job.leaves.iter_mut().zip(&self.leaves) {
                    *to.strides.last_mut().expect("one stride per axis") = from.strides[a];
                }
                if let (true, Some(to), Some(from)) = (kept, &mut merged_target, target) {
                    *to.last_mut().expect("one stride per kept axis") = from[a];
                }
            } else {
                group.push(len);
                for (to, from) in job.leaves.iter_mut().zip(&self.leaves) {
                    to.strides.push(from.strides[a]);
                }
                if let (true, Some(to), Some(from)) = (kept, &mut merged_target, target) {
                    to.push(from[a]);
                }
            }
            last = Some((kept, a));
        }
        (job, merged_target)
    }
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

impl MatmulJob<'_> {
    /// An error unless every element either operand reads lies in its buffer: backends check
    /// this before a kernel or library reads device memory.
    pub fn check_reach(&self) -> Result<()> {
        let sides = [
            (self.lhs, [self.batch, self.m, self.k]),
            (self.rhs, [self.batch, self.k, self.n]),
        ];
        for (side, lens) in sides {
            let strides = [side.batch_stride, side.row_stride, side.col_stride];
            check_reach(
                "a matrix",
                self.dtype,
                side.memory,
                side.offset,
                &strides,
                &lens,
            )?;
        }
        Ok(())
    }
}

/// Work for a device, which [`Backend::run`] runs: one or more results over one iteration
/// space, each a node of one expression, kept over some of the iteration axes (row-major, in
/// its own order) and combined over the others, optionally onto existing values. An
/// element-wise expression is a job of one result that keeps every axis, a reduction one
/// that keeps some ([`OutputJob`] builds those); autodiff's backward is a job of several:
/// every input's gradient at once, each summed over the axes that input was broadcast along,
/// each added to what earlier steps accumulated.
#[derive(Clone, Debug)]
pub struct Job<'a> {
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

/// Where the results of a [`Job`] go ([`Backend::run`]).
#[derive(Debug)]
pub enum WriteTo<'a> {
    /// One new buffer per result, row-major over its kept axes, returned in order.
    New,
    /// Result `k` into `targets[k]`, a region of an existing buffer: how an optimizer writes
    /// a model's next parameters into a buffer it keeps, and how gradients are gathered into
    /// one buffer. No result may start from values ([`JobOutput::start`]). Nothing returned.
    Into(Vec<JobTarget<'a>>),
    /// Result `k` over the elements of leaf `over[k]` in place (see [`Job::check_in_place`]
    /// for what it may be): how an optimizer updates the parameters and its state in buffers
    /// that never change, so that a recorded step's buffers stay the ones it recorded. The
    /// caller holds each written buffer as its only user. Nothing returned.
    Over(&'a [usize]),
}

/// One result of a [`Job`].
#[derive(Clone, Debug)]
pub struct JobOutput<'a> {
    /// The IR node it holds.
    pub root: usize,
    /// The iteration axes it keeps (indices into [`Job::lens`]), in its row-major order.
    pub kept: Vec<usize>,
    /// How values meeting at one element combine: over the axes not kept, and with `start`.
    pub reduce: ReduceOp,
    /// The values it starts from (else the identity of `reduce`): a leaf read over the
    /// iteration axes, stride 0 on those not kept.
    pub start: Option<JobLeaf<'a>>,
}

impl<'a> Job<'a> {
    /// The job's one result as an [`OutputJob`], where it has one and that result starts from
    /// nothing: how a backend runs it as a kernel of one result.
    pub fn single(&self) -> Option<OutputJob<'a>> {
        match &self.outputs[..] {
            [output] if output.start.is_none() => Some(self.output_job(0).0),
            _ => None,
        }
    }

    /// An error unless `targets` holds one target per result and no result starts from values
    /// (what [`WriteTo::Into`] asks of a job).
    pub fn check_into(&self, targets: &[JobTarget<'_>]) -> Result<()> {
        if targets.len() != self.outputs.len() {
            return Err(Error::Unsupported {
                what: format!(
                    "{} targets for a job of {} results",
                    targets.len(),
                    self.outputs.len()
                ),
            });
        }
        if self.outputs.iter().any(|output| output.start.is_some()) {
            return Err(Error::Unsupported {
                what: "a result onto starting values, written into a buffer".into(),
            });
        }
        Ok(())
    }

    /// The element count of each result, or an error naming a result's node that the
    /// expression lacks, or the lengths that overflow.
    pub fn output_counts(&self) -> Result<Vec<usize>> {
        (self.outputs.iter())
            .map(|output| {
                if output.root >= self.ir.nodes.len() {
                    return Err(Error::Unsupported {
                        what: format!(
                            "a result of node {} of an expression of {} nodes",
                            output.root,
                            self.ir.nodes.len()
                        ),
                    });
                }
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

impl Job<'_> {
    /// An error unless `job` can write result `k` over leaf `over[k]` in place
    /// ([`WriteTo::Over`]): every leaf in reach; one written leaf per result,
    /// distinct, of the result's type and reaching no position twice; every result keeps every iteration
    /// axis and starts from nothing; and every other leaf of a written leaf's buffer reads
    /// none of the positions written (each position is read through the leaf that writes
    /// it, at the iteration that writes it, so the order of work items cannot matter).
    ///
    /// ```
    /// use axes_core::element::DType;
    /// use axes_core::ir::{Ir, ReduceOp};
    /// use axes_core::protocol::{DeviceMemory, JobLeaf, JobOutput, Job};
    /// let memory = DeviceMemory::new((), 16); // four f32
    /// let leaf = |offset, strides: Vec<isize>| JobLeaf { dtype: DType::F32, memory: &memory, offset, strides };
    /// let mut ir = Ir::default();
    /// let (a, _) = (ir.leaf(), ir.leaf());
    /// let output = JobOutput { root: a, kept: vec![0], reduce: ReduceOp::Sum, start: None };
    /// let job = |leaves| Job { ir: ir.clone(), leaves, lens: vec![2], out: DType::F32, outputs: vec![output.clone()] };
    /// // elements 0..2 written over themselves, 2..4 read: fine
    /// assert!(job(vec![leaf(0, vec![1]), leaf(2, vec![1])]).check_in_place(&[0]).is_ok());
    /// // elements 1..3 read while 0..2 are written: refused
    /// assert!(job(vec![leaf(0, vec![1]), leaf(1, vec![1])]).check_in_place(&[0]).is_err());
    /// // one element written twice
    /// assert!(job(vec![leaf(0, vec![0]), leaf(2, vec![1])]).check_in_place(&[0]).is_err());
    /// ```
    pub fn check_in_place(&self, over: &[usize]) -> Result<()> {
        let refuse = |what: String| Err(Error::Unsupported { what });
        if over.len() != self.outputs.len() {
            return refuse(format!(
                "{} results written over {} leaves",
                self.outputs.len(),
                over.len()
            ));
        }
        let rank = self.lens.len();
        for output in &self.outputs {
            let mut kept = output.kept.clone();
            kept.sort_unstable();
            if output.start.is_some() || !kept.iter().copied().eq(0..rank) {
                return refuse("a result written in place that reduces or accumulates".into());
            }
        }
        for leaf in &self.leaves {
            leaf.check_reach(&self.lens)?;
        }
        for (j, &k) in over.iter().enumerate() {
            let Some(leaf) = self.leaves.get(k) else {
                return refuse(format!(
                    "a result written over leaf {k} of {}",
                    self.leaves.len()
                ));
            };
            if over[..j].contains(&k) {
                return refuse(format!("two results written over leaf {k}"));
            }
            if leaf.dtype != self.out {
                return refuse(format!(
                    "a result of {} written over a leaf of {}",
                    self.out.name(),
                    leaf.dtype.name()
                ));
            }
            if !crate::layout::injective(&self.lens, &leaf.strides) {
                return refuse(format!(
                    "a result written in place through strides {:?} over lengths {:?}, which \
                     reach one position twice",
                    leaf.strides, self.lens
                ));
            }
            let written = span(leaf, &self.lens);
            for (other, read) in self.leaves.iter().enumerate() {
                let overlaps = || {
                    let (start, end) = span(read, &self.lens);
                    start <= written.1 && written.0 <= end
                };
                if other != k && std::ptr::eq(read.memory, leaf.memory) && overlaps() {
                    return refuse(format!(
                        "leaf {other} reading positions that leaf {k} is overwritten at"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The first and last positions (in elements) `leaf` reaches over `lens`, of a job with
/// elements (its reach checked).
fn span(leaf: &JobLeaf<'_>, lens: &[usize]) -> (isize, isize) {
    let offset = leaf.offset as isize;
    (leaf.strides.iter().zip(lens)).fold((offset, offset), |(low, high), (&s, &l)| {
        let far = s * (l.max(1) as isize - 1);
        (low + far.min(0), high + far.max(0))
    })
}

/// Runs `job` on `backend` into one new buffer: its one result.
pub fn run_one<B: Backend + ?Sized>(backend: &B, job: OutputJob<'_>) -> Result<DeviceMemory> {
    let mut results = backend.run(&job.into(), WriteTo::New)?;
    match results.len() {
        1 => Ok(results.pop().expect("one result")),
        count => Err(Error::Unsupported {
            what: format!(
                "{} returned {count} results for a job of one",
                backend.name()
            ),
        }),
    }
}

/// Runs `job` on `backend` one result at a time into new buffers, each as an [`OutputJob`]
/// (see [`Job::output_job`]), its starting values combined in by a second job when the first
/// reduces: how a backend whose kernels write one result each runs [`WriteTo::New`].
pub fn run_each_output<B: Backend + ?Sized>(
    backend: &B,
    job: &Job<'_>,
) -> Result<Vec<DeviceMemory>> {
    job.output_counts()?;
    let mut results = Vec::with_capacity(job.outputs.len());
    for k in 0..job.outputs.len() {
        let (single, start) = job.output_job(k);
        let (kept, reduce) = (single.kept.clone(), single.reduce);
        let memory = run_one(backend, single)?;
        let memory = match start {
            Some(start) => {
                let mut ir = Ir::default();
                let (from, fresh) = (ir.leaf(), ir.leaf());
                ir.push(IrNode::Binary(reduce.combine_op(), from, fresh));
                let fresh_leaf = JobLeaf {
                    dtype: job.out,
                    memory: &memory,
                    offset: 0,
                    strides: row_major_strides(&kept),
                };
                run_one(
                    backend,
                    OutputJob {
                        ir,
                        leaves: vec![start, fresh_leaf],
                        kept,
                        reduced: Vec::new(),
                        reduce,
                        out: job.out,
                    },
                )?
            }
            None => memory,
        };
        results.push(memory);
    }
    Ok(results)
}

impl<'a> From<OutputJob<'a>> for Job<'a> {
    /// The job of one result: the last node of `job.ir`, over the kept axes then the reduced
    /// ones, keeping the former.
    fn from(job: OutputJob<'a>) -> Job<'a> {
        let output = JobOutput {
            root: job.ir.nodes.len().saturating_sub(1),
            kept: (0..job.kept.len()).collect(),
            reduce: job.reduce,
            start: None,
        };
        let mut lens = job.kept;
        lens.extend(job.reduced);
        Job {
            ir: job.ir,
            leaves: job.leaves,
            lens,
            out: job.out,
            outputs: vec![output],
        }
    }
}

impl<'a> Job<'a> {
    /// Result `k` as an [`OutputJob`]: the expression pruned to its node, the iteration axes
    /// ordered kept-then-reduced, and its starting values combined in inside the job when
    /// nothing is reduced; otherwise the starting values are returned (over the kept axes)
    /// to combine with the job's result.
    pub fn output_job(&self, k: usize) -> (OutputJob<'a>, Option<JobLeaf<'a>>) {
        let output = &self.outputs[k];
        let rest = (0..self.lens.len()).filter(|a| !output.kept.contains(a));
        let order: Vec<usize> = output.kept.iter().copied().chain(rest).collect();
        let permute = |strides: &[isize]| order.iter().map(|&a| strides[a]).collect::<Vec<_>>();
        let mut ir = self.ir.pruned(output.root);
        let mut leaves: Vec<JobLeaf<'a>> = (self.leaves.iter())
            .map(|leaf| JobLeaf {
                strides: permute(&leaf.strides),
                ..leaf.clone()
            })
            .collect();
        let reduced: Vec<usize> = order[output.kept.len()..]
            .iter()
            .map(|&a| self.lens[a])
            .collect();
        let kept: Vec<usize> = output.kept.iter().map(|&a| self.lens[a]).collect();
        let mut start = output.start.as_ref().map(|start| JobLeaf {
            strides: permute(&start.strides)[..kept.len()].to_vec(),
            ..start.clone()
        });
        if reduced.is_empty()
            && let Some(fused) = start.take()
        {
            let root = ir.nodes.len() - 1;
            let from = ir.push(IrNode::Leaf(leaves.len()));
            ir.push(IrNode::Binary(output.reduce.combine_op(), from, root));
            leaves.push(fused);
        }
        let job = OutputJob {
            ir,
            leaves,
            kept,
            reduced,
            reduce: output.reduce,
            out: self.out,
        };
        (job, start)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job<'a>(memory: &'a DeviceMemory, strides: &[&[isize]], kept: &[usize]) -> OutputJob<'a> {
        let mut ir = Ir::default();
        let leaves = strides.iter().map(|s| {
            ir.leaf();
            JobLeaf {
                dtype: DType::F32,
                memory,
                offset: 0,
                strides: s.to_vec(),
            }
        });
        let leaves: Vec<JobLeaf<'a>> = leaves.collect();
        OutputJob {
            ir,
            leaves,
            kept: kept.to_vec(),
            reduced: Vec::new(),
            reduce: ReduceOp::Sum,
            out: DType::F32,
        }
    }

    #[test]
    fn contiguous_axes_merge_and_others_stay() {
        let memory = DeviceMemory::new((), 0);
        // A contiguous rank-4 operand (one length-1 axis) is one axis of 60.
        let dense = job(&memory, &[&[20, 5, 5, 1]], &[3, 4, 1, 5]);
        let (merged, _) = dense.merged(None);
        assert_eq!(
            (merged.kept, merged.leaves[0].strides.clone()),
            (vec![60], vec![1])
        );
        // A transposed second operand keeps the axes apart.
        let mixed = job(&memory, &[&[4, 1], &[1, 3]], &[3, 4]);
        assert_eq!(mixed.merged(None).0.kept, [3, 4]);
        // So does a target that is not row-major, though every leaf is.
        let (into, target) = dense.merged(Some(&[5, 15, 0, 1]));
        assert_eq!((into.kept, target), (vec![3, 4, 5], Some(vec![5, 15, 1])));
        // Kept and reduced axes never merge with each other; reduced ones merge among
        // themselves.
        let mut reduce = job(&memory, &[&[12, 4, 1]], &[3]);
        reduce.reduced = vec![3, 4];
        let (merged, _) = reduce.merged(None);
        assert_eq!((merged.kept, merged.reduced), (vec![3], vec![12]));
        assert_eq!(merged.leaves[0].strides, [12, 1]);
    }
}
