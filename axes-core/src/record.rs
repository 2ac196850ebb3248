//! Training steps planned once and replayed: [`Recorded`] runs a step — forward, loss,
//! backward, clipping, optimizer — as its closure says the first time, records the device's
//! launches the second time, and from then on queues exactly those launches again, on the
//! same buffers: no tape node built, no job lowered or planned, no kernel looked up.

use std::marker::PhantomData;

use crate::dispatch::{copied_into, written_out};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::nn::Params;
use crate::num::{Float, Num};
use crate::protocol::{Backend, Device, DeviceMemory, Recording};
use crate::storage::Storage;
use crate::tensor::Tensor;

/// The layouts a [`Recorded`] step keeps a recording for at once (an epoch's last, shorter
/// batch gets its own); the oldest goes when another comes.
const LAYOUTS: usize = 4;

/// The tensors a recorded step takes at each run: a tensor, or a tuple of up to four.
pub trait StepInputs: Sized {
    /// Each tensor's element type and lengths: a step is recorded once per layout.
    fn layout(&self) -> Vec<(DType, Vec<usize>)>;
    /// Each tensor's device.
    fn devices(&self) -> Vec<Device>;
    /// Copies of the tensors in buffers of their own, which a recording reads.
    fn copies(&self) -> Result<Self>;
    /// Writes these values into `into`'s buffers (a recording's inputs: same layout).
    fn copy_into(&self, into: &mut Self) -> Result<()>;
}

/// What a recorded step returns (the loss, say): a tensor, a tuple of up to four, or `()`.
/// Each run returns copies, since a replay overwrites the recorded ones.
pub trait StepOutputs: Sized {
    /// Copies of the values in buffers of their own.
    fn copies(&self) -> Result<Self>;
}

impl<T: Num, A: AxisSet> StepInputs for Tensor<T, A> {
    fn layout(&self) -> Vec<(DType, Vec<usize>)> {
        vec![(T::DTYPE, self.lens().to_vec())]
    }

    fn devices(&self) -> Vec<Device> {
        vec![self.device()]
    }

    /// A copy, with a copy of its host copy where it has one (the labels of a minibatch
    /// copied from host memory keep one, which checks read at the recording).
    fn copies(&self) -> Result<Self> {
        let copy = StepOutputs::copies(self)?;
        let Some(values) = self.storage().host_now() else {
            return Ok(copy);
        };
        let on_host = Storage::new(values.to_vec());
        let (host, _) = written_out(&on_host, self.layout())?;
        let host = crate::storage::copied(host.host()?)?;
        let (storage, layout) = (copy.storage().clone().with_host_copy(host), *copy.layout());
        drop(copy);
        Tensor::from_parts(storage, layout).ok_or_else(|| Error::Unsupported {
            what: "a copy that does not fit its buffer".into(),
        })
    }

    fn copy_into(&self, into: &mut Self) -> Result<()> {
        // Contiguous elements on the same device: the device copies the bytes.
        if let (Device::Backend(backend), Some(from), Some((from_at, bytes)), Some((to_at, _))) = (
            self.device(),
            self.storage().device_memory(),
            contiguous::<T>(self.layout()),
            contiguous::<T>(into.layout()),
        ) && into.device() == self.device()
        {
            let to = into.storage_mut().unique_memory().ok_or_else(held_input)?;
            if backend.copy_bytes(from, from_at, to, to_at, bytes)? {
                return Ok(());
            }
        }
        // The buffer is moved into the copy, so that a buffer nothing else holds is written
        // in place.
        let layout = *into.layout();
        let buffer = std::mem::replace(into.storage_mut(), Storage::new(Vec::new()));
        let recorded = buffer.device_memory().map(address);
        let (written, _) = copied_into(self.storage(), self.layout(), buffer, layout)?;
        let same = written.device_memory().map(address) == recorded;
        *into.storage_mut() = written;
        if !same {
            return Err(held_input());
        }
        Ok(())
    }
}

