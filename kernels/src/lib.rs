//! Device kernel source generated from the `axes` expression IR ([`axes_core::ir::Ir`]), in
//! two dialects from one generator: CUDA C (compiled with NVRTC) and OpenCL C.
//!
//! Kernels are generic over lengths, strides and offsets, which are passed by value as
//! arguments: one kernel serves every shape of an expression of a given rank, so a device
//! compiles it once. Generation needs no device, so its output can be checked anywhere.
//!
//! - [`elementwise`]: `out[i] = f(leaves[i])` over any strides (stride 0 broadcasts, negative
//!   strides reverse); casts and contiguous copies are elementwise kernels of `cast(leaf0)`
//!   and `leaf0`.
//! - [`reduction`]: `out[kept] = ⊕ over reduced of f(leaves)`, one work-group (block) per
//!   output element: its threads stride over the reduced elements, then combine their
//!   partial results in a tree in local (shared) memory.
//!
//! Indices are 32-bit unless a tensor has 2^30 elements or more ([`Spec::wide`],
//! [`Spec::needs_wide`]).
//!
//! ```
//! use axes_core::ir::{BinaryOp, Ir, IrNode};
//! use axes_kernels::{CType, Dialect, Spec, elementwise};
//!
//! // a * x + y
//! let mut ir = Ir::default();
//! let (x, y) = (ir.leaf(), ir.leaf());
//! let a = ir.push(IrNode::Scalar(2.0));
//! let ax = ir.push(IrNode::Binary(BinaryOp::Mul, a, x));
//! ir.push(IrNode::Binary(BinaryOp::Add, ax, y));
//! let spec = Spec { ir: &ir, leaves: &[CType::F32, CType::F32], out: CType::F32, wide: false };
//! let cuda = elementwise(&spec, 2, Dialect::Cuda)?;
//! assert!(cuda.source.contains("extern \"C\" __global__ void"));
//! let opencl = elementwise(&spec, 2, Dialect::OpenCl)?;
//! assert!(opencl.source.contains("__kernel void"));
//! # Ok::<(), axes_core::Error>(())
//! ```

mod emit;

use std::fmt::Write;

use axes_core::element::DType;
use axes_core::error::{Error, Result};
pub use axes_core::ir::ReduceOp;
use axes_core::ir::{Ir, IrNode};

/// The source language of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// CUDA C++ for NVRTC.
    Cuda,
    /// OpenCL C 1.2.
    OpenCl,
}

/// An element type as stored in device buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// `float`
    F32,
    /// `double`
    F64,
    /// `int`
    I32,
    /// `long long` (CUDA) / `long` (OpenCL)
    I64,
    /// `unsigned char`
    U8,
    /// `unsigned char` holding 0 or 1.
    Bool,
}

impl CType {
    /// The type of an element type, if devices support it (f16 and bf16 do not yet).
    pub fn of(dtype: DType) -> Result<CType> {
        Ok(match dtype {
            DType::F32 => CType::F32,
            DType::F64 => CType::F64,
            DType::I32 => CType::I32,
            DType::I64 => CType::I64,
            DType::U8 => CType::U8,
            DType::Bool => CType::Bool,
            other => {
                return Err(Error::Unsupported {
                    what: format!("{} elements in device kernels", other.name()),
                });
            }
        })
    }

    /// The C spelling in `dialect`.
    pub fn c_name(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (CType::F32, _) => "float",
            (CType::F64, _) => "double",
            (CType::I32, _) => "int",
            (CType::I64, Dialect::Cuda) => "long long",
            (CType::I64, Dialect::OpenCl) => "long",
            (CType::U8 | CType::Bool, _) => "unsigned char",
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, CType::F32 | CType::F64)
    }

    /// The size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            CType::F64 | CType::I64 => 8,
            CType::F32 | CType::I32 => 4,
            CType::U8 | CType::Bool => 1,
        }
    }
}

/// What a kernel computes: the expression, the element types of its leaves (in leaf order)
/// and of its result, and whether indices need 64 bits.
#[derive(Clone, Copy, Debug)]
pub struct Spec<'a> {
    /// The expression; its last node is the result.
    pub ir: &'a Ir,
    /// The element type of each leaf.
    pub leaves: &'a [CType],
    /// The element type written.
    pub out: CType,
    /// 64-bit indexing (needed from 2^31 elements).
    pub wide: bool,
}

