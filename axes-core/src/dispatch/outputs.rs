//! Jobs with several results, from buffers: where autodiff's fused forward and backward steps
//! and its loss run. Each call goes to the device its buffers share — host memory to the CPU
//! engine's one-pass interpreter (results written in place into their starting buffers), a
//! backend's device to its backend as a [`Job`].

use crate::element::{DType, Element, Elements};
use crate::engine::interp::{self, StridedSink, StridedSource};
use crate::error::{Error, Result};
use crate::ir::ops::identity_of;
use crate::ir::{Ir, ReduceOp};
use crate::layout::Layout;
use crate::num::Num;
use crate::protocol::{Backend, Device, DeviceMemory, Job, JobLeaf, JobOutput, JobTarget, WriteTo};
use crate::storage::{self, Storage};

use super::buffers::{copied_into, written_out};
use super::{common_device, lower::device_storage};

/// One input of [`run_outputs`]: a buffer of any element type, and where its elements are
/// for each iteration axis (stride 0 where it is broadcast).
pub(crate) struct Input<'a> {
    data: InputData<'a>,
    offset: usize,
    strides: Vec<isize>,
}

/// Where an input's elements are.
pub(crate) enum InputData<'a> {
    Host(Elements<'a>),
    Device(Device, DType, &'a DeviceMemory),
}

impl<'a> Input<'a> {
    /// `storage` laid out by `layout` (no padding), its axis `j` being iteration axis
    /// `axes[j]` of `rank`.
    pub(crate) fn new<T: Element>(
        storage: &'a Storage<T>,
        layout: &Layout,
        axes: &[usize],
        rank: usize,
    ) -> Result<Self> {
        let data = match storage.device_memory() {
            Some(memory) => InputData::Device(storage.device(), T::DTYPE, memory),
            None => InputData::Host(T::elements(storage.host()?)),
        };
        Input::laid_out(data, layout, axes, rank)
    }

    /// Elements in host memory, laid out as in [`Input::new`]: a device buffer's host copy
    /// ([`Storage::host_now`]) read without waiting for the device.
    pub(crate) fn host<T: Element>(
        values: &'a [T],
        layout: &Layout,
        axes: &[usize],
        rank: usize,
    ) -> Result<Self> {
        Input::laid_out(InputData::Host(T::elements(values)), layout, axes, rank)
    }

    pub(crate) fn laid_out(
        data: InputData<'a>,
        layout: &Layout,
        axes: &[usize],
        rank: usize,
    ) -> Result<Self> {
        if layout.is_padded() {
            return Err(Error::Unsupported {
                what: "a padded view as an operand here: write it out with `.contiguous()` first"
                    .into(),
            });
        }
        Ok(Input {
            data,
            offset: layout.offset(),
            strides: strides_over(layout, axes, rank),
        })
    }

    fn device(&self) -> Device {
        match self.data {
            InputData::Host(_) => Device::Cpu,
            InputData::Device(device, ..) => device,
        }
    }
}

/// One result of [`run_outputs`].
pub(crate) struct Output<T> {
    /// The IR node it holds.
    pub(crate) root: usize,
    /// The iteration axes it keeps, in its axis order.
    pub(crate) kept: Vec<usize>,
    /// How values meeting at one element combine: over the other axes, and with `start`.
    pub(crate) reduce: ReduceOp,
    /// The identity of `reduce` in `T`: where a fresh result combines, what it starts from.
    identity: T,
    /// The values it starts from (lengths of `kept`, no padding, no repeated positions),
    /// else the identity of `reduce`. In host memory the result is written into it.
    pub(crate) start: Option<(Storage<T>, Layout)>,
    /// A region of an existing buffer (lengths of `kept`, no padding, no repeated positions)
    /// that the result overwrites, the rest of the buffer kept: in place when this is the
    /// buffer's only handle, else in a copy (copy-on-write).
    pub(crate) into: Option<(Storage<T>, Layout)>,
}

impl<T: Num> Output<T> {
    /// A result holding node `root`, kept over the iteration axes `kept`, combined over the
    /// others with `reduce`, into a fresh buffer.
    pub(crate) fn new(root: usize, kept: Vec<usize>, reduce: ReduceOp) -> Self {
        Output::combined_by(root, kept, reduce, identity_of(reduce.identity()))
    }
}

impl<T: Element> Output<T> {
    /// [`Output::new`] for any element type, given the identity of `reduce` in it (a
    /// [`Combine`](crate::engine::exec::Combine)'s): a boolean result is written over,
    /// never combined.
    pub(crate) fn combined_by(
        root: usize,
        kept: Vec<usize>,
        reduce: ReduceOp,
        identity: T,
    ) -> Self {
        Output {
            root,
            kept,
            reduce,
            identity,
            start: None,
            into: None,
        }
    }

    /// The result added (by `reduce`) to `start`.
    pub(crate) fn onto(mut self, start: Option<(Storage<T>, Layout)>) -> Self {
        self.start = start;
        self
    }

    /// The result written over the region `layout` of `buffer` (see [`Output::into`]).
    pub(crate) fn written_into(mut self, buffer: Storage<T>, layout: Layout) -> Self {
        self.into = Some((buffer, layout));
        self
    }

    /// Whether it combines over any of `rank` iteration axes.
    fn reduces(&self, rank: usize) -> bool {
        self.kept.len() < rank
    }
}

/// The strides of `layout` over `rank` iteration axes, its axis `j` being iteration axis
/// `axes[j]` (0 on the others).
fn strides_over(layout: &Layout, axes: &[usize], rank: usize) -> Vec<isize> {
    let mut strides = vec![0isize; rank];
    for (&a, &s) in axes.iter().zip(layout.strides()) {
        strides[a] = s;
    }
    strides
}

/// Computes the `outputs` of `ir` over the iteration axes `lens` from `inputs` (leaf `k`
/// reads `inputs[k]`), on the device every buffer is on: each result as a buffer and its
/// layout (row-major over its kept axes, or its starting buffer's layout in host memory).
pub(crate) fn run_outputs<T: Element>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    outputs: Vec<Output<T>>,
) -> Result<Vec<(Storage<T>, Layout)>> {
    for output in &outputs {
        let kept: Vec<usize> = output.kept.iter().map(|&a| lens[a]).collect();
        if output.start.is_some() && output.into.is_some() {
            return Err(Error::Unsupported {
                what: "a result both accumulated onto and written into a buffer".into(),
            });
        }
        for (storage, layout) in output.start.iter().chain(&output.into) {
            if layout.is_padded() || !layout.is_injective() {
                return Err(Error::Unsupported {
                    what: "writing into a view that repeats or skips elements".into(),
                });
            }
            if layout.lens() != kept || !layout.fits(storage.len()) {
                return Err(Error::Unsupported {
                    what: format!(
                        "writing a result of lengths {kept:?} into a view of lengths {:?} of a \
                         buffer of {} elements",
                        layout.lens(),
                        storage.len()
                    ),
                });
            }
        }
    }
    let devices = (inputs.iter().map(Input::device)).chain(
        (outputs.iter())
            .filter_map(|o| o.start.as_ref().or(o.into.as_ref()))
            .map(|(s, _)| s.device()),
    );
    match common_device(devices)? {
        None | Some(Device::Cpu) => on_host(ir, lens, inputs, outputs),
        Some(Device::Backend(backend)) => on_device(backend, ir, lens, inputs, outputs),
    }
}

