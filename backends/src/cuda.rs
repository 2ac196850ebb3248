//! The CUDA backend: NVRTC compiles the generated CUDA C once per (source, device) — once per
//! machine, with the cubins kept on disk (`crate::disk_cache`) — and the driver runs it.
//! Every library is probed before its first call (cudarc panics on a missing one), so a
//! machine without CUDA gets an error that says what is missing.
//!
//! Operations on tensors that live on the device queue their kernels (or cuBLAS calls) on
//! the device's one stream and return at once, so the host builds the next launch while the
//! GPU runs; a copy to the host waits for them and reports a failed kernel. Time device work
//! with [`Cuda::synchronize`] after it. Result buffers come from the driver's stream-ordered
//! pool, which keeps freed memory for reuse.
//!
//! A recorded step ([`axes_core::record::Recorded`]) is captured as one CUDA graph, which
//! each replay launches (one driver call for the whole step); `AXES_CUDA_GRAPHS=off` makes
//! replays queue the recorded launches one by one instead, as they do where the driver cannot
//! capture them ([`Cuda::graph_error`] says why).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axes_core::error::{Error, Result};
use axes_core::protocol::{
    AttentionJob, AttentionSaved, Backend, DeviceKind, DeviceMemory, Job, MatmulJob, Meter,
    Recording, Recycle, WriteTo,
};
use axes_kernels::{ATTENTION_GROUP, Dialect, Kernel, REDUCE_GROUP};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};

use crate::disk_cache::DiskCache;
use crate::launch::{KernelDevice, LaunchArg};
use crate::tuning::Tuning;
use crate::{Index, JobPlan, Slot};

mod blas;
mod nvrtc;
mod pool;
mod record;
mod replay;
use blas::Blas;
use nvrtc::{arch_of, compiler_versions};
pub use nvrtc::{compile_cubin, compile_ptx, nvrtc_available};
use pool::{default_pool, keep_freed_memory, pool_attribute, set_release_threshold};
use record::{ArgValue, Command, Recordings, address};

pub(crate) fn cuda_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Unsupported {
        what: format!("CUDA: {what}: {e:?}"),
    }
}

/// `Ok` when a library probe found it, else the error saying what is missing.
pub(crate) fn present(found: bool, missing: &str) -> Result<()> {
    if found {
        Ok(())
    } else {
        Err(Error::Unsupported {
            what: format!("CUDA: {missing}"),
        })
    }
}

/// `Ok` when cuBLAS (libcublas) can be loaded, else why not.
pub fn cublas_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    let found = unsafe { cudarc::cublas::sys::is_culib_present() };
    present(found, "cuBLAS (libcublas.so.13) is not on the library path")
}

/// `Ok` when the CUDA driver (libcuda) can be loaded, else why not.
pub fn driver_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    let found = unsafe { cudarc::driver::sys::is_culib_present() };
    present(found, "no CUDA driver (libcuda.so) on this machine")
}

/// A CUDA device: its context, stream and compiled kernels.
pub struct Cuda {
    ordinal: usize,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: &'static str,
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// Cubins from earlier processes.
    disk: DiskCache,
    /// What a cubin depends on besides its source: the architecture, NVRTC's version and
    /// the driver's (the start of every key into `disk`).
    cubin_key: String,
    /// Kernels this object compiled (not loaded from a kept cubin).
    compiled: AtomicUsize,
    /// cuBLAS on this device's stream, made on the first product (or why it cannot be).
    blas: OnceLock<std::result::Result<Blas, String>>,
    /// Launches and the bytes of the buffers this device holds.
    meter: Arc<Meter>,
    /// Recordings under way and alive, which every dropped buffer passes by.
    recordings: Arc<Recordings>,
    /// The stream recordings are captured into graphs on (or why there is none), and a lock
    /// so that one capture runs at a time.
    capture: Mutex<Option<std::result::Result<record::CaptureStream, String>>>,
    /// Why the last recording could not be captured as a graph.
    graph_error: Mutex<Option<String>>,
    /// Whether cuBLAS's f32 products may round their operands to TF32
    /// ([`Backend::allow_tf32`]).
    tf32: AtomicBool,
    /// How this device's kernels are cut.
    tuning: Tuning,
}

