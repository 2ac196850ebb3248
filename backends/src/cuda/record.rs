//! Recording what this device queues during a step, and queuing it again — as one CUDA graph
//! where the driver captures it. A recording keeps each launch's function and argument
//! values, each cuBLAS product's call, and each upload's bytes (in a device buffer of its
//! own); every buffer they name stays the recording's while it lives: freed by its owner, it
//! is kept, never given to another result. A recording keeps what its own thread queues
//! (another thread may meanwhile copy the next batch).

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

use axes_core::protocol::{Recording, Recycle};
use axes_core::{DType, Error, Result};
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasHandle_t, cublasOperation_t, cudaDataType_t,
};
use cudarc::driver::sys::{CUdeviceptr, CUgraph, CUgraphExec, CUstream};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, result};

use super::cuda_error;

/// A kernel argument's value as it was launched.
#[derive(Clone, Copy, Debug)]
pub(super) enum ArgValue {
    /// A 32-bit index.
    Int(i32),
    /// A 64-bit index.
    Long(i64),
    /// A buffer's device address.
    Pointer(CUdeviceptr),
}

impl ArgValue {
    /// The address of the value, as the driver takes a kernel's parameters.
    fn param(&self) -> *mut c_void {
        match self {
            ArgValue::Int(v) => (v as *const i32).cast_mut().cast(),
            ArgValue::Long(v) => (v as *const i64).cast_mut().cast(),
            ArgValue::Pointer(p) => (p as *const CUdeviceptr).cast_mut().cast(),
        }
    }
}

/// The device address of `buffer`'s first byte.
pub(super) fn address<T>(buffer: &CudaSlice<T>, stream: &CudaStream) -> CUdeviceptr {
    buffer.device_ptr(stream).0
}

/// A cuBLAS strided batched product (column-major, as cuBLAS takes it) by its operands'
/// device addresses: what a product queues, and what a replay queues again.
#[derive(Clone, Copy, Debug)]
pub(super) struct GemmCall {
    pub dtype: DType,
    /// An f32 product with its operands rounded to TF32 on the tensor cores.
    pub tf32: bool,
    pub transa: cublasOperation_t,
    pub transb: cublasOperation_t,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub a: CUdeviceptr,
    pub lda: i32,
    pub stride_a: i64,
    pub b: CUdeviceptr,
    pub ldb: i32,
    pub stride_b: i64,
    pub c: CUdeviceptr,
    pub ldc: i32,
    pub stride_c: i64,
    pub batch: i32,
}

