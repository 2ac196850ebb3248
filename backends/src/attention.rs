//! Fused attention on the generated kernels ([`axes_kernels::attention`]), shared by the
//! OpenCL and CUDA backends: an [`AttentionJob`]'s offset lists in one index buffer, every
//! pass's arguments, and the launches — one for the forward, three for the backward
//! (`D = rowsum(dO ∘ O)`, the keys' and values' gradients, the queries' gradients).

use axes_core::error::{Error, Result};
use axes_core::protocol::{AttentionJob, AttentionOperand, AttentionSaved, DeviceMemory};
use axes_kernels::{
    ATTENTION_GROUP, AttentionArg, AttentionInput, AttentionPass, AttentionSpec, CType, Spec,
    attention,
};

use crate::Index;
use crate::launch::{KernelDevice, LaunchArg};

/// From this magnitude, an offset or a row's reach makes the kernels use 64-bit indices (the
/// kernels add three such terms, which must stay below 2^31).
const NARROW_TERM: i128 = 1 << 29;

/// One call's kernels' spec and the arguments that do not change between its passes.
struct Plan {
    spec: AttentionSpec,
    /// Every offset list, in the kernels' index type.
    offsets: Vec<u8>,
    /// Where each input's batch and column offsets start in `offsets` ([`AttentionInput::ALL`]
    /// order; 0 for an input the call lacks).
    starts: [(Index, Index); 6],
    /// Each input's row step (the mask's step along the queries).
    rows: [Index; 6],
    /// The mask's step along the keys.
    mask_key: Index,
}

/// An input's offset lists and steps, and its buffer's length in elements.
struct Lists<'a> {
    batch: &'a [isize],
    cols: &'a [isize],
    row: isize,
    rows: usize,
    elements: usize,
}

impl<'a> Lists<'a> {
    fn of(x: &AttentionOperand<'a>, rows: usize, size: usize) -> Self {
        Lists {
            batch: x.batch,
            cols: x.cols,
            row: x.row,
            rows,
            elements: x.memory.bytes() / size,
        }
    }
}