impl Spec<'_> {
    /// Whether a tensor of `elements` elements (or a buffer spanning as many) needs 64-bit
    /// indices. The bound is 2^30, not 2^31: grid-stride loops step past the last index by up
    /// to one launch (at most 2^30 work items, see [`MAX_LAUNCH`]) before they stop, and that
    /// must not overflow a 32-bit `int`.
    pub fn needs_wide(elements: usize) -> bool {
        elements >= 1 << 30
    }
}

/// The most work items one launch may have with 32-bit indices (see [`Spec::needs_wide`]).
pub const MAX_LAUNCH: usize = 1 << 30;

/// The threads of one reduction work-group (block); launch reductions with this local size.
pub const REDUCE_GROUP: usize = 256;

/// Generated kernel source and how to call it.
///
/// Arguments, in order — `IDX` is `int`, or the 64-bit integer type when [`Spec::wide`]:
/// - elementwise of rank `R`: `n` (element count), `len_0 .. len_{R-1}`, then the output
///   (pointer, offset, `R` strides), then each leaf (pointer, offset, `R` strides);
/// - reduction with `K` kept and `Q` reduced axes: `m` (outputs), `r` (elements reduced per
///   output), `splits` (parts each output's elements are cut into), the `K` kept lengths,
///   the `Q` reduced lengths, then the output (pointer, offset, `K` strides, the stride
///   between the partial results of one output's parts), then each leaf (pointer, offset,
///   `K` kept strides, `Q` reduced strides). With `splits` = 1 it writes the results; with
///   more, each part's partial result (so that few outputs still fill a device), which a
///   second reduction over the parts combines;
/// - matrix product ([`matmul`]): `batches`, `m`, `n`, `k`, then the output (pointer,
///   offset, batch, row and column strides), then the left operand (`m`×`k`) and the right
///   operand (`k`×`n`), each the same way.
///
/// Offsets and strides count elements and may be negative; stride 0 broadcasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The entry point's name (derived from the source, so equal kernels share it).
    pub name: String,
    /// The complete source.
    pub source: String,
    /// Its dialect.
    pub dialect: Dialect,
}

fn index_type(wide: bool, dialect: Dialect) -> &'static str {
    match (wide, dialect) {
        (false, _) => "int",
        (true, Dialect::Cuda) => "long long",
        (true, Dialect::OpenCl) => "long",
    }
}

/// The work-group builtins of a dialect, spelled with the index type `idx`.
struct Group {
    /// The qualifier of group-shared memory.
    local: &'static str,
    /// This thread's position in its group.
    tid: String,
    /// This group's position.
    group: String,
    /// The number of groups.
    groups: String,
    /// A barrier for the group's threads and its shared memory.
    sync: &'static str,
}

