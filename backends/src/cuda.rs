//! The CUDA backend: NVRTC compiles the generated CUDA C once per (source, device); the
//! driver runs it. Every library is probed before its first call (cudarc panics on a missing
//! one), so a machine without CUDA gets an error that says what is missing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axes_core::error::{Error, Result};
use axes_kernels::{Dialect, Kernel, REDUCE_GROUP};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::{Index, JobPlan, Slot};

fn cuda_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Unsupported {
        what: format!("CUDA: {what}: {e:?}"),
    }
}

/// `Ok` when NVRTC (libnvrtc) can be loaded, else why not.
pub fn nvrtc_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Unsupported {
            what: "CUDA: NVRTC (libnvrtc.so.13) is not on the library path; install the \
                   `nvidia-cuda-nvrtc` wheel or the CUDA toolkit and add its lib folder to \
                   LD_LIBRARY_PATH"
                .into(),
        })
    }
}

/// `Ok` when the CUDA driver (libcuda) can be loaded, else why not.
pub fn driver_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Unsupported {
            what: "CUDA: no CUDA driver (libcuda.so) on this machine".into(),
        })
    }
}

/// PTX for `kernel` compiled by NVRTC for the virtual architecture `arch` (e.g.
/// `"compute_90"`). A compile error shows NVRTC's log and the generated source.
pub fn compile_ptx(kernel: &Kernel, arch: &'static str) -> Result<String> {
    if kernel.dialect != Dialect::Cuda {
        return Err(Error::Unsupported {
            what: "CUDA: a kernel in the OpenCL dialect".into(),
        });
    }
    nvrtc_available()?;
    let options = CompileOptions {
        arch: Some(arch),
        name: Some(format!("{}.cu", kernel.name)),
        ..Default::default()
    };
    compile_ptx_with_opts(&kernel.source, options)
        .map(|ptx| ptx.to_src())
        .map_err(|e| {
            let log = match &e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            };
            Error::Unsupported {
                what: format!(
                    "CUDA: NVRTC could not compile `{}` for {arch}:\n{log}\n--- source ---\n{}",
                    kernel.name, kernel.source
                ),
            }
        })
}

/// The NVRTC architecture name of a compute capability.
fn arch_of(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (7, 0) => "compute_70",
        (7, 5) => "compute_75",
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (10, _) => "compute_100",
        (12, _) => "compute_120",
        (8, _) => "compute_80",
        _ => "compute_75",
    }
}

