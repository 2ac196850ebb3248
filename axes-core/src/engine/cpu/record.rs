//! Recording what the CPU backend runs during a step, and running it again: each job and
//! product keeps what it ran — its compiled program or product shape, and the buffers it read
//! and wrote (shared, so they stay allocated while the recording lives) — and a replay runs
//! it again on them, writing the same buffers in place; an attention keeps its operands'
//! layouts and overwrites the buffers it made. A recording keeps what its own thread runs.

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::thread::ThreadId;

use super::buffers::{Buffer, buffer_of, lock, memory_of_buffer};
use super::launch::Launch;
use super::{CpuBackend, Product};
use crate::error::{Error, Result};
use crate::protocol::{
    AttentionJob, AttentionMask, AttentionOperand, AttentionSaved, DeviceMemory, Recording,
};

/// One recorded op: runs it again on the recorded buffers.
type Command = Box<dyn Fn() -> Result<()> + Send + Sync>;

/// A recording's ops, each with whether it is a launch (a job, product or attention; not a
/// write of uploaded bytes).
type Ops = Vec<(Command, bool)>;

/// The recordings under way, by the thread that records each.
#[derive(Default)]
pub(super) struct Recorder(Mutex<Vec<(ThreadId, Ops)>>);

impl Recorder {
    pub(super) const fn new() -> Recorder {
        Recorder(Mutex::new(Vec::new()))
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Recorder")
    }
}

/// A finished recording's ops.
struct Commands(Ops);

/// A buffer of this backend, held by a recording: its bytes and its length.
#[derive(Clone)]
struct Shared(Buffer, usize);

impl Shared {
    fn of(memory: &DeviceMemory) -> Result<Shared> {
        Ok(Shared(Arc::clone(buffer_of(memory)?), memory.bytes()))
    }

    /// A handle on the same bytes, for a job.
    fn memory(&self) -> DeviceMemory {
        memory_of_buffer(Arc::clone(&self.0), self.1)
    }

    /// Puts `fresh`'s bytes (a result just made, which nothing else holds) in place of
    /// these, without copying them.
    fn overwrite(&self, fresh: &DeviceMemory) -> Result<()> {
        let bytes = std::mem::take(&mut *lock(buffer_of(fresh)?));
        *lock(&self.0) = bytes;
        Ok(())
    }
}

/// What a recorded op's memory references point at until a replay binds the recorded
/// buffers.
pub(super) fn placeholder() -> &'static DeviceMemory {
    static PLACEHOLDER: LazyLock<DeviceMemory> = LazyLock::new(|| DeviceMemory::new((), 0));
    &PLACEHOLDER
}

/// An attention operand's layout, kept.
struct Operand {
    buffer: Shared,
    batch: Vec<isize>,
    row: isize,
    cols: Vec<isize>,
}

impl Operand {
    fn of(operand: &AttentionOperand<'_>) -> Result<Operand> {
        Ok(Operand {
            buffer: Shared::of(operand.memory)?,
            batch: operand.batch.to_vec(),
            row: operand.row,
            cols: operand.cols.to_vec(),
        })
    }

    fn view<'m>(&'m self, memory: &'m DeviceMemory) -> AttentionOperand<'m> {
        AttentionOperand {
            memory,
            batch: &self.batch,
            row: self.row,
            cols: &self.cols,
        }
    }
}

/// An attention job kept: its operands, mask and shape.
struct Attention {
    job: AttentionJob<'static>,
    operands: [Operand; 3],
    mask: Option<(Shared, Vec<isize>)>,
}

impl Attention {
    fn of(job: &AttentionJob<'_>) -> Result<Attention> {
        let mask = (job.mask.as_ref())
            .map(|m| Ok::<_, Error>((Shared::of(m.memory)?, m.batch.to_vec())))
            .transpose()?;
        let empty = AttentionOperand {
            memory: placeholder(),
            batch: &[],
            row: 0,
            cols: &[],
        };
        Ok(Attention {
            job: AttentionJob {
                dtype: job.dtype,
                shape: job.shape,
                q: empty,
                k: empty,
                v: empty,
                mask: job.mask.map(|m| AttentionMask {
                    memory: placeholder(),
                    batch: &[],
                    ..m
                }),
            },
            operands: [
                Operand::of(&job.q)?,
                Operand::of(&job.k)?,
                Operand::of(&job.v)?,
            ],
            mask,
        })
    }

    /// The buffers to bind, in `bind`'s order.
    fn memories(&self) -> Vec<DeviceMemory> {
        let operands = self.operands.iter().map(|o| o.buffer.memory());
        operands
            .chain(self.mask.iter().map(|(m, _)| m.memory()))
            .collect()
    }

    fn bind<'m>(&'m self, memories: &'m [DeviceMemory]) -> AttentionJob<'m> {
        let [q, k, v] = &self.operands;
        AttentionJob {
            q: q.view(&memories[0]),
            k: k.view(&memories[1]),
            v: v.view(&memories[2]),
            mask: (self.job.mask.zip(self.mask.as_ref())).map(|(m, (_, batch))| AttentionMask {
                memory: &memories[3],
                batch,
                ..m
            }),
            ..self.job
        }
    }
}

