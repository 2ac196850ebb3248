//! Recording what this device queues during a step, and queuing it again: each launch keeps
//! its kernel object with the arguments set, each write its bytes, and every buffer they
//! name is retained — and kept out of the pool — while the recording lives. A recording
//! keeps what its own thread queues (another thread may meanwhile copy the next batch).

use std::ptr;
use std::sync::Arc;

use axes_core::Result;
use axes_core::protocol::Recording;
use cl3::types::{CL_NON_BLOCKING, cl_mem};
use opencl3::event::Event;
use opencl3::kernel::Kernel as ClKernel;

use super::{OpenCl, Pool, cl_error};

/// One command of a recording.
pub(super) enum Command {
    /// A kernel object, its arguments set, over `global` work items in groups of `local`.
    Launch {
        kernel: ClKernel,
        global: usize,
        local: usize,
        _buffers: Vec<Held>,
    },
    /// `bytes` written to the start of `buffer`.
    Write { buffer: Held, bytes: Vec<u8> },
}

/// A recording's commands.
pub(super) struct Commands(Vec<Command>);

// SAFETY: OpenCL handles are thread-safe but for clSetKernelArg on one kernel object (OpenCL
// 1.2 §A.2), which is never called on a recorded kernel again; `Held` buffers are retained
// handles.
unsafe impl Send for Commands {}
// SAFETY: as above.
unsafe impl Sync for Commands {}

/// A buffer a recording names: retained until the recording is dropped, and meanwhile never
/// taken back by the pool (so no other result is given it).
pub(super) struct Held {
    mem: cl_mem,
    pool: Arc<Pool>,
}

impl Held {
    /// Retains `mem`, a live buffer of this device.
    fn new(mem: cl_mem, pool: &Arc<Pool>) -> Result<Held> {
        // SAFETY: `mem` is the handle of a buffer alive now (an argument of a launch being
        // queued, or a buffer just written); retaining it keeps it alive until the release
        // in `drop`.
        unsafe { cl3::memory::retain_mem_object(mem) }
            .map_err(|e| cl_error("retaining a recorded buffer", e))?;
        pool.name(mem as usize);
        Ok(Held {
            mem,
            pool: Arc::clone(pool),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pool.unname(self.mem as usize);
        // SAFETY: releases the reference `new` took.
        let _ = unsafe { cl3::memory::release_mem_object(self.mem) };
    }
}

impl OpenCl {
    /// Whether this thread records.
    pub(super) fn recording(&self) -> bool {
        let recorded = self.recorded.lock().expect("never poisoned");
        recorded.contains_key(&std::thread::current().id())
    }

    /// Adds a launch of `kernel` (its arguments set, naming `buffers`) to this thread's
    /// recording, if it records; otherwise drops it.
    pub(super) fn record_launch(
        &self,
        kernel: ClKernel,
        buffers: &[cl_mem],
        global: usize,
        local: usize,
    ) -> Result<()> {
        let mut recorded = self.recorded.lock().expect("never poisoned");
        if let Some(commands) = recorded.get_mut(&std::thread::current().id()) {
            let held = (buffers.iter())
                .map(|&mem| Held::new(mem, &self.pool))
                .collect::<Result<_>>()?;
            commands.push(Command::Launch {
                kernel,
                global,
                local,
                _buffers: held,
            });
        }
        Ok(())
    }

    /// Adds a write of `bytes` to the start of `mem` to this thread's recording, if it
    /// records.
    pub(super) fn record_write(&self, mem: cl_mem, bytes: &[u8]) -> Result<()> {
        let mut recorded = self.recorded.lock().expect("never poisoned");
        if let Some(commands) = recorded.get_mut(&std::thread::current().id()) {
            commands.push(Command::Write {
                buffer: Held::new(mem, &self.pool)?,
                bytes: bytes.to_vec(),
            });
        }
        Ok(())
    }

    /// Starts a recording on this thread.
    pub(super) fn begin(&self) -> Result<()> {
        let mut recorded = self.recorded.lock().expect("never poisoned");
        let thread = std::thread::current().id();
        if recorded.contains_key(&thread) {
            return Err(axes_core::Error::RecordedStep {
                what: format!("a step recorded on {} inside another", self.name()),
            });
        }
        recorded.insert(thread, Vec::new());
        let mut private = self.pool.private.lock().expect("never poisoned");
        private.insert(thread, super::Private::default());
        Ok(())
    }

    /// Ends this thread's recording.
    pub(super) fn end(&self) -> Result<Recording> {
        let mut recorded = self.recorded.lock().expect("never poisoned");
        // The recording's freed buffers are released (it keeps a reference to each).
        drop(
            self.pool
                .private
                .lock()
                .expect("never poisoned")
                .remove(&std::thread::current().id()),
        );
        let commands = (recorded.remove(&std::thread::current().id())).ok_or_else(|| {
            axes_core::Error::RecordedStep {
                what: format!("no recording under way on {}", self.name()),
            }
        })?;
        let launches = (commands.iter())
            .filter(|c| matches!(c, Command::Launch { .. }))
            .count();
        Ok(Recording::new(Commands(commands), launches))
    }

    /// Queues `recording`'s commands again, in order.
    pub(super) fn replay_recording(&self, recording: &Recording) -> Result<()> {
        let Some(Commands(commands)) = recording.commands::<Commands>() else {
            return Err(axes_core::Error::RecordedStep {
                what: format!("a recording of another device replayed on {}", self.name()),
            });
        };
        if self.recording() {
            return Err(axes_core::Error::RecordedStep {
                what: "a recording replayed inside another".into(),
            });
        }
        for command in commands {
            match command {
                Command::Launch {
                    kernel,
                    global,
                    local,
                    ..
                } => {
                    let (global, local) = ([*global], [*local]);
                    // SAFETY: the kernel's arguments were set and checked when it was
                    // recorded, and every buffer they name is retained by the recording and
                    // given to no other result while it lives.
                    unsafe {
                        self.queue
                            .enqueue_nd_range_kernel(
                                kernel.get(),
                                1,
                                ptr::null(),
                                global.as_ptr(),
                                local.as_ptr(),
                                &[],
                            )
                            .map_err(|e| cl_error("replaying a launch", e))?;
                    }
                    self.meter.launched();
                }
                Command::Write { buffer, bytes } => {
                    let staged = bytes.clone();
                    // SAFETY: `buffer` is retained and was written with these many bytes
                    // when recorded; `staged` stays in the pool's list until the write's
                    // event says it is done.
                    let event = unsafe {
                        cl3::command_queue::enqueue_write_buffer(
                            self.queue.get(),
                            buffer.mem,
                            CL_NON_BLOCKING,
                            0,
                            staged.len(),
                            staged.as_ptr().cast(),
                            0,
                            ptr::null(),
                        )
                    }
                    .map_err(|e| cl_error("replaying a write", e))?;
                    self.pool.lock().staged.push((Event::new(event), staged));
                }
            }
        }
        Ok(())
    }
}
