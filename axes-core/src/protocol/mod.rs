//! What every backend implements, as plain data: the [`Device`] a tensor lives on, device
//! memory and views of host memory as bytes, the work a backend runs ([`Job`]s: an
//! expression's run-time IR over buffers with strides, element-wise, reduced or of several
//! results; [`MatmulJob`]s: contractions; [`AttentionJob`]s: fused attention) and the
//! [`Backend`] trait itself.
//! Nothing here decides where work runs or knows tensors or expressions: that is
//! [`crate::dispatch`]'s part, above.
//!
//! Backend authors implement [`Backend`]; the OpenCL and CUDA backends of `axes-backends`
//! are the examples.

mod attention;
mod backend;
mod device;
mod free_buffers;
mod job;
mod memory;
mod meter;
mod record;

pub use attention::{
    AttentionJob, AttentionMask, AttentionOperand, AttentionSaved, AttentionShape,
    FUSED_ATTENTION_MAX_WIDTH,
};
pub use backend::Backend;
pub use device::{Device, DeviceKind};
pub use free_buffers::FreeBuffers;
pub use job::{
    Job, JobLeaf, JobOutput, JobTarget, MatmulJob, MatrixSide, OutputJob, WriteTo,
    row_major_strides, run_each_output, run_one,
};
pub use memory::{BufferRef, Buffers, DeviceMemory, LeafBuffer, Recycle};
pub(crate) use memory::{as_bytes, bytes_into, host_elements};
pub(crate) use meter::HOST_METER;
pub use meter::{DeviceCounters, Meter};
pub use record::Recording;
