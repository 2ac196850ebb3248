//! The OpenCL backend: compiles generated OpenCL C once per (source, device) — once per
//! machine, with the program binaries kept on disk (`crate::disk_cache`) — keeps device
//! buffers, and launches elementwise and reduction kernels.
//!
//! Result buffers come from a pool of the device's freed ones, by size class (a quarter of a
//! power of two apart, so results of similar sizes share buffers), bounded like the host's
//! (`axes::memory::set_pool_limit`). The one queue runs in order, so a buffer freed while a
//! queued kernel still reads it is written by its next owner's kernels only after that one.

use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};

use axes_core::error::{Error, Result};
use axes_core::protocol::{
    AttentionJob, AttentionSaved, Backend, DeviceKind, DeviceMemory, FreeBuffers, Job, MatmulJob,
    Meter, Recording, WriteTo,
};
use axes_kernels::{ATTENTION_GROUP, Dialect, Kernel, REDUCE_GROUP};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU, Device, get_all_devices};
use opencl3::kernel::Kernel as ClKernel;
use opencl3::memory::{Buffer, CL_MEM_COPY_HOST_PTR, CL_MEM_READ_WRITE, ClMem};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, cl_int, cl_long, cl_mem};

use crate::disk_cache::DiskCache;
use crate::launch::{KernelDevice, LaunchArg};
use crate::tuning::Tuning;
use crate::{Index, JobPlan, Plain, Slot};
use pool::{Held, Pool, Private, STAGED_UPLOAD_MAX};

fn cl_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unsupported {
        what: format!("OpenCL: {what}: {e}"),
    }
}

/// An OpenCL device with its context, queue and compiled kernels.
pub struct OpenCl {
    device: Device,
    context: Context,
    queue: CommandQueue,
    programs: Mutex<HashMap<String, Arc<Program>>>,
    /// Program binaries from earlier processes.
    disk: DiskCache,
    /// Programs this object built from source (not from a kept binary).
    source_builds: AtomicUsize,
    /// Programs built from source whose binaries are not on disk yet, by key: kept once
    /// their first launches are done (`keep_binaries`), when the binary holds what the
    /// runtime compiled for those launches too (PoCL compiles a kernel for its work-group
    /// size at its first launch, and puts that code into the program's binary).
    unkept: Mutex<Vec<(String, Arc<Program>)>>,
    /// What a program binary depends on besides its source: the platform, the device and
    /// the driver (the start of every key into `disk`).
    binary_key: String,
    /// Launches and the bytes of the buffers this device holds.
    meter: Arc<Meter>,
    /// Freed result buffers, for the next results of their size class.
    pool: Arc<Pool>,
    /// The commands of each recording under way, by the thread that records it.
    recorded: Mutex<HashMap<std::thread::ThreadId, Vec<record::Command>>>,
    /// How this device's kernels are cut.
    tuning: Tuning,
}

// SAFETY: OpenCL contexts, queues and programs are thread-safe handles (OpenCL 1.2 §A.2: all
// API calls are thread-safe except clSetKernelArg on one kernel object, and kernels are
// created per launch here); the cache is behind a mutex.
unsafe impl Send for OpenCl {}
// SAFETY: as above.
unsafe impl Sync for OpenCl {}

/// A device buffer of `T`.
pub struct DeviceBuffer<T> {
    buffer: Buffer<T>,
    len: usize,
    /// The elements the OpenCL buffer has room for (`len` or more).
    capacity: usize,
}

impl<T> DeviceBuffer<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An argument of a launch.
pub(crate) enum Arg<'a> {
    /// An index, length, offset or stride.
    Index(Index),
    /// A buffer (of any element type).
    Buffer(&'a dyn ClMem),
}

impl OpenCl {
    /// The first OpenCL device of any type. One per process is enough (and PoCL prefers it):
    /// [`OpenCl::shared`] keeps one.
    pub fn first() -> Result<OpenCl> {
        OpenCl::first_tuned(|_| ())
    }

