//! The tiled matrix-product kernel, for devices without a BLAS and element types cuBLAS lacks.

use std::fmt::Write;

use axes_core::error::{Error, Result};
use axes_core::ir::Ir;

use crate::dialect::{Group, finish, index_type, pointer};
use crate::{CType, Dialect, Kernel, Spec, emit};

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
    let zero = if ty.compute() == CType::F32 {
        "0.0f"
    } else {
        "0.0"
    };
    let lhs = emit::load(
        "lhs",
        "lhs_off + b * lhs_bs + row * lhs_rs + (k0 + tx) * lhs_cs",
        ty,
        dialect,
    );
    let rhs = emit::load(
        "rhs",
        "rhs_off + b * rhs_bs + (k0 + ty) * rhs_rs + col * rhs_cs",
        ty,
        dialect,
    );
    let out = emit::store(
        "out",
        "out_off + b * out_bs + row * out_rs + col * out_cs",
        "acc",
        ty,
        dialect,
    );
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
        "      lt[ty][tx] = (row < m && k0 + tx < k) ? {lhs} : {zero};"
    )
    .unwrap();
    writeln!(
        body,
        "      rt[ty][tx] = (k0 + ty < k && col < n) ? {rhs} : {zero};"
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
    writeln!(body, "    if (row < m && col < n) {out}").unwrap();
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
