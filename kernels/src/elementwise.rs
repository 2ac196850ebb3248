//! Element-wise kernels: `out[i] = f(leaves[i])` over any strides, one result or several.

use std::fmt::Write;

use axes_core::error::Result;

use crate::dialect::{coordinate, finish_bounded, index_type, pointer};
use crate::emit;
use crate::tiled::{self, Tiling};
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
    outputs_kernel(spec, roots, None, rank, None, dialect)
}

/// An elementwise kernel of rank `rank` writing the value of each of the IR nodes `roots`
/// over the elements of leaf `over[j]` in place, in one pass: every leaf is loaded before
/// any value is stored, and a written leaf is read only at the positions it is written, so
/// each element is read and then overwritten by one work item. Its arguments are those of
/// [`elementwise`] without an output; the written leaves' pointers are not `const`. How an
/// optimizer updates parameters and moments in buffers that never change.
///
/// ```
/// use axes_core::ir::{BinaryOp, Ir, IrNode};
/// use axes_kernels::{CType, Dialect, Spec, elementwise_in_place};
///
/// // m = 0.9 m + g, written over m
/// let mut ir = Ir::default();
/// let (m, g) = (ir.leaf(), ir.leaf());
/// let decay = ir.push(IrNode::Scalar(0.9));
/// let kept = ir.push(IrNode::Binary(BinaryOp::Mul, decay, m));
/// let next_m = ir.push(IrNode::Binary(BinaryOp::Add, kept, g));
/// let spec = Spec { ir: &ir, leaves: &[CType::F32; 2], out: CType::F32, wide: false };
/// let kernel = elementwise_in_place(&spec, &[next_m], &[0], 1, Dialect::Cuda)?;
/// assert!(kernel.source.contains("in_0[p_0] =") && !kernel.source.contains("out_0"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn elementwise_in_place(
    spec: &Spec<'_>,
    roots: &[usize],
    over: &[usize],
    rank: usize,
    dialect: Dialect,
) -> Result<Kernel> {
    check_over(spec, roots, over)?;
    outputs_kernel(spec, roots, Some(over), rank, None, dialect)
}

/// An elementwise kernel of rank `rank` ≥ 2 that writes the results of [`elementwise`]
/// (`roots` empty), [`elementwise_outputs`] (the nodes `roots`) or, with `over`,
/// [`elementwise_in_place`], with the same arguments, in tiles of the last two axes
/// ([`Tile`](crate::Tile)): the leaves `tiling.staged` — those whose fastest axis is the second-to-last
/// while the results' is the last — are read through local memory along their own fastest
/// axis, so that no global read or write strides. Launch it over
/// [`Tile::groups`](crate::Tile::groups) work-groups (or fewer: groups loop over the tiles)
/// of [`Tile::threads`](crate::Tile::threads) threads.
///
/// ```
/// use axes_core::ir::{BinaryOp, Ir, IrNode};
/// use axes_kernels::{CType, Dialect, Spec, Tile, Tiling, elementwise_tiled};
///
/// // x + yᵀ: leaf 1 runs along the second-to-last axis
/// let mut ir = Ir::default();
/// let (x, y) = (ir.leaf(), ir.leaf());
/// ir.push(IrNode::Binary(BinaryOp::Add, x, y));
/// let spec = Spec { ir: &ir, leaves: &[CType::F32; 2], out: CType::F32, wide: false };
/// let tiling = Tiling { staged: &[1], tile: Tile::DEFAULT };
/// let kernel = elementwise_tiled(&spec, &[], None, 2, &tiling, Dialect::OpenCl)?;
/// assert!(kernel.source.contains("__local float tile_1[32][33];"));
/// // In CUDA the kernel names its block of 32 × 8 threads, so its registers fit one.
/// let kernel = elementwise_tiled(&spec, &[], None, 2, &tiling, Dialect::Cuda)?;
/// assert!(kernel.source.contains("__launch_bounds__(256)"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn elementwise_tiled(
    spec: &Spec<'_>,
    roots: &[usize],
    over: Option<&[usize]>,
    rank: usize,
    tiling: &Tiling<'_>,
    dialect: Dialect,
) -> Result<Kernel> {
    let root = [spec.ir.nodes.len().saturating_sub(1)];
    let roots = if roots.is_empty() { &root[..] } else { roots };
    if let Some(over) = over {
        check_over(spec, roots, over)?;
    }
    outputs_kernel(spec, roots, over, rank, Some(tiling), dialect)
}