/// An argument of a launch.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "typed buffers are for the kernel tests")
)]
pub(crate) enum CudaArg<'a> {
    /// An index, length, offset or stride.
    Index(Index),
    /// An f32 buffer.
    F32(&'a CudaSlice<f32>),
    /// An f64 buffer.
    F64(&'a CudaSlice<f64>),
    /// A u8 (or bool) buffer.
    U8(&'a CudaSlice<u8>),
}

impl Cuda {
    /// Device `ordinal`; an error (not a panic) when there is no driver, no NVRTC or no such
    /// device.
    pub fn new(ordinal: usize) -> Result<Cuda> {
        Cuda::new_tuned(ordinal, |_| ())
    }

    /// [`Cuda::new`], its kernels cut as `tune` changes the device's own choice (made from
    /// the device and the environment: [`crate::tuning`]). A setting the device cannot run
    /// is an error.
    pub fn new_tuned(ordinal: usize, tune: impl FnOnce(&mut Tuning)) -> Result<Cuda> {
        Cuda::with_cache(ordinal, DiskCache::from_env(), tune)
    }

    /// How this device's kernels are cut.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// [`Cuda::new_tuned`], its cubins kept in `disk`.
    pub(crate) fn with_cache(
        ordinal: usize,
        disk: DiskCache,
        tune: impl FnOnce(&mut Tuning),
    ) -> Result<Cuda> {
        driver_available()?;
        nvrtc_available()?;
        let context =
            CudaContext::new(ordinal).map_err(|e| cuda_error(&format!("device {ordinal}"), e))?;
        // SAFETY: every buffer is used on the device's one stream: no cudarc stream is ever
        // made beside it (the stream recordings are captured on is the driver's own and runs
        // nothing but a cuBLAS warm-up between two waits), so cudarc's per-buffer events —
        // two made with each buffer and destroyed with it — would order nothing.
        unsafe { context.disable_event_tracking() };
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| cuda_error("compute capability", e))?;
        let stream = context.default_stream();
        if context.has_async_alloc() {
            keep_freed_memory(&context)?;
        }
        let arch = arch_of(major, minor);
        let tuning = cuda_tuning(&context, tune)?;
        Ok(Cuda {
            ordinal,
            context,
            stream,
            arch,
            functions: Mutex::new(HashMap::new()),
            disk,
            cubin_key: format!("cuda\n{arch}\n{}", compiler_versions()),
            compiled: AtomicUsize::new(0),
            blas: OnceLock::new(),
            meter: Arc::default(),
            recordings: Arc::default(),
            capture: Mutex::new(None),
            graph_error: Mutex::new(None),
            tf32: AtomicBool::new(false),
            tuning,
        })
    }

    /// Device `ordinal` as a [`Device`](axes_core::Device), for `x.to(&device)`: one backend
    /// per device for the whole process (made on first use; a failure is retried next time).
    pub fn device(ordinal: usize) -> Result<axes_core::Device> {
        Ok(axes_core::Device::Backend(Cuda::shared(ordinal)?))
    }

    /// The process's backend for device `ordinal` (made on first use, then kept; a failure
    /// is retried next time).
    pub fn shared(ordinal: usize) -> Result<&'static Cuda> {
        static DEVICES: Mutex<Vec<&'static Cuda>> = Mutex::new(Vec::new());
        let mut devices = DEVICES.lock().expect("the device list is never poisoned");
        if let Some(cuda) = devices.iter().find(|c| c.ordinal == ordinal) {
            return Ok(cuda);
        }
        let cuda: &'static Cuda = Box::leak(Box::new(Cuda::new(ordinal)?));
        devices.push(cuda);
        Ok(cuda)
    }

    /// A buffer of `len` elements, zeroed.
    pub fn alloc<T: DeviceRepr + crate::Plain + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        self.stream
            .alloc_zeros(len)
            .map_err(|e| self.allocation_error(len * std::mem::size_of::<T>(), e))
    }

    /// A result buffer of `bytes` bytes, not initialised: every launch that gets one writes
    /// all of it (each kernel writes every result element; cuBLAS with beta 0 every element
    /// of C) before anything reads it — no memset costs bandwidth.
    /// While this thread records a step, a buffer of that size the recording made and freed
    /// comes first.
    pub(crate) fn result_buffer(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        if let Some(buffer) = self.recordings.take_free(bytes) {
            return Ok(buffer);
        }
        // SAFETY: u8 has no invalid bit patterns, and the buffer is written in full before
        // it is read (above).
        let buffer = unsafe { self.stream.alloc::<u8>(bytes) }
            .map_err(|e| self.allocation_error(bytes, e))?;
        self.recordings.made(address(&buffer, &self.stream));
        Ok(buffer)
    }

    /// The error of a failed allocation of `bytes`: [`Error::OutOfMemory`] (with the free
    /// memory the driver reports) when the device had no room.
    fn allocation_error(&self, bytes: usize, e: cudarc::driver::DriverError) -> Error {
        use cudarc::driver::sys::CUresult;
        if e.0 != CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return cuda_error(&format!("allocating {bytes} bytes of device memory"), e);
        }
        Error::OutOfMemory {
            device: format!("cuda:{} ({})", self.ordinal, self.name()),
            requested: bytes as u64,
            available: self
                .context
                .mem_get_info()
                .ok()
                .map(|(free, _)| free as u64),
        }
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
            .map_err(|e| self.allocation_error(std::mem::size_of_val(data), e))
    }

    /// The elements of `buffer`.
    pub fn download<T: DeviceRepr + crate::Plain>(&self, buffer: &CudaSlice<T>) -> Result<Vec<T>> {
        let data = self
            .stream
            .clone_dtoh(buffer)
            .map_err(|e| cuda_error("copy from the device", e))?;
        // The copy waited for the queued kernels; this reports a failure of one of them.
        self.synchronize()?;
        Ok(data)
    }

    fn function(&self, kernel: &Kernel) -> Result<CudaFunction> {
        let cache = || {
            self.functions
                .lock()
                .expect("the kernel cache is never poisoned")
        };
        self.meter.looked_up();
        if let Some(f) = cache().get(&kernel.source) {
            return Ok(f.clone());
        }
        // Compiled without the lock, so that threads wanting other kernels compile them
        // meanwhile (NVRTC takes programs on several threads); two threads wanting the same
        // one may both compile it, and the first one kept serves both.
        let module = self.module(kernel)?;
        let f = module
            .load_function(&kernel.name)
            .map_err(|e| cuda_error(&format!("finding `{}`", kernel.name), e))?;
        Ok(cache().entry(kernel.source.clone()).or_insert(f).clone())
    }

    /// How many kernels this object compiled rather than loaded from a cubin kept on disk.
    #[cfg(test)]
    pub(crate) fn built_from_source(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }

    /// `kernel` compiled and loaded: from the cubin an earlier process kept on disk where
    /// the driver takes it, else compiled by NVRTC to a cubin for this device's architecture
    /// (kept on disk), else — where this NVRTC has no such architecture — to PTX that the
    /// driver translates.
    fn module(&self, kernel: &Kernel) -> Result<Arc<cudarc::driver::CudaModule>> {
        use cudarc::nvrtc::Ptx;
        let key = format!("{}{}", self.cubin_key, kernel.source);
        if let Some(cubin) = self.disk.load(&key)
            && let Ok(module) = self.context.load_module(Ptx::from_binary(cubin))
        {
            return Ok(module);
        }
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let sm = self.arch.replacen("compute_", "sm_", 1);
        let loaded = match compile_cubin(kernel, &sm) {
            Ok(cubin) => {
                let module = self.context.load_module(Ptx::from_binary(cubin.clone()));
                if module.is_ok() {
                    self.disk.store(&key, &cubin);
                }
                module
            }
            Err(_) => self
                .context
                .load_module(Ptx::from_src(compile_ptx(kernel, self.arch)?)),
        };
        loaded.map_err(|e| cuda_error(&format!("loading `{}`", kernel.name), e))
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
    #[cfg(test)]
    pub(crate) unsafe fn launch(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[CudaArg<'_>],
        blocks: usize,
        threads: usize,
    ) -> Result<()> {
        // SAFETY: the caller upholds this function's contract, which is `enqueue`'s.
        unsafe { self.enqueue(kernel, wide, args, blocks, threads)? };
        self.synchronize()
    }

    /// [`Cuda::launch`] without the wait: the kernel is queued on the device's stream, after
    /// the work already there and before any later copy, launch or free on it (buffers
    /// dropped meanwhile are freed in stream order, once the kernel is done with them).
    ///
    /// # Safety
    /// As for [`Cuda::launch`].
    unsafe fn enqueue(
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
        self.meter.launched();
        if self.recordings.recording() {
            let mut names = Vec::new();
            let mut named = |address: u64, len: usize| {
                if len > 0 {
                    names.push(address);
                }
                ArgValue::Pointer(address)
            };
            let values = (args.iter().enumerate())
                .map(|(i, arg)| match arg {
                    CudaArg::Index(_) if wide => ArgValue::Long(long[i]),
                    CudaArg::Index(_) => ArgValue::Int(narrow[i]),
                    CudaArg::F32(b) => named(address(*b, &self.stream), b.len()),
                    CudaArg::F64(b) => named(address(*b, &self.stream), b.len()),
                    CudaArg::U8(b) => named(address(*b, &self.stream), b.len()),
                })
                .collect();
            let launch = Command::Launch {
                function,
                args: values,
                blocks: config.grid_dim.0,
                threads: config.block_dim.0,
            };
            self.recordings.push(launch, &names);
        }
        Ok(())
    }

    /// Waits for everything queued on this device's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_error("waiting for the device", e))
    }
}