    /// [`OpenCl::first`], its kernels cut as `tune` changes the device's own choice (made
    /// from the device and the environment: [`crate::tuning`]) — e.g. tiles on a CPU
    /// runtime, which has none by default. A setting the device cannot run is an error.
    pub fn first_tuned(tune: impl FnOnce(&mut Tuning)) -> Result<OpenCl> {
        OpenCl::first_with(DiskCache::from_env(), tune)
    }

    /// How this device's kernels are cut.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// [`OpenCl::first_tuned`], its program binaries kept in `disk`.
    pub(crate) fn first_with(disk: DiskCache, tune: impl FnOnce(&mut Tuning)) -> Result<OpenCl> {
        if !cl3::is_opencl_runtime_available() {
            return Err(Error::Unsupported {
                what: "OpenCL: no OpenCL runtime (libOpenCL.so with an ICD) on this machine".into(),
            });
        }
        let ids =
            get_all_devices(CL_DEVICE_TYPE_ALL).map_err(|e| cl_error("listing devices", e))?;
        let id = *ids.first().ok_or_else(|| Error::Unsupported {
            what: "OpenCL: the runtime lists no device".into(),
        })?;
        let device = Device::new(id);
        let context =
            Context::from_device(&device).map_err(|e| cl_error("creating a context", e))?;
        #[allow(deprecated)]
        // clCreateCommandQueue: the OpenCL 1.2 call PoCL and older runtimes have
        let queue = CommandQueue::create_default(&context, 0)
            .map_err(|e| cl_error("creating a queue", e))?;
        let meter = Arc::<Meter>::default();
        let binary_key = program::binary_key(&device);
        let tuning = opencl_tuning(&device, tune)?;
        Ok(OpenCl {
            device,
            context,
            queue,
            programs: Mutex::new(HashMap::new()),
            disk,
            binary_key,
            source_builds: AtomicUsize::new(0),
            unkept: Mutex::new(Vec::new()),
            pool: Arc::new(Pool {
                held: Mutex::new(Held {
                    buffers: FreeBuffers::new(axes_core::memory::limit_from_env(), |&size| size),
                    staged: Vec::new(),
                }),
                meter: Arc::clone(&meter),
                named: Mutex::new(HashMap::new()),
                private: Mutex::new(HashMap::new()),
            }),
            meter,
            recorded: Mutex::new(HashMap::new()),
            tuning,
        })
    }

    /// The process's shared device (created on first use; the error is kept too).
    pub fn shared() -> Result<&'static OpenCl> {
        static DEVICE: OnceLock<Result<OpenCl>> = OnceLock::new();
        DEVICE
            .get_or_init(OpenCl::first)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The shared device as a [`Device`](axes_core::Device), for `x.to(&device)`.
    pub fn device() -> Result<axes_core::Device> {
        Ok(axes_core::Device::Backend(OpenCl::shared()?))
    }

    /// The device's name.
    pub fn name(&self) -> String {
        self.device
            .name()
            .unwrap_or_else(|_| "unknown OpenCL device".into())
    }

    /// `Ok` when a buffer of `len` elements of `T` fits the device's largest buffer (and its
    /// memory), else [`Error::OutOfMemory`] with what it allows.
    fn check_room<T>(&self, len: usize) -> Result<()> {
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let largest = self.device.max_mem_alloc_size().ok();
        let memory = self.device.global_mem_size().ok();
        let room = largest.into_iter().chain(memory).min();
        match room {
            Some(room) if bytes > room => Err(self.out_of_memory(bytes, Some(room))),
            _ => Ok(()),
        }
    }

    /// The error for `bytes` the device could not give (`room`: the most it could).
    fn out_of_memory(&self, bytes: u64, room: Option<u64>) -> Error {
        Error::OutOfMemory {
            device: format!("opencl:0 ({})", self.name()),
            requested: bytes,
            available: room,
        }
    }