/// Why results cannot be written over the leaves `over`, if they cannot.
fn check_over(spec: &Spec<'_>, roots: &[usize], over: &[usize]) -> Result<()> {
    if over.len() != roots.len() || over.iter().any(|&k| k >= spec.leaves.len()) {
        return Err(axes_core::Error::Unsupported {
            what: format!(
                "{} results written over leaves {over:?} of {}",
                roots.len(),
                spec.leaves.len()
            ),
        });
    }
    if over.iter().any(|&k| spec.leaves[k] != spec.out) {
        return Err(axes_core::Error::Unsupported {
            what: "a result written in place over a leaf of another element type".into(),
        });
    }
    Ok(())
}

/// [`elementwise_outputs`], or with `over` [`elementwise_in_place`]; in tiles with `tiling`.
fn outputs_kernel(
    spec: &Spec<'_>,
    roots: &[usize],
    over: Option<&[usize]>,
    rank: usize,
    tiling: Option<&Tiling<'_>>,
    dialect: Dialect,
) -> Result<Kernel> {
    let idx = index_type(spec.wide, dialect);
    let mut params = vec![format!("{idx} n")];
    params.extend((0..rank).map(|a| format!("{idx} len_{a}")));
    let outputs = if over.is_some() { 0 } else { roots.len() };
    for j in 0..outputs {
        params.push(format!("{} out_{j}", pointer(dialect, spec.out, false)));
        params.push(format!("{idx} out_{j}_off"));
        params.extend((0..rank).map(|a| format!("{idx} out_{j}_s_{a}")));
    }
    for (k, &ty) in spec.leaves.iter().enumerate() {
        let written = over.is_some_and(|over| over.contains(&k));
        params.push(format!("{} in_{k}", pointer(dialect, ty, !written)));
        params.push(format!("{idx} in_{k}_off"));
        params.extend((0..rank).map(|a| format!("{idx} in_{k}_s_{a}")));
    }
    let kind = match (over, roots.len()) {
        (Some(_), outputs) => format!("ew{rank}i{outputs}"),
        (None, 1) => format!("ew{rank}"),
        (None, outputs) => format!("ew{rank}x{outputs}"),
    };
    let body = match tiling {
        Some(tiling) => tiled::body(spec, roots, over, rank, tiling, idx, dialect)?,
        None => flat_body(spec, roots, over, rank, idx, dialect)?,
    };
    let kind = if tiling.is_some() {
        format!("{kind}t")
    } else {
        kind
    };
    let threads = tiling.map(|tiling| tiling.tile.threads());
    Ok(finish_bounded(
        spec, dialect, &kind, &params, &body, threads,
    ))
}

/// The body of an elementwise kernel that is not tiled: a loop over the flat index, each
/// work item computing the elements a grid's stride apart.
fn flat_body(
    spec: &Spec<'_>,
    roots: &[usize],
    over: Option<&[usize]>,
    rank: usize,
    idx: &str,
    dialect: Dialect,
) -> Result<String> {
    let outputs = if over.is_some() { 0 } else { roots.len() };
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
    for j in 0..outputs {
        writeln!(body, "    {idx} o_{j} = out_{j}_off;").unwrap();
    }
    for k in 0..spec.leaves.len() {
        writeln!(body, "    {idx} p_{k} = in_{k}_off;").unwrap();
    }
    for a in (0..rank).rev() {
        let c = coordinate(idx, a, "rest", &format!("len_{a}"));
        writeln!(body, "    {{ {c}").unwrap();
        for j in 0..outputs {
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
    // Every value is held in a variable before the first store (see `emit::expressions`),
    // so no store can reach a load of the same iteration.
    for (j, value) in values.iter().enumerate() {
        let (array, index) = match over {
            Some(over) => (format!("in_{}", over[j]), format!("p_{}", over[j])),
            None => (format!("out_{j}"), format!("o_{j}")),
        };
        let store = emit::store(&array, &index, value, spec.out, dialect);
        writeln!(body, "    {store}").unwrap();
    }
    body.push_str("  }\n");
    Ok(body)
}