/// The CUDA defaults of the device of `context` ([`Tuning::device`]), with the
/// environment's overrides and then `tune`'s changes: tiles; as many reduction blocks as the multiprocessors hold at
/// once; at most 65,535 blocks a launch; 48 KiB of static shared memory.
fn cuda_tuning(context: &CudaContext, tune: impl FnOnce(&mut Tuning)) -> Result<Tuning> {
    use cudarc::driver::sys::CUdevice_attribute as Attribute;
    let attribute = |a| {
        (context.attribute(a))
            .map(|v| v.max(0) as usize)
            .map_err(|e| cuda_error("device attributes", e))
    };
    let multiprocessors = attribute(Attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let threads = attribute(Attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
    let resident = multiprocessors * (threads / REDUCE_GROUP).max(1);
    Tuning::device(true, resident, 65_535, 48 << 10, 1024).resolve(tune)
}

/// The error for a buffer that another backend made.
pub(crate) fn foreign() -> Error {
    Error::Unsupported {
        what: "CUDA: a buffer that another backend (or device) made".into(),
    }
}

/// The backend's buffer inside `memory`, or an error when another backend made it.
fn buffer_of(memory: &DeviceMemory) -> Result<&CudaSlice<u8>> {
    memory.buffer().ok_or_else(foreign)
}

impl Cuda {
    /// `buffer` (of `bytes` bytes) as device memory, counted by this device's meter; when
    /// dropped, kept while a recording names it (else freed).
    pub(crate) fn metered_memory<B: std::any::Any + Send + Sync>(
        &self,
        buffer: B,
        bytes: usize,
    ) -> DeviceMemory {
        let recordings: Arc<dyn Recycle> = self.recordings.clone();
        DeviceMemory::pooled(buffer, bytes, &self.meter, recordings)
    }

    /// An error naming `what` while this thread records a step: it cannot be recorded.
    #[cfg_attr(
        not(feature = "nccl"),
        expect(dead_code, reason = "NCCL's collectives use it")
    )]
    pub(crate) fn not_recording(&self, what: &str) -> Result<()> {
        if self.recordings.recording() {
            return Err(Error::RecordedStep {
                what: format!("{what} inside the recorded step, which cannot be recorded"),
            });
        }
        Ok(())
    }
}

