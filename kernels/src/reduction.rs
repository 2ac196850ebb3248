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
/// ([`reduction`]'s `unroll`).
pub const REDUCE_UNROLL: usize = 4;

/// A reduction kernel over `reduced` axes keeping `kept` axes (see [`Kernel`] for its
/// arguments); launch it with a local size of [`REDUCE_GROUP`]. Each thread reads `unroll`
/// elements a round, [`REDUCE_GROUP`] apart (so that a group's reads stay consecutive), into
/// as many accumulators, which it combines in order at the end: independent loads in flight
/// instead of one chain.
///
/// ```
/// use axes_core::ir::{Ir, ReduceOp};
/// use axes_kernels::{CType, Dialect, Spec, reduction};
///
/// let mut ir = Ir::default();
/// ir.leaf();
/// let spec = Spec { ir: &ir, leaves: &[CType::F32], out: CType::F32, wide: false };
/// let kernel = reduction(&spec, 1, 1, ReduceOp::Sum, 4, Dialect::Cuda)?;
/// assert!(kernel.source.contains("acc_3"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn reduction(
    spec: &Spec<'_>,
    kept: usize,
    reduced: usize,
    op: ReduceOp,
    unroll: usize,
    dialect: Dialect,
) -> Result<Kernel> {
    let unroll = unroll.max(1);
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
    for u in 0..unroll {
        writeln!(body, "    {acc} acc_{u} = {init};").unwrap();
    }
    writeln!(
        body,
        "    for ({idx} t = lo + tid; t < hi; t += {}) {{",
        REDUCE_GROUP * unroll
    )
    .unwrap();
    for u in 0..unroll {
        // The first element of a round is below `hi` by the loop's test.
        let guard = if u == 0 {
            String::new()
        } else {
            format!("if (t + {} < hi) ", u * REDUCE_GROUP)
        };
        writeln!(body, "      {guard}{{").unwrap();
        writeln!(body, "        {idx} rr = t + {};", u * REDUCE_GROUP).unwrap();
        for k in 0..leaves {
            writeln!(body, "        {idx} p_{k} = b_{k};").unwrap();
        }
        for a in (0..reduced).rev() {
            let c = coordinate(idx, a, "rr", &format!("rlen_{a}"));
            writeln!(body, "        {{ {c}").unwrap();
            for k in 0..leaves {
                writeln!(body, "          p_{k} += c * in_{k}_rs_{a};").unwrap();
            }
            writeln!(body, "        }}").unwrap();
        }
        let loads: Vec<String> = (spec.leaves.iter().enumerate())
            .map(|(k, &ty)| emit::load(&format!("in_{k}"), &format!("p_{k}"), ty, dialect))
            .collect();
        let value = emit::expression(spec, dialect, &loads, &mut body, "        ")?;
        let value = emit::convert(&value, acc_type, dialect);
        let accumulator = format!("acc_{u}");
        writeln!(
            body,
            "        {accumulator} = {};",
            emit::combine(op, &accumulator, &value, acc_type, dialect)
        )
        .unwrap();
        writeln!(body, "      }}").unwrap();
    }
    body.push_str("    }\n");
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
        &format!("red{kept}x{reduced}{}u{unroll}", op.name()),
        &params,
        &body,
    ))
}