/// The error for a recorded input that something else holds too.
fn held_input() -> Error {
    Error::RecordedStep {
        what: "an input of the recorded step is held by something the step kept, so the next \
               batch cannot be written over it"
            .into(),
    }
}

/// The first byte and the length in bytes of a tensor's elements where they lie one after
/// another, in row-major order, in its buffer ([`Layout::is_dense`]); `None` for other
/// layouts.
fn contiguous<T>(layout: &Layout) -> Option<(usize, usize)> {
    if !layout.is_dense() {
        return None;
    }
    let size = std::mem::size_of::<T>();
    Some((layout.offset() * size, layout.element_count()? * size))
}

/// A device buffer's identity while it lives: its address.
fn address(memory: &DeviceMemory) -> usize {
    memory as *const DeviceMemory as usize
}

impl<T: Num, A: AxisSet> StepOutputs for Tensor<T, A> {
    /// Contiguous elements on a device are copied by the device, as bytes.
    fn copies(&self) -> Result<Self> {
        if let (Device::Backend(backend), Some(from), Some((at, bytes))) = (
            self.device(),
            self.storage().device_memory(),
            contiguous::<T>(self.layout()),
        ) && let Some(copy) = backend.copied_bytes(from, at, bytes)?
        {
            let count = bytes / std::mem::size_of::<T>().max(1);
            let storage = Storage::from_device_memory(self.device(), copy, count)?;
            return Tensor::from_parts(storage, Layout::row_major(self.lens())).ok_or_else(|| {
                Error::Unsupported {
                    what: "a copy that does not fit its buffer".into(),
                }
            });
        }
        let (storage, layout) = written_out(self.storage(), self.layout())?;
        Tensor::from_parts(storage, layout).ok_or_else(|| Error::Unsupported {
            what: "a copy that does not fit its buffer".into(),
        })
    }
}

impl StepOutputs for () {
    fn copies(&self) -> Result<Self> {
        Ok(())
    }
}

macro_rules! step_tuples {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl<$($t: StepInputs),+> StepInputs for ($($t,)+) {
            fn layout(&self) -> Vec<(DType, Vec<usize>)> {
                let mut all = Vec::new();
                $(all.extend(self.$i.layout());)+
                all
            }
            fn devices(&self) -> Vec<Device> {
                let mut all = Vec::new();
                $(all.extend(self.$i.devices());)+
                all
            }
            fn copies(&self) -> Result<Self> {
                Ok(($(self.$i.copies()?,)+))
            }
            fn copy_into(&self, into: &mut Self) -> Result<()> {
                $(self.$i.copy_into(&mut into.$i)?;)+
                Ok(())
            }
        }
        impl<$($t: StepOutputs),+> StepOutputs for ($($t,)+) {
            fn copies(&self) -> Result<Self> {
                Ok(($(self.$i.copies()?,)+))
            }
        }
    )*};
}

step_tuples! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
}