impl Plan {
    fn new<'a>(job: &AttentionJob<'a>, saved: Option<&AttentionSaved<'a>>) -> Result<Plan> {
        let shape = job.shape;
        let ty = CType::of(job.dtype)?;
        let size = ty.size();
        let operand = |x: &AttentionOperand<'a>, rows| Lists::of(x, rows, size);
        let inputs: [Option<Lists<'a>>; 6] = [
            Some(operand(&job.q, shape.queries)),
            Some(operand(&job.k, shape.keys)),
            Some(operand(&job.v, shape.keys)),
            job.mask.map(|m| Lists {
                batch: m.batch,
                cols: &[],
                row: m.query,
                rows: shape.queries,
                elements: m.memory.bytes() / size,
            }),
            saved.map(|s| operand(&s.out, shape.queries)),
            saved.map(|s| operand(&s.grad, shape.queries)),
        ];
        let mask_key = job.mask.map_or(0, |m| m.key);
        let reach = |step: isize, count: usize| step as i128 * count.saturating_sub(1) as i128;
        let mut terms = vec![reach(mask_key, shape.keys)];
        let mut largest = (shape.batch)
            .saturating_mul(shape.queries.max(shape.keys))
            .saturating_mul(shape.width.max(shape.value_width).max(1));
        for lists in inputs.iter().flatten() {
            terms.extend(lists.batch.iter().chain(lists.cols).map(|&o| o as i128));
            terms.push(reach(lists.row, lists.rows));
            largest = largest.max(lists.elements);
        }
        let wide = Spec::needs_wide(largest) || terms.iter().any(|t| t.abs() >= NARROW_TERM);
        let mut offsets = Vec::new();
        let mut count = 0;
        let mut push = |list: &[isize]| {
            let start = count as Index;
            for &o in list {
                if wide {
                    offsets.extend_from_slice(&(o as i64).to_ne_bytes());
                } else {
                    offsets.extend_from_slice(&(o as i32).to_ne_bytes());
                }
            }
            count += list.len();
            start
        };
        let mut starts = [(0, 0); 6];
        let mut rows = [0; 6];
        for (k, lists) in inputs.iter().enumerate() {
            if let Some(lists) = lists {
                starts[k] = (push(lists.batch), push(lists.cols));
                rows[k] = lists.row as Index;
            }
        }
        Ok(Plan {
            spec: AttentionSpec {
                ty,
                width: shape.width,
                value_width: shape.value_width,
                scale: shape.scale,
                masked: job.mask.is_some(),
                wide,
            },
            offsets,
            starts,
            rows,
            mask_key: mask_key as Index,
        })
    }

    /// Queues `pass` over `groups` groups, reading `inputs` and writing `results`.
    fn launch<D: KernelDevice>(
        &self,
        device: &D,
        pass: AttentionPass,
        inputs: &Inputs<'_>,
        results: [&DeviceMemory; 2],
        groups: usize,
    ) -> Result<()> {
        let kernel = attention(&self.spec, pass, D::DIALECT)?;
        let shape = inputs.job.shape;
        let position = |x: AttentionInput| {
            (AttentionInput::ALL.iter())
                .position(|&y| y == x)
                .expect("every input is in ALL")
        };
        let index = |v: usize| LaunchArg::Index(v as Index);
        let args = (AttentionArg::ALL.iter())
            .map(|&arg| {
                Ok(match arg {
                    AttentionArg::Batch => index(shape.batch),
                    AttentionArg::Queries => index(shape.queries),
                    AttentionArg::Keys => index(shape.keys),
                    AttentionArg::Causal => index(shape.causal as usize),
                    AttentionArg::Offsets => LaunchArg::Buffer(device.buffer(inputs.offsets)?),
                    AttentionArg::BatchOffsets(x) => LaunchArg::Index(self.starts[position(x)].0),
                    AttentionArg::ColumnOffsets(x) => LaunchArg::Index(self.starts[position(x)].1),
                    AttentionArg::RowStep(x) => LaunchArg::Index(self.rows[position(x)]),
                    AttentionArg::MaskKeyStep => LaunchArg::Index(self.mask_key),
                    AttentionArg::Buffer(x) => LaunchArg::Buffer(device.buffer(inputs.buffer(x))?),
                    AttentionArg::LogSumExp => {
                        LaunchArg::Buffer(device.buffer(inputs.lse.unwrap_or(inputs.offsets))?)
                    }
                    AttentionArg::RowProducts => {
                        LaunchArg::Buffer(device.buffer(inputs.delta.unwrap_or(inputs.offsets))?)
                    }
                    AttentionArg::Result(j) => LaunchArg::Buffer(device.buffer(results[j])?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the arguments follow `AttentionArg::ALL`, as the kernel's parameters do.
        // `AttentionJob::check` (called before any plan is made) found every element the
        // job's offsets, steps and lengths reach — the kernels read no other — inside its
        // buffer, the log-sum-exp's `batch × queries` included; the offsets buffer holds the
        // job's own lists at `starts`, in the index type `wide` chose so that no sum
        // overflows; `delta` holds `batch × queries` elements, and each result the
        // `[batch][position][column]` rows the pass writes (fresh buffers, which no input is).
        unsafe { device.launch_attention(&kernel, self.spec.wide, &args, groups) }
    }
}

/// The buffers a pass may read.
struct Inputs<'a> {
    job: &'a AttentionJob<'a>,
    saved: Option<&'a AttentionSaved<'a>>,
    lse: Option<&'a DeviceMemory>,
    delta: Option<&'a DeviceMemory>,
    offsets: &'a DeviceMemory,
}

impl Inputs<'_> {
    /// The buffer of input `x` (the offsets buffer for one the call lacks, which the kernels
    /// do not read).
    fn buffer(&self, x: AttentionInput) -> &DeviceMemory {
        match x {
            AttentionInput::Queries => self.job.q.memory,
            AttentionInput::Keys => self.job.k.memory,
            AttentionInput::Values => self.job.v.memory,
            AttentionInput::Mask => self.job.mask.map_or(self.offsets, |m| m.memory),
            AttentionInput::Out => self.saved.map_or(self.offsets, |s| s.out.memory),
            AttentionInput::Grad => self.saved.map_or(self.offsets, |s| s.grad.memory),
        }
    }
}

/// `a × b × c` bytes, or an error naming the lengths.
fn bytes(a: usize, b: usize, c: usize, size: usize) -> Result<usize> {
    (a.checked_mul(b))
        .and_then(|n| n.checked_mul(c))
        .and_then(|n| n.checked_mul(size))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{a} × {b} × {c}"),
        })
}