/// [`run_outputs`] on `backend`'s device: the fresh results as one [`Job`], those written
/// into buffers as another.
fn on_device<T: Element>(
    backend: &'static dyn Backend,
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    outputs: Vec<Output<T>>,
) -> Result<Vec<(Storage<T>, Layout)>> {
    let device = Device::Backend(backend);
    let leaves = job_leaves(inputs, device)?;
    let (targets, outputs): (Vec<_>, Vec<_>) = (outputs.into_iter())
        .map(|mut output| (output.into.take(), output))
        .unzip();
    let job_outputs = (outputs.iter())
        .map(|output| {
            let start = (output.start.as_ref())
                .map(|(storage, layout)| {
                    let strides = strides_over(layout, &output.kept, lens.len());
                    device_leaf(storage, device, layout.offset(), strides)
                })
                .transpose()?;
            Ok(JobOutput {
                root: output.root,
                kept: output.kept.clone(),
                reduce: output.reduce,
                start,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let job = Job {
        ir: ir.clone(),
        leaves,
        lens: lens.to_vec(),
        out: T::DTYPE,
        outputs: job_outputs,
    };
    let counts = job.output_counts()?;
    let fresh: Vec<usize> = (0..targets.len())
        .filter(|&k| targets[k].is_none())
        .collect();
    let mut fresh_results = if fresh.is_empty() {
        Vec::new()
    } else {
        let fresh_job = Job {
            outputs: fresh.iter().map(|&k| job.outputs[k].clone()).collect(),
            ..job.clone()
        };
        let results = backend.run(&fresh_job, WriteTo::New)?;
        if results.len() != fresh.len() {
            return Err(Error::Unsupported {
                what: format!(
                    "{device} returned {} results for a job of {}",
                    results.len(),
                    fresh.len()
                ),
            });
        }
        results
    }
    .into_iter();
    // Copy-on-write: a region of a shared buffer is written into a copy of the whole buffer.
    let mut targets = (targets.into_iter())
        .map(|target| {
            target
                .map(|(mut storage, layout)| {
                    if storage.unique_memory().is_none() {
                        let whole = Layout::row_major(&[storage.len()]);
                        storage = written_out(&storage, &whole)?.0;
                    }
                    Ok((storage, layout))
                })
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    let written: Vec<usize> = (0..targets.len())
        .filter(|&k| targets[k].is_some())
        .collect();
    if !written.is_empty() {
        let into_job = Job {
            outputs: written.iter().map(|&k| job.outputs[k].clone()).collect(),
            ..job.clone()
        };
        let into = (targets.iter_mut().flatten())
            .map(|(storage, layout)| JobTarget {
                memory: (storage.unique_memory()).expect("made unique above"),
                offset: layout.offset(),
                strides: layout.strides().to_vec(),
            })
            .collect();
        backend.run(&into_job, WriteTo::Into(into))?;
    }
    let mut results = Vec::with_capacity(targets.len());
    for (k, target) in targets.into_iter().enumerate() {
        match target {
            None => {
                let memory = fresh_results.next().expect("one result per fresh output");
                let kept: Vec<usize> = job.outputs[k].kept.iter().map(|&a| lens[a]).collect();
                let storage = device_storage(backend, memory, counts[k])?;
                results.push((storage, Layout::row_major(&kept)));
            }
            Some(written) => results.push(written),
        }
    }
    Ok(results)
}

/// Computes the nodes `roots[k]` of `ir` over the iteration axes `lens` from `inputs` (leaf
/// `k` reads `inputs[k]`), result `k` written over the elements of input `over[k]` in place,
/// as one job on the device the inputs share (see
/// [`WriteTo::Over`]): how an optimizer
/// updates the parameters and its state in buffers that stay the same from step to step.
/// The caller holds each written buffer as its only user, its host copy dropped
/// ([`unique_for_writing`]). Device buffers only: host memory is written by the typed engine.
pub(crate) fn run_in_place<T: Element>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    roots: &[usize],
    over: &[usize],
) -> Result<()> {
    let Some(Device::Backend(backend)) = common_device(inputs.iter().map(Input::device))? else {
        return Err(Error::Unsupported {
            what: "a job written in place over buffers in host memory".into(),
        });
    };
    let device = Device::Backend(backend);
    let leaves = job_leaves(inputs, device)?;
    let all: Vec<usize> = (0..lens.len()).collect();
    let job = Job {
        ir: ir.clone(),
        leaves,
        lens: lens.to_vec(),
        out: T::DTYPE,
        outputs: (roots.iter())
            .map(|&root| JobOutput {
                root,
                kept: all.clone(),
                reduce: ReduceOp::Sum,
                start: None,
            })
            .collect(),
    };
    backend.run(&job, WriteTo::Over(over))?;
    Ok(())
}

/// `inputs`, on `device`, as a job's leaves.
fn job_leaves<'a>(inputs: &[Input<'a>], device: Device) -> Result<Vec<JobLeaf<'a>>> {
    (inputs.iter())
        .map(|input| match input.data {
            InputData::Device(_, dtype, memory) => Ok(JobLeaf {
                dtype,
                memory,
                offset: input.offset,
                strides: input.strides.clone(),
            }),
            InputData::Host(_) => Err(mismatch(Device::Cpu, device)),
        })
        .collect()
}

/// `storage`, on `device`, as a job's leaf.
fn device_leaf<T: Element>(
    storage: &Storage<T>,
    device: Device,
    offset: usize,
    strides: Vec<isize>,
) -> Result<JobLeaf<'_>> {
    let memory = storage
        .device_memory()
        .ok_or_else(|| mismatch(Device::Cpu, device))?;
    Ok(JobLeaf {
        dtype: T::DTYPE,
        memory,
        offset,
        strides,
    })
}

/// The error for buffers on two devices.
pub(super) fn mismatch(left: Device, right: Device) -> Error {
    Error::DeviceMismatch {
        left: left.to_string(),
        right: right.to_string(),
    }
}

/// [`run_outputs`] for one result.
pub(crate) fn run_output<T: Element>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    output: Output<T>,
) -> Result<(Storage<T>, Layout)> {
    let mut results = run_outputs(ir, lens, inputs, vec![output])?;
    Ok(results.pop().expect("one result per output"))
}

