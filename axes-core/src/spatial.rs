//! Convolution and pooling that find their axes by role: a window moves along the input's
//! axes with the roles `Width`; `Height` and `Width`; or `Depth`, `Height` and `Width` —
//! whatever order the data's axes come in, so channels-first against channels-last is no
//! longer a question. [`Convolution`] contracts each window with a filter over the input's
//! `Channel` axis; [`Pool`] takes each window's maximum or mean.
//!
//! Both are built from a *window view* — a spatial axis read as (window position, kernel
//! offset) with strides `stride·s` and `dilation·s`, no copy — and the jobs every device runs:
//! a convolution is one contraction of that view with the filter (the operand packing of the
//! product is the classic im2col, then `gemm`, cuBLAS or the OpenCL product), a pooling one
//! reduction; their gradients sum windows back onto the input, a job per residue of the
//! stride. Forward and backward run on every device; [`Convolution::run_var`] and
//! [`Pool::run_var`] put them on the tape.

mod axes;
mod conv;
mod pool;
mod windows;

pub use axes::{
    ConvAxes, ConvPositions, ConvolveWith, FilterHasChannel, RoleIfCounted, SpatialAxes,
    SpatialRole,
};
pub use conv::Convolution;
pub(crate) use conv::{backward as conv_backward, forward as conv_forward, padded_input_of};
pub use pool::{Pool, PoolOp};

/// A value per spatial role (Depth, Height, Width).
type PerRole = [usize; 3];
