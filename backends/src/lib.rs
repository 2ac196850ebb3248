//! Execution backends of `axes`: CPU (gemm contractions, IR interpreter), CUDA and OpenCL.
//!
//! Empty until the backend protocol exists (the fused-expressions and GPU issues).
