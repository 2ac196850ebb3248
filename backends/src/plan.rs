//! Device jobs turned into launches, shared by the backends: the generated kernel (made
//! once per process for each expression shape), its argument list, and how many parts a
//! reduction is split into.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use axes_kernels::{REDUCE_VECTOR, ReduceShape, Tile, Tiling};

use crate::Index;
use crate::tuning::{MAX_STAGED, Tuning};

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
    /// Work items (elementwise) or work-groups (reductions, tiles, products) wanted.
    pub(crate) items: usize,
    /// The threads of one work-group, for kernels cut into groups; `None` for flat
    /// elementwise kernels (`items` work items in groups of the backend's choice).
    pub(crate) group: Option<usize>,
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

/// What kind of kernel a job takes, with everything its source depends on besides the
/// expression and its types.
#[derive(Clone, PartialEq, Eq, Hash)]
enum KernelKind {
    /// Elementwise over `rank` axes, writing the nodes `roots` (none: the last node), over
    /// the leaves `over` when given, in tiles staging the leaves `tiles.0` when given.
    Elementwise {
        rank: usize,
        roots: Vec<usize>,
        over: Option<Vec<usize>>,
        tiles: Option<(Vec<usize>, Tile)>,
    },
    /// A reduction of this shape.
    Reduction(ReduceShape),
}

/// Everything a generated elementwise or reduction kernel depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct KernelKey {
    ir: axes_core::ir::Ir,
    leaves: Vec<axes_kernels::CType>,
    out: axes_kernels::CType,
    wide: bool,
    kind: KernelKind,
    dialect: axes_kernels::Dialect,
}

/// The kernel of `kind` for `spec`, generated once per process and then looked up:
/// generating one takes about 10 µs, as long as a small kernel runs, and a training step
/// asks for the same few kernels every time.
fn generated(
    spec: &axes_kernels::Spec<'_>,
    kind: KernelKind,
    dialect: axes_kernels::Dialect,
) -> axes_core::Result<Arc<axes_kernels::Kernel>> {
    static KERNELS: LazyLock<Mutex<HashMap<KernelKey, Arc<axes_kernels::Kernel>>>> =
        LazyLock::new(Mutex::default);
    let key = KernelKey {
        ir: spec.ir.clone(),
        leaves: spec.leaves.to_vec(),
        out: spec.out,
        wide: spec.wide,
        kind,
        dialect,
    };
    if let Some(kernel) = KERNELS.lock().expect("never poisoned").get(&key) {
        return Ok(Arc::clone(kernel));
    }
    let kernel = Arc::new(match &key.kind {
        KernelKind::Reduction(shape) => axes_kernels::reduction(spec, shape, dialect)?,
        KernelKind::Elementwise {
            rank,
            roots,
            over,
            tiles: Some((staged, tile)),
        } => {
            let tiling = Tiling {
                staged,
                tile: *tile,
            };
            axes_kernels::elementwise_tiled(spec, roots, over.as_deref(), *rank, &tiling, dialect)?
        }
        KernelKind::Elementwise {
            rank,
            roots,
            over: Some(over),
            tiles: None,
        } => axes_kernels::elementwise_in_place(spec, roots, over, *rank, dialect)?,
        KernelKind::Elementwise {
            rank,
            roots,
            over: None,
            tiles: None,
        } if roots.is_empty() => axes_kernels::elementwise(spec, *rank, dialect)?,
        KernelKind::Elementwise { rank, roots, .. } => {
            axes_kernels::elementwise_outputs(spec, roots, *rank, dialect)?
        }
    });
    let mut kernels = KERNELS.lock().expect("never poisoned");
    Ok(Arc::clone(kernels.entry(key).or_insert(kernel)))
}

/// The iteration axes of a tiled elementwise launch and what it stages: `order` lists the
/// axes as the tiled kernel takes them (the results' fastest axis last, the fastest axis of
/// the leaves that disagree with it second-to-last, the others before them in their order),
/// `staged` the leaves read through local memory.
#[derive(Debug, PartialEq)]
struct Transpose {
    order: Vec<usize>,
    staged: Vec<usize>,
}