impl GemmCall {
    /// Queues C = A·B (alpha 1, beta 0) on `handle`'s stream: cuBLAS's SGEMM and DGEMM for
    /// f32 and f64 (f32 with TF32 operands where `tf32`), its mixed precision for the half
    /// types (16-bit operands and result, f32 accumulation).
    ///
    /// # Safety
    /// Each address must be that of a live buffer of `dtype` elements that holds every
    /// element the lengths, leading dimensions and batch strides reach.
    pub(super) unsafe fn enqueue(&self, handle: cublasHandle_t) -> Result<()> {
        use cudarc::cublas::result as blas;
        let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
        let g = self;
        // SAFETY: the caller vouches for the addresses and the reach; the scalars live on
        // this stack frame through the call, which reads them before returning (host
        // pointer mode).
        let done = unsafe {
            match g.dtype {
                DType::F32 if !g.tf32 => blas::sgemm_strided_batched(
                    handle,
                    g.transa,
                    g.transb,
                    g.m,
                    g.n,
                    g.k,
                    &one32,
                    g.a as *const f32,
                    g.lda,
                    g.stride_a,
                    g.b as *const f32,
                    g.ldb,
                    g.stride_b,
                    &zero32,
                    g.c as *mut f32,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                ),
                DType::F64 => blas::dgemm_strided_batched(
                    handle,
                    g.transa,
                    g.transb,
                    g.m,
                    g.n,
                    g.k,
                    &one64,
                    g.a as *const f64,
                    g.lda,
                    g.stride_a,
                    g.b as *const f64,
                    g.ldb,
                    g.stride_b,
                    &zero64,
                    g.c as *mut f64,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                ),
                DType::F16 | DType::BF16 | DType::F32 => {
                    let (kind, compute) = match g.dtype {
                        DType::F16 => (
                            cudaDataType_t::CUDA_R_16F,
                            cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        ),
                        DType::BF16 => (
                            cudaDataType_t::CUDA_R_16BF,
                            cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        ),
                        _ => (
                            cudaDataType_t::CUDA_R_32F,
                            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                        ),
                    };
                    blas::gemm_strided_batched_ex(
                        handle,
                        g.transa,
                        g.transb,
                        g.m,
                        g.n,
                        g.k,
                        (&one32 as *const f32).cast(),
                        g.a as *const c_void,
                        kind,
                        g.lda,
                        g.stride_a,
                        g.b as *const c_void,
                        kind,
                        g.ldb,
                        g.stride_b,
                        (&zero32 as *const f32).cast(),
                        g.c as *mut c_void,
                        kind,
                        g.ldc,
                        g.stride_c,
                        g.batch,
                        compute,
                        cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
                other => {
                    return Err(Error::Unsupported {
                        what: format!("CUDA: a cuBLAS product of {other:?}"),
                    });
                }
            }
        };
        done.map_err(|e| cuda_error("cuBLAS GEMM", e))
    }
}

/// One command of a recording.
pub(super) enum Command {
    /// `function` on `blocks` blocks of `threads` threads with these arguments.
    Launch {
        function: CudaFunction,
        args: Vec<ArgValue>,
        blocks: u32,
        threads: u32,
    },
    /// A cuBLAS product.
    Gemm(GemmCall),
    /// The uploaded bytes, kept in `source`, copied to the buffer at `to`.
    Write {
        to: CUdeviceptr,
        source: CudaSlice<u8>,
    },
}

impl Command {
    /// Queues the command on `stream`, its products on `blas` (a handle on that stream).
    ///
    /// # Safety
    /// Every buffer the command names must be alive: the recording that holds it keeps
    /// them.
    unsafe fn enqueue(
        &self,
        stream: CUstream,
        source_stream: &CudaStream,
        blas: cublasHandle_t,
    ) -> Result<()> {
        match self {
            Command::Launch {
                function,
                args,
                blocks,
                threads,
            } => {
                let mut params: Vec<*mut c_void> = args.iter().map(ArgValue::param).collect();
                // SAFETY: the arguments are the values the kernel was launched with when
                // recorded, in its parameters' order and sizes; the buffers they name are
                // alive (the caller's contract) and were written as the recording's earlier
                // commands, queued again before this one, write them.
                unsafe {
                    result::launch_kernel(
                        function.cu_function(),
                        (*blocks, 1, 1),
                        (*threads, 1, 1),
                        0,
                        stream,
                        &mut params,
                    )
                }
                .map_err(|e| cuda_error("replaying a launch", e))
            }
            // SAFETY: the addresses are those recorded, of buffers alive (the caller's
            // contract) that hold what the product reaches, as when it was recorded.
            Command::Gemm(call) => unsafe { call.enqueue(blas) },
            Command::Write { to, source } => {
                let from = address(source, source_stream);
                // SAFETY: `to` is the recorded upload's buffer, alive (the caller's contract)
                // and as long as `source`, which the recording owns.
                unsafe { result::memcpy_dtod_async(*to, from, source.len(), stream) }
                    .map_err(|e| cuda_error("replaying an upload", e))
            }
        }
    }
}

/// The device's recordings: those under way (by thread) and the buffers every live one
/// names. Dropped device buffers come here first ([`Recycle`]), so that a buffer a
/// recording names is kept, not freed.
#[derive(Default)]
pub(super) struct Recordings {
    state: Mutex<State>,
    /// Recordings under way: while none, a launch records nothing.
    under_way: AtomicUsize,
    /// Recordings begun and not yet dropped: while none, a dropped buffer is freed at once.
    live: AtomicUsize,
}

#[derive(Default)]
struct State {
    under_way: HashMap<ThreadId, UnderWay>,
    /// Addresses named by live recordings, with how many name each.
    named: HashMap<CUdeviceptr, usize>,
    /// Named buffers their owners dropped, freed when no recording names them.
    kept: HashMap<CUdeviceptr, CudaSlice<u8>>,
}

/// A recording under way.
#[derive(Default)]
struct UnderWay {
    commands: Vec<Command>,
    named: HashSet<CUdeviceptr>,
    /// Buffers made during the recording: one freed during it is given again to a later
    /// result of the same recording and size (a replay reuses it in the same order), so a
    /// replay's working set is the plain step's, not every intermediate at once.
    made: HashSet<CUdeviceptr>,
    free: Vec<(CUdeviceptr, CudaSlice<u8>)>,
}

impl Recordings {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this thread records.
    pub(super) fn recording(&self) -> bool {
        self.under_way.load(Ordering::Relaxed) > 0
            && (self.state().under_way).contains_key(&std::thread::current().id())
    }

    /// Starts a recording on this thread.
    pub(super) fn begin(&self, device: &str) -> Result<()> {
        let mut state = self.state();
        let thread = std::thread::current().id();
        if state.under_way.contains_key(&thread) {
            return Err(Error::RecordedStep {
                what: format!("a step recorded on {device} inside another"),
            });
        }
        state.under_way.insert(thread, UnderWay::default());
        self.under_way.fetch_add(1, Ordering::Relaxed);
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Ends this thread's recording: its commands, the addresses they name, and the
    /// buffers it made and freed (which it owns from now on).
    pub(super) fn end(
        self: &Arc<Self>,
        device: &str,
        stream: &Arc<CudaStream>,
    ) -> Result<Commands> {
        let mut state = self.state();
        let Some(done) = state.under_way.remove(&std::thread::current().id()) else {
            return Err(Error::RecordedStep {
                what: format!("no recording under way on {device}"),
            });
        };
        self.under_way.fetch_sub(1, Ordering::Relaxed);
        let launches = (done.commands.iter())
            .filter(|c| !matches!(c, Command::Write { .. }))
            .count();
        Ok(Commands {
            list: done.commands,
            named: done.named.into_iter().collect(),
            _owned: done.free.into_iter().map(|(_, buffer)| buffer).collect(),
            launches,
            recordings: Arc::clone(self),
            stream: Arc::clone(stream),
            graph: Mutex::new(Captured::NotYet),
        })
    }

    /// Adds `command`, naming the buffers at `names`, to this thread's recording if it
    /// records; otherwise drops it.
    pub(super) fn push(&self, command: Command, names: &[CUdeviceptr]) {
        if self.under_way.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut state = self.state();
        let State {
            under_way, named, ..
        } = &mut *state;
        let Some(own) = under_way.get_mut(&std::thread::current().id()) else {
            return;
        };
        for &address in names {
            if own.named.insert(address) {
                *named.entry(address).or_default() += 1;
            }
        }
        own.commands.push(command);
    }

    /// A buffer of exactly `bytes` bytes this thread's recording made and freed, if it
    /// records and has one.
    pub(super) fn take_free(&self, bytes: usize) -> Option<CudaSlice<u8>> {
        if self.under_way.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut state = self.state();
        let own = state.under_way.get_mut(&std::thread::current().id())?;
        let at = own.free.iter().position(|(_, b)| b.len() == bytes)?;
        Some(own.free.swap_remove(at).1)
    }

    /// Notes the buffer at `address` as made by this thread's recording, if it records.
    pub(super) fn made(&self, address: CUdeviceptr) {
        if self.under_way.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(own) = (self.state().under_way).get_mut(&std::thread::current().id()) {
            own.made.insert(address);
        }
    }

    /// Counts one recording's names of `addresses` less; the buffers no recording names
    /// any more and whose owners dropped them, to free.
    fn unname(&self, addresses: &[CUdeviceptr]) -> Vec<CudaSlice<u8>> {
        let mut state = self.state();
        let mut freed = Vec::new();
        for address in addresses {
            if let Some(count) = state.named.get_mut(address) {
                *count -= 1;
                if *count == 0 {
                    state.named.remove(address);
                    freed.extend(state.kept.remove(address));
                }
            }
        }
        freed
    }
}

impl Recycle for Recordings {
    fn recycle(&self, buffer: Box<dyn std::any::Any + Send + Sync>) {
        // While no recording lives, none names a buffer: freed at once, no lock taken.
        if self.live.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Ok(buffer) = buffer.downcast::<CudaSlice<u8>>() else {
            return;
        };
        let address = address(&buffer, buffer.stream());
        let mut state = self.state();
        // A buffer this thread's recording made goes back to that recording alone, unless
        // another recording names it too.
        let names = state.named.get(&address).copied().unwrap_or(0);
        if let Some(own) = state.under_way.get_mut(&std::thread::current().id())
            && own.made.contains(&address)
            && names <= usize::from(own.named.contains(&address))
        {
            own.free.push((address, *buffer));
            return;
        }
        // A buffer a recording names stays the recording's until it goes.
        if state.named.contains_key(&address) {
            state.kept.insert(address, *buffer);
            return;
        }
        drop(state);
        // Freed in stream order, after the work queued on it.
        drop(buffer);
    }
}

/// A recording's commands, the buffers it owns and names, and its graph once captured.
pub(super) struct Commands {
    list: Vec<Command>,
    /// Every address its commands name, once each.
    named: Vec<CUdeviceptr>,
    /// Buffers made and freed during the recording.
    _owned: Vec<CudaSlice<u8>>,
    /// Kernel launches and products among the commands.
    launches: usize,
    recordings: Arc<Recordings>,
    /// The device's stream, which replays queue on.
    stream: Arc<CudaStream>,
    graph: Mutex<Captured>,
}

/// Whether a recording's graph is captured.
enum Captured {
    /// Not tried: the first replay tries (so a recording whose step failed is not).
    NotYet,
    Graph(Graph),
    /// Not to be: the replays queue the commands one by one.
    Never,
}

impl Commands {
    /// Kernel launches and products a replay queues.
    pub(super) fn launches(&self) -> usize {
        self.launches
    }

    /// Queues every command on `stream`, products on `blas`.
    ///
    /// # Safety
    /// `blas` must be a live cuBLAS handle whose stream is `stream`.
    pub(super) unsafe fn enqueue(&self, stream: CUstream, blas: cublasHandle_t) -> Result<()> {
        for command in &self.list {
            // SAFETY: this recording keeps every buffer its commands name alive: those it
            // made and freed in `_owned`, the others in `kept` once their owners drop them.
            unsafe { command.enqueue(stream, &self.stream, blas)? };
        }
        Ok(())
    }

    /// Whether a command is a product (which needs cuBLAS).
    pub(super) fn has_products(&self) -> bool {
        self.list.iter().any(|c| matches!(c, Command::Gemm(_)))
    }

    /// Launches the recording's graph on the device's stream, captured by `capture` at the
    /// first call (where `capture` gives none, never); `false` where there is none.
    pub(super) fn launch_graph(
        &self,
        capture: impl FnOnce(&Commands) -> Option<Graph>,
    ) -> Result<bool> {
        let mut captured = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        if let Captured::NotYet = *captured {
            *captured = capture(self).map_or(Captured::Never, Captured::Graph);
        }
        let Captured::Graph(graph) = &*captured else {
            return Ok(false);
        };
        // SAFETY: the executable graph is alive (held under the lock); its nodes name only
        // buffers this recording keeps alive.
        unsafe { result::graph::launch(graph.exec, self.stream.cu_stream()) }
            .map_err(|e| cuda_error("launching a recorded step's graph", e))?;
        Ok(true)
    }

    /// Wraps the commands as a [`Recording`].
    pub(super) fn into_recording(self) -> Recording {
        let launches = self.launches;
        Recording::new(self, launches)
    }
}

impl Drop for Commands {
    fn drop(&mut self) {
        // Freed from whichever thread drops the recording.
        let _ = self.stream.context().bind_to_thread();
        if let Captured::Graph(graph) = std::mem::replace(
            self.graph.get_mut().unwrap_or_else(|e| e.into_inner()),
            Captured::Never,
        ) {
            // A launch of the graph may still run: the graph goes once it is done (the
            // buffers are freed in stream order anyway).
            let _ = self.stream.synchronize();
            drop(graph);
        }
        drop(self.recordings.unname(&self.named));
        self.recordings.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A captured graph, instantiated.
pub(super) struct Graph {
    graph: CUgraph,
    exec: CUgraphExec,
}

// SAFETY: a CUDA graph may be used from any thread as long as no two calls on it overlap;
// `Commands` holds it under a mutex.
unsafe impl Send for Graph {}

impl Graph {
    /// Captures what `queue` queues on `stream` (which nothing else queues on meanwhile) as
    /// a graph, and instantiates it.
    ///
    /// # Safety
    /// `stream` must be a live stream of the current context, not the legacy default one.
    pub(super) unsafe fn capture(
        stream: CUstream,
        queue: impl FnOnce() -> Result<()>,
    ) -> Result<Graph> {
        use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the caller's contract.
        unsafe { result::stream::begin_capture(stream, mode) }
            .map_err(|e| cuda_error("starting a graph capture", e))?;
        let queued = queue();
        // SAFETY: the capture began above on this stream; ending it is required even when
        // queuing failed, so the stream leaves capture mode.
        let graph = unsafe { result::stream::end_capture(stream) };
        if let (Err(e), Ok(graph)) = (&queued, &graph) {
            if !graph.is_null() {
                // SAFETY: just captured, held by nothing else.
                let _ = unsafe { result::graph::destroy(*graph) };
            }
            return Err(e.clone());
        }
        queued?;
        let graph = graph.map_err(|e| cuda_error("ending a graph capture", e))?;
        if graph.is_null() {
            return Err(cuda_error("a graph capture", "captured nothing"));
        }
        // SAFETY: `graph` was just captured and is destroyed only below or by `Graph`.
        match unsafe { result::graph::instantiate(graph, CUgraphInstantiate_flags(0)) } {
            Ok(exec) => Ok(Graph { graph, exec }),
            Err(e) => {
                // SAFETY: as above; nothing else holds it.
                let _ = unsafe { result::graph::destroy(graph) };
                Err(cuda_error("instantiating a recorded step's graph", e))
            }
        }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both were made by `capture`, are destroyed only here, and no launch of
        // them runs (`Commands` waits for its stream first).
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// A stream of its own, and a cuBLAS handle on it once a product is captured, to capture
/// replays on: never the device's stream, which other threads may queue on meanwhile.
pub(super) struct CaptureStream {
    pub stream: CUstream,
    blas: Option<(cublasHandle_t, CudaSlice<u8>)>,
}

// SAFETY: the stream and handle are used only under the device's capture lock.
unsafe impl Send for CaptureStream {}

impl CaptureStream {
    /// A non-blocking stream of the current context.
    pub(super) fn new() -> Result<Self> {
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| cuda_error("making a stream to capture on", e))?;
        Ok(CaptureStream { stream, blas: None })
    }

    /// The cuBLAS handle on this stream (made on the first call) whose workspace is the
    /// one `workspace` makes: of the size the device's own handle has, so that both choose
    /// the same algorithms and give the same bits.
    pub(super) fn blas(
        &mut self,
        workspace: impl FnOnce() -> Result<CudaSlice<u8>>,
        device_stream: &Arc<CudaStream>,
    ) -> Result<cublasHandle_t> {
        use cudarc::cublas::result as blas;
        if let Some((handle, _)) = &self.blas {
            return Ok(*handle);
        }
        let workspace = workspace()?;
        let handle = blas::create_handle().map_err(|e| cuda_error("making a cuBLAS handle", e))?;
        // SAFETY: `handle` was just made and the stream is alive; the workspace is a live
        // buffer kept as long as the handle (below).
        let set = unsafe { blas::set_stream(handle, self.stream as _) }
            .map_err(|e| cuda_error("setting cuBLAS's stream", e))
            .and_then(|()| unsafe { set_workspace(handle, &workspace, device_stream) });
        // A first product outside any capture, so that what cuBLAS sets up at a handle's
        // first call is not captured.
        let warmed = set.and_then(|()| warm_up(handle, device_stream, self.stream));
        if let Err(e) = warmed {
            // SAFETY: made above, used by nothing.
            let _ = unsafe { blas::destroy_handle(handle) };
            return Err(e);
        }
        self.blas = Some((handle, workspace));
        Ok(handle)
    }
}

impl Drop for CaptureStream {
    fn drop(&mut self) {
        // SAFETY: made by `new` and `blas`, destroyed only here.
        unsafe {
            if let Some((handle, _)) = self.blas.take() {
                let _ = cudarc::cublas::result::destroy_handle(handle);
            }
            let _ = result::stream::destroy(self.stream);
        }
    }
}

/// A 1×1×1 f32 product on `handle` (whose stream is `stream`), waited for.
fn warm_up(
    handle: cublasHandle_t,
    device_stream: &Arc<CudaStream>,
    stream: CUstream,
) -> Result<()> {
    let scratch = device_stream
        .alloc_zeros::<f32>(3)
        .map_err(|e| cuda_error("allocating 12 bytes", e))?;
    let at = address(&scratch, device_stream);
    // The product, on another stream, waits for the zeros.
    device_stream
        .synchronize()
        .map_err(|e| cuda_error("waiting for the device", e))?;
    let call = GemmCall {
        dtype: DType::F32,
        tf32: false,
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: 1,
        n: 1,
        k: 1,
        a: at,
        lda: 1,
        stride_a: 1,
        b: at + 4,
        ldb: 1,
        stride_b: 1,
        c: at + 8,
        ldc: 1,
        stride_c: 1,
        batch: 1,
    };
    // SAFETY: the three one-element operands are the three f32 of `scratch`, which lives
    // until the product is done (waited for below).
    unsafe { call.enqueue(handle)? };
    // SAFETY: a live stream of the current context.
    unsafe { cudarc::driver::sys::cuStreamSynchronize(stream) }
        .result()
        .map_err(|e| cuda_error("waiting for a capture stream", e))?;
    drop(scratch);
    Ok(())
}

/// The bytes of cuBLAS workspace each handle gets (cuBLAS's recommendation for Hopper).
pub(super) const BLAS_WORKSPACE: usize = 32 << 20;

/// Gives `handle` the workspace `workspace` (set after its stream, which resets it).
///
/// # Safety
/// `workspace` must outlive every product queued on `handle`.
pub(super) unsafe fn set_workspace(
    handle: cublasHandle_t,
    workspace: &CudaSlice<u8>,
    stream: &CudaStream,
) -> Result<()> {
    let at = address(workspace, stream);
    // SAFETY: the caller keeps the buffer alive; cuBLAS uses at most its length.
    unsafe {
        cudarc::cublas::sys::cublasSetWorkspace_v2(handle, at as *mut c_void, workspace.len())
    }
    .result()
    .map_err(|e| cuda_error("setting cuBLAS's workspace", e))
}
