//! CUDA: every generated kernel of many random expression trees (random ops, ranks,
//! reductions, element types, 32- and 64-bit indexing) compiles with NVRTC to PTX for
//! compute_80 and compute_90, and ptxas assembles the compute_90 PTX for sm_90. With
//! `AXES_REQUIRE_NVRTC=1` (as CI sets) a missing NVRTC or ptxas fails the test; otherwise it
//! prints `SKIPPED`.
//!
//! Where a CUDA device exists, the kernels also run there against the plain reference;
//! elsewhere that test prints `SKIPPED (no CUDA device): <reason>`.

use std::path::PathBuf;
use std::process::Command;

use std::sync::Mutex;

use super::{Cuda, CudaArg, compile_cubin, compile_ptx, nvrtc_available};
use crate::cpu::CPU_BACKEND;
use crate::global_size;
use crate::launch::{KernelDevice, LaunchArg};
use crate::plan::JobPlan;
use crate::reference::{
    close, eval, exact, indices, random_dense, random_ir, random_operand, to_f32,
};
use crate::tuning::Tuning;
use axes_core::ir::ReduceOp;
use axes_core::ir::{Ir, IrNode};
use axes_core::protocol::{Backend, DeviceKind, DeviceMemory, Job, JobTarget, MatmulJob, WriteTo};
use axes_kernels::{
    AttentionPass, AttentionSpec, CType, Dialect, Kernel, MatmulTile, REDUCE_GROUP, REDUCE_UNROLL,
    ReduceShape, Spec, Tile, Tiling, attention, elementwise, elementwise_tiled, matmul, reduction,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Launches `kernel`.
fn launch(
    device: &Cuda,
    kernel: &Kernel,
    wide: bool,
    args: &[CudaArg<'_>],
    a: usize,
    b: usize,
) -> axes_core::Result<()> {
    // SAFETY: every launch here builds `args` in the generator's documented order, from
    // buffers of the kernel's element types, with lengths, offsets and strides whose positions
    // the reference reads too (so they lie inside the buffers).
    unsafe { device.launch(kernel, wide, args, a, b) }
}

fn required() -> bool {
    std::env::var_os("AXES_REQUIRE_NVRTC").is_some()
}

/// ptxas from `AXES_PTXAS` or the PATH.
fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AXES_PTXAS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
    })
}