/// Whether operands over `lens` disagree on their fastest axis enough for tiles to pay,
/// given the results' strides `out` and each leaf's strides and element size in a kernel
/// (`None` for leaves that may not be staged: those written in place); how, if so.
///
/// The results' fastest axis `a` is the one of least nonzero stride; a leaf that runs along
/// another axis `b` (a smaller nonzero stride there than along `a`, which it does not
/// broadcast) would be read with a stride of its own. The `b` most such leaves share is
/// tiled with `a`; each leaf faster along `b` than along `a` is staged. Not tiled: rank
/// below 2, an axis shorter than half a tile, more than [`MAX_STAGED`] leaves to stage, or
/// more local memory than the device gives a tiled kernel.
fn transpose(
    lens: &[usize],
    out: &[isize],
    leaves: &[Option<(&[isize], usize)>],
    tuning: &Tuning,
) -> Option<Transpose> {
    let tile = tuning.tile?;
    let rank = lens.len();
    if rank < 2 {
        return None;
    }
    let fastest = |strides: &[isize]| {
        (0..rank)
            .filter(|&x| strides[x] != 0)
            .min_by_key(|&x| (strides[x].unsigned_abs(), std::cmp::Reverse(x)))
    };
    let a = fastest(out)?;
    let faster_than_a = |strides: &[isize], x: usize| {
        strides[a] != 0 && strides[x] != 0 && strides[x].unsigned_abs() < strides[a].unsigned_abs()
    };
    let mut votes = vec![0usize; rank];
    for (strides, _) in leaves.iter().flatten() {
        if let Some(f) = fastest(strides)
            && f != a
            && faster_than_a(strides, f)
        {
            votes[f] += 1;
        }
    }
    let b = (0..rank)
        .filter(|&x| votes[x] > 0)
        .max_by_key(|&x| (votes[x], std::cmp::Reverse(x)))?;
    let short = tile.side.div_ceil(2);
    if lens[a] < short || lens[b] < short {
        return None;
    }
    let staged: Vec<usize> = (leaves.iter().enumerate())
        .filter(|(_, leaf)| leaf.is_some_and(|(strides, _)| faster_than_a(strides, b)))
        .map(|(k, _)| k)
        .collect();
    let sizes = staged
        .iter()
        .filter_map(|&k| leaves[k].map(|(_, size)| size));
    if staged.len() > MAX_STAGED || tile.local_bytes(sizes) > tuning.local_bytes {
        return None;
    }
    let mut order: Vec<usize> = (0..rank).filter(|&x| x != a && x != b).collect();
    order.extend([b, a]);
    Some(Transpose { order, staged })
}

/// Whether every leaf of the reduction `job` (merged) is f32 read along its one reduced axis
/// with stride 1 from an offset and kept strides that are multiples of [`REDUCE_VECTOR`],
/// so that its threads can read whole aligned vectors (device buffers start aligned).
fn reads_vectors(job: &axes_core::protocol::OutputJob<'_>, types: &[axes_kernels::CType]) -> bool {
    let aligned = |v: isize| v.rem_euclid(REDUCE_VECTOR as isize) == 0;
    job.reduced.len() == 1
        && types.iter().all(|&ty| ty == axes_kernels::CType::F32)
        && job.leaves.iter().all(|leaf| {
            let (kept, reduced) = leaf.strides.split_at(job.kept.len());
            reduced == [1] && aligned(leaf.offset as isize) && kept.iter().all(|&s| aligned(s))
        })
}

/// `values` (one per iteration axis) in the axis order `order`.
fn permuted<T: Copy>(values: &[T], order: &[usize]) -> Vec<T> {
    order.iter().map(|&x| values[x]).collect()
}

/// Elements a part of a split reduction reduces at least.
const ELEMENTS_PER_PART: usize = 4096;

/// The parts to cut each of `count` results' `reduced` elements into, so that few results
/// over many elements still fill the device with `groups` work-groups.
fn splits(count: usize, reduced: usize, groups: usize) -> usize {
    (groups / count.max(1))
        .min(reduced / ELEMENTS_PER_PART)
        .max(1)
}