    /// The error of a failed buffer creation: [`Error::OutOfMemory`] when the runtime had no
    /// room for `bytes`.
    fn creation_error(&self, what: &str, bytes: u64, e: opencl3::error_codes::ClError) -> Error {
        use cl3::error_codes::{
            CL_INVALID_BUFFER_SIZE, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY,
            CL_OUT_OF_RESOURCES,
        };
        match e.0 {
            CL_MEM_OBJECT_ALLOCATION_FAILURE
            | CL_OUT_OF_RESOURCES
            | CL_OUT_OF_HOST_MEMORY
            | CL_INVALID_BUFFER_SIZE => self.out_of_memory(bytes, None),
            _ => cl_error(what, e),
        }
    }

    /// A buffer of `len` elements, not initialised; [`Error::OutOfMemory`] when the device
    /// has no room for it.
    pub fn alloc<T: Plain>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.check_room::<T>(len)?;
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        // SAFETY: a read-write buffer of at least one element with no host pointer.
        let buffer = unsafe {
            Buffer::<T>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                len.max(1),
                ptr::null_mut(),
            )
        }
        .map_err(|e| self.creation_error("allocating a buffer", bytes, e))?;
        Ok(DeviceBuffer {
            buffer,
            len,
            capacity: len.max(1),
        })
    }

    /// A buffer holding a copy of `data`, copied when the buffer is made
    /// (`CL_MEM_COPY_HOST_PTR`): no command on the queue, so an upload does not wait for the
    /// kernels queued before it.
    pub fn upload<T: Plain>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        if data.is_empty() {
            return self.alloc::<T>(0);
        }
        self.check_room::<T>(data.len())?;
        let bytes = std::mem::size_of_val(data) as u64;
        // SAFETY: `data` is valid for reads of `data.len()` elements while `create` runs,
        // which is when OpenCL copies them (the buffer keeps no pointer to host memory).
        let buffer = unsafe {
            Buffer::<T>::create(
                &self.context,
                CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                data.len(),
                data.as_ptr() as *mut std::ffi::c_void,
            )
        }
        .map_err(|e| self.creation_error("writing a buffer", bytes, e))?;
        Ok(DeviceBuffer {
            buffer,
            len: data.len(),
            capacity: data.len(),
        })
    }

    /// The buffer's elements.
    pub fn download<T: Plain>(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        let mut out = vec![T::default(); buffer.len];
        if !out.is_empty() {
            // SAFETY: a blocking read of `len` elements from a buffer of `len` (or more).
            unsafe {
                self.queue
                    .enqueue_read_buffer(&buffer.buffer, CL_BLOCKING, 0, &mut out, &[])
                    .map_err(|e| cl_error("reading a buffer", e))?;
            }
        }
        self.keep_binaries();
        Ok(out)
    }

    /// Queues `kernel` with `args` over `global` work items in groups of `local` (the queue is
    /// in order: later launches and reads see its results; OpenCL keeps a buffer alive until
    /// the commands using it are done, so dropping one meanwhile is safe). `wide` says
    /// whether index arguments are 64-bit; with 32-bit indices an argument that does not fit
    /// is an error.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in order and kind (see
    /// [`axes_kernels::Kernel`]): each buffer of the element type the kernel reads or writes
    /// there, and lengths, offsets and strides that keep every position the kernel reaches
    /// inside its buffer. The kernel writes device memory — on PoCL, this process's memory —
    /// so wrong arguments are undefined behaviour.
    pub(crate) unsafe fn launch(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[Arg<'_>],
        global: usize,
        local: usize,
    ) -> Result<()> {
        let program = self.program(kernel)?;
        let cl_kernel = ClKernel::create(&program, &kernel.name)
            .map_err(|e| cl_error(&format!("creating kernel `{}`", kernel.name), e))?;
        for (position, arg) in args.iter().enumerate() {
            let i = position as u32;
            let narrow = match arg {
                Arg::Index(v) if !wide => crate::narrow_index(&kernel.name, position, *v)?,
                _ => 0,
            };
            // SAFETY: the caller guarantees each argument matches the kernel's parameter `i`
            // (buffers as cl_mem, indices as int or long, as `wide` says).
            let set = unsafe {
                match arg {
                    Arg::Index(v) if wide => cl_kernel.set_arg(i, &(*v as cl_long)),
                    Arg::Index(_) => cl_kernel.set_arg(i, &(narrow as cl_int)),
                    Arg::Buffer(b) => cl_kernel.set_arg(i, &b.get()),
                }
            };
            set.map_err(|e| cl_error(&format!("argument {i} of `{}`", kernel.name), e))?;
        }
        let (global, local) = ([global], [local]);
        // SAFETY: the kernel's arguments are all set above; global is a multiple of local.
        unsafe {
            self.queue
                .enqueue_nd_range_kernel(
                    cl_kernel.get(),
                    1,
                    ptr::null(),
                    global.as_ptr(),
                    local.as_ptr(),
                    &[],
                )
                .map_err(|e| cl_error(&format!("launching `{}`", kernel.name), e))?;
        }
        self.meter.launched();
        let buffers: Vec<cl_mem> = (args.iter())
            .filter_map(|arg| match arg {
                Arg::Buffer(b) => Some(b.get()),
                Arg::Index(_) => None,
            })
            .collect();
        self.record_launch(cl_kernel, &buffers, global[0], local[0])
    }

    /// Waits for everything queued on this device.
    pub fn synchronize(&self) -> Result<()> {
        self.queue
            .finish()
            .map_err(|e| cl_error("waiting for the queue", e))?;
        self.keep_binaries();
        Ok(())
    }

    /// Checks that reductions' work-groups fit this device.
    pub fn check_reduction_group(&self) -> Result<()> {
        let max = self
            .device
            .max_work_group_size()
            .map_err(|e| cl_error("device limits", e))?;
        let local = self
            .device
            .local_mem_size()
            .map_err(|e| cl_error("device limits", e))?;
        if max < REDUCE_GROUP || local < (REDUCE_GROUP * 8) as u64 {
            return Err(Error::Unsupported {
                what: format!(
                    "OpenCL: {} allows work-groups of {max} and {local} bytes of local memory; \
                     reductions need {REDUCE_GROUP} and {}",
                    self.name(),
                    REDUCE_GROUP * 8
                ),
            });
        }
        Ok(())
    }
}