impl KernelDevice for Cuda {
    type Buffer = CudaSlice<u8>;
    const DIALECT: Dialect = Dialect::Cuda;

    fn buffer<'m>(&self, memory: &'m DeviceMemory) -> Result<&'m CudaSlice<u8>> {
        buffer_of(memory)
    }

    fn buffer_mut<'m>(&self, memory: &'m mut DeviceMemory) -> Result<&'m CudaSlice<u8>> {
        memory
            .buffer_mut::<CudaSlice<u8>>()
            .map(|b| &*b)
            .ok_or_else(foreign)
    }

    fn fresh(&self, bytes: usize) -> Result<DeviceMemory> {
        let buffer = if bytes == 0 {
            self.alloc::<u8>(0)?
        } else {
            self.result_buffer(bytes)?
        };
        Ok(self.metered_memory(buffer, bytes))
    }

    fn tuning(&self) -> &Tuning {
        Cuda::tuning(self)
    }

    unsafe fn launch_job(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, CudaSlice<u8>>],
        items: usize,
        group: Option<usize>,
    ) -> Result<()> {
        let cap = self.tuning.max_groups;
        let (blocks, threads) = match group {
            Some(threads) => (items.clamp(1, cap), threads),
            None => (items.div_ceil(256).clamp(1, cap), 256),
        };
        // SAFETY: the caller upholds `KernelDevice::launch_job`'s contract, which is
        // `enqueue`'s.
        unsafe { self.enqueue(kernel, wide, &cuda_args(args), blocks, threads) }
    }

    unsafe fn launch_attention(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, CudaSlice<u8>>],
        groups: usize,
    ) -> Result<()> {
        let blocks = groups.clamp(1, 65_535);
        // SAFETY: the caller upholds `KernelDevice::launch_attention`'s contract, which is
        // `enqueue`'s.
        unsafe { self.enqueue(kernel, wide, &cuda_args(args), blocks, ATTENTION_GROUP) }
    }
}

