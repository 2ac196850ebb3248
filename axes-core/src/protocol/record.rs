//! Recordings: the work a device queued during a step, kept to be queued again.

use std::any::Any;
use std::fmt;

/// What a device kept of the work it queued between
/// [`Backend::begin_recording`](super::Backend::begin_recording) and
/// [`Backend::end_recording`](super::Backend::end_recording): each launch with its kernel,
/// its arguments and the buffers they name, which
/// [`Backend::replay`](super::Backend::replay) queues again as they were — no job lowered,
/// planned or looked up again. The buffers a recording names stay allocated while it lives,
/// and no other result is given one of them. Opaque to the core: the backend's own type.
pub struct Recording {
    commands: Box<dyn Any + Send + Sync>,
    launches: usize,
}

impl Recording {
    /// Wraps a backend's recorded `commands`, of which `launches` are launches (kernels and
    /// copies).
    pub fn new<C: Any + Send + Sync>(commands: C, launches: usize) -> Recording {
        Recording {
            commands: Box::new(commands),
            launches,
        }
    }

    /// The backend's recorded commands, if they are a `C`.
    pub fn commands<C: Any>(&self) -> Option<&C> {
        self.commands.downcast_ref()
    }

    /// The launches it queues on each replay.
    pub fn launches(&self) -> usize {
        self.launches
    }
}

impl fmt::Debug for Recording {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recording({} launches)", self.launches)
    }
}