/// A training step recorded once per input layout and replayed.
///
/// The closure is the whole step: it takes the parameters and the step's inputs, and
/// returns what the caller wants back (the loss). [`Recorded::run`] runs it as it is at a
/// layout's first run (so that the optimizer's state exists before anything is recorded),
/// records the device's launches at the second, and replays them from the third on: the
/// inputs are copied into the buffers the recording reads, the recorded launches are queued
/// again, and copies of the outputs come back. What the closure does on the host — building
/// the tape, lowering and planning jobs, looking up kernels — happens only at those first
/// two runs; a replay gives the same values, bit for bit, as running the closure would. On
/// CUDA a replay is one CUDA graph, launched by one driver call.
///
/// On the host (`Device::Cpu`) nothing is recorded: the closure runs at every step, its
/// loop nests compiled code already. What a recording fixes: the parameters' buffer (the
/// optimizers write it in place), the optimizer's settings and schedule (the step count, the
/// schedule's rate and Adam's bias corrections advance on the device), and any host data the
/// closure uploads (per-step data comes in through the inputs). A host read inside the
/// closure is an error, as is a replay with parameters whose buffer is not the recorded one
/// or that a tensor taken out of them still shares.
///
/// The optimizer the closure steps can be shared with the loop through a `RefCell`, to save
/// its state between steps ([`crate::nn::save_checkpoint`]): what a save reads — the state's
/// values and the step count — is read from the device as the replays left it.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Init, Linear, ParamsBuilder};
/// use axes::optim::Sgd;
/// use axes::record::Recorded;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
/// # fn main() -> Result<(), axes::Error> {
/// // the CPU through the device protocol; a GPU records the same way
/// let device = Device::Backend(&axes::engine::cpu::CPU_BACKEND);
/// let mut builder = ParamsBuilder::new();
/// let layer = Linear::<In, Out>::new(&mut builder, "layer", In.len(3), Out.len(1), Init::Glorot)?;
/// let mut params = builder.build::<f32>(7)?.to(&device)?;
/// let mut sgd = Sgd::new(0.1, 0.9);
/// let mut step = Recorded::new(&device, |params, x: &Tensor<f32, (Batch, In)>| {
///     let grad = {
///         let tape = Tape::new();
///         let p = params.bind(&tape);
///         let y = layer.forward(&p, &tape.constant(x.clone()))?;
///         let loss = y.square().mean::<(Batch, Out)>()?;
///         p.gradient(&loss.backward()?)?
///     };
///     sgd.step(params, &grad)?;
///     Ok(())
/// });
/// let values = (0..12).map(|v| v as f32 / 12.0).collect();
/// let x = Tensor::<f32, (Batch, In)>::from_vec((Batch.len(4), In.len(3)), values)?.to(&device)?;
/// for _ in 0..5 {
///     step.run(&mut params, &x)?; // plain, recorded, then replayed
/// }
/// assert!(step.launches(&x).is_some_and(|n| n > 0));
/// # Ok(())
/// # }
/// ```
pub struct Recorded<T, I, O, F> {
    device: Device,
    step: F,
    layouts: Vec<ByLayout<I, O>>,
    _params: PhantomData<fn(T)>,
}

/// An input layout's state: run once, or recorded.
struct ByLayout<I, O> {
    key: Vec<(DType, Vec<usize>)>,
    recorded: Option<Record<I, O>>,
}

/// A recording with the inputs it reads and the outputs it writes.
struct Record<I, O> {
    inputs: I,
    outputs: O,
    recording: Recording,
    /// The parameters' device buffer, by address.
    params: usize,
}

