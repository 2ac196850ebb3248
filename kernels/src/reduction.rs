//! Reduction kernels: one work-group per output element, its threads striding over the
//! reduced elements, then combining their partial results in a tree in local memory.

use std::fmt::Write;

use axes_core::error::Result;
use axes_core::ir::ReduceOp;

use crate::dialect::{Group, coordinate, finish, index_type, pointer};
use crate::emit;
use crate::{Dialect, Kernel, Spec};

/// The threads of one reduction work-group (block); launch reductions with this local size.
pub const REDUCE_GROUP: usize = 256;

/// The elements each thread of a reduction reads per round, by default
/// ([`ReduceShape::unroll`]).
pub const REDUCE_UNROLL: usize = 4;

/// The elements of one vector read ([`ReduceShape::vectors`]).
pub const REDUCE_VECTOR: usize = 4;

/// What a reduction kernel reduces, and how its threads read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReduceShape {
    /// The axes kept (one result per position).
    pub kept: usize,
    /// The axes reduced.
    pub reduced: usize,
    /// How the elements combine.
    pub op: ReduceOp,
    /// Elements (or vectors) each thread reads a round, [`REDUCE_GROUP`] apart (so that a
    /// group's reads stay consecutive), into as many accumulators, combined in order at the
    /// end: independent loads in flight instead of one chain.
    pub unroll: usize,
    /// Whether each thread reads [`REDUCE_VECTOR`] consecutive elements of every leaf at once
    /// (`float4`): only for one reduced axis and f32 leaves, launched where every leaf's
    /// reduced stride is 1 and its offset and kept strides are multiples of
    /// [`REDUCE_VECTOR`] (each part then starts on a vector); the few elements past the last
    /// whole vector of a part are read one by one.
    pub vectors: bool,
}

