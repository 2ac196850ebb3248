//! Device jobs turned into launches, shared by the backends: the generated kernel (made
//! once per process for each expression shape), its argument list, and how many parts a
//! reduction is split into.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use crate::Index;

/// One argument of a planned launch: an index, output `j`'s buffer, or leaf `k`'s buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    Index(Index),
    Out(usize),
    Leaf(usize),
}

/// A device job turned into a kernel and its argument list (shared by the backends).
pub(crate) struct JobPlan {
    pub(crate) kernel: Arc<axes_kernels::Kernel>,
    pub(crate) wide: bool,
    pub(crate) args: Vec<Slot>,
    /// Work items (elementwise) or work-groups (reduction) wanted.
    pub(crate) items: usize,
    pub(crate) reduction: bool,
    pub(crate) out_bytes: usize,
    /// The parts each result's elements are cut into (1: the kernel writes the results;
    /// more: partial results, which [`JobPlan::combine`] reduces).
    pub(crate) splits: usize,
    /// The element type of the partial results of a split reduction: the result's, or f32
    /// for the half types (so that only the final result is rounded to 16 bits).
    pub(crate) partial: axes_core::DType,
}

/// Where a planned job writes: a new buffer, or a region of an existing one.
pub(crate) enum Destination<'a> {
    Fresh,
    Into(&'a axes_core::protocol::JobTarget<'a>),
}

/// Everything a generated elementwise or reduction kernel depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct KernelKey {
    ir: axes_core::ir::Ir,
    leaves: Vec<axes_kernels::CType>,
    out: axes_kernels::CType,
    wide: bool,
    kept: usize,
    reduced: usize,
    op: Option<axes_core::ir::ReduceOp>,
    /// The nodes written, for a kernel of several results (else the last node).
    roots: Vec<usize>,
    /// The leaves the results are written over, for a kernel that writes in place.
    over: Option<Vec<usize>>,
    dialect: axes_kernels::Dialect,
}

/// The elementwise kernel (`op` `None`; writing the nodes `roots` when given, over the
/// leaves `over` when given) or reduction kernel for `spec`, generated once per process and then looked up: generating one takes
/// about 10 µs, as long as a small kernel runs, and a training step asks for the same few
/// kernels every time.
fn generated(
    spec: &axes_kernels::Spec<'_>,
    kept: usize,
    reduced: usize,
    op: Option<axes_core::ir::ReduceOp>,
    roots: &[usize],
    over: Option<&[usize]>,
    dialect: axes_kernels::Dialect,
) -> axes_core::Result<Arc<axes_kernels::Kernel>> {
    static KERNELS: LazyLock<Mutex<HashMap<KernelKey, Arc<axes_kernels::Kernel>>>> =
        LazyLock::new(Mutex::default);
    let key = KernelKey {
        ir: spec.ir.clone(),
        leaves: spec.leaves.to_vec(),
        out: spec.out,
        wide: spec.wide,
        kept,
        reduced,
        op,
        roots: roots.to_vec(),
        over: over.map(<[usize]>::to_vec),
        dialect,
    };
    if let Some(kernel) = KERNELS.lock().expect("never poisoned").get(&key) {
        return Ok(Arc::clone(kernel));
    }
    let kernel = Arc::new(match (op, over) {
        (_, Some(over)) => axes_kernels::elementwise_in_place(spec, roots, over, kept, dialect)?,
        (Some(op), None) => axes_kernels::reduction(spec, kept, reduced, op, dialect)?,
        (None, None) if roots.is_empty() => axes_kernels::elementwise(spec, kept, dialect)?,
        (None, None) => axes_kernels::elementwise_outputs(spec, roots, kept, dialect)?,
    });
    let mut kernels = KERNELS.lock().expect("never poisoned");
    Ok(Arc::clone(kernels.entry(key).or_insert(kernel)))
}

/// Work-groups a reduction wants at least (a device's cores are filled several times over).
const REDUCTION_GROUPS: usize = 1024;
/// Elements a part of a split reduction reduces at least.
const ELEMENTS_PER_PART: usize = 4096;