/// [`run_outputs`] in host memory: one pass of the interpreter, each result written into its
/// starting buffer (or a fresh one).
fn on_host<T: Element>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    outputs: Vec<Output<T>>,
) -> Result<Vec<(Storage<T>, Layout)>> {
    let rank = lens.len();
    let mut results = Vec::with_capacity(outputs.len());
    let mut combines = Vec::with_capacity(outputs.len());
    let mut roots = Vec::with_capacity(outputs.len());
    // Reducing results meant for a region of a buffer: computed fresh, then copied there.
    let mut copies = Vec::new();
    for (k, mut output) in outputs.into_iter().enumerate() {
        let kept: Vec<usize> = output.kept.iter().map(|&a| lens[a]).collect();
        let reduces = output.reduces(rank);
        roots.push(output.root);
        if reduces && let Some(into) = output.into.take() {
            copies.push((k, into));
        }
        let (storage, layout, combine) = match (output.start, output.into) {
            (Some((storage, layout)), _) => (storage, layout, Some(output.reduce)),
            (None, Some((storage, layout))) => (storage, layout, None),
            (None, None) => {
                let count = (kept.iter())
                    .try_fold(1usize, |n, &l| n.checked_mul(l))
                    .ok_or_else(|| Error::SizeOverflow {
                        lengths: format!("{kept:?}"),
                    })?;
                let layout = Layout::row_major(&kept);
                // A result that keeps every axis is written over every element.
                let values = if reduces {
                    storage::filled(count, output.identity)?
                } else {
                    storage::for_overwrite(count)?
                };
                let combine = reduces.then_some(output.reduce);
                (Storage::from_host_vec(values), layout, combine)
            }
        };
        combines.push((strides_over(&layout, &output.kept, rank), combine));
        results.push((storage, layout));
    }
    let sources = (inputs.iter())
        .map(|input| match input.data {
            InputData::Host(data) => Ok(StridedSource {
                data,
                offset: input.offset,
                strides: input.strides.as_slice().into(),
            }),
            InputData::Device(device, ..) => Err(mismatch(device, Device::Cpu)),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut sinks: Vec<StridedSink<'_>> = (results.iter_mut().zip(combines))
        .map(|((storage, layout), (strides, combine))| {
            Ok(StridedSink {
                offset: layout.offset(),
                data: T::elements_mut(storage.try_make_mut()?),
                strides: strides.into(),
                combine,
            })
        })
        .collect::<Result<_>>()?;
    interp::compile_and_run(ir, &roots, lens, T::DTYPE, &sources, &mut sinks)?;
    drop(sinks);
    for (k, (buffer, layout)) in copies {
        let (fresh, fresh_layout) = &results[k];
        results[k] = copied_into(fresh, fresh_layout, buffer, layout)?;
    }
    Ok(results)
}
