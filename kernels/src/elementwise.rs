//! Element-wise kernels: `out[i] = f(leaves[i])` over any strides.

use std::fmt::Write;

use axes_core::error::Result;

use crate::dialect::{coordinate, finish, index_type, pointer};
use crate::emit;
use crate::{Dialect, Kernel, Spec};

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
