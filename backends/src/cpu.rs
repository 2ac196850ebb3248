//! The CPU through the device protocol: a backend whose jobs run on the IR interpreter and
//! whose products run on the CPU engine's GEMM, over buffers in host memory.
//!
//! It is a test device, not a faster CPU: host tensors ([`Device::Cpu`](axes_core::Device))
//! run on the compiled loop engine and never go through the protocol. `Device::Backend(&CPU_BACKEND)`
//! runs every job the device lowering makes, on any machine, so the shared backend suite
//! checks the lowering on every `cargo test`, beside OpenCL and CUDA where those exist.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes_backends::cpu::CPU_BACKEND;
//! #[derive(Axis)] struct Row;
//! let backend = Device::Backend(&CPU_BACKEND);
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![1., 2., 3.])?.to(&backend)?;
//! let y = (&x * 2.0).exp().eval()?;          // a job, run by the interpreter
//! assert_eq!(y.device(), backend);
//! let host = (&x.to(&Device::Cpu)? * 2.0).exp().eval()?;
//! assert_eq!(y.to(&Device::Cpu)?.to_vec(), host.to_vec());
//! # Ok::<(), axes::Error>(())
//! ```

pub use axes_core::engine::cpu::{CPU_BACKEND, CpuBackend};
