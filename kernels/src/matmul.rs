//! The tiled matrix-product kernel, for devices without a BLAS and element types cuBLAS lacks.

use std::fmt::Write;

use axes_core::error::{Error, Result};
use axes_core::ir::Ir;

use crate::dialect::{Group, finish, index_type, pointer};
use crate::{CType, Dialect, Kernel, Spec, emit};

/// The elements of the contracted axis a group stages per round.
const DEPTH: usize = 16;

/// The square of outputs one group of a [`matmul`] kernel computes: `side`² outputs, a
/// `per_thread`² block of them per thread (in registers), so a group has
/// [`threads`](MatmulTile::threads) threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulTile {
    /// Rows (and columns) of outputs per group.
    pub side: usize,
    /// Rows (and columns) of outputs per thread.
    pub per_thread: usize,
}

impl MatmulTile {
    /// 16 × 16 outputs, one a thread: products with a side shorter than [`LARGE`](Self::LARGE)'s.
    pub const SMALL: MatmulTile = MatmulTile {
        side: 16,
        per_thread: 1,
    };
    /// 64 × 64 outputs, 4 × 4 a thread: each element read from local memory serves four
    /// products instead of one.
    pub const LARGE: MatmulTile = MatmulTile {
        side: 64,
        per_thread: 4,
    };

    /// The tile for an `m` × `n` product (of any contracted length and batch count).
    ///
    /// ```
    /// use axes_kernels::MatmulTile;
    /// assert_eq!(MatmulTile::for_product(4096, 128), MatmulTile::LARGE);
    /// assert_eq!(MatmulTile::for_product(4096, 10), MatmulTile::SMALL);
    /// ```
    pub fn for_product(m: usize, n: usize) -> MatmulTile {
        let large = MatmulTile::LARGE.side;
        if m >= large && n >= large {
            MatmulTile::LARGE
        } else {
            MatmulTile::SMALL
        }
    }

    /// The threads of one group.
    pub fn threads(self) -> usize {
        (self.side / self.per_thread).pow(2)
    }

    /// The groups a `batches` × `m` × `n` product is cut into.
    pub fn groups(self, batches: usize, m: usize, n: usize) -> usize {
        batches * m.div_ceil(self.side) * n.div_ceil(self.side)
    }
}