/// Launch arguments as CUDA kernel arguments.
fn cuda_args<'a>(args: &[LaunchArg<'a, CudaSlice<u8>>]) -> Vec<CudaArg<'a>> {
    (args.iter())
        .map(|arg| match *arg {
            LaunchArg::Index(v) => CudaArg::Index(v),
            LaunchArg::Buffer(b) => CudaArg::U8(b),
        })
        .collect()
}

impl Backend for Cuda {
    fn name(&self) -> String {
        Cuda::name(self)
    }

    fn meter(&self) -> Option<&Meter> {
        Some(&self.meter)
    }

    /// The meter's counters, with the driver pool's freed bytes as the pooled bytes (its
    /// reserve less what buffers use). Pool hits and misses are the driver's own business:
    /// they stay 0.
    fn counters(&self) -> Option<axes_core::memory::DeviceCounters> {
        use cudarc::driver::sys::CUmemPool_attribute as Attribute;
        let mut counters = self.meter.counters();
        if let Some(pool) = default_pool(&self.context) {
            let reserved = pool_attribute(pool, Attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
            let used = pool_attribute(pool, Attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
            if let (Some(reserved), Some(used)) = (reserved, used) {
                counters.pooled_bytes = reserved.saturating_sub(used);
            }
        }
        Some(counters)
    }

    /// The driver pool's release threshold: the bytes it keeps reserved (in use or freed)
    /// at a synchronisation before handing memory back; unbounded by default.
    fn pool_limit(&self) -> usize {
        use cudarc::driver::sys::CUmemPool_attribute as Attribute;
        default_pool(&self.context)
            .and_then(|pool| pool_attribute(pool, Attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD))
            .map_or(0, |bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
    }

    /// Sets the driver pool's release threshold (which, unlike the other pools' limits,
    /// counts memory in use too).
    fn set_pool_limit(&self, bytes: usize) {
        if let Some(pool) = default_pool(&self.context) {
            // A failure leaves the threshold as it was: the limit is a hint to the driver.
            let _ = set_release_threshold(pool, bytes as u64);
        }
    }

    fn allow_tf32(&self, allowed: bool) -> bool {
        self.tf32.store(allowed, Ordering::Relaxed);
        true
    }

    /// Waits for the device, then hands every freed byte of the driver pool back.
    fn release_pool(&self) -> usize {
        use cudarc::driver::sys::CUmemPool_attribute as Attribute;
        let Some(pool) = default_pool(&self.context) else {
            return 0;
        };
        if self.synchronize().is_err() {
            return 0;
        }
        let reserved = || pool_attribute(pool, Attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
        let before = reserved().unwrap_or(0);
        // SAFETY: the pool handle came from the driver for a live context; trimming frees
        // only memory no allocation holds.
        let _ = unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool, 0) };
        usize::try_from(before.saturating_sub(reserved().unwrap_or(before))).unwrap_or(usize::MAX)
    }

    fn synchronize(&self) -> Result<()> {
        Cuda::synchronize(self)
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda(self.ordinal)
    }

    /// While this thread records a step, the bytes are kept in a second buffer, which a
    /// replay copies again.
    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory> {
        let buffer = Cuda::upload(self, bytes)?;
        if !bytes.is_empty() && self.recordings.recording() {
            let to = address(&buffer, &self.stream);
            self.recordings.made(to);
            let source = Cuda::upload(self, bytes)?;
            self.recordings.push(Command::Write { to, source }, &[to]);
        }
        Ok(self.metered_memory(buffer, bytes.len()))
    }

    /// The driver's device-to-device copy, in stream order.
    fn copy_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        to: &mut DeviceMemory,
        to_at: usize,
        bytes: usize,
    ) -> Result<bool> {
        if self.recordings.recording() {
            return Ok(false);
        }
        let (source, target) = (buffer_of(from)?, buffer_of(to)?);
        from.check_span(from_at, bytes)?;
        to.check_span(to_at, bytes)?;
        if from_at + bytes > source.len() || to_at + bytes > target.len() {
            return Err(Error::Unsupported {
                what: "CUDA: a copy past the end of a buffer".into(),
            });
        }
        if bytes == 0 {
            return Ok(true);
        }
        self.context
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the device's context", e))?;
        let source = address(source, &self.stream) + from_at as u64;
        let target = address(target, &self.stream) + to_at as u64;
        // SAFETY: both spans lie inside live buffers of this device (checked above), which
        // two `DeviceMemory` never share; the copy is queued on the device's stream, after
        // the work on them queued before.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                target,
                source,
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| cuda_error("copying a buffer", e))?;
        self.meter.launched();
        Ok(true)
    }