/// Groups of [`ATTENTION_GROUP`] rows over `rows` positions of every batch entry.
fn blocks(batch: usize, rows: usize) -> usize {
    batch * rows.div_ceil(ATTENTION_GROUP)
}

/// The forward pass of `job` on `device`: the result and each query's log-sum-exp.
pub(crate) fn forward<D: KernelDevice>(
    device: &D,
    job: &AttentionJob<'_>,
) -> Result<(DeviceMemory, DeviceMemory)> {
    job.check(None)?;
    let plan = Plan::new(job, None)?;
    let shape = job.shape;
    let size = job.dtype.size();
    let out = device.fresh(bytes(shape.batch, shape.queries, shape.value_width, size)?)?;
    let lse = device.fresh(bytes(shape.batch, shape.queries, 1, job.wide().size())?)?;
    if shape.batch * shape.queries > 0 {
        let offsets = device.upload(&plan.offsets)?;
        let inputs = Inputs {
            job,
            saved: None,
            lse: None,
            delta: None,
            offsets: &offsets,
        };
        let groups = blocks(shape.batch, shape.queries);
        plan.launch(
            device,
            AttentionPass::Forward,
            &inputs,
            [&out, &lse],
            groups,
        )?;
    }
    Ok((out, lse))
}

/// The backward pass of `job` on `device`: the gradients of the queries, keys and values.
pub(crate) fn backward<D: KernelDevice>(
    device: &D,
    job: &AttentionJob<'_>,
    saved: &AttentionSaved<'_>,
) -> Result<[DeviceMemory; 3]> {
    job.check(Some(saved))?;
    let plan = Plan::new(job, Some(saved))?;
    let shape = job.shape;
    let size = job.dtype.size();
    let dq = device.fresh(bytes(shape.batch, shape.queries, shape.width, size)?)?;
    let dk = device.fresh(bytes(shape.batch, shape.keys, shape.width, size)?)?;
    let dv = device.fresh(bytes(shape.batch, shape.keys, shape.value_width, size)?)?;
    let delta = device.fresh(bytes(shape.batch, shape.queries, 1, job.wide().size())?)?;
    if shape.batch * shape.queries.max(shape.keys) == 0 {
        return Ok([dq, dk, dv]);
    }
    let offsets = device.upload(&plan.offsets)?;
    let mut inputs = Inputs {
        job,
        saved: Some(saved),
        lse: Some(saved.lse),
        delta: None,
        offsets: &offsets,
    };
    let query_groups = blocks(shape.batch, shape.queries);
    if query_groups > 0 {
        let groups = (shape.batch * shape.queries).div_ceil(ATTENTION_GROUP);
        let results = [&delta, &delta];
        plan.launch(device, AttentionPass::RowProducts, &inputs, results, groups)?;
        inputs.delta = Some(&delta);
    }
    let key_groups = blocks(shape.batch, shape.keys);
    if key_groups > 0 {
        let results = [&dk, &dv];
        plan.launch(
            device,
            AttentionPass::KeyGradients,
            &inputs,
            results,
            key_groups,
        )?;
    }
    if query_groups > 0 {
        let results = [&dq, &dq];
        plan.launch(
            device,
            AttentionPass::QueryGradients,
            &inputs,
            results,
            query_groups,
        )?;
    }
    Ok([dq, dk, dv])
}