impl JobPlan {
    /// The plan for `job` in `dialect` over its merged axes
    /// ([`axes_core::protocol::OutputJob::merged`]), cut as `tuning` says, writing to
    /// `destination` (a region of an existing buffer only when the job is not split: see
    /// [`JobPlan::splits`]); `None` when the result is empty. An error when a leaf or the
    /// destination reaches outside its buffer.
    pub(crate) fn new(
        job: &axes_core::protocol::OutputJob<'_>,
        dialect: axes_kernels::Dialect,
        tuning: &Tuning,
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
        let splits = if reduction {
            splits(count, reduced, tuning.reduce_groups)
        } else {
            1
        };
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
        // Where the result goes: a target's region, or a new buffer, row-major over the kept
        // axes, each result's parts side by side.
        let (out_offset, out_strides): (usize, Vec<isize>) = match destination {
            Destination::Into(target) if splits == 1 => (
                target.offset,
                target_strides.expect("merged with the target"),
            ),
            _ => (
                0,
                (partial_strides(&job.kept, splits).into_iter())
                    .map(|s| s as isize)
                    .collect(),
            ),
        };
        let mut leaf_strides: Vec<Vec<isize>> =
            job.leaves.iter().map(|leaf| leaf.strides.clone()).collect();
        let mut lens = job.kept.clone();
        let mut out_strides = out_strides;
        let (kind, items, group) = if reduction {
            lens.extend(&job.reduced);
            let kind = KernelKind::Reduction(ReduceShape {
                kept: job.kept.len(),
                reduced: job.reduced.len(),
                op: job.reduce,
                unroll: tuning.reduce_unroll,
                vectors: tuning.vector_reads && reads_vectors(job, &types),
            });
            (kind, count * splits, Some(axes_kernels::REDUCE_GROUP))
        } else {
            let candidates: Vec<Option<(&[isize], usize)>> = (leaf_strides.iter())
                .zip(&types)
                .map(|(strides, ty)| Some((&strides[..], ty.compute().size())))
                .collect();
            let tiles = transpose(&lens, &out_strides, &candidates, tuning);
            let (items, group) = match (&tiles, tuning.tile) {
                (Some(t), Some(tile)) => {
                    lens = permuted(&lens, &t.order);
                    out_strides = permuted(&out_strides, &t.order);
                    for strides in &mut leaf_strides {
                        *strides = permuted(strides, &t.order);
                    }
                    (tile.groups(&lens), Some(tile.threads()))
                }
                _ => (count, None),
            };
            let kind = KernelKind::Elementwise {
                rank: lens.len(),
                roots: Vec::new(),
                over: None,
                tiles: tiles.zip(tuning.tile).map(|(t, tile)| (t.staged, tile)),
            };
            (kind, items, group)
        };
        let kernel = generated(&spec, kind, dialect)?;
        let mut args = vec![Slot::Index(count as Index)];
        if reduction {
            args.extend([Slot::Index(reduced as Index), Slot::Index(splits as Index)]);
        }
        args.extend(lens.iter().map(|&l| Slot::Index(l as Index)));
        args.extend([Slot::Out(0), Slot::Index(out_offset as Index)]);
        args.extend(out_strides.iter().map(|&s| Slot::Index(s as Index)));
        if reduction {
            args.push(Slot::Index(if splits > 1 { 1 } else { 0 }));
        }
        for (k, (leaf, strides)) in job.leaves.iter().zip(&leaf_strides).enumerate() {
            args.extend([Slot::Leaf(k), Slot::Index(leaf.offset as Index)]);
            args.extend(strides.iter().map(|&s| Slot::Index(s as Index)));
        }
        Ok(Some(JobPlan {
            kernel,
            wide: spec.wide,
            args,
            items,
            group,
            out_bytes: count * splits * out.size(),
            splits,
            partial,
        }))
    }
}