/// A reduction kernel of `shape` (see [`Kernel`] for its arguments); launch it with a local
/// size of [`REDUCE_GROUP`].
///
/// ```
/// use axes_core::ir::{Ir, ReduceOp};
/// use axes_kernels::{CType, Dialect, ReduceShape, Spec, reduction};
///
/// let mut ir = Ir::default();
/// ir.leaf();
/// let spec = Spec { ir: &ir, leaves: &[CType::F32], out: CType::F32, wide: false };
/// let shape = ReduceShape { kept: 1, reduced: 1, op: ReduceOp::Sum, unroll: 4, vectors: true };
/// let kernel = reduction(&spec, &shape, Dialect::Cuda)?;
/// assert!(kernel.source.contains("acc_3") && kernel.source.contains("float4"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn reduction(spec: &Spec<'_>, shape: &ReduceShape, dialect: Dialect) -> Result<Kernel> {
    let ReduceShape {
        kept,
        reduced,
        op,
        unroll,
        vectors,
    } = *shape;
    let unroll = unroll.max(1);
    if vectors && (reduced != 1 || spec.leaves.iter().any(|&ty| ty != crate::CType::F32)) {
        return Err(axes_core::Error::Unsupported {
            what: format!(
                "vector reads in a reduction over {reduced} axes of {:?} leaves",
                spec.leaves
            ),
        });
    }
    let idx = index_type(spec.wide, dialect);
    let acc_type = spec.out.compute();
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
    if vectors {
        // Parts of whole vectors, so that each starts on one.
        let v = REDUCE_VECTOR;
        writeln!(
            body,
            "  {idx} per = ((r + splits - 1) / splits + {}) / {v} * {v};",
            v - 1
        )
        .unwrap();
    } else {
        writeln!(body, "  {idx} per = (r + splits - 1) / splits;").unwrap();
    }
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
    for u in 0..unroll {
        writeln!(body, "    {acc} acc_{u} = {init};").unwrap();
    }
    // One element at `rr` (the reduced axes' flat index), or with `component` the
    // component of each leaf's vector read at `rr`, into `accumulator`.
    let element = |body: &mut String, indent: &str, accumulator: &str, component: Option<&str>| {
        let loads: Vec<String> = match component {
            Some(c) => (0..leaves).map(|k| format!("w_{k}.{c}")).collect(),
            None => (spec.leaves.iter().enumerate())
                .map(|(k, &ty)| emit::load(&format!("in_{k}"), &format!("p_{k}"), ty, dialect))
                .collect(),
        };
        let value = emit::expression(spec, dialect, &loads, body, indent)?;
        let value = emit::convert(&value, acc_type, dialect);
        let combined = emit::combine(op, accumulator, &value, acc_type, dialect);
        writeln!(body, "{indent}{accumulator} = {combined};").unwrap();
        Ok::<(), axes_core::Error>(())
    };
    // The positions `p_k` of element `rr` in each leaf.
    let positions = |body: &mut String, indent: &str| {
        for k in 0..leaves {
            writeln!(body, "{indent}{idx} p_{k} = b_{k};").unwrap();
        }
        for a in (0..reduced).rev() {
            let c = coordinate(idx, a, "rr", &format!("rlen_{a}"));
            writeln!(body, "{indent}{{ {c}").unwrap();
            for k in 0..leaves {
                writeln!(body, "{indent}  p_{k} += c * in_{k}_rs_{a};").unwrap();
            }
            writeln!(body, "{indent}}}").unwrap();
        }
    };
    let (step, end) = if vectors {
        // The whole vectors of the part; the elements after them below.
        writeln!(
            body,
            "    {idx} whole = lo + (hi > lo ? (hi - lo) / {REDUCE_VECTOR} * {REDUCE_VECTOR} : 0);"
        )
        .unwrap();
        (REDUCE_VECTOR, "whole")
    } else {
        (1, "hi")
    };
    let stride = REDUCE_GROUP * step;
    writeln!(
        body,
        "    for ({idx} t = lo + tid * {step}; t < {end}; t += {}) {{",
        stride * unroll
    )
    .unwrap();
    for u in 0..unroll {
        // The first element of a round is below `end` by the loop's test.
        let guard = if u == 0 {
            String::new()
        } else {
            format!("if (t + {} < {end}) ", u * stride)
        };
        writeln!(body, "      {guard}{{").unwrap();
        writeln!(body, "        {idx} rr = t + {};", u * stride).unwrap();
        positions(&mut body, "        ");
        let accumulator = format!("acc_{u}");
        if vectors {
            for k in 0..leaves {
                let read = match dialect {
                    Dialect::Cuda => format!("*(const float4*)(in_{k} + p_{k})"),
                    Dialect::OpenCl => format!("vload4(0, in_{k} + p_{k})"),
                };
                writeln!(body, "        float4 w_{k} = {read};").unwrap();
            }
            for c in ["x", "y", "z", "w"] {
                writeln!(body, "        {{").unwrap();
                element(&mut body, "          ", &accumulator, Some(c))?;
                writeln!(body, "        }}").unwrap();
            }
        } else {
            element(&mut body, "        ", &accumulator, None)?;
        }
        writeln!(body, "      }}").unwrap();
    }
    body.push_str("    }\n");
    if vectors {
        writeln!(body, "    if (whole + tid < hi) {{").unwrap();
        writeln!(body, "      {idx} rr = whole + tid;").unwrap();
        positions(&mut body, "      ");
        element(&mut body, "      ", "acc_0", None)?;
        writeln!(body, "    }}").unwrap();
    }
    for u in 1..unroll {
        let combined = emit::combine(op, "acc_0", &format!("acc_{u}"), acc_type, dialect);
        writeln!(body, "    acc_0 = {combined};").unwrap();
    }
    writeln!(body, "    scratch[tid] = acc_0;").unwrap();
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
    let store = emit::store("out", "o", "scratch[0]", spec.out, dialect);
    writeln!(body, "    if (tid == 0) {store}").unwrap();
    writeln!(body, "    {sync}").unwrap();
    body.push_str("  }\n");
    Ok(finish(
        spec,
        dialect,
        &format!(
            "red{kept}x{reduced}{}u{unroll}{}",
            op.name(),
            if vectors { "v" } else { "" }
        ),
        &params,
        &body,
    ))
}