impl<T> DeviceBuffer<T> {
    /// As a kernel argument.
    pub(crate) fn arg(&self) -> Arg<'_> {
        Arg::Buffer(&self.buffer)
    }
}

/// The error for a buffer that another backend made.
fn foreign() -> Error {
    Error::Unsupported {
        what: "OpenCL: a buffer that another backend made".into(),
    }
}

/// The backend's buffer inside `memory`, or an error when another backend made it.
fn buffer_of(memory: &DeviceMemory) -> Result<&DeviceBuffer<u8>> {
    memory.buffer().ok_or_else(foreign)
}

impl KernelDevice for OpenCl {
    type Buffer = DeviceBuffer<u8>;
    const DIALECT: Dialect = Dialect::OpenCl;

    fn buffer<'m>(&self, memory: &'m DeviceMemory) -> Result<&'m DeviceBuffer<u8>> {
        buffer_of(memory)
    }

    fn buffer_mut<'m>(&self, memory: &'m mut DeviceMemory) -> Result<&'m DeviceBuffer<u8>> {
        memory
            .buffer_mut::<DeviceBuffer<u8>>()
            .map(|b| &*b)
            .ok_or_else(foreign)
    }

    fn fresh(&self, bytes: usize) -> Result<DeviceMemory> {
        if bytes == 0 {
            return Ok(self.memory(self.alloc::<u8>(0)?, 0));
        }
        self.result_buffer(bytes)
    }

    fn tuning(&self) -> &Tuning {
        OpenCl::tuning(self)
    }

    unsafe fn launch_job(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, DeviceBuffer<u8>>],
        items: usize,
        group: Option<usize>,
    ) -> Result<()> {
        let cap = self.tuning.max_groups;
        let (global, local) = match group {
            Some(threads) => {
                if threads == REDUCE_GROUP {
                    self.check_reduction_group()?;
                }
                (crate::global_size(items, 1, cap) * threads, threads)
            }
            None => (crate::global_size(items, 64, cap), 64),
        };
        // SAFETY: the caller upholds `KernelDevice::launch_job`'s contract, which is this
        // one's.
        unsafe { self.launch(kernel, wide, &cl_args(args), global, local) }
    }

    unsafe fn launch_attention(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, DeviceBuffer<u8>>],
        groups: usize,
    ) -> Result<()> {
        let global = crate::global_size(groups, 1, self.tuning.max_groups) * ATTENTION_GROUP;
        // SAFETY: the caller upholds `KernelDevice::launch_attention`'s contract, which is
        // this one's.
        unsafe { OpenCl::launch(self, kernel, wide, &cl_args(args), global, ATTENTION_GROUP) }
    }
}

