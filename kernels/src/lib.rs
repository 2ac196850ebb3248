//! Device kernel source generated from the `axes` expression IR (CUDA C and OpenCL C).
//!
//! Empty until the expression IR exists (the fused-expressions issue); generation will run
//! without any device, so its output can be checked on any machine.
