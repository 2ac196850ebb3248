//! What differs between the dialects, and what every kernel shares: index types, the
//! work-group builtins, pointer qualifiers, the preamble, and assembling a named kernel.

use axes_core::element::DType;
use axes_core::ir::IrNode;

use crate::{CType, Dialect, Kernel, Spec};

pub(crate) fn index_type(wide: bool, dialect: Dialect) -> &'static str {
    match (wide, dialect) {
        (false, _) => "int",
        (true, Dialect::Cuda) => "long long",
        (true, Dialect::OpenCl) => "long",
    }
}

/// The work-group builtins of a dialect, spelled with the index type `idx`.
pub(crate) struct Group {
    /// The qualifier of group-shared memory.
    pub(crate) local: &'static str,
    /// This thread's position in its group.
    pub(crate) tid: String,
    /// This group's position.
    pub(crate) group: String,
    /// The number of groups.
    pub(crate) groups: String,
    /// A barrier for the group's threads and its shared memory.
    pub(crate) sync: &'static str,
}

impl Group {
    pub(crate) fn of(dialect: Dialect, idx: &str) -> Group {
        match dialect {
            Dialect::Cuda => Group {
                local: "__shared__",
                tid: format!("({idx})threadIdx.x"),
                group: format!("({idx})blockIdx.x"),
                groups: format!("({idx})gridDim.x"),
                sync: "__syncthreads();",
            },
            Dialect::OpenCl => Group {
                local: "__local",
                tid: format!("({idx})get_local_id(0)"),
                group: format!("({idx})get_group_id(0)"),
                groups: format!("({idx})get_num_groups(0)"),
                sync: "barrier(CLK_LOCAL_MEM_FENCE);",
            },
        }
    }
}

/// FNV-1a of the text, for kernel names.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The preamble every kernel of `dialect` starts with.
fn preamble(spec: &Spec<'_>, dialect: Dialect) -> String {
    let uses = |ty: CType, dtype: DType| {
        spec.out == ty
            || spec.leaves.contains(&ty)
            || (spec.ir.nodes.iter()).any(|n| matches!(*n, IrNode::Cast(d, _) if d == dtype))
    };
    let mut preamble = String::new();
    if dialect == Dialect::OpenCl && uses(CType::F64, DType::F64) {
        preamble.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    if uses(CType::F16, DType::F16) || uses(CType::BF16, DType::BF16) {
        preamble.push_str(match dialect {
            Dialect::OpenCl => OPENCL_HALVES,
            Dialect::Cuda => CUDA_HALVES,
        });
    }
    preamble
}

/// Conversions between `float` and the 16-bit float types, for OpenCL C 1.2 without the
/// `cl_khr_fp16` extension (halves are read and written by `vload_half`/`vstore_half_rte`;
/// bfloat16 is the top half of a float's bits, rounded to nearest even). Guarded, so that
/// kernels built into one program define them once.
const OPENCL_HALVES: &str = "#ifndef AXES_HALVES
#define AXES_HALVES
float axes_round_f16(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); return vload_half(0, (__private const half*)&h); }
float axes_bf16_to_float(ushort b) { return as_float(((uint)b) << 16); }
ushort axes_float_to_bf16(float x) { uint u = as_uint(x); if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); u += 0x7fffu + ((u >> 16) & 1u); return (ushort)(u >> 16); }
#endif
";

/// The same conversions in CUDA C without `cuda_fp16.h` (PTX's `cvt` for halves).
const CUDA_HALVES: &str = "#ifndef AXES_HALVES
#define AXES_HALVES
__device__ __forceinline__ float axes_f16_to_float(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }
__device__ __forceinline__ unsigned short axes_float_to_f16(float x) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); return h; }
__device__ __forceinline__ float axes_round_f16(float x) { return axes_f16_to_float(axes_float_to_f16(x)); }
__device__ __forceinline__ float axes_bf16_to_float(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
__device__ __forceinline__ unsigned short axes_float_to_bf16(float x) { unsigned int u = __float_as_uint(x); if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }
#endif
";

/// A kernel's signature up to its parameters. A CUDA kernel launched with exactly
/// `threads` threads a block says so (`__launch_bounds__`), so that NVRTC keeps its
/// registers within what a block of that many can hold.
fn signature_start(dialect: Dialect, name: &str, threads: Option<usize>) -> String {
    match (dialect, threads) {
        (Dialect::Cuda, None) => format!("extern \"C\" __global__ void {name}("),
        (Dialect::Cuda, Some(threads)) => {
            format!("extern \"C\" __global__ void __launch_bounds__({threads}) {name}(")
        }
        (Dialect::OpenCl, _) => format!("__kernel void {name}("),
    }
}

pub(crate) fn pointer(dialect: Dialect, ty: CType, constant: bool) -> String {
    let c = ty.storage_name(dialect);
    match (dialect, constant) {
        (Dialect::Cuda, true) => format!("const {c}* __restrict__"),
        (Dialect::Cuda, false) => format!("{c}* __restrict__"),
        (Dialect::OpenCl, true) => format!("__global const {c}*"),
        (Dialect::OpenCl, false) => format!("__global {c}*"),
    }
}

/// Adds `name` (parameter list in `params`) and wraps `body` into a named kernel.
pub(crate) fn finish(
    spec: &Spec<'_>,
    dialect: Dialect,
    kind: &str,
    params: &[String],
    body: &str,
) -> Kernel {
    finish_bounded(spec, dialect, kind, params, body, None)
}

/// [`finish`] for a kernel always launched with `threads` threads a group, where that is
/// known when it is generated.
pub(crate) fn finish_bounded(
    spec: &Spec<'_>,
    dialect: Dialect,
    kind: &str,
    params: &[String],
    body: &str,
    threads: Option<usize>,
) -> Kernel {
    let key = format!("{kind}|{}|{body}", params.join(","));
    let name = format!("axes_{kind}_{:016x}", fnv(&key));
    let mut source = preamble(spec, dialect);
    source.push_str(&signature_start(dialect, &name, threads));
    source.push_str(&params.join(", "));
    source.push_str(") {\n");
    source.push_str(body);
    source.push_str("}\n");
    Kernel {
        name,
        source,
        dialect,
    }
}

/// The statements that take axis `axis`'s coordinate `c` off the flat index `rest` (axes
/// are peeled innermost first, so `rest` is already below the outermost axis's length and
/// axis 0 needs no division: a one-axis loop has none at all).
pub(crate) fn coordinate(idx: &str, axis: usize, rest: &str, len: &str) -> String {
    if axis == 0 {
        format!("{idx} c = {rest};")
    } else {
        format!("{idx} c = {rest} % {len}; {rest} /= {len};")
    }
}