/// Kernels of random expressions, and a few hand-made ones covering casts, integers and
/// boolean selects.
fn kernels() -> Vec<Kernel> {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut out = Vec::new();
    let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
    for case in 0..40 {
        let ty = [CType::F32, CType::F64, CType::F16, CType::BF16][case % 4];
        let leaves = rng.random_range(1..=4);
        let ir = random_ir(&mut rng, leaves, 5);
        let types = vec![ty; leaves];
        let spec = Spec {
            ir: &ir,
            leaves: &types,
            out: ty,
            wide: (case / 4) % 2 == 0,
        };
        out.push(elementwise(&spec, rng.random_range(0..=6), Dialect::Cuda).unwrap());
        let kept = rng.random_range(0..=3);
        let reduced = rng.random_range(1..=3);
        let op = ops[(case / 4) % 4];
        let shape = ReduceShape {
            kept,
            reduced,
            op,
            unroll: 1 + case % 4,
            vectors: false,
        };
        out.push(reduction(&spec, &shape, Dialect::Cuda).unwrap());
        if ty == CType::F32 {
            let vectors = ReduceShape {
                reduced: 1,
                vectors: true,
                ..shape
            };
            out.push(reduction(&spec, &vectors, Dialect::Cuda).unwrap());
        }
        // Every other case, a tiled kernel staging some of the leaves, in the tile shapes a
        // tuning run sweeps.
        if case % 2 == 1 {
            continue;
        }
        let tile = [
            Tile::DEFAULT,
            Tile { side: 16, rows: 16 },
            Tile { side: 64, rows: 4 },
        ][case / 2 % 3];
        // As many as fit the 32 KiB a device gives a tiled kernel at most.
        let size = ty.compute().size();
        let staged: Vec<usize> = (0..leaves)
            .filter(|_| rng.random_bool(0.5))
            .scan(0, |bytes, k| {
                *bytes += tile.local_bytes([size]);
                (*bytes <= 32 << 10).then_some(k)
            })
            .collect();
        let tiling = Tiling {
            staged: &staged,
            tile,
        };
        let rank = rng.random_range(2..=5);
        out.push(elementwise_tiled(&spec, &[], None, rank, &tiling, Dialect::Cuda).unwrap());
    }
    // Every op of the table in every element type it accepts, summed in one kernel per type.
    for ty in [
        CType::F32,
        CType::F64,
        CType::I32,
        CType::I64,
        CType::U8,
        CType::F16,
        CType::BF16,
    ] {
        use axes_core::ir::{BinaryOp, CompareOp, Domain, UnaryOp};
        let accepts = |domain: Domain| domain.accepts(ty.dtype());
        let mut ir = Ir::default();
        let (a, b) = (ir.leaf(), ir.leaf());
        let mut sum = a;
        for &op in UnaryOp::ALL.iter().filter(|op| accepts(op.domain())) {
            let v = ir.push(IrNode::Unary(op, a));
            sum = ir.push(IrNode::Binary(BinaryOp::Add, sum, v));
        }
        for &op in BinaryOp::ALL.iter().filter(|op| accepts(op.domain())) {
            let v = ir.push(IrNode::Binary(op, a, b));
            sum = ir.push(IrNode::Binary(BinaryOp::Add, sum, v));
        }
        for &op in CompareOp::ALL {
            let c = ir.push(IrNode::Compare(op, a, b));
            let v = ir.push(IrNode::Select(c, a, b));
            sum = ir.push(IrNode::Binary(BinaryOp::Add, sum, v));
        }
        let spec = Spec {
            ir: &ir,
            leaves: &[ty, ty],
            out: ty,
            wide: false,
        };
        out.push(elementwise(&spec, 2, Dialect::Cuda).unwrap());
    }
    // select(x > 0, cast_f32(i), 2.5) over an i32 leaf and an f32 leaf, into f64.
    let mut ir = Ir::default();
    let (x, i) = (ir.leaf(), ir.leaf());
    let zero = ir.push(IrNode::Scalar(0.0));
    let c = ir.push(IrNode::Compare(axes_core::ir::CompareOp::Greater, x, zero));
    let f = ir.push(IrNode::Cast(axes_core::element::DType::F32, i));
    let k = ir.push(IrNode::Scalar(2.5));
    let s = ir.push(IrNode::Select(c, f, k));
    ir.push(IrNode::Cast(axes_core::element::DType::F64, s));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F32, CType::I32],
        out: CType::F64,
        wide: false,
    };
    out.push(elementwise(&spec, 3, Dialect::Cuda).unwrap());
    // Integer arithmetic with division by zero defined, into bool and i64 outputs.
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    let d = ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Div, a, b));
    let m = ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Max, d, a));
    ir.push(IrNode::Unary(axes_core::ir::UnaryOp::Abs, m));
    for out_ty in [CType::I64, CType::I32] {
        let spec = Spec {
            ir: &ir,
            leaves: &[CType::I64, CType::I64],
            out: out_ty,
            wide: true,
        };
        out.push(elementwise(&spec, 2, Dialect::Cuda).unwrap());
        out.push(
            reduction(
                &spec,
                &ReduceShape {
                    kept: 1,
                    reduced: 1,
                    op: ReduceOp::Max,
                    unroll: REDUCE_UNROLL,
                    vectors: false,
                },
                Dialect::Cuda,
            )
            .unwrap(),
        );
    }
    // Casts between the halves and f32, stored as a half.
    let mut ir = Ir::default();
    let h = ir.leaf();
    let f = ir.push(IrNode::Cast(axes_core::element::DType::F32, h));
    let b = ir.push(IrNode::Cast(axes_core::element::DType::BF16, f));
    ir.push(IrNode::Cast(axes_core::element::DType::F16, b));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F16],
        out: CType::F16,
        wide: false,
    };
    out.push(elementwise(&spec, 2, Dialect::Cuda).unwrap());
    for ty in [CType::F32, CType::F64, CType::F16, CType::BF16] {
        for tile in [MatmulTile::SMALL, MatmulTile::LARGE] {
            out.push(matmul(ty, false, tile, Dialect::Cuda).unwrap());
            out.push(matmul(ty, true, tile, Dialect::Cuda).unwrap());
        }
    }
    // Every pass of fused attention in every float type, masked and not, 32- and 64-bit
    // indexed, over the GPT's heads, odd widths and the widest (whose loops stay rolled).
    for (ty, width, value_width, masked, wide) in [
        (CType::F32, 32, 32, false, false),
        (CType::F32, 256, 256, true, false),
        (CType::F64, 33, 5, true, true),
        (CType::F16, 1, 1, true, false),
        (CType::BF16, 33, 5, false, true),
    ] {
        let spec = AttentionSpec {
            ty,
            width,
            value_width,
            scale: 0.125,
            masked,
            wide,
        };
        for pass in AttentionPass::ALL {
            out.push(attention(&spec, pass, Dialect::Cuda).unwrap());
        }
    }
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    ir.push(IrNode::Compare(axes_core::ir::CompareOp::LessEqual, a, b));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::U8, CType::F64],
        out: CType::Bool,
        wide: false,
    };
    out.push(elementwise(&spec, 1, Dialect::Cuda).unwrap());
    out
}