/// The OpenCL defaults of `device` ([`Tuning::device`]), with the environment's overrides and
/// then `tune`'s changes: a GPU's kernels on GPUs, a CPU runtime's on PoCL (no tiles: local
/// memory is ordinary memory there, and the caches serve a strided read; one read a round);
/// 1,024 reduction groups (a GPU's compute units several times over), at most 4,096 groups a
/// launch.
fn opencl_tuning(device: &Device, tune: impl FnOnce(&mut Tuning)) -> Result<Tuning> {
    let limits = |e| cl_error("device limits", e);
    let gpu = device.dev_type().map_err(limits)? & CL_DEVICE_TYPE_GPU != 0;
    let local = device.local_mem_size().map_err(limits)?;
    let threads = device.max_work_group_size().map_err(limits)?;
    Tuning::device(gpu, 1024, 4096, local as usize, threads).resolve(tune)
}

/// Launch arguments as OpenCL kernel arguments.
fn cl_args<'a>(args: &[LaunchArg<'a, DeviceBuffer<u8>>]) -> Vec<Arg<'a>> {
    (args.iter())
        .map(|arg| match *arg {
            LaunchArg::Index(v) => Arg::Index(v),
            LaunchArg::Buffer(b) => b.arg(),
        })
        .collect()
}

impl Backend for OpenCl {
    fn name(&self) -> String {
        OpenCl::name(self)
    }

    fn meter(&self) -> Option<&Meter> {
        Some(&self.meter)
    }

    fn synchronize(&self) -> Result<()> {
        OpenCl::synchronize(self)
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::OpenCl(0)
    }

    /// A copy of `bytes` in a buffer of the pool (a new one of its size class when the pool
    /// has none), written asynchronously from a host copy kept until the write is done; above
    /// 1 MiB, a new buffer of exactly that size, filled when made.
    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory> {
        if bytes.is_empty() || bytes.len() > STAGED_UPLOAD_MAX {
            let buffer = OpenCl::upload(self, bytes)?;
            if !bytes.is_empty() {
                self.record_write(buffer.buffer.get(), bytes)?;
            }
            return Ok(self.memory(buffer, bytes.len()));
        }
        let mut memory = self.result_buffer(bytes.len())?;
        let buffer = memory
            .buffer_mut::<DeviceBuffer<u8>>()
            .ok_or_else(foreign)?;
        let staged = bytes.to_vec();
        // SAFETY: `buffer` is the pooled buffer of `memory` (at least `bytes.len()` bytes),
        // which nothing else holds; the write reads `staged`, which the pool keeps alive until
        // the write's event says it is done (commands queued later, on the in-order queue,
        // run after it).
        let event = unsafe {
            self.queue.enqueue_write_buffer(
                &mut buffer.buffer,
                opencl3::types::CL_NON_BLOCKING,
                0,
                &staged,
                &[],
            )
        }
        .map_err(|e| cl_error("writing a buffer", e))?;
        self.record_write(buffer.buffer.get(), &staged)?;
        self.pool.lock().staged.push((event, staged));
        Ok(memory)
    }