    fn copied_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        bytes: usize,
    ) -> Result<Option<DeviceMemory>> {
        if self.recordings.recording() {
            return Ok(None);
        }
        let mut copy = self.metered_memory(self.result_buffer(bytes)?, bytes);
        self.copy_bytes(from, from_at, &mut copy, 0, bytes)?;
        Ok(Some(copy))
    }

    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>> {
        if self.recordings.recording() {
            return Err(Error::RecordedStep {
                what: "a device value read back to the host inside the recorded step (read \
                       it after the step, or return it from the step)"
                    .into(),
            });
        }
        self.meter.read();
        Cuda::download(self, buffer_of(memory)?)
    }

    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> Result<Vec<DeviceMemory>> {
        crate::launch::run(self, job, to)
    }

    fn attention(&self, job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
        crate::attention::forward(self, job)
    }

    fn begin_recording(&self) -> Result<()> {
        self.recordings.begin(&self.name())
    }

    /// The recording is captured as a CUDA graph at its first replay.
    fn end_recording(&self) -> Result<Recording> {
        let commands = self.recordings.end(&self.name(), &self.stream)?;
        Ok(commands.into_recording())
    }

    fn replay(&self, recording: &Recording) -> Result<()> {
        self.replay_here(recording)
    }

    fn attention_backward(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
    ) -> Result<[DeviceMemory; 3]> {
        crate::attention::backward(self, job, saved)
    }

    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        job.check_reach()?;
        if let Some(out) = self.blas_matmul(job)? {
            return Ok(out);
        }
        let plan = JobPlan::matmul(job, &self.tuning, Dialect::Cuda)?;
        let out = self.result_buffer(plan.out_bytes)?;
        let sides = [buffer_of(job.lhs.memory)?, buffer_of(job.rhs.memory)?];
        let args: Vec<CudaArg<'_>> = (plan.args.iter())
            .map(|slot| match *slot {
                Slot::Index(v) => CudaArg::Index(v),
                Slot::Out(_) => CudaArg::U8(&out),
                Slot::Leaf(k) => CudaArg::U8(sides[k]),
            })
            .collect();
        let group = plan.group.unwrap_or(1);
        // SAFETY: `JobPlan::matmul` lays the arguments out in the generator's order; each
        // side's buffer is its operand's whole buffer on this device, and every element its
        // offset, batch stride and strides reach lies inside it (checked above); the output
        // holds batch×m×n elements.
        unsafe {
            self.enqueue(
                &plan.kernel,
                plan.wide,
                &args,
                plan.items.clamp(1, 65_535),
                group,
            )?
        };
        Ok(self.metered_memory(out, plan.out_bytes))
    }
}

#[cfg(test)]
mod tests;
