//! The trait every device's runtime implements.

use super::{
    AttentionJob, AttentionSaved, DeviceKind, DeviceMemory, Job, MatmulJob, Meter, Recording,
    WriteTo,
};
use crate::error::{Error, Result};

/// A device's runtime, as the core drives it (implemented by the OpenCL and CUDA backends).
/// Backends live for the whole process (one per physical device), so devices are
/// `&'static dyn Backend`.
pub trait Backend: Send + Sync {
    /// The device's name, for messages.
    fn name(&self) -> String;
    /// The kind of device and its number.
    fn kind(&self) -> DeviceKind;
    /// A device buffer holding a copy of `bytes`.
    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory>;
    /// A host copy of a buffer this backend made.
    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>>;
    /// Runs `job`, its results written where `to` says: new buffers (returned, one per
    /// result, each row-major over its kept axes), regions of existing buffers, or over
    /// leaves in place (nothing returned for either). [`run_one`](super::run_one) runs a job of one result
    /// into a new buffer; [`run_each_output`](super::run_each_output) runs a job's results one at a time, for a
    /// backend whose kernels write one result each.
    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> Result<Vec<DeviceMemory>>;

    /// Copies `bytes` bytes of `from`, from byte `from_at` on, to `to` at byte `to_at`
    /// (two buffers of this device, or one), as the driver copies memory: no job lowered or
    /// planned. `Ok(false)` where the backend has no such copy, or cannot use it now (while
    /// this thread records a step: a job copies instead, which the recording keeps). The
    /// default has none.
    fn copy_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        to: &mut DeviceMemory,
        to_at: usize,
        bytes: usize,
    ) -> Result<bool> {
        let _ = (from, from_at, to, to_at, bytes);
        Ok(false)
    }

    /// A new buffer holding `bytes` bytes of `from` from byte `from_at` on, copied as
    /// [`Backend::copy_bytes`] copies; `None` where it would return `false`.
    fn copied_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        bytes: usize,
    ) -> Result<Option<DeviceMemory>> {
        let _ = (from, from_at, bytes);
        Ok(None)
    }

    /// Starts recording: until [`Backend::end_recording`], the device keeps every launch
    /// and write this thread queues, and refuses to read a buffer back to the host on it. An
    /// error where this thread records already. The default refuses.
    fn begin_recording(&self) -> Result<()> {
        Err(Error::Unsupported {
            what: format!("recording steps on {}", self.name()),
        })
    }

    /// Ends the recording under way: what it kept, which [`Backend::replay`] queues again.
    fn end_recording(&self) -> Result<Recording> {
        Err(Error::Unsupported {
            what: format!("recording steps on {}", self.name()),
        })
    }

    /// Queues `recording`'s launches and writes again, in order, on the buffers they named
    /// when recorded: no job lowered, planned or looked up.
    fn replay(&self, recording: &Recording) -> Result<()> {
        let _ = recording;
        Err(Error::Unsupported {
            what: format!("replaying steps on {}", self.name()),
        })
    }

    /// Waits until the work queued on the device is done (reads wait by themselves; this is
    /// for timing). The default has nothing to wait for.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// The counters of the device's work (launches, bytes held), where the backend keeps
    /// them.
    fn meter(&self) -> Option<&Meter> {
        None
    }

    /// What [`Device::counters`](super::Device::counters) reports: the meter's counters by
    /// default; a backend whose pool its driver keeps (CUDA) fills in the pool's figures.
    fn counters(&self) -> Option<super::DeviceCounters> {
        self.meter().map(Meter::counters)
    }

    /// The most bytes the device's pool of freed buffers holds (0 where it keeps none).
    fn pool_limit(&self) -> usize {
        0
    }

    /// Sets [`Backend::pool_limit`], freeing pooled buffers until the pool holds no more.
    /// The default keeps no pool.
    fn set_pool_limit(&self, bytes: usize) {
        let _ = bytes;
    }

    /// Frees every buffer the device's pool holds; the bytes freed.
    fn release_pool(&self) -> usize {
        0
    }

    /// Lets f32 products round their operands to TF32 (10 bits of significand, f32's range;
    /// products still summed in f32) where the device has units for it, or stops them;
    /// whether the device does so. The default has none, and ignores it.
    fn allow_tf32(&self, allowed: bool) -> bool {
        let _ = allowed;
        false
    }

    /// Runs a matrix product into a new buffer (row-major `m`×`n`).
    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        let _ = job;
        Err(Error::Unsupported {
            what: format!("matrix products on {}", self.name()),
        })
    }

    /// Runs fused attention: its result (row-major `[batch][query][value column]`) and each
    /// query's log-sum-exp (`[batch][query]`, of [`AttentionJob::wide`]), in new buffers.
    fn attention(&self, job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
        let _ = job;
        Err(Error::Unsupported {
            what: format!("fused attention on {}", self.name()),
        })
    }

    /// The gradients of fused attention's queries, keys and values, given what its forward
    /// saved, in new buffers (row-major `[batch][position][column]` each, 0 where a position
    /// passes no gradient).
    fn attention_backward(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
    ) -> Result<[DeviceMemory; 3]> {
        let _ = (job, saved);
        Err(Error::Unsupported {
            what: format!("fused attention's backward on {}", self.name()),
        })
    }
}