impl CpuBackend {
    /// Whether this thread records.
    pub(super) fn recording(&self) -> bool {
        let thread = std::thread::current().id();
        let recordings = self
            .recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        recordings.iter().any(|(t, _)| *t == thread)
    }

    /// An error where this thread records: a read back to the host inside a recorded step.
    pub(super) fn refuse_reads(&self) -> Result<()> {
        if !self.recording() {
            return Ok(());
        }
        Err(Error::RecordedStep {
            what: "a device value read back to the host inside the recorded step (read it \
                   after the step, or return it from the step)"
                .into(),
        })
    }

    /// Adds `command` (made by `make`, only where this thread records) to this thread's
    /// recording; `launch` says whether it counts as a launch.
    fn record(&self, launch: bool, make: impl FnOnce() -> Result<Command>) -> Result<()> {
        if !self.recording() {
            return Ok(());
        }
        let command = make()?;
        let thread = std::thread::current().id();
        let mut recordings = self
            .recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, commands)) = recordings.iter_mut().find(|(t, _)| *t == thread) {
            commands.push((command, launch));
        }
        Ok(())
    }

    pub(super) fn record_upload(&self, memory: &DeviceMemory, bytes: &[u8]) -> Result<()> {
        self.record(false, || {
            let (buffer, bytes) = (Shared::of(memory)?, bytes.to_vec());
            Ok(Box::new(move || {
                let mut target = lock(&buffer.0);
                if target.len() != bytes.len() {
                    return Err(Error::RecordedStep {
                        what: format!(
                            "an upload of {} bytes replayed into a buffer of {}",
                            bytes.len(),
                            target.len()
                        ),
                    });
                }
                target.copy_from_slice(&bytes);
                Ok(())
            }))
        })
    }

    /// Records a job (which already ran): a replay runs it again on the same buffers.
    pub(super) fn record_launch(&self, launch: Launch) -> Result<()> {
        self.record(true, || Ok(Box::new(move || launch.run())))
    }

    /// Records a product (which already ran): a replay runs it again on the same buffers.
    pub(super) fn record_product(&self, product: Product) -> Result<()> {
        self.record(true, || Ok(Box::new(move || product.run())))
    }

    pub(super) fn record_attention(
        &self,
        job: &AttentionJob<'_>,
        results: [&DeviceMemory; 2],
    ) -> Result<()> {
        self.record(true, || {
            let kept = Attention::of(job)?;
            let results = results.map(Shared::of);
            let [out, lse] = results;
            let (out, lse) = (out?, lse?);
            Ok(Box::new(move || {
                let memories = kept.memories();
                let (o, l) = super::CPU_BACKEND.attention_now(&kept.bind(&memories))?;
                out.overwrite(&o)?;
                lse.overwrite(&l)
            }))
        })
    }

    pub(super) fn record_attention_backward(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
        results: &[DeviceMemory; 3],
    ) -> Result<()> {
        self.record(true, || {
            let kept = Attention::of(job)?;
            let (out, grad) = (Operand::of(&saved.out)?, Operand::of(&saved.grad)?);
            let lse = Shared::of(saved.lse)?;
            let results: Vec<Shared> = results.iter().map(Shared::of).collect::<Result<_>>()?;
            Ok(Box::new(move || {
                let memories = kept.memories();
                let saved_memories = [out.buffer.memory(), grad.buffer.memory(), lse.memory()];
                let saved = AttentionSaved {
                    out: out.view(&saved_memories[0]),
                    grad: grad.view(&saved_memories[1]),
                    lse: &saved_memories[2],
                };
                let fresh =
                    super::CPU_BACKEND.attention_backward_now(&kept.bind(&memories), &saved)?;
                (results.iter().zip(&fresh)).try_for_each(|(r, f)| r.overwrite(f))
            }))
        })
    }

    /// Starts a recording on this thread.
    pub(super) fn begin(&self) -> Result<()> {
        let thread = std::thread::current().id();
        let mut recordings = self
            .recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if recordings.iter().any(|(t, _)| *t == thread) {
            return Err(Error::RecordedStep {
                what: "a step recorded on the CPU backend inside another".into(),
            });
        }
        recordings.push((thread, Vec::new()));
        Ok(())
    }

    /// Ends this thread's recording.
    pub(super) fn end(&self) -> Result<Recording> {
        let thread = std::thread::current().id();
        let mut recordings = self
            .recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(at) = recordings.iter().position(|(t, _)| *t == thread) else {
            return Err(Error::RecordedStep {
                what: "no recording under way on the CPU backend".into(),
            });
        };
        let (_, commands) = recordings.swap_remove(at);
        let launches = commands.iter().filter(|(_, launch)| *launch).count();
        Ok(Recording::new(Commands(commands), launches))
    }

    /// Runs `recording`'s ops again, in order.
    pub(super) fn replay_recording(&self, recording: &Recording) -> Result<()> {
        let Some(Commands(commands)) = recording.commands::<Commands>() else {
            return Err(Error::RecordedStep {
                what: "a recording of another device replayed on the CPU backend".into(),
            });
        };
        if self.recording() {
            return Err(Error::RecordedStep {
                what: "a recording replayed inside another".into(),
            });
        }
        for (command, launch) in commands {
            command()?;
            if *launch {
                self.meter.launched();
            }
        }
        Ok(())
    }
}
