//! Element-wise kernels: `out[i] = f(leaves[i])` over any strides, one result or several.

use std::fmt::Write;

use axes_core::error::Result;

use crate::dialect::{coordinate, finish, index_type, pointer};
use crate::emit;
use crate::{Dialect, Kernel, Spec};

/// An elementwise kernel of rank `rank` computing `spec` (see [`Kernel`] for its arguments).
pub fn elementwise(spec: &Spec<'_>, rank: usize, dialect: Dialect) -> Result<Kernel> {
    let root = spec.ir.nodes.len().saturating_sub(1);
    elementwise_outputs(spec, &[root], rank, dialect)
}

/// An elementwise kernel of rank `rank` writing the value of each of the IR nodes `roots`
/// into an output of its own, all of `spec.out`'s type, in one pass (nodes the results
/// share are computed once): how an optimizer updates parameters and moments in one launch.
/// Its arguments are those of [`elementwise`] with one output (pointer, offset, strides) per
/// root, in order.
///
/// ```
/// use axes_core::ir::{BinaryOp, Ir, IrNode};
/// use axes_kernels::{CType, Dialect, Spec, elementwise_outputs};
///
/// // m = 0.9 m + g, and p - m
/// let mut ir = Ir::default();
/// let (p, m, g) = (ir.leaf(), ir.leaf(), ir.leaf());
/// let decay = ir.push(IrNode::Scalar(0.9));
/// let kept = ir.push(IrNode::Binary(BinaryOp::Mul, decay, m));
/// let next_m = ir.push(IrNode::Binary(BinaryOp::Add, kept, g));
/// let next_p = ir.push(IrNode::Binary(BinaryOp::Sub, p, next_m));
/// let spec = Spec { ir: &ir, leaves: &[CType::F32; 3], out: CType::F32, wide: false };
/// let kernel = elementwise_outputs(&spec, &[next_p, next_m], 1, Dialect::OpenCl)?;
/// assert!(kernel.source.contains("out_0[o_0] =") && kernel.source.contains("out_1[o_1] ="));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn elementwise_outputs(
    spec: &Spec<'_>,
    roots: &[usize],
    rank: usize,
    dialect: Dialect,
) -> Result<Kernel> {
    let idx = index_type(spec.wide, dialect);
    let mut params = vec![format!("{idx} n")];
    params.extend((0..rank).map(|a| format!("{idx} len_{a}")));
    for j in 0..roots.len() {
        params.push(format!("{} out_{j}", pointer(dialect, spec.out, false)));
        params.push(format!("{idx} out_{j}_off"));
        params.extend((0..rank).map(|a| format!("{idx} out_{j}_s_{a}")));
    }
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
    for j in 0..roots.len() {
        writeln!(body, "    {idx} o_{j} = out_{j}_off;").unwrap();
    }
    for k in 0..spec.leaves.len() {
        writeln!(body, "    {idx} p_{k} = in_{k}_off;").unwrap();
    }
    for a in (0..rank).rev() {
        let c = coordinate(idx, a, "rest", &format!("len_{a}"));
        writeln!(body, "    {{ {c}").unwrap();
        for j in 0..roots.len() {
            writeln!(body, "      o_{j} += c * out_{j}_s_{a};").unwrap();
        }
        for k in 0..spec.leaves.len() {
            writeln!(body, "      p_{k} += c * in_{k}_s_{a};").unwrap();
        }
        writeln!(body, "    }}").unwrap();
    }
    let loads: Vec<String> = (spec.leaves.iter().enumerate())
        .map(|(k, &ty)| emit::load(&format!("in_{k}"), &format!("p_{k}"), ty, dialect))
        .collect();
    let values = emit::expressions(spec, roots, dialect, &loads, &mut body, "    ")?;
    for (j, value) in values.iter().enumerate() {
        let store = emit::store(
            &format!("out_{j}"),
            &format!("o_{j}"),
            value,
            spec.out,
            dialect,
        );
        writeln!(body, "    {store}").unwrap();
    }
    body.push_str("  }\n");
    let kind = match roots.len() {
        1 => format!("ew{rank}"),
        outputs => format!("ew{rank}x{outputs}"),
    };
    Ok(finish(spec, dialect, &kind, &params, &body))
}