/// Compiles every kernel with NVRTC to PTX for compute_80 and compute_90 and to a cubin for
/// sm_90 (what a device loads and keeps on disk), and assembles the compute_90 PTX with
/// ptxas for sm_90, failing on the first that does not; `false` (after
/// printing why) where there is no NVRTC and `AXES_REQUIRE_NVRTC` is not set.
fn compile_all(kernels: &[Kernel]) -> bool {
    if let Err(e) = nvrtc_available() {
        assert!(!required(), "AXES_REQUIRE_NVRTC is set: {e}");
        println!("SKIPPED (no NVRTC): {e}");
        return false;
    }
    let ptxas = ptxas();
    assert!(
        ptxas.is_some() || !required(),
        "AXES_REQUIRE_NVRTC is set but ptxas is not on the PATH (or AXES_PTXAS)"
    );
    let dir =
        std::env::temp_dir().join(format!("axes-ptx-{}-{}", std::process::id(), kernels.len()));
    std::fs::create_dir_all(&dir).unwrap();
    for kernel in kernels {
        let _ = compile_ptx(kernel, "compute_80").unwrap();
        let cubin = compile_cubin(kernel, "sm_90").unwrap();
        assert!(cubin.starts_with(b"\x7fELF"), "a cubin is an ELF image");
        let ptx = compile_ptx(kernel, "compute_90").unwrap();
        assert!(
            ptx.contains(&format!(".entry {}", kernel.name)),
            "no entry point in\n{ptx}"
        );
        if let Some(ptxas) = &ptxas {
            let file = dir.join(format!("{}.ptx", kernel.name));
            std::fs::write(&file, &ptx).unwrap();
            let out = Command::new(ptxas)
                .arg("-arch=sm_90")
                .arg(&file)
                .arg("-o")
                .arg(file.with_extension("cubin"))
                .output()
                .expect("ptxas runs");
            assert!(
                out.status.success(),
                "ptxas rejected `{}`:\n{}\n{}",
                kernel.name,
                String::from_utf8_lossy(&out.stderr),
                kernel.source
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    println!(
        "{} kernels compiled for compute_80 and compute_90{}",
        kernels.len(),
        if ptxas.is_some() {
            " and assembled for sm_90"
        } else {
            " (no ptxas: not assembled)"
        }
    );
    true
}

#[test]
fn generated_kernels_compile_with_nvrtc_and_assemble_with_ptxas() {
    compile_all(&kernels());
}

/// The CPU backend as a device that also plans every job as the CUDA backend would, keeping
/// each kernel: what a training step launches on a GPU, found without one.
struct Recording {
    kernels: Mutex<Vec<Kernel>>,
    /// An H100's (132 multiprocessors), tiles included.
    tuning: Tuning,
}

impl Recording {
    fn keep(&self, kernel: &Kernel) {
        let mut kept = self.kernels.lock().unwrap();
        if !kept.iter().any(|k| k.source == kernel.source) {
            kept.push(kernel.clone());
        }
    }
}

/// The shared launcher ([`crate::launch::run`]) plans each job for CUDA on buffers of no
/// device, and every launch it asks for keeps its kernel.
impl KernelDevice for Recording {
    type Buffer = ();
    const DIALECT: Dialect = Dialect::Cuda;

    fn buffer<'m>(&self, _: &'m DeviceMemory) -> axes_core::Result<&'m ()> {
        Ok(&())
    }

    fn buffer_mut<'m>(&self, _: &'m mut DeviceMemory) -> axes_core::Result<&'m ()> {
        Ok(&())
    }

    fn fresh(&self, bytes: usize) -> axes_core::Result<DeviceMemory> {
        Ok(DeviceMemory::new((), bytes))
    }

    fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    unsafe fn launch_job(
        &self,
        kernel: &Kernel,
        _: bool,
        _: &[LaunchArg<'_, ()>],
        _: usize,
        _: Option<usize>,
    ) -> axes_core::Result<()> {
        self.keep(kernel);
        Ok(())
    }

    unsafe fn launch_attention(
        &self,
        kernel: &Kernel,
        _: bool,
        _: &[LaunchArg<'_, ()>],
        _: usize,
    ) -> axes_core::Result<()> {
        self.keep(kernel);
        Ok(())
    }
}

impl Backend for Recording {
    fn name(&self) -> String {
        "CPU recording CUDA kernels".into()
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda(usize::MAX)
    }
    fn upload(&self, bytes: &[u8]) -> axes_core::Result<DeviceMemory> {
        CPU_BACKEND.upload(bytes)
    }
    fn download(&self, memory: &DeviceMemory) -> axes_core::Result<Vec<u8>> {
        CPU_BACKEND.download(memory)
    }
    /// Plans `job` through the shared launcher, keeping each kernel, and runs it on the CPU
    /// backend.
    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> axes_core::Result<Vec<DeviceMemory>> {
        // The launcher only plans here: targets it writes are stood in for by buffers of no
        // device of their sizes.
        let mut stand_ins: Vec<DeviceMemory> = match &to {
            WriteTo::Into(targets) => (targets.iter())
                .map(|t| DeviceMemory::new((), t.memory.bytes()))
                .collect(),
            _ => Vec::new(),
        };
        let planned = match &to {
            WriteTo::New => WriteTo::New,
            WriteTo::Over(over) => WriteTo::Over(over),
            WriteTo::Into(targets) => WriteTo::Into(
                (targets.iter().zip(&mut stand_ins))
                    .map(|(t, memory)| JobTarget {
                        memory,
                        offset: t.offset,
                        strides: t.strides.clone(),
                    })
                    .collect(),
            ),
        };
        crate::launch::run(self, job, planned)?;
        CPU_BACKEND.run(job, to)
    }
    fn matmul(&self, job: &MatmulJob<'_>) -> axes_core::Result<DeviceMemory> {
        // cuBLAS runs f32 and f64 products on a GPU; the tiled kernel is the fallback.
        self.keep(&JobPlan::matmul(job, &self.tuning, Dialect::Cuda)?.kernel);
        CPU_BACKEND.matmul(job)
    }
}

/// Every kernel that training steps of an MLP (SGD and Adam, softmax cross-entropy, ReLU,
/// a square layer, argmax) launch on CUDA compiles with NVRTC and assembles with ptxas.
#[test]
fn every_kernel_of_a_training_step_compiles_for_cuda() {
    use axes::prelude::*;
    use axes_core::autodiff::{Tape, softmax_cross_entropy};
    use axes_core::nn::{Init, Linear, ParamsBuilder, Square};
    use axes_core::optim::{Adam, Sgd};
    #[derive(Axis)]
    struct Batch;
    #[derive(Axis)]
    struct Pixel;
    #[derive(Axis)]
    struct Hidden;
    #[derive(Axis)]
    struct Class;

    static RECORDING: Recording = Recording {
        kernels: Mutex::new(Vec::new()),
        tuning: Tuning::device(true, 1056, 65_535, 48 << 10, 1024),
    };
    let device = axes_core::Device::Backend(&RECORDING);
    let (b, p, h, c) = (Batch.len(32), Pixel.len(64), Hidden.len(48), Class.len(10));
    let x = Tensor::<f32, (Pixel, Batch)>::random_uniform((p, b), 0.0, 1.0, 1).unwrap();
    let y = Tensor::<i64, (Batch,)>::from_fn(b, |i| (i.of::<Batch>() % 10) as i64).unwrap();
    let (x, y) = (x.to(&device).unwrap(), y.to(&device).unwrap());
    let mut builder = ParamsBuilder::new();
    let input = Linear::<Pixel, Hidden>::new(&mut builder, "input", p, h, Init::He).unwrap();
    let middle = Square::<Hidden>::new(&mut builder, "middle", h, Init::He).unwrap();
    let output = Linear::<Hidden, Class>::new(&mut builder, "output", h, c, Init::Glorot).unwrap();
    let mut params = builder.build::<f32>(3).unwrap().to(&device).unwrap();
    let mut adam = Adam::new(1e-3).with_weight_decay(1e-2);
    let mut sgd = Sgd::new(1e-2, 0.9);
    for step in 0..4 {
        let tape = Tape::new();
        let bound = params.bind(&tape);
        let hidden = input
            .forward(&bound, &tape.constant(x.clone()))
            .unwrap()
            .relu();
        let hidden = middle.forward(&bound, hidden).unwrap().relu();
        let logits = output.forward(&bound, hidden).unwrap().eval().unwrap();
        let predicted = argmax::<_, _, Class>(logits.value()).unwrap();
        assert_eq!(predicted.device(), device);
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)
            .unwrap()
            .mean::<(Batch,)>()
            .unwrap();
        let grad = bound.gradient(&loss.backward().unwrap()).unwrap();
        if step < 2 {
            adam.step(&mut params, &grad).unwrap();
        } else {
            sgd.step(&mut params, &grad).unwrap();
        }
    }
    assert_eq!(
        params.device(),
        device,
        "training stayed on the recording device"
    );
    let kernels = RECORDING.kernels.lock().unwrap().clone();
    assert!(
        kernels.len() >= 10,
        "only {} kernels recorded",
        kernels.len()
    );
    // Adam writes parameters and two moments over themselves in one launch, SGD parameters
    // and velocity; each advances its step scalars (four and two) in place first.
    for fused in ["axes_ew1i3_", "axes_ew1i2_", "axes_ew0i4_", "axes_ew0i2_"] {
        assert!(
            kernels.iter().any(|k| k.name.starts_with(fused)),
            "no {fused} kernel recorded"
        );
    }
    compile_all(&kernels);
}