/// A batched matrix product `out[b] = left[b] · right[b]` of `ty` elements over any strides
/// (see [`Kernel`] for its arguments): the contraction kernel of devices without a BLAS (and
/// of element types cuBLAS lacks). Each group computes `tile`'s square of the output, staging
/// a slice of both operands' rows and columns in local (shared) memory per round; thread
/// `(ty, tx)` of a group computes the outputs at rows `ty + i·s` and columns `tx + j·s`
/// of the square (`s` threads a side), so neighbouring threads read neighbouring elements.
/// Launch it with [`MatmulTile::threads`] threads per group.
///
/// ```
/// use axes_kernels::{CType, Dialect, MatmulTile, matmul};
/// let kernel = matmul(CType::F32, false, MatmulTile::LARGE, Dialect::OpenCl)?;
/// assert!(kernel.name.starts_with("axes_mm64x4_") && kernel.source.contains("acc3_3"));
/// // A thread's block must divide the group's square.
/// let uneven = MatmulTile { side: 64, per_thread: 3 };
/// assert!(matmul(CType::F32, false, uneven, Dialect::Cuda).is_err());
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn matmul(ty: CType, wide: bool, tile: MatmulTile, dialect: Dialect) -> Result<Kernel> {
    if !ty.is_float() {
        return Err(Error::Unsupported {
            what: format!("{ty:?} matrix products on a device"),
        });
    }
    let MatmulTile { side, per_thread } = tile;
    if per_thread == 0
        || side == 0
        || !side.is_multiple_of(per_thread)
        || !(DEPTH * side).is_multiple_of(tile.threads())
    {
        return Err(Error::Unsupported {
            what: format!("a matrix-product tile of {side} with {per_thread} a thread"),
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
    let threads = tile.threads();
    let across = side / per_thread;
    let zero = if ty.compute() == CType::F32 {
        "0.0f"
    } else {
        "0.0"
    };
    let lhs = emit::load(
        "lhs",
        "lhs_off + b * lhs_bs + (row0 + r) * lhs_rs + (k0 + kk) * lhs_cs",
        ty,
        dialect,
    );
    let rhs = emit::load(
        "rhs",
        "rhs_off + b * rhs_bs + (k0 + kc) * rhs_rs + (col0 + c) * rhs_cs",
        ty,
        dialect,
    );
    let mut body = String::new();
    // Both staged slices are kept contracted-axis first, padded against bank conflicts.
    writeln!(body, "  {local} {t} lt[{DEPTH}][{}];", side + 1).unwrap();
    writeln!(body, "  {local} {t} rt[{DEPTH}][{}];", side + 1).unwrap();
    writeln!(body, "  {idx} tid = {tid};").unwrap();
    writeln!(body, "  {idx} ty = tid / {across}, tx = tid % {across};").unwrap();
    writeln!(
        body,
        "  {idx} tiles_m = (m + {}) / {side}, tiles_n = (n + {}) / {side};",
        side - 1,
        side - 1
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
        "    {idx} row0 = (within / tiles_n) * {side}, col0 = (within % tiles_n) * {side};"
    )
    .unwrap();
    let blocks = || (0..per_thread).flat_map(|i| (0..per_thread).map(move |j| (i, j)));
    for (i, j) in blocks() {
        writeln!(body, "    {t} acc{i}_{j} = {zero};").unwrap();
    }
    writeln!(body, "    for ({idx} k0 = 0; k0 < k; k0 += {DEPTH}) {{").unwrap();
    for round in 0..DEPTH * side / threads {
        let e = format!("tid + {}", round * threads);
        // Neighbouring threads read the left operand along the contracted axis, the right
        // one along a row.
        writeln!(
            body,
            "      {{
        {idx} kk = ({e}) % {DEPTH}, r = ({e}) / {DEPTH};
        lt[kk][r] = (row0 + r < m && k0 + kk < k) ? {lhs} : {zero};
        {idx} c = ({e}) % {side}, kc = ({e}) / {side};
        rt[kc][c] = (k0 + kc < k && col0 + c < n) ? {rhs} : {zero};
      }}"
        )
        .unwrap();
    }
    writeln!(body, "      {sync}").unwrap();
    writeln!(body, "      for (int kk = 0; kk < {DEPTH}; kk++) {{").unwrap();
    for i in 0..per_thread {
        writeln!(body, "        {t} a{i} = lt[kk][ty + {}];", i * across).unwrap();
    }
    for j in 0..per_thread {
        writeln!(body, "        {t} b{j} = rt[kk][tx + {}];", j * across).unwrap();
    }
    for (i, j) in blocks() {
        writeln!(body, "        acc{i}_{j} += a{i} * b{j};").unwrap();
    }
    writeln!(body, "      }}").unwrap();
    writeln!(body, "      {sync}").unwrap();
    writeln!(body, "    }}").unwrap();
    for (i, j) in blocks() {
        let (row, col) = (
            format!("row0 + ty + {}", i * across),
            format!("col0 + tx + {}", j * across),
        );
        let store = emit::store(
            "out",
            &format!("out_off + b * out_bs + ({row}) * out_rs + ({col}) * out_cs"),
            &format!("acc{i}_{j}"),
            ty,
            dialect,
        );
        writeln!(body, "    if ({row} < m && {col} < n) {store}").unwrap();
    }
    writeln!(body, "  }}").unwrap();
    let ir = Ir::default();
    let spec = Spec {
        ir: &ir,
        leaves: &[ty],
        out: ty,
        wide,
    };
    let name = format!("mm{side}x{per_thread}");
    Ok(finish(&spec, dialect, &name, &params, &body))
}
