//! Execution backends of `axes` for generated kernels ([`axes_kernels`]).
//!
//! - `opencl` (cargo feature `opencl`): runs the OpenCL C dialect on any OpenCL runtime
//!   (PoCL on the CPU in CI; AMD and Intel GPUs). libOpenCL is loaded at run time, so this
//!   builds without it; no runtime is an error, never a panic.
//! - `cuda` (cargo feature `cuda`): cudarc with dynamic loading: NVRTC compiles the CUDA C
//!   dialect; the driver, NVRTC and cuBLAS are probed before any call, so a machine without
//!   CUDA gets an error naming what is missing.
//!
//! Each implements [`axes_core::device::Backend`]; `OpenCl::device()` and
//! `Cuda::device(ordinal)` give the [`Device`](axes_core::Device) that tensors are copied to
//! with `x.to(&device)`, after which expressions, reductions and `dot` over them run there.
//! [`device`] parses a device name (`cpu`, `cuda:0`, `opencl`).
//!
//! The CPU backend is `axes-core` itself (the monomorphised loop engine, the gemm crate and
//! the run-time IR interpreter).

/// The error for a device whose backend this build lacks.
#[cfg(not(all(feature = "cuda", feature = "opencl")))]
fn lacks(name: &str, feature: &str) -> axes_core::Error {
    axes_core::Error::Unsupported {
        what: format!("device `{name}`: this build of axes-backends lacks the `{feature}` feature"),
    }
}

/// The device a name gives: `cpu`, `cuda` or `cuda:N`, `opencl` or `opencl:0`. A backend
/// this build lacks (cargo features `cuda`, `opencl`), or a device the machine lacks, is an
/// error that says so.
///
/// ```
/// assert_eq!(axes_backends::device("cpu")?, axes_core::Device::Cpu);
/// assert!(axes_backends::device("tpu").is_err());
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn device(name: &str) -> axes_core::Result<axes_core::Device> {
    let (kind, number) = match name.split_once(':') {
        Some((kind, number)) => (kind, Some(number)),
        None => (name, None),
    };
    let number = number
        .map(|n| {
            n.parse::<usize>()
                .map_err(|_| axes_core::Error::Unsupported {
                    what: format!("device `{name}`: `{n}` is not a device number"),
                })
        })
        .transpose()?
        .unwrap_or(0);
    match kind {
        "cpu" if number == 0 => Ok(axes_core::Device::Cpu),
        #[cfg(feature = "cuda")]
        "cuda" => cuda::Cuda::device(number),
        #[cfg(feature = "opencl")]
        "opencl" if number == 0 => opencl::OpenCl::device(),
        #[cfg(feature = "opencl")]
        "opencl" => Err(axes_core::Error::Unsupported {
            what: format!("device `{name}`: only the first OpenCL device, `opencl:0`, is used"),
        }),
        #[cfg(not(feature = "cuda"))]
        "cuda" => Err(lacks(name, "cuda")),
        #[cfg(not(feature = "opencl"))]
        "opencl" => Err(lacks(name, "opencl")),
        _ => Err(axes_core::Error::Unsupported {
            what: format!("device `{name}`: expected cpu, cuda, cuda:N or opencl"),
        }),
    }
}

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "opencl")]
pub mod opencl;

/// Element types device buffers hold: plain numbers, for which every bit pattern a kernel may
/// write is a valid value (so no `bool`: kernels write booleans as `u8`).
pub trait Plain: Copy + Default + Send + Sync + 'static + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Plain for $t {}
    )*};
}

plain!(f32, f64, i32, i64, u8);

/// An index argument as a kernel with 32-bit indices takes it, or an error naming it.
pub fn narrow_index(kernel: &str, position: usize, value: Index) -> axes_core::Result<i32> {
    i32::try_from(value).map_err(|_| axes_core::Error::Unsupported {
        what: format!(
            "argument {position} of `{kernel}` is {value}, beyond 32-bit indices: generate the \
             kernel with `Spec::wide`"
        ),
    })
}

/// One kernel argument besides the buffers: an index, length, offset or stride, passed as
/// the kernel's index type (32 or 64 bits, [`axes_kernels::Spec::wide`]).
pub type Index = i64;

/// The global size of a launch: `items` work items rounded up to a multiple of `local`,
/// capped at `cap` groups (kernels stride over the rest).
pub fn global_size(items: usize, local: usize, cap_groups: usize) -> usize {
    let local = local.max(1);
    items.div_ceil(local).clamp(1, cap_groups.max(1)) * local
}

/// One argument of a planned launch: an index, the output buffer, or leaf `k`'s buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    Index(Index),
    Out,
    Leaf(usize),
}

/// A device job turned into a kernel and its argument list (shared by the backends).
pub(crate) struct JobPlan {
    pub(crate) kernel: axes_kernels::Kernel,
    pub(crate) wide: bool,
    pub(crate) args: Vec<Slot>,
    /// Work items (elementwise) or work-groups (reduction) wanted.
    pub(crate) items: usize,
    pub(crate) reduction: bool,
    pub(crate) out_bytes: usize,
    /// The parts each result's elements are cut into (1: the kernel writes the results;
    /// more: partial results, which [`JobPlan::combine`] reduces).
    pub(crate) splits: usize,
}

/// Work-groups a reduction wants at least (a device's cores are filled several times over).
const REDUCTION_GROUPS: usize = 1024;
/// Elements a part of a split reduction reduces at least.
const ELEMENTS_PER_PART: usize = 4096;

/// The parts to cut each of `count` results' `reduced` elements into, so that few results
/// over many elements still fill the device.
fn splits(count: usize, reduced: usize) -> usize {
    (REDUCTION_GROUPS / count.max(1))
        .min(reduced / ELEMENTS_PER_PART)
        .max(1)
}