#[test]
fn a_compile_error_shows_the_log_and_the_source() {
    if nvrtc_available().is_err() {
        println!("SKIPPED (no NVRTC)");
        return;
    }
    let kernel = Kernel {
        name: "broken".into(),
        source: "extern \"C\" __global__ void broken() { undeclared = 1; }".into(),
        dialect: Dialect::Cuda,
    };
    let err = compile_ptx(&kernel, "compute_90").unwrap_err().to_string();
    assert!(err.contains("undeclared"), "{err}");
    assert!(err.contains("--- source ---"), "{err}");
}

/// A kernel compiled in one process is loaded from its cubin on disk by the next (another
/// device object here), and runs; an entry with a flipped byte is compiled again.
#[test]
fn cubins_are_kept_on_disk() {
    if device().is_none() {
        return;
    }
    // x · 2.625: an expression no other test compiles.
    let mut ir = Ir::default();
    let x = ir.leaf();
    let k = ir.push(IrNode::Scalar(2.625));
    ir.push(IrNode::Binary(axes_core::ir::BinaryOp::Mul, x, k));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F32],
        out: CType::F32,
        wide: false,
    };
    let kernel = elementwise(&spec, 1, Dialect::Cuda).unwrap();
    let run = |gpu: &Cuda| {
        let input = gpu.upload(&[1.0f32, 2.0, 4.0]).unwrap();
        let out = gpu.upload(&[0.0f32; 3]).unwrap();
        let args = [
            CudaArg::Index(3),
            CudaArg::Index(3),
            CudaArg::F32(&out),
            CudaArg::Index(0),
            CudaArg::Index(1),
            CudaArg::F32(&input),
            CudaArg::Index(0),
            CudaArg::Index(1),
        ];
        launch(gpu, &kernel, false, &args, 1, 64).unwrap();
        assert_eq!(gpu.download(&out).unwrap(), [2.625, 5.25, 10.5]);
    };
    let dir = std::env::temp_dir().join(format!("axes-cubins-{}", std::process::id()));
    let fresh = |cache| Cuda::with_cache(0, cache, |_| ()).unwrap();
    crate::disk_cache::check_kept_on_disk(&dir, fresh, run, Cuda::built_from_source);
}