    /// `clEnqueueCopyBuffer`.
    fn copy_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        to: &mut DeviceMemory,
        to_at: usize,
        bytes: usize,
    ) -> Result<bool> {
        if self.recording() {
            return Ok(false);
        }
        from.check_span(from_at, bytes)?;
        to.check_span(to_at, bytes)?;
        if bytes == 0 {
            return Ok(true);
        }
        let (source, target) = (buffer_of(from)?.buffer.get(), buffer_of(to)?.buffer.get());
        // SAFETY: both are live buffers of this context (two `DeviceMemory` never share one)
        // holding the spans checked above; the queue is in order, so the copy runs after
        // what was queued on them and before what comes next.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_buffer(
                self.queue.get(),
                source,
                target,
                from_at,
                to_at,
                bytes,
                0,
                ptr::null(),
            )
        }
        .map_err(|e| cl_error("copying a buffer", e))?;
        drop(opencl3::event::Event::new(event));
        self.meter.launched();
        Ok(true)
    }

    fn copied_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        bytes: usize,
    ) -> Result<Option<DeviceMemory>> {
        if self.recording() {
            return Ok(None);
        }
        let mut copy = self.result_buffer(bytes)?;
        self.copy_bytes(from, from_at, &mut copy, 0, bytes)?;
        Ok(Some(copy))
    }

    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>> {
        if self.recording() {
            return Err(Error::RecordedStep {
                what: "a device value read back to the host inside the recorded step (read \
                       it after the step, or return it from the step)"
                    .into(),
            });
        }
        self.meter.read();
        OpenCl::download(self, buffer_of(memory)?)
    }

    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> Result<Vec<DeviceMemory>> {
        crate::launch::run(self, job, to)
    }

    fn begin_recording(&self) -> Result<()> {
        self.begin()
    }

    fn end_recording(&self) -> Result<Recording> {
        self.end()
    }

    fn replay(&self, recording: &Recording) -> Result<()> {
        self.replay_recording(recording)
    }

    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        job.check_reach()?;
        let plan = JobPlan::matmul(job, &self.tuning, Dialect::OpenCl)?;
        let memory = self.result_buffer(plan.out_bytes)?;
        let out = buffer_of(&memory)?;
        let sides = [buffer_of(job.lhs.memory)?, buffer_of(job.rhs.memory)?];
        let args: Vec<Arg<'_>> = (plan.args.iter())
            .map(|slot| match *slot {
                Slot::Index(v) => Arg::Index(v),
                Slot::Out(_) => out.arg(),
                Slot::Leaf(k) => sides[k].arg(),
            })
            .collect();
        let group = plan.group.unwrap_or(1);
        // SAFETY: `JobPlan::matmul` lays the arguments out in the generator's order; each
        // side's buffer is its operand's whole buffer on this device, and every element its
        // offset, batch stride and strides reach lies inside it (checked above); the output
        // holds batch×m×n elements.
        unsafe {
            self.launch(
                &plan.kernel,
                plan.wide,
                &args,
                crate::global_size(plan.items, 1, self.tuning.max_groups) * group,
                group,
            )?
        };
        Ok(memory)
    }

    fn attention(&self, job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
        crate::attention::forward(self, job)
    }

    fn attention_backward(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
    ) -> Result<[DeviceMemory; 3]> {
        crate::attention::backward(self, job, saved)
    }

    fn pool_limit(&self) -> usize {
        self.pool.lock().buffers.limit()
    }

    fn set_pool_limit(&self, bytes: usize) {
        self.pool.set_limit(bytes);
    }

    fn release_pool(&self) -> usize {
        self.pool.release()
    }
}

mod pool;
mod program;
mod record;
#[cfg(test)]
mod tests;
