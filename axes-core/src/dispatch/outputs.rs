//! Jobs with several results, from buffers: where autodiff's fused forward and backward steps
//! and its loss run. Each call goes to the device its buffers share — host memory to the CPU
//! engine's one-pass interpreter (results written in place into their starting buffers), an
//! accelerator to its backend as a [`MultiJob`].

use crate::element::{DType, Element, Elements};
use crate::engine::cpu::run_host;
use crate::engine::interp::{Sink, Source};
use crate::error::{Error, Result};
use crate::ir::ops::identity_of;
use crate::ir::{Ir, ReduceOp};
use crate::layout::Layout;
use crate::num::Num;
use crate::protocol::{Device, DeviceMemory, JobLeaf, JobOutput, MultiJob};
use crate::storage::Storage;

use super::{common_device, lower::device_storage};

/// One input of [`run_outputs`]: a buffer of any element type, and where its elements are
/// for each iteration axis (stride 0 where it is broadcast).
pub(crate) struct Input<'a> {
    data: InputData<'a>,
    offset: usize,
    strides: Vec<isize>,
}

/// Where an input's elements are.
enum InputData<'a> {
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
        if layout.is_padded() {
            return Err(Error::Unsupported {
                what: "a padded view as an operand here: write it out with `.contiguous()` first"
                    .into(),
            });
        }
        let data = match storage.memory() {
            Some(memory) => InputData::Device(storage.device(), T::DTYPE, memory),
            None => InputData::Host(T::elements(storage.host()?)),
        };
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
    /// The values it starts from (lengths of `kept`, no padding, no repeated positions),
    /// else the identity of `reduce`. In host memory the result is written into it.
    pub(crate) start: Option<(Storage<T>, Layout)>,
}

impl<T> Output<T> {
    /// A result holding node `root`, kept over the iteration axes `kept`, combined over the
    /// others with `reduce`, into a fresh buffer.
    pub(crate) fn new(root: usize, kept: Vec<usize>, reduce: ReduceOp) -> Self {
        Output {
            root,
            kept,
            reduce,
            start: None,
        }
    }