impl JobPlan {
    /// The plan for `job` written into `targets` (one region per result) by one elementwise
    /// kernel over the merged axes (in tiles where `tuning` has them and they pay), or `None` when the results are empty. Every result must
    /// keep every iteration axis and start from nothing (how an optimizer writes the next
    /// parameters and moments); an error otherwise, or when a leaf or a target reaches
    /// outside its buffer.
    pub(crate) fn outputs(
        job: &axes_core::protocol::Job<'_>,
        targets: &[axes_core::protocol::JobTarget<'_>],
        dialect: axes_kernels::Dialect,
        tuning: &Tuning,
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
        elementwise_plan(job, leaves, None, dialect, tuning)
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
        tuning: &Tuning,
    ) -> axes_core::Result<Option<JobPlan>> {
        job.check_in_place(over)?;
        elementwise_plan(job, job.leaves.clone(), Some(over), dialect, tuning)
    }
}

/// The plan of one elementwise launch computing `job`'s results over `leaves`: the job's
/// own leaves, then one per result written into a target (none where the results are
/// written `over` leaves), all merged over as few axes as their strides allow, in tiles
/// where `tuning` has them and the operands disagree on their fastest axis; `None` when the
/// results are empty.
fn elementwise_plan(
    job: &axes_core::protocol::Job<'_>,
    leaves: Vec<axes_core::protocol::JobLeaf<'_>>,
    over: Option<&[usize]>,
    dialect: axes_kernels::Dialect,
    tuning: &Tuning,
) -> axes_core::Result<Option<JobPlan>> {
    use axes_kernels::{CType, Spec};
    let out = CType::of(job.out)?;
    let types = (job.leaves.iter())
        .map(|leaf| CType::of(leaf.dtype))
        .collect::<axes_core::Result<Vec<_>>>()?;
    let (mut merged, _) = axes_core::protocol::OutputJob {
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
    let sources = job.leaves.len();
    // The results' layout: the first target's, or the first leaf written over.
    let first_written = over.map_or(Some(sources), |over| over.first().copied());
    let candidates: Vec<Option<(&[isize], usize)>> = (merged.leaves[..sources].iter())
        .zip(&types)
        .enumerate()
        .map(|(k, (leaf, ty))| {
            let written = over.is_some_and(|over| over.contains(&k));
            (!written).then_some((&leaf.strides[..], ty.compute().size()))
        })
        .collect();
    let tiles = (first_written.and_then(|k| merged.leaves.get(k)))
        .and_then(|written| transpose(&merged.kept, &written.strides, &candidates, tuning))
        .zip(tuning.tile);
    let (items, group) = match &tiles {
        Some((t, tile)) => {
            merged.kept = permuted(&merged.kept, &t.order);
            for leaf in &mut merged.leaves {
                leaf.strides = permuted(&leaf.strides, &t.order);
            }
            (tile.groups(&merged.kept), Some(tile.threads()))
        }
        None => (count, None),
    };
    let kind = KernelKind::Elementwise {
        rank: merged.kept.len(),
        roots: job.outputs.iter().map(|o| o.root).collect(),
        over: over.map(<[usize]>::to_vec),
        tiles: tiles.map(|(t, tile)| (t.staged, tile)),
    };
    let kernel = generated(&spec, kind, dialect)?;
    let mut args = vec![Slot::Index(count as Index)];
    args.extend(merged.kept.iter().map(|&l| Slot::Index(l as Index)));
    let (sources, written) = merged.leaves.split_at(sources);
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
        items,
        group,
        out_bytes: 0,
        splits: 1,
        partial: job.out,
    }))
}