impl<T, I, O, F> Recorded<T, I, O, F>
where
    T: Float,
    I: StepInputs,
    O: StepOutputs,
    F: FnMut(&mut Params<T>, &I) -> Result<O>,
{
    /// The step `step` on `device`, not yet run.
    pub fn new(device: &Device, step: F) -> Self {
        Recorded {
            device: *device,
            step,
            layouts: Vec::new(),
            _params: PhantomData,
        }
    }

    /// The launches a replay of `inputs`' layout queues, where it is recorded.
    pub fn launches(&self, inputs: &I) -> Option<usize> {
        let key = inputs.layout();
        let layout = self.layouts.iter().find(|l| l.key == key)?;
        Some(layout.recorded.as_ref()?.recording.launches())
    }

    /// Takes one step on `params` with `inputs` (see [`Recorded`]): plain at the first run
    /// of a layout, recorded at the second, replayed after. An error where the parameters or
    /// the inputs are not on the step's device, the parameters' buffer is not the one
    /// recorded or is shared, or the closure reads a device value on the host while it is
    /// recorded.
    pub fn run(&mut self, params: &mut Params<T>, inputs: &I) -> Result<O> {
        for device in [params.device()].into_iter().chain(inputs.devices()) {
            if device != self.device {
                return Err(Error::RecordedStep {
                    what: format!(
                        "an operand on {device} for a step recorded on {}: move it with \
                         `.to(&device)` first",
                        self.device
                    ),
                });
            }
        }
        // Host tensors run their compiled loop nests: the closure runs every time.
        let Device::Backend(backend) = self.device else {
            return (self.step)(params, inputs);
        };
        let key = inputs.layout();
        let Some(at) = self.layouts.iter().position(|l| l.key == key) else {
            let outputs = (self.step)(params, inputs)?;
            if self.layouts.len() == LAYOUTS {
                self.layouts.remove(0);
            }
            self.layouts.push(ByLayout {
                key,
                recorded: None,
            });
            return Ok(outputs);
        };
        match &mut self.layouts[at].recorded {
            Some(record) => {
                check_params(params, record.params)?;
                inputs.copy_into(&mut record.inputs)?;
                backend.replay(&record.recording)?;
                record.outputs.copies()
            }
            None => {
                let record = self.record(backend, params, inputs)?;
                let outputs = record.outputs.copies()?;
                self.layouts[at].recorded = Some(record);
                Ok(outputs)
            }
        }
    }

    /// Replays the recording of `inputs`' layout, as [`Recorded::run`] does from a layout's
    /// third run on: an error where that layout has no recording yet.
    pub fn replay(&mut self, params: &mut Params<T>, inputs: &I) -> Result<O> {
        let key = inputs.layout();
        let recorded = self
            .layouts
            .iter()
            .any(|l| l.key == key && l.recorded.is_some());
        if !recorded {
            let lengths: Vec<&Vec<usize>> = key.iter().map(|(_, lens)| lens).collect();
            return Err(Error::RecordedStep {
                what: format!(
                    "no recording for inputs of lengths {lengths:?} (`run` records one at \
                     their layout's second run)"
                ),
            });
        }
        self.run(params, inputs)
    }

    /// Runs the step once with the device recording.
    fn record(
        &mut self,
        backend: &'static dyn Backend,
        params: &mut Params<T>,
        inputs: &I,
    ) -> Result<Record<I, O>> {
        let inputs = inputs.copies()?;
        let before = params_buffer(params);
        backend.begin_recording()?;
        let mut unwinding = EndsRecording(Some(backend));
        let outputs = (self.step)(params, &inputs);
        unwinding.0 = None;
        let recording = backend.end_recording();
        let (outputs, recording) = (outputs?, recording?);
        let after = params_buffer(params);
        if before != after {
            return Err(Error::RecordedStep {
                what: "the step replaced the parameters' buffer while it was recorded (a \
                       tensor taken out of the parameters, or a tape bound to them, was alive \
                       at the optimizer's step)"
                    .into(),
            });
        }
        Ok(Record {
            inputs,
            outputs,
            recording,
            params: after.unwrap_or(0),
        })
    }
}

/// Ends the recording under way where the step panics, so that its thread does not go on
/// recording.
struct EndsRecording(Option<&'static dyn Backend>);

impl Drop for EndsRecording {
    fn drop(&mut self) {
        if let Some(backend) = self.0 {
            drop(backend.end_recording());
        }
    }
}

/// The address of the parameters' device buffer.
fn params_buffer<T: Float>(params: &Params<T>) -> Option<usize> {
    params.arena().storage().device_memory().map(address)
}

/// An error unless `params` hold the buffer recorded at `recorded`, and hold it alone (its
/// host copy dropped: the replay writes it).
fn check_params<T: Float>(params: &mut Params<T>, recorded: usize) -> Result<()> {
    if params_buffer(params) != Some(recorded) {
        return Err(Error::RecordedStep {
            what: "the parameters' buffer is not the one the step was recorded with (the \
                   parameters were replaced, or are others)"
                .into(),
        });
    }
    if params.arena.storage_mut().unique_memory().is_none() {
        return Err(Error::RecordedStep {
            what: "the parameters' buffer is shared (a tensor taken out of them is alive), and \
                   a replay writes it in place"
                .into(),
        });
    }
    Ok(())
}