impl JobPlan {
    /// The plan for `job` in `dialect`; `None` when the result is empty.
    pub(crate) fn new(
        job: &axes_core::device::Job<'_>,
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<Option<JobPlan>> {
        use axes_core::device::ReduceKind;
        use axes_kernels::{CType, ReduceOp, Spec};
        let out = CType::of(job.out)?;
        let types = (job.leaves.iter())
            .map(|leaf| CType::of(leaf.dtype))
            .collect::<axes_core::Result<Vec<_>>>()?;
        let count: usize = job.kept.iter().product();
        let reduced: usize = job.reduced.iter().product();
        if count == 0 {
            return Ok(None);
        }
        let largest = (job.leaves.iter())
            .zip(&types)
            .map(|(leaf, ty)| leaf.memory.bytes() / ty.size())
            .chain([count.saturating_mul(reduced.max(1))])
            .max()
            .unwrap_or(0);
        let spec = Spec {
            ir: &job.ir,
            leaves: &types,
            out,
            wide: Spec::needs_wide(largest),
        };
        let reduction = !job.reduced.is_empty();
        let splits = if reduction { splits(count, reduced) } else { 1 };
        let mut args = vec![Slot::Index(count as Index)];
        let kernel = if reduction {
            args.extend([Slot::Index(reduced as Index), Slot::Index(splits as Index)]);
            let op = match job.reduce {
                ReduceKind::Sum => ReduceOp::Sum,
                ReduceKind::Prod => ReduceOp::Prod,
                ReduceKind::Max => ReduceOp::Max,
                ReduceKind::Min => ReduceOp::Min,
            };
            axes_kernels::reduction(&spec, job.kept.len(), job.reduced.len(), op, dialect)?
        } else {
            axes_kernels::elementwise(&spec, job.kept.len(), dialect)?
        };
        args.extend(
            job.kept
                .iter()
                .chain(&job.reduced)
                .map(|&l| Slot::Index(l as Index)),
        );
        args.extend([Slot::Out, Slot::Index(0)]);
        // The result is row-major over the kept axes, each result's parts side by side.
        args.extend(
            partial_strides(&job.kept, splits)
                .into_iter()
                .map(Slot::Index),
        );
        if reduction {
            args.push(Slot::Index(if splits > 1 { 1 } else { 0 }));
        }
        for (k, leaf) in job.leaves.iter().enumerate() {
            args.extend([Slot::Leaf(k), Slot::Index(leaf.offset as Index)]);
            args.extend(leaf.strides.iter().map(|&s| Slot::Index(s as Index)));
        }
        Ok(Some(JobPlan {
            kernel,
            wide: spec.wide,
            args,
            items: count * splits,
            reduction,
            out_bytes: count * splits * out.size(),
            splits,
        }))
    }
}

/// Row-major strides over `kept` lengths, each result holding `splits` parts.
fn partial_strides(kept: &[usize], splits: usize) -> Vec<Index> {
    let mut strides = vec![0; kept.len()];
    let mut size = splits as Index;
    for (s, &l) in strides.iter_mut().zip(kept).rev() {
        *s = size;
        size *= l as Index;
    }
    strides
}

impl JobPlan {
    /// The job that combines the partial results of a split reduction (`partial`, laid out
    /// by this plan) into `job`'s results: a reduction over the parts, with `job`'s operator.
    pub(crate) fn combine<'a>(
        &self,
        job: &axes_core::device::Job<'_>,
        partial: &'a axes_core::device::DeviceMemory,
    ) -> axes_core::device::Job<'a> {
        let mut ir = axes_core::expr::Ir::default();
        ir.leaf();
        let mut strides: Vec<isize> = (partial_strides(&job.kept, self.splits).into_iter())
            .map(|s| s as isize)
            .collect();
        strides.push(1);
        axes_core::device::Job {
            ir,
            leaves: vec![axes_core::device::JobLeaf {
                dtype: job.out,
                memory: partial,
                offset: 0,
                strides,
            }],
            kept: job.kept.clone(),
            reduced: vec![self.splits],
            reduce: job.reduce,
            out: job.out,
        }
    }

    /// The plan for a matrix product: the tiled kernel, its arguments (leaf 0 is the left
    /// operand, leaf 1 the right), and its work-group count in `items`.
    pub(crate) fn matmul(
        job: &axes_core::device::MatmulJob<'_>,
        dialect: axes_kernels::Dialect,
    ) -> axes_core::Result<JobPlan> {
        use axes_kernels::{CType, MATMUL_TILE, Spec};
        let ty = CType::of(job.dtype)?;
        let out_count = job.batch * job.m * job.n;
        let largest = (job.lhs.memory.bytes())
            .max(job.rhs.memory.bytes())
            .div_ceil(ty.size())
            .max(out_count);
        let wide = Spec::needs_wide(largest);
        let kernel = axes_kernels::matmul(ty, wide, dialect)?;
        let i = |v: usize| Slot::Index(v as Index);
        let mut args = vec![i(job.batch), i(job.m), i(job.n), i(job.k)];
        args.extend([Slot::Out, i(0), i(job.m * job.n), i(job.n), i(1)]);
        for (k, side) in [job.lhs, job.rhs].iter().enumerate() {
            args.extend([
                Slot::Leaf(k),
                i(side.offset),
                Slot::Index(side.batch_stride as Index),
                Slot::Index(side.row_stride as Index),
                Slot::Index(side.col_stride as Index),
            ]);
        }
        Ok(JobPlan {
            kernel,
            wide,
            args,
            items: job.batch * job.m.div_ceil(MATMUL_TILE) * job.n.div_ceil(MATMUL_TILE),
            reduction: true,
            out_bytes: out_count * ty.size(),
            splits: 1,
        })
    }
}