/// Where `job` copies its one leaf's consecutive elements unchanged into consecutive
/// elements (a new buffer, or a target of `target` strides): the bytes to copy and the
/// byte where they start in the leaf's buffer, so that the driver's copy can do it.
pub(crate) fn plain_copy(
    job: &axes_core::protocol::OutputJob<'_>,
    target: Option<&[isize]>,
) -> Option<(usize, usize)> {
    let [leaf] = &job.leaves[..] else {
        return None;
    };
    use axes_core::ir::IrNode;
    // The leaf's value, cast to its own type at most (an assignment's cast to the target's).
    let copies = match job.ir.nodes[..] {
        [IrNode::Leaf(0)] => true,
        [IrNode::Leaf(0), IrNode::Cast(to, 0)] => to == leaf.dtype,
        _ => false,
    };
    if !copies || !job.reduced.is_empty() || leaf.dtype != job.out {
        return None;
    }
    let count: usize = job.kept.iter().product();
    let (merged, target) = job.merged(target);
    let consecutive = |strides: &[isize]| matches!(strides, [] | [1]);
    (count > 0
        && consecutive(&merged.leaves[0].strides)
        && target.as_deref().is_none_or(consecutive))
    .then(|| (count * leaf.dtype.size(), leaf.offset * leaf.dtype.size()))
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
        tuning: &Tuning,
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<JobPlan> {
        use axes_kernels::{CType, Spec};
        let ty = CType::of(job.dtype)?;
        let out_count = job.batch * job.m * job.n;
        let largest = (job.lhs.memory.bytes())
            .max(job.rhs.memory.bytes())
            .div_ceil(ty.size())
            .max(out_count);
        let wide = Spec::needs_wide(largest);
        let tile = tuning.matmul_tile(job.m, job.n);
        let kernel = Arc::new(axes_kernels::matmul(ty, wide, tile, dialect)?);
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
            items: tile.groups(job.batch, job.m, job.n),
            group: Some(tile.threads()),
            out_bytes: out_count * ty.size(),
            splits: 1,
            partial: job.dtype,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiled() -> Tuning {
        Tuning::device(true, 1024, 4096, 64 << 10, 1024)
    }

    /// `leaves` as the planner sees them (f32 elements, none written in place).
    fn candidates(leaves: &[&'static [isize]]) -> Vec<Option<(&'static [isize], usize)>> {
        leaves.iter().map(|&s| Some((s, 4))).collect()
    }

    #[test]
    fn a_transposed_leaf_is_staged_and_the_axes_ordered_for_the_tiles() {
        // x + yᵀ over (row, col) of 64 × 48 into a row-major result.
        let leaves = candidates(&[&[48, 1], &[1, 64]]);
        let found = transpose(&[64, 48], &[48, 1], &leaves, &tiled());
        let expected = Transpose {
            order: vec![0, 1],
            staged: vec![1],
        };
        assert_eq!(found, Some(expected));
        // The result written in the other order: both leaves run along its slower axis.
        let leaves = candidates(&[&[48, 1], &[48, 1]]);
        let found = transpose(&[64, 48], &[1, 64], &leaves, &tiled());
        let expected = Transpose {
            order: vec![1, 0],
            staged: vec![0, 1],
        };
        assert_eq!(found, Some(expected));
        // A third, outer axis stays first.
        let leaves = candidates(&[&[1, 3, 3 * 40]]);
        let found = transpose(&[40, 3, 40], &[3 * 40, 40, 1], &leaves, &tiled());
        assert_eq!(found.map(|t| t.order), Some(vec![1, 0, 2]));
    }

    #[test]
    fn tiles_are_left_out_where_they_do_not_pay() {
        let tuning = tiled();
        // Operands that agree, or broadcast along the results' fastest axis.
        let same = candidates(&[&[48, 1], &[0, 1], &[1, 0]]);
        assert_eq!(transpose(&[64, 48], &[48, 1], &same, &tuning), None);
        // An axis shorter than half a tile.
        let short = candidates(&[&[1, 64]]);
        assert_eq!(transpose(&[64, 15], &[15, 1], &short, &tuning), None);
        // More leaves to stage than a kernel takes.
        let transposed: &[isize] = &[1, 64];
        let many = candidates(&[transposed; MAX_STAGED + 1]);
        assert_eq!(transpose(&[64, 48], &[48, 1], &many, &tuning), None);
        // A leaf written in place is never staged; nor tiles where the device has none.
        let written = vec![None];
        assert_eq!(transpose(&[64, 48], &[48, 1], &written, &tuning), None);
        let untiled = Tuning {
            tile: None,
            ..tuning
        };
        let leaves = candidates(&[&[1, 64]]);
        assert_eq!(transpose(&[64, 48], &[48, 1], &leaves, &untiled), None);
    }
}