impl Group {
    fn of(dialect: Dialect, idx: &str) -> Group {
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
    let uses_double = spec.out == CType::F64
        || spec.leaves.contains(&CType::F64)
        || (spec.ir.nodes.iter()).any(|n| matches!(n, IrNode::Cast(DType::F64, _)));
    match dialect {
        Dialect::OpenCl if uses_double => "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n".into(),
        _ => String::new(),
    }
}

fn signature_start(dialect: Dialect, name: &str) -> String {
    match dialect {
        Dialect::Cuda => format!("extern \"C\" __global__ void {name}("),
        Dialect::OpenCl => format!("__kernel void {name}("),
    }
}

fn pointer(dialect: Dialect, ty: CType, constant: bool) -> String {
    let c = ty.c_name(dialect);
    match (dialect, constant) {
        (Dialect::Cuda, true) => format!("const {c}* __restrict__"),
        (Dialect::Cuda, false) => format!("{c}* __restrict__"),
        (Dialect::OpenCl, true) => format!("__global const {c}*"),
        (Dialect::OpenCl, false) => format!("__global {c}*"),
    }
}

/// Adds `name` (parameter list in `params`) and wraps `body` into a named kernel.
fn finish(spec: &Spec<'_>, dialect: Dialect, kind: &str, params: &[String], body: &str) -> Kernel {
    let key = format!("{kind}|{}|{body}", params.join(","));
    let name = format!("axes_{kind}_{:016x}", fnv(&key));
    let mut source = preamble(spec, dialect);
    source.push_str(&signature_start(dialect, &name));
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
fn coordinate(idx: &str, axis: usize, rest: &str, len: &str) -> String {
    if axis == 0 {
        format!("{idx} c = {rest};")
    } else {
        format!("{idx} c = {rest} % {len}; {rest} /= {len};")
    }
}

/// An elementwise kernel of rank `rank` computing `spec` (see [`Kernel`] for its arguments).
pub fn elementwise(spec: &Spec<'_>, rank: usize, dialect: Dialect) -> Result<Kernel> {
    let idx = index_type(spec.wide, dialect);
    let mut params = vec![format!("{idx} n")];
    params.extend((0..rank).map(|a| format!("{idx} len_{a}")));
    params.push(format!("{} out", pointer(dialect, spec.out, false)));
    params.push(format!("{idx} out_off"));
    params.extend((0..rank).map(|a| format!("{idx} out_s_{a}")));
    for (k, &ty) in spec.leaves.iter().enumerate() {
        params.push(format!("{} in_{k}", pointer(dialect, ty, true)));
        params.push(format!("{idx} in_{k}_off"));
        params.extend((0..rank).map(|a| format!("{idx} in_{k}_s_{a}")));
    }
    let (gid, gsize) = match dialect {
        Dialect::Cuda => (
            format!("({idx})blockIdx.x * blockDim.x + threadIdx.x"),
            format!("({idx})gridDim.x * blockDim.x"),
        ),
        Dialect::OpenCl => (
            format!("({idx})get_global_id(0)"),
            format!("({idx})get_global_size(0)"),
        ),
    };
    let mut body = String::new();
    writeln!(body, "  for ({idx} i = {gid}; i < n; i += {gsize}) {{").unwrap();
    writeln!(body, "    {idx} rest = i;").unwrap();
    writeln!(body, "    {idx} o = out_off;").unwrap();
    for k in 0..spec.leaves.len() {
        writeln!(body, "    {idx} p_{k} = in_{k}_off;").unwrap();
    }
    for a in (0..rank).rev() {
        let c = coordinate(idx, a, "rest", &format!("len_{a}"));
        writeln!(body, "    {{ {c} o += c * out_s_{a};").unwrap();
        for k in 0..spec.leaves.len() {
            writeln!(body, "      p_{k} += c * in_{k}_s_{a};").unwrap();
        }
        writeln!(body, "    }}").unwrap();
    }
    let loads: Vec<String> = (0..spec.leaves.len())
        .map(|k| format!("in_{k}[p_{k}]"))
        .collect();
    let value = emit::expression(spec, dialect, &loads, &mut body, "    ")?;
    writeln!(
        body,
        "    out[o] = {};",
        emit::convert(&value, spec.out, dialect)
    )
    .unwrap();
    body.push_str("  }\n");
    Ok(finish(spec, dialect, &format!("ew{rank}"), &params, &body))
}

/// A reduction kernel over `reduced` axes keeping `kept` axes (see [`Kernel`] for its
/// arguments); launch it with a local size of [`REDUCE_GROUP`].
pub fn reduction(
    spec: &Spec<'_>,
    kept: usize,
    reduced: usize,
    op: ReduceOp,
    dialect: Dialect,
) -> Result<Kernel> {
    let idx = index_type(spec.wide, dialect);
    let acc_type = spec.out;
    let acc = acc_type.c_name(dialect);
    let mut params = vec![
        format!("{idx} m"),
        format!("{idx} r"),
        format!("{idx} splits"),
    ];
    params.extend((0..kept).map(|a| format!("{idx} klen_{a}")));
    params.extend((0..reduced).map(|a| format!("{idx} rlen_{a}")));
    params.push(format!("{} out", pointer(dialect, spec.out, false)));
    params.push(format!("{idx} out_off"));
    params.extend((0..kept).map(|a| format!("{idx} out_s_{a}")));
    params.push(format!("{idx} out_split_s"));
    for (k, &ty) in spec.leaves.iter().enumerate() {
        params.push(format!("{} in_{k}", pointer(dialect, ty, true)));
        params.push(format!("{idx} in_{k}_off"));
        params.extend((0..kept).map(|a| format!("{idx} in_{k}_ks_{a}")));
        params.extend((0..reduced).map(|a| format!("{idx} in_{k}_rs_{a}")));
    }
    let Group {
        local,
        tid,
        group,
        groups,
        sync,
    } = Group::of(dialect, idx);
    let init = emit::identity(op, acc_type, dialect)?;
    let leaves = spec.leaves.len();
    let mut body = String::new();
    writeln!(body, "  {local} {acc} scratch[{REDUCE_GROUP}];").unwrap();
    writeln!(body, "  {idx} tid = {tid};").unwrap();
    writeln!(body, "  {idx} per = (r + splits - 1) / splits;").unwrap();
    writeln!(
        body,
        "  for ({idx} j = {group}; j < m * splits; j += {groups}) {{"
    )
    .unwrap();
    writeln!(body, "    {idx} part = j % splits;").unwrap();
    writeln!(body, "    {idx} rest = j / splits;").unwrap();
    writeln!(body, "    {idx} lo = part * per;").unwrap();
    writeln!(body, "    {idx} hi = lo + per < r ? lo + per : r;").unwrap();
    writeln!(body, "    {idx} o = out_off + part * out_split_s;").unwrap();
    for k in 0..leaves {
        writeln!(body, "    {idx} b_{k} = in_{k}_off;").unwrap();
    }
    for a in (0..kept).rev() {
        let c = coordinate(idx, a, "rest", &format!("klen_{a}"));
        writeln!(body, "    {{ {c} o += c * out_s_{a};").unwrap();
        for k in 0..leaves {
            writeln!(body, "      b_{k} += c * in_{k}_ks_{a};").unwrap();
        }
        writeln!(body, "    }}").unwrap();
    }
    writeln!(body, "    {acc} acc = {init};").unwrap();
    writeln!(
        body,
        "    for ({idx} t = lo + tid; t < hi; t += {REDUCE_GROUP}) {{"
    )
    .unwrap();
    writeln!(body, "      {idx} rr = t;").unwrap();
    for k in 0..leaves {
        writeln!(body, "      {idx} p_{k} = b_{k};").unwrap();
    }
    for a in (0..reduced).rev() {
        let c = coordinate(idx, a, "rr", &format!("rlen_{a}"));
        writeln!(body, "      {{ {c}").unwrap();
        for k in 0..leaves {
            writeln!(body, "        p_{k} += c * in_{k}_rs_{a};").unwrap();
        }
        writeln!(body, "      }}").unwrap();
    }
    let loads: Vec<String> = (0..leaves).map(|k| format!("in_{k}[p_{k}]")).collect();
    let value = emit::expression(spec, dialect, &loads, &mut body, "      ")?;
    let value = emit::convert(&value, acc_type, dialect);
    writeln!(
        body,
        "      acc = {};",
        emit::combine(op, "acc", &value, acc_type, dialect)
    )
    .unwrap();
    body.push_str("    }\n");
    writeln!(body, "    scratch[tid] = acc;").unwrap();
    writeln!(body, "    {sync}").unwrap();
    writeln!(
        body,
        "    for ({idx} s = {}; s > 0; s >>= 1) {{",
        REDUCE_GROUP / 2
    )
    .unwrap();
    writeln!(
        body,
        "      if (tid < s) scratch[tid] = {};",
        emit::combine(op, "scratch[tid]", "scratch[tid + s]", acc_type, dialect)
    )
    .unwrap();
    writeln!(body, "      {sync}").unwrap();
    body.push_str("    }\n");
    writeln!(body, "    if (tid == 0) out[o] = scratch[0];").unwrap();
    writeln!(body, "    {sync}").unwrap();
    body.push_str("  }\n");
    Ok(finish(
        spec,
        dialect,
        &format!("red{kept}x{reduced}{}", op.name()),
        &params,
        &body,
    ))
}

/// The side of the square tiles [`matmul`] works on; launch it with `MATMUL_TILE²` threads
/// per group.
pub const MATMUL_TILE: usize = 16;

/// A batched matrix product `out[b] = left[b] · right[b]` of `ty` elements over any strides
/// (see [`Kernel`] for its arguments): the contraction kernel of devices without a BLAS (and
/// of element types cuBLAS lacks). Each group computes one `MATMUL_TILE`² tile of the output,
/// staging tiles of both operands in local (shared) memory.
pub fn matmul(ty: CType, wide: bool, dialect: Dialect) -> Result<Kernel> {
    if !ty.is_float() {
        return Err(Error::Unsupported {
            what: format!("{ty:?} matrix products on a device"),
        });
    }
    let idx = index_type(wide, dialect);
    let t = ty.c_name(dialect);
    let mut params: Vec<String> = ["batches", "m", "n", "k"]
        .iter()
        .map(|p| format!("{idx} {p}"))
        .collect();
    for (name, constant) in [("out", false), ("lhs", true), ("rhs", true)] {
        params.push(format!("{} {name}", pointer(dialect, ty, constant)));
        for s in ["off", "bs", "rs", "cs"] {
            params.push(format!("{idx} {name}_{s}"));
        }
    }
    let Group {
        local,
        tid,
        group,
        groups,
        sync,
    } = Group::of(dialect, idx);
    let tile = MATMUL_TILE;
    let zero = if ty == CType::F32 { "0.0f" } else { "0.0" };
    let mut body = String::new();
    writeln!(body, "  {local} {t} lt[{tile}][{}];", tile + 1).unwrap();
    writeln!(body, "  {local} {t} rt[{tile}][{}];", tile + 1).unwrap();
    writeln!(body, "  {idx} tid = {tid};").unwrap();
    writeln!(body, "  {idx} ty = tid / {tile}, tx = tid % {tile};").unwrap();
    writeln!(
        body,
        "  {idx} tiles_m = (m + {}) / {tile}, tiles_n = (n + {}) / {tile};",
        tile - 1,
        tile - 1
    )
    .unwrap();
    writeln!(
        body,
        "  for ({idx} g = {group}; g < batches * tiles_m * tiles_n; g += {groups}) {{"
    )
    .unwrap();
    writeln!(
        body,
        "    {idx} b = g / (tiles_m * tiles_n), within = g % (tiles_m * tiles_n);"
    )
    .unwrap();
    writeln!(
        body,
        "    {idx} row = (within / tiles_n) * {tile} + ty, col = (within % tiles_n) * {tile} + tx;"
    )
    .unwrap();
    writeln!(body, "    {t} acc = {zero};").unwrap();
    writeln!(body, "    for ({idx} k0 = 0; k0 < k; k0 += {tile}) {{").unwrap();
    writeln!(
        body,
        "      lt[ty][tx] = (row < m && k0 + tx < k) ? lhs[lhs_off + b * lhs_bs + row * lhs_rs + (k0 + tx) * lhs_cs] : {zero};"
    )
    .unwrap();
    writeln!(
        body,
        "      rt[ty][tx] = (k0 + ty < k && col < n) ? rhs[rhs_off + b * rhs_bs + (k0 + ty) * rhs_rs + col * rhs_cs] : {zero};"
    )
    .unwrap();
    writeln!(body, "      {sync}").unwrap();
    writeln!(
        body,
        "      for (int kk = 0; kk < {tile}; kk++) acc += lt[ty][kk] * rt[kk][tx];"
    )
    .unwrap();
    writeln!(body, "      {sync}").unwrap();
    body.push_str(
        "    }
",
    );
    writeln!(
        body,
        "    if (row < m && col < n) out[out_off + b * out_bs + row * out_rs + col * out_cs] = acc;"
    )
    .unwrap();
    body.push_str(
        "  }
",
    );
    let ir = Ir::default();
    let spec = Spec {
        ir: &ir,
        leaves: &[ty],
        out: ty,
        wide,
    };
    Ok(finish(&spec, dialect, "mm", &params, &body))
}
