//! Recording what the CPU backend runs during a step, and running it again: each op keeps
//! its job with the buffers it named (shared, so they stay allocated while the recording
//! lives) and the buffers it made, which a replay overwrites. A recording keeps what its own
//! thread runs.

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::thread::ThreadId;

use super::{CpuBackend, HostBytes, compiled, compiled_multi, write_into};
use crate::engine::interp::Program;
use crate::error::{Error, Result};
use crate::protocol::{
    AttentionJob, AttentionMask, AttentionOperand, AttentionSaved, DeviceMemory, Job, JobLeaf,
    JobOutput, JobTarget, MatmulJob, MatrixSide, OutputJob, Recording,
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
struct Shared(Arc<Mutex<Vec<u8>>>, usize);

impl Shared {
    fn of(memory: &DeviceMemory) -> Result<Shared> {
        let HostBytes(bytes) = memory
            .buffer::<HostBytes>()
            .ok_or_else(|| Error::Unsupported {
                what: "a buffer of another device in a job on the CPU backend".into(),
            })?;
        Ok(Shared(Arc::clone(bytes), memory.bytes()))
    }

    /// A handle on the same bytes, for a job.
    fn memory(&self) -> DeviceMemory {
        DeviceMemory::new(HostBytes(Arc::clone(&self.0)), self.1)
    }

    /// Puts `fresh`'s bytes (a result just made, which nothing else holds) in place of
    /// these, without copying them.
    fn overwrite(&self, fresh: &DeviceMemory) -> Result<()> {
        let bytes = std::mem::take(&mut *super::bytes_of(fresh)?);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = bytes;
        Ok(())
    }
}

/// What a recorded job's memory references point at until a replay binds the recorded
/// buffers.
fn placeholder() -> &'static DeviceMemory {
    static PLACEHOLDER: LazyLock<DeviceMemory> = LazyLock::new(|| DeviceMemory::new((), 0));
    &PLACEHOLDER
}

/// `leaves` with their buffers shared, and as leaves of no buffer yet.
fn unbound(leaves: &[JobLeaf<'_>]) -> Result<(Vec<Shared>, Vec<JobLeaf<'static>>)> {
    let shared = leaves
        .iter()
        .map(|l| Shared::of(l.memory))
        .collect::<Result<_>>()?;
    let unbound = (leaves.iter())
        .map(|l| JobLeaf {
            dtype: l.dtype,
            memory: placeholder(),
            offset: l.offset,
            strides: l.strides.clone(),
        })
        .collect();
    Ok((shared, unbound))
}

/// `leaves` reading `memories`, in order.
fn bound<'m>(leaves: &[JobLeaf<'static>], memories: &'m [DeviceMemory]) -> Vec<JobLeaf<'m>> {
    (leaves.iter().zip(memories))
        .map(|(leaf, memory)| JobLeaf {
            memory,
            ..leaf.clone()
        })
        .collect()
}

/// A job kept: the buffers of its leaves, the job with leaves of no buffer yet, and the same
/// over merged axes with its interpreter program, which a replay runs.
struct KeptJob {
    shared: Vec<Shared>,
    template: OutputJob<'static>,
    merged: OutputJob<'static>,
    program: Program,
}

impl KeptJob {
    fn of(job: &OutputJob<'_>) -> Result<KeptJob> {
        let (shared, leaves) = unbound(&job.leaves)?;
        let template = OutputJob {
            ir: job.ir.clone(),
            leaves,
            kept: job.kept.clone(),
            reduced: job.reduced.clone(),
            reduce: job.reduce,
            out: job.out,
        };
        let (merged, _) = template.merged(None);
        let program = compiled(&merged)?;
        Ok(KeptJob {
            shared,
            template,
            merged,
            program,
        })
    }

    /// The buffers to bind.
    fn memories(&self) -> Vec<DeviceMemory> {
        self.shared.iter().map(Shared::memory).collect()
    }

