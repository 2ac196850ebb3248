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

pub(crate) fn pointer(dialect: Dialect, ty: CType, constant: bool) -> String {
    let c = ty.c_name(dialect);
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
pub(crate) fn coordinate(idx: &str, axis: usize, rest: &str, len: &str) -> String {
    if axis == 0 {
        format!("{idx} c = {rest};")
    } else {
        format!("{idx} c = {rest} % {len}; {rest} /= {len};")
    }
}