fn device() -> Option<&'static Cuda> {
    match Cuda::shared(0) {
        Ok(cuda) => Some(cuda),
        Err(e) => {
            println!("SKIPPED (no CUDA device): {e}");
            None
        }
    }
}

#[test]
fn random_kernels_run_on_the_gpu() {
    let Some(cuda) = device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for case in 0..24 {
        let (ty, round, tolerance) = if case % 2 == 0 {
            (CType::F32, to_f32 as fn(f64) -> f64, 2e-4)
        } else {
            (CType::F64, exact as fn(f64) -> f64, 1e-9)
        };
        let rank = rng.random_range(0..=4);
        let lens: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=5)).collect();
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 4);
        let operands: Vec<_> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        let out_strides = random_dense(&mut rng, &lens);
        let types = vec![ty; leaves];
        let spec = Spec {
            ir: &ir,
            leaves: &types,
            out: ty,
            wide: case % 3 == 0,
        };
        let kernel = elementwise(&spec, rank, Dialect::Cuda).unwrap();
        let n: usize = lens.iter().product();
        let got: Vec<f64> = if ty == CType::F32 {
            let out = cuda.upload(&vec![0f32; n]).unwrap();
            let inputs: Vec<_> = operands
                .iter()
                .map(|o| {
                    cuda.upload(&o.data.iter().map(|&v| v as f32).collect::<Vec<_>>())
                        .unwrap()
                })
                .collect();
            let mut args = vec![CudaArg::Index(n as i64)];
            args.extend(lens.iter().map(|&l| CudaArg::Index(l as i64)));
            args.push(CudaArg::F32(&out));
            args.push(CudaArg::Index(0));
            args.extend(out_strides.iter().map(|&s| CudaArg::Index(s)));
            for (o, b) in operands.iter().zip(&inputs) {
                args.push(CudaArg::F32(b));
                args.push(CudaArg::Index(o.offset));
                args.extend(o.strides.iter().map(|&s| CudaArg::Index(s)));
            }
            launch(
                cuda,
                &kernel,
                spec.wide,
                &args,
                global_size(n, 128, 1024) / 128,
                128,
            )
            .unwrap();
            cuda.download(&out)
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect()
        } else {
            let out = cuda.upload(&vec![0f64; n]).unwrap();
            let inputs: Vec<_> = operands
                .iter()
                .map(|o| cuda.upload(&o.data).unwrap())
                .collect();
            let mut args = vec![CudaArg::Index(n as i64)];
            args.extend(lens.iter().map(|&l| CudaArg::Index(l as i64)));
            args.push(CudaArg::F64(&out));
            args.push(CudaArg::Index(0));
            args.extend(out_strides.iter().map(|&s| CudaArg::Index(s)));
            for (o, b) in operands.iter().zip(&inputs) {
                args.push(CudaArg::F64(b));
                args.push(CudaArg::Index(o.offset));
                args.extend(o.strides.iter().map(|&s| CudaArg::Index(s)));
            }
            launch(
                cuda,
                &kernel,
                spec.wide,
                &args,
                global_size(n, 128, 1024) / 128,
                128,
            )
            .unwrap();
            cuda.download(&out).unwrap()
        };
        for index in indices(&lens) {
            let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
            let expected = eval(&ir, &values, round);
            let p: i64 = index
                .iter()
                .zip(&out_strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum();
            assert!(
                close(got[p as usize], expected, tolerance),
                "case {case} at {index:?}: {} vs {expected}\n{ir}",
                got[p as usize]
            );
        }
    }
    // A reduction: Σ over the last axis of x² for a 300×517 f32 matrix.
    let (m, r) = (300usize, 517usize);
    let x: Vec<f32> = (0..m * r)
        .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
        .collect();
    let mut ir = Ir::default();
    let l = ir.leaf();
    ir.push(IrNode::Unary(axes_core::ir::UnaryOp::Square, l));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F32],
        out: CType::F32,
        wide: false,
    };
    let kernel = reduction(
        &spec,
        &ReduceShape {
            kept: 1,
            reduced: 1,
            op: ReduceOp::Sum,
            unroll: REDUCE_UNROLL,
            vectors: false,
        },
        Dialect::Cuda,
    )
    .unwrap();
    let (xb, out) = (
        cuda.upload(&x).unwrap(),
        cuda.upload(&vec![0f32; m]).unwrap(),
    );
    let args = [
        CudaArg::Index(m as i64),
        CudaArg::Index(r as i64),
        CudaArg::Index(1),
        CudaArg::Index(m as i64),
        CudaArg::Index(r as i64),
        CudaArg::F32(&out),
        CudaArg::Index(0),
        CudaArg::Index(1),
        CudaArg::Index(0),
        CudaArg::F32(&xb),
        CudaArg::Index(0),
        CudaArg::Index(r as i64),
        CudaArg::Index(1),
    ];
    launch(cuda, &kernel, false, &args, m, REDUCE_GROUP).unwrap();
    let got = cuda.download(&out).unwrap();
    for (row, g) in got.iter().enumerate() {
        let expected: f64 = x[row * r..(row + 1) * r]
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum();
        assert!(
            close(*g as f64, expected, 1e-4),
            "row {row}: {g} vs {expected}"
        );
    }
    println!("random kernels matched on {}", cuda.name());
}
