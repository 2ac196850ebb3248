//! A recorded step replayed: captured as one CUDA graph where the driver can, else its
//! launches queued again one by one.

use axes_core::error::{Error, Result};
use axes_core::protocol::Recording;

use super::{Cuda, cuda_error, record};

impl Cuda {
    /// The graph of `commands`, unless `AXES_CUDA_GRAPHS` is `off` or the driver cannot
    /// capture them (then a replay queues the commands one by one, and
    /// [`Cuda::graph_error`] says why).
    pub(super) fn graph_of(&self, commands: &record::Commands) -> Option<record::Graph> {
        let graphs = std::env::var("AXES_CUDA_GRAPHS").map_or(true, |v| v != "off");
        if !graphs || commands.launches() == 0 {
            return None;
        }
        self.capture_graph(commands)
            .map_err(|e| {
                *self.graph_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string())
            })
            .ok()
    }

    /// `commands` captured on the capture stream as a graph.
    fn capture_graph(&self, commands: &record::Commands) -> Result<record::Graph> {
        self.context
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the context", e))?;
        let mut capture = self.capture.lock().unwrap_or_else(|e| e.into_inner());
        if capture.is_none() {
            *capture = Some(record::CaptureStream::new().map_err(|e| e.to_string()));
        }
        let capture = match capture.as_mut() {
            Some(Ok(capture)) => capture,
            Some(Err(what)) => return Err(Error::Unsupported { what: what.clone() }),
            None => unreachable!("made above"),
        };
        let blas = if commands.has_products() {
            self.blas()?;
            capture.blas(|| self.workspace(), &self.stream)?
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the capture stream is a live non-blocking stream of this context, queued on
        // only here, under the capture lock; `blas` is on it (or unused: no product); the
        // recording keeps every buffer its commands name.
        unsafe { record::Graph::capture(capture.stream, || commands.enqueue(capture.stream, blas)) }
    }

    /// Queues `recording` again: its graph where it has one, else its commands.
    pub(super) fn replay_here(&self, recording: &Recording) -> Result<()> {
        let Some(commands) = recording.commands::<record::Commands>() else {
            return Err(Error::RecordedStep {
                what: format!("a recording of another device replayed on {}", self.name()),
            });
        };
        if self.recordings.recording() {
            return Err(Error::RecordedStep {
                what: "a recording replayed inside another".into(),
            });
        }
        self.context
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the context", e))?;
        if !commands.launch_graph(|commands| self.graph_of(commands))? {
            let blas = if commands.has_products() {
                *self.blas()?.handle()
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: `blas` is the device's cuBLAS handle, on the device's stream (or
            // unused: the recording has no product).
            unsafe { commands.enqueue(self.stream.cu_stream(), blas)? };
        }
        for _ in 0..commands.launches() {
            self.meter.launched();
        }
        Ok(())
    }

    /// Why a recording could not be captured as a graph (the latest that could not), if
    /// any could not.
    pub fn graph_error(&self) -> Option<String> {
        self.graph_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