    /// The job reading `memories` (from [`KeptJob::memories`]).
    fn bind<'m>(&self, memories: &'m [DeviceMemory]) -> OutputJob<'m> {
        OutputJob {
            leaves: bound(&self.template.leaves, memories),
            ..self.template.clone()
        }
    }

    /// Runs the job, over merged axes, on `memories`: its result.
    fn run(&self, memories: &[DeviceMemory]) -> Result<DeviceMemory> {
        let job = OutputJob {
            leaves: bound(&self.merged.leaves, memories),
            ..self.merged.clone()
        };
        super::CPU_BACKEND.run_compiled(&job, &self.program)
    }
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
                *buffer.0.lock().unwrap_or_else(PoisonError::into_inner) = bytes.clone();
                Ok(())
            }))
        })
    }

    pub(super) fn record_run(&self, job: &OutputJob<'_>, result: &DeviceMemory) -> Result<()> {
        self.record(true, || {
            let (kept, result) = (KeptJob::of(job)?, Shared::of(result)?);
            Ok(Box::new(move || {
                result.overwrite(&kept.run(&kept.memories())?)
            }))
        })
    }

    pub(super) fn record_run_into(
        &self,
        job: &OutputJob<'_>,
        target: &JobTarget<'_>,
    ) -> Result<()> {
        self.record(true, || {
            let kept = KeptJob::of(job)?;
            let (into, offset) = (Shared::of(target.memory)?, target.offset);
            let strides = target.strides.clone();
            Ok(Box::new(move || {
                let memories = kept.memories();
                let mut memory = into.memory();
                let target = JobTarget {
                    memory: &mut memory,
                    offset,
                    strides: strides.clone(),
                };
                write_into(&kept.bind(&memories), &kept.run(&memories)?, target)
            }))
        })
    }

    /// Records `job`, whose results are `results` (fresh buffers) or, with `over`, written
    /// over its leaves.
    pub(super) fn record_multi(
        &self,
        job: &Job<'_>,
        results: &[DeviceMemory],
        over: Option<&[usize]>,
    ) -> Result<()> {
        self.record(true, || {
            let (mut shared, leaves) = unbound(&job.leaves)?;
            let mut outputs = Vec::with_capacity(job.outputs.len());
            for output in &job.outputs {
                let start = match &output.start {
                    Some(start) => {
                        shared.push(Shared::of(start.memory)?);
                        Some(JobLeaf {
                            memory: placeholder(),
                            ..start.clone()
                        })
                    }
                    None => None,
                };
                outputs.push(JobOutput {
                    start,
                    ..output.clone()
                });
            }
            let template = Job {
                ir: job.ir.clone(),
                leaves,
                lens: job.lens.clone(),
                out: job.out,
                outputs,
            };
            let results: Vec<Shared> = results.iter().map(Shared::of).collect::<Result<_>>()?;
            let over = over.map(<[usize]>::to_vec);
            let program = compiled_multi(&template)?;
            Ok(Box::new(move || {
                let memories: Vec<DeviceMemory> = shared.iter().map(Shared::memory).collect();
                let (leaf_memories, start_memories) = memories.split_at(template.leaves.len());
                let mut starts = start_memories.iter();
                let job = Job {
                    leaves: bound(&template.leaves, leaf_memories),
                    outputs: (template.outputs.iter())
                        .map(|output| JobOutput {
                            start: (output.start.as_ref()).map(|start| JobLeaf {
                                memory: starts.next().expect("one buffer per start"),
                                ..start.clone()
                            }),
                            ..output.clone()
                        })
                        .collect(),
                    ..template.clone()
                };
                if let Some(over) = &over {
                    return super::CPU_BACKEND.run_in_place_compiled(&job, over, &program);
                }
                let fresh = super::CPU_BACKEND.run_multi_compiled(&job, &program)?;
                (results.iter().zip(&fresh)).try_for_each(|(r, f)| r.overwrite(f))
            }))
        })
    }

    pub(super) fn record_matmul(&self, job: &MatmulJob<'_>, result: &DeviceMemory) -> Result<()> {
        self.record(true, || {
            let sides = [Shared::of(job.lhs.memory)?, Shared::of(job.rhs.memory)?];
            let unbound = |side: &MatrixSide<'_>| MatrixSide {
                memory: placeholder(),
                ..*side
            };
            let template = MatmulJob {
                lhs: unbound(&job.lhs),
                rhs: unbound(&job.rhs),
                ..*job
            };
            let result = Shared::of(result)?;
            Ok(Box::new(move || {
                let [lhs, rhs] = [sides[0].memory(), sides[1].memory()];
                let job = MatmulJob {
                    lhs: MatrixSide {
                        memory: &lhs,
                        ..template.lhs
                    },
                    rhs: MatrixSide {
                        memory: &rhs,
                        ..template.rhs
                    },
                    ..template
                };
                result.overwrite(&super::CPU_BACKEND.matmul_now(&job)?)
            }))
        })
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