/// A CUDA device: its context, stream and compiled kernels.
pub struct Cuda {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: &'static str,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

/// An argument of a launch.
pub enum CudaArg<'a> {
    /// An index, length, offset or stride.
    Index(Index),
    /// An f32 buffer.
    F32(&'a CudaSlice<f32>),
    /// An f64 buffer.
    F64(&'a CudaSlice<f64>),
    /// An i32 buffer.
    I32(&'a CudaSlice<i32>),
    /// An i64 buffer.
    I64(&'a CudaSlice<i64>),
    /// A u8 (or bool) buffer.
    U8(&'a CudaSlice<u8>),
}

impl Cuda {
    /// Device `ordinal`; an error (not a panic) when there is no driver, no NVRTC or no such
    /// device.
    pub fn new(ordinal: usize) -> Result<Cuda> {
        driver_available()?;
        nvrtc_available()?;
        let context =
            CudaContext::new(ordinal).map_err(|e| cuda_error(&format!("device {ordinal}"), e))?;
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| cuda_error("compute capability", e))?;
        let stream = context.default_stream();
        Ok(Cuda {
            context,
            stream,
            arch: arch_of(major, minor),
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The device's name.
    pub fn name(&self) -> String {
        self.context
            .name()
            .unwrap_or_else(|_| "unknown CUDA device".into())
    }

    /// The stream kernels and copies run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A device copy of `data`.
    pub fn upload<T: DeviceRepr + crate::Plain>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        self.stream
            .clone_htod(data)
            .map_err(|e| cuda_error("copy to the device", e))
    }

    /// The elements of `buffer`.
    pub fn download<T: DeviceRepr + crate::Plain>(&self, buffer: &CudaSlice<T>) -> Result<Vec<T>> {
        self.stream
            .clone_dtoh(buffer)
            .map_err(|e| cuda_error("copy from the device", e))
    }

    fn function(&self, kernel: &Kernel) -> Result<CudaFunction> {
        let mut cache = self
            .functions
            .lock()
            .expect("the kernel cache is never poisoned");
        if let Some(f) = cache.get(&kernel.source) {
            return Ok(f.clone());
        }
        let ptx = compile_ptx(kernel, self.arch)?;
        let module = self
            .context
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| cuda_error(&format!("loading `{}`", kernel.name), e))?;
        let f = module
            .load_function(&kernel.name)
            .map_err(|e| cuda_error(&format!("finding `{}`", kernel.name), e))?;
        cache.insert(kernel.source.clone(), f.clone());
        Ok(f)
    }

    /// Launches `kernel` on `blocks` blocks of `threads` threads with `args` (indices 64-bit
    /// when `wide`; with 32-bit indices an argument that does not fit is an error), and waits
    /// for it.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in order and kind (see
    /// [`axes_kernels::Kernel`]): each buffer of the element type the kernel reads or writes
    /// there, and lengths, offsets and strides that keep every position the kernel reaches
    /// inside its buffer; otherwise the kernel reads or writes out of bounds.
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[CudaArg<'_>],
        blocks: usize,
        threads: usize,
    ) -> Result<()> {
        let function = self.function(kernel)?;
        let narrow: Vec<i32> = args
            .iter()
            .enumerate()
            .map(|(position, a)| match a {
                CudaArg::Index(v) if !wide => crate::narrow_index(&kernel.name, position, *v),
                _ => Ok(0),
            })
            .collect::<Result<_>>()?;
        let long: Vec<i64> = args
            .iter()
            .map(|a| match a {
                CudaArg::Index(v) => *v,
                _ => 0,
            })
            .collect();
        let mut builder = self.stream.launch_builder(&function);
        for (i, arg) in args.iter().enumerate() {
            match arg {
                CudaArg::Index(_) if wide => builder.arg(&long[i]),
                CudaArg::Index(_) => builder.arg(&narrow[i]),
                CudaArg::F32(b) => builder.arg(*b),
                CudaArg::F64(b) => builder.arg(*b),
                CudaArg::I32(b) => builder.arg(*b),
                CudaArg::I64(b) => builder.arg(*b),
                CudaArg::U8(b) => builder.arg(*b),
            };
        }
        let config = LaunchConfig {
            grid_dim: (blocks.max(1) as u32, 1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the caller guarantees the arguments follow the generator's documented order
        // and types for this kernel (buffers as device pointers, indices as int or long long).
        unsafe { builder.launch(config) }
            .map_err(|e| cuda_error(&format!("launching `{}`", kernel.name), e))?;
        self.stream
            .synchronize()
            .map_err(|e| cuda_error("waiting for the device", e))
    }
}

impl axes_core::device::Device for Cuda {
    fn name(&self) -> String {
        Cuda::name(self)
    }

    fn run(&self, job: &axes_core::device::Job<'_>) -> Result<Vec<u8>> {
        let Some(plan) = JobPlan::new(job, Dialect::Cuda)? else {
            return Ok(Vec::new());
        };
        let out = self.upload(&vec![0u8; plan.out_bytes])?;
        let inputs = (job.leaves.iter())
            .map(|leaf| self.upload(leaf.bytes))
            .collect::<Result<Vec<_>>>()?;
        let args: Vec<CudaArg<'_>> = (plan.args.iter())
            .map(|slot| match *slot {
                Slot::Index(v) => CudaArg::Index(v),
                Slot::Out => CudaArg::U8(&out),
                Slot::Leaf(k) => CudaArg::U8(&inputs[k]),
            })
            .collect();
        let (blocks, threads) = if plan.reduction {
            (plan.items.clamp(1, 65_535), REDUCE_GROUP)
        } else {
            (plan.items.div_ceil(256).clamp(1, 65_535), 256)
        };
        // SAFETY: `JobPlan` lays the arguments out in the generator's order for this kernel;
        // each leaf's buffer is a copy of its whole host buffer and the job's offsets and
        // strides are its tensor's unpadded layout, inside that buffer; the output holds the
        // result.
        unsafe { self.launch(&plan.kernel, plan.wide, &args, blocks, threads)? };
        self.download(&out)
    }

    fn matmul(&self, job: &axes_core::device::MatmulJob<'_>) -> Result<Vec<u8>> {
        let plan = JobPlan::matmul(job, Dialect::Cuda)?;
        let out = self.upload(&vec![0u8; plan.out_bytes])?;
        let sides = [self.upload(job.lhs.bytes)?, self.upload(job.rhs.bytes)?];
        let args: Vec<CudaArg<'_>> = (plan.args.iter())
            .map(|slot| match *slot {
                Slot::Index(v) => CudaArg::Index(v),
                Slot::Out => CudaArg::U8(&out),
                Slot::Leaf(k) => CudaArg::U8(&sides[k]),
            })
            .collect();
        let tile = axes_kernels::MATMUL_TILE;
        // SAFETY: `JobPlan::matmul` lays the arguments out in the generator's order; each
        // side's buffer is a copy of its operand's whole buffer, and its offset and strides
        // are the operand's matrix view, inside that buffer; the output holds m×n elements.
        unsafe {
            self.launch(
                &plan.kernel,
                plan.wide,
                &args,
                plan.items.clamp(1, 65_535),
                tile * tile,
            )?
        };
        self.download(&out)
    }
}