    /// The result added (by `reduce`) to `start`.
    pub(crate) fn onto(mut self, start: Option<(Storage<T>, Layout)>) -> Self {
        self.start = start;
        self
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
pub(crate) fn run_outputs<T: Num>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    outputs: Vec<Output<T>>,
) -> Result<Vec<(Storage<T>, Layout)>> {
    for output in &outputs {
        if let Some((_, layout)) = &output.start
            && (layout.is_padded() || !layout.is_injective())
        {
            return Err(Error::Unsupported {
                what: "accumulating into a view that repeats or skips elements".into(),
            });
        }
    }
    let devices = (inputs.iter().map(Input::device)).chain(
        outputs
            .iter()
            .filter_map(|o| o.start.as_ref())
            .map(|(s, _)| s.device()),
    );
    match common_device(devices)? {
        None | Some(Device::Cpu) => on_host(ir, lens, inputs, outputs),
        Some(Device::Accelerator(backend)) => {
            let device = Device::Accelerator(backend);
            let leaf = |storage, offset, strides| device_leaf(storage, device, offset, strides);
            let leaves = (inputs.iter())
                .map(|input| match input.data {
                    InputData::Device(_, dtype, memory) => Ok(JobLeaf {
                        dtype,
                        memory,
                        offset: input.offset,
                        strides: input.strides.clone(),
                    }),
                    InputData::Host(_) => Err(mismatch(Device::Cpu, device)),
                })
                .collect::<Result<Vec<_>>>()?;
            let job_outputs = (outputs.iter())
                .map(|output| {
                    let start = (output.start.as_ref())
                        .map(|(storage, layout)| {
                            let strides = strides_over(layout, &output.kept, lens.len());
                            leaf(storage, layout.offset(), strides)
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
            let job = MultiJob {
                ir: ir.clone(),
                leaves,
                lens: lens.to_vec(),
                out: T::DTYPE,
                outputs: job_outputs,
            };
            let counts = job.output_counts()?;
            let results = backend.run_multi(&job)?;
            if results.len() != counts.len() {
                return Err(Error::Unsupported {
                    what: format!(
                        "{} returned {} results for a job of {}",
                        Device::Accelerator(backend),
                        results.len(),
                        counts.len()
                    ),
                });
            }
            (results.into_iter().zip(&counts).zip(&job.outputs))
                .map(|((memory, &count), output)| {
                    let kept: Vec<usize> = output.kept.iter().map(|&a| lens[a]).collect();
                    Ok((
                        device_storage(backend, memory, count)?,
                        Layout::row_major(&kept),
                    ))
                })
                .collect()
        }
    }
}

/// `storage`, on `device`, as a job's leaf.
fn device_leaf<T: Num>(
    storage: &Storage<T>,
    device: Device,
    offset: usize,
    strides: Vec<isize>,
) -> Result<JobLeaf<'_>> {
    let memory = storage
        .memory()
        .ok_or_else(|| mismatch(Device::Cpu, device))?;
    Ok(JobLeaf {
        dtype: T::DTYPE,
        memory,
        offset,
        strides,
    })
}

/// The error for buffers on two devices.
fn mismatch(left: Device, right: Device) -> Error {
    Error::DeviceMismatch {
        left: left.to_string(),
        right: right.to_string(),
    }
}

/// [`run_outputs`] for one result.
pub(crate) fn run_output<T: Num>(
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
fn on_host<T: Num>(
    ir: &Ir,
    lens: &[usize],
    inputs: &[Input<'_>],
    outputs: Vec<Output<T>>,
) -> Result<Vec<(Storage<T>, Layout)>> {
    let rank = lens.len();
    let mut results = Vec::with_capacity(outputs.len());
    let mut combines = Vec::with_capacity(outputs.len());
    let mut roots = Vec::with_capacity(outputs.len());
    for output in outputs {
        let kept: Vec<usize> = output.kept.iter().map(|&a| lens[a]).collect();
        let reduces = output.kept.len() < rank;
        roots.push(output.root);
        let (storage, layout, combine) = match output.start {
            Some((storage, layout)) => (storage, layout, Some(output.reduce)),
            None => {
                let count = (kept.iter())
                    .try_fold(1usize, |n, &l| n.checked_mul(l))
                    .ok_or_else(|| Error::SizeOverflow {
                        lengths: format!("{kept:?}"),
                    })?;
                let identity = identity_of::<T>(output.reduce.identity());
                let layout = Layout::row_major(&kept);
                let combine = reduces.then_some(output.reduce);
                (Storage::new(vec![identity; count]), layout, combine)
            }
        };
        combines.push((strides_over(&layout, &output.kept, rank), combine));
        results.push((storage, layout));
    }
    let sources = (inputs.iter())
        .map(|input| match input.data {
            InputData::Host(data) => Ok(Source {
                data,
                offset: input.offset,
                strides: input.strides.clone(),
            }),
            InputData::Device(device, ..) => Err(mismatch(device, Device::Cpu)),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut sinks: Vec<Sink<'_>> = (results.iter_mut().zip(combines))
        .map(|((storage, layout), (strides, combine))| Sink {
            offset: layout.offset(),
            data: T::elements_mut(storage.make_mut()),
            strides,
            combine,
        })
        .collect();
    run_host(ir, &roots, lens, T::DTYPE, &sources, &mut sinks)?;
    drop(sinks);
    Ok(results)
}

/// A buffer of `count` copies of `value` on `device`.
pub(crate) fn filled<T: Num>(device: Device, count: usize, value: T) -> Result<Storage<T>> {
    match device {
        Device::Cpu => Ok(Storage::new(vec![value; count])),
        Device::Accelerator(backend) => {
            let mut ir = Ir::default();
            ir.push(crate::ir::IrNode::Scalar(value.to_f64()));
            let job = MultiJob {
                ir,
                leaves: Vec::new(),
                lens: vec![count],
                out: T::DTYPE,
                outputs: vec![JobOutput {
                    root: 0,
                    kept: vec![0],
                    reduce: ReduceOp::Sum,
                    start: None,
                }],
            };
            let memory = backend
                .run_multi(&job)?
                .pop()
                .ok_or_else(|| Error::Unsupported {
                    what: format!("{} returned no result", Device::Accelerator(backend)),
                })?;
            device_storage(backend, memory, count)
        }
    }
}

/// `storage` viewed by `layout`, written out row-major into a fresh buffer on its device
/// (every padding element and every repeated position becomes an element of its own).
pub(crate) fn written_out<T: Num>(
    storage: &Storage<T>,
    layout: &Layout,
) -> Result<(Storage<T>, Layout)> {
    let mut ir = Ir::default();
    let root = ir.leaf();
    let axes: Vec<usize> = (0..layout.rank()).collect();
    let output = Output::new(root, axes.clone(), ReduceOp::Sum);
    let input = Input::new(storage, layout, &axes, axes.len())?;
    run_output(&ir, layout.lens(), &[input], output)
}

/// `values` in a buffer on `device` (copied there from the host).
pub(crate) fn placed<T: Element>(values: Vec<T>, device: Device) -> Result<Storage<T>> {
    match device {
        Device::Cpu => Ok(Storage::new(values)),
        Device::Accelerator(backend) => {
            let memory = backend.upload(crate::protocol::as_bytes(&values))?;
            device_storage(backend, memory, values.len())
        }
    }
}