/// The parts to cut each of `count` results' `reduced` elements into, so that few results
/// over many elements still fill the device.
fn splits(count: usize, reduced: usize) -> usize {
    (REDUCTION_GROUPS / count.max(1))
        .min(reduced / ELEMENTS_PER_PART)
        .max(1)
}

impl JobPlan {
    /// The plan for `job` in `dialect` over its merged axes
    /// ([`axes_core::protocol::OutputJob::merged`]), writing to
    /// `destination` (a region of an existing buffer only when the job is not split: see
    /// [`JobPlan::splits`]); `None` when the result is empty. An error when a leaf or the
    /// destination reaches outside its buffer.
    pub(crate) fn new(
        job: &axes_core::protocol::OutputJob<'_>,
        dialect: axes_kernels::Dialect,
        destination: Destination<'_>,
    ) -> axes_core::Result<Option<JobPlan>> {
        use axes_kernels::{CType, Spec};
        let out = CType::of(job.out)?;
        let types = (job.leaves.iter())
            .map(|leaf| CType::of(leaf.dtype))
            .collect::<axes_core::Result<Vec<_>>>()?;
        let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
        for leaf in &job.leaves {
            leaf.check_reach(&lens)?;
        }
        if let Destination::Into(target) = destination {
            target.check(job.out, &job.kept)?;
        }
        let (job, target_strides) = job.merged(match destination {
            Destination::Into(target) => Some(&target.strides),
            Destination::Fresh => None,
        });
        let job = &job;
        let count: usize = job.kept.iter().product();
        let reduced: usize = job.reduced.iter().product();
        if count == 0 {
            return Ok(None);
        }
        let target_len = match destination {
            Destination::Into(target) => target.memory.bytes() / out.size(),
            Destination::Fresh => 0,
        };
        let largest = (job.leaves.iter())
            .zip(&types)
            .map(|(leaf, ty)| leaf.memory.bytes() / ty.size())
            .chain([count.saturating_mul(reduced.max(1)), target_len])
            .max()
            .unwrap_or(0);
        let reduction = !job.reduced.is_empty();
        let splits = if reduction { splits(count, reduced) } else { 1 };
        let (out, partial) = if splits > 1 && out.is_half() {
            (CType::F32, axes_core::DType::F32)
        } else {
            (out, job.out)
        };
        let spec = Spec {
            ir: &job.ir,
            leaves: &types,
            out,
            wide: Spec::needs_wide(largest),
        };
        let mut args = vec![Slot::Index(count as Index)];
        let op = reduction.then_some(job.reduce);
        if reduction {
            args.extend([Slot::Index(reduced as Index), Slot::Index(splits as Index)]);
        }
        let kernel = generated(
            &spec,
            job.kept.len(),
            job.reduced.len(),
            op,
            &[],
            None,
            dialect,
        )?;
        args.extend(
            job.kept
                .iter()
                .chain(&job.reduced)
                .map(|&l| Slot::Index(l as Index)),
        );
        match destination {
            Destination::Into(target) if splits == 1 => {
                args.extend([Slot::Out(0), Slot::Index(target.offset as Index)]);
                let strides = target_strides.expect("merged with the target");
                args.extend(strides.iter().map(|&s| Slot::Index(s as Index)));
            }
            _ => {
                // A new buffer, row-major over the kept axes, each result's parts side by side.
                args.extend([Slot::Out(0), Slot::Index(0)]);
                args.extend(
                    partial_strides(&job.kept, splits)
                        .into_iter()
                        .map(Slot::Index),
                );
            }
        }
        if reduction {
            args.push(Slot::Index(if splits > 1 { 1 } else { 0 }));
        }
        for (k, leaf) in job.leaves.iter().enumerate() {
            args.extend([Slot::Leaf(k), Slot::Index(leaf.offset as Index)]);
            args.extend(leaf.strides.iter().map(|&s| Slot::Index(s as Index)));
        }
        Ok(Some(JobPlan {
            kernel,
            wide: spec.wide,
            args,
            items: count * splits,
            reduction,
            out_bytes: count * splits * out.size(),
            splits,
            partial,
        }))
    }
}

impl JobPlan {
    /// The plan for `job` written into `targets` (one region per result) by one elementwise
    /// kernel over the merged axes, or `None` when the results are empty. Every result must
    /// keep every iteration axis and start from nothing (how an optimizer writes the next
    /// parameters and moments); an error otherwise, or when a leaf or a target reaches
    /// outside its buffer.
    pub(crate) fn outputs(
        job: &axes_core::protocol::Job<'_>,
        targets: &[axes_core::protocol::JobTarget<'_>],
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<Option<JobPlan>> {
        use axes_core::protocol::JobLeaf;
        let rank = job.lens.len();
        let every_axis = |kept: &[usize]| {
            let mut sorted = kept.to_vec();
            sorted.sort_unstable();
            sorted.iter().copied().eq(0..rank)
        };
        if targets.len() != job.outputs.len()
            || (job.outputs.iter()).any(|o| o.start.is_some() || !every_axis(&o.kept))
        {
            return Err(axes_core::Error::Unsupported {
                what: "one launch for results that reduce, accumulate, or lack a target".into(),
            });
        }
        for leaf in &job.leaves {
            leaf.check_reach(&job.lens)?;
        }
        // Each target over the iteration axes (its strides are in its result's axis order),
        // merged with the leaves as if it were one more leaf.
        let mut leaves = job.leaves.clone();
        for (target, output) in targets.iter().zip(&job.outputs) {
            let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
            target.check(job.out, &kept)?;
            let mut strides = vec![0; rank];
            for (&a, &s) in output.kept.iter().zip(&target.strides) {
                strides[a] = s;
            }
            leaves.push(JobLeaf {
                dtype: job.out,
                memory: &*target.memory,
                offset: target.offset,
                strides,
            });
        }
        elementwise_plan(job, leaves, None, dialect)
    }
}

impl JobPlan {
    /// The plan for `job` with result `k` written over leaf `over[k]` in place, by one
    /// elementwise kernel over the merged axes; `None` when the results are empty. An error
    /// unless [`Job::check_in_place`](axes_core::protocol::Job::check_in_place)
    /// allows it.
    pub(crate) fn in_place(
        job: &axes_core::protocol::Job<'_>,
        over: &[usize],
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<Option<JobPlan>> {
        job.check_in_place(over)?;
        elementwise_plan(job, job.leaves.clone(), Some(over), dialect)
    }
}

/// The plan of one elementwise launch computing `job`'s results over `leaves`: the job's
/// own leaves, then one per result written into a target (none where the results are
/// written `over` leaves), all merged over as few axes as their strides allow; `None` when
/// the results are empty.
fn elementwise_plan(
    job: &axes_core::protocol::Job<'_>,
    leaves: Vec<axes_core::protocol::JobLeaf<'_>>,
    over: Option<&[usize]>,
    dialect: axes_kernels::Dialect,
) -> axes_core::Result<Option<JobPlan>> {
    use axes_kernels::{CType, Spec};
    let out = CType::of(job.out)?;
    let types = (job.leaves.iter())
        .map(|leaf| CType::of(leaf.dtype))
        .collect::<axes_core::Result<Vec<_>>>()?;
    let (merged, _) = axes_core::protocol::OutputJob {
        ir: axes_core::ir::Ir::default(),
        leaves,
        kept: job.lens.clone(),
        reduced: Vec::new(),
        reduce: axes_core::ir::ReduceOp::Sum,
        out: job.out,
    }
    .merged(None);
    let count: usize = merged.kept.iter().product();
    if count == 0 {
        return Ok(None);
    }
    let largest = (merged.leaves.iter())
        .map(|leaf| leaf.memory.bytes() / leaf.dtype.size())
        .chain([count])
        .max()
        .unwrap_or(0);
    let spec = Spec {
        ir: &job.ir,
        leaves: &types,
        out,
        wide: Spec::needs_wide(largest),
    };
    let roots: Vec<usize> = job.outputs.iter().map(|o| o.root).collect();
    let kernel = generated(&spec, merged.kept.len(), 0, None, &roots, over, dialect)?;
    let mut args = vec![Slot::Index(count as Index)];
    args.extend(merged.kept.iter().map(|&l| Slot::Index(l as Index)));
    let (sources, written) = merged.leaves.split_at(job.leaves.len());
    for (j, target) in written.iter().enumerate() {
        args.extend([Slot::Out(j), Slot::Index(target.offset as Index)]);
        args.extend(target.strides.iter().map(|&s| Slot::Index(s as Index)));
    }
    for (k, leaf) in sources.iter().enumerate() {
        args.extend([Slot::Leaf(k), Slot::Index(leaf.offset as Index)]);
        args.extend(leaf.strides.iter().map(|&s| Slot::Index(s as Index)));
    }
    Ok(Some(JobPlan {
        kernel,
        wide: spec.wide,
        args,
        items: count,
        reduction: false,
        out_bytes: 0,
        splits: 1,
        partial: job.out,
    }))
}

/// Row-major strides over `kept` lengths, each result holding `splits` parts.
fn partial_strides(kept: &[usize], splits: usize) -> Vec<Index> {
    let mut strides = vec![0; kept.len()];
    let mut size = splits as Index;
    for (s, &l) in strides.iter_mut().zip(kept).rev() {
        *s = size;
        size *= l as Index;
    }
    strides
}

impl JobPlan {
    /// The job that combines the partial results of a split reduction (`partial`, laid out
    /// by this plan) into `job`'s results: a reduction over the parts, with `job`'s operator.
    pub(crate) fn combine<'a>(
        &self,
        job: &axes_core::protocol::OutputJob<'_>,
        partial: &'a axes_core::protocol::DeviceMemory,
    ) -> axes_core::protocol::OutputJob<'a> {
        let mut ir = axes_core::ir::Ir::default();
        ir.leaf();
        let mut strides: Vec<isize> = (partial_strides(&job.kept, self.splits).into_iter())
            .map(|s| s as isize)
            .collect();
        strides.push(1);
        axes_core::protocol::OutputJob {
            ir,
            leaves: vec![axes_core::protocol::JobLeaf {
                dtype: self.partial,
                memory: partial,
                offset: 0,
                strides,
            }],
            kept: job.kept.clone(),
            reduced: vec![self.splits],
            reduce: job.reduce,
            out: job.out,
        }
    }

    /// The plan for a matrix product: the tiled kernel, its arguments (leaf 0 is the left
    /// operand, leaf 1 the right), and its work-group count in `items`.
    pub(crate) fn matmul(
        job: &axes_core::protocol::MatmulJob<'_>,
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<JobPlan> {
        use axes_kernels::{CType, MATMUL_TILE, Spec};
        let ty = CType::of(job.dtype)?;
        let out_count = job.batch * job.m * job.n;
        let largest = (job.lhs.memory.bytes())
            .max(job.rhs.memory.bytes())
            .div_ceil(ty.size())
            .max(out_count);
        let wide = Spec::needs_wide(largest);
        let kernel = Arc::new(axes_kernels::matmul(ty, wide, dialect)?);
        let i = |v: usize| Slot::Index(v as Index);
        let mut args = vec![i(job.batch), i(job.m), i(job.n), i(job.k)];
        args.extend([Slot::Out(0), i(0), i(job.m * job.n), i(job.n), i(1)]);
        for (k, side) in [job.lhs, job.rhs].iter().enumerate() {
            args.extend([
                Slot::Leaf(k),
                i(side.offset),
                Slot::Index(side.batch_stride as Index),
                Slot::Index(side.row_stride as Index),
                Slot::Index(side.col_stride as Index),
            ]);
        }
        Ok(JobPlan {
            kernel,
            wide,
            args,
            items: job.batch * job.m.div_ceil(MATMUL_TILE) * job.n.div_ceil(MATMUL_TILE),
            reduction: true,
            out_bytes: out_count * ty.size(),
            splits: 1,
            partial: job.dtype,
        })
    }
}
