//! Element-wise kernels whose operands disagree on their fastest axis: the two innermost
//! axes are cut into square tiles, and the operands that run along the other one are read
//! into local (shared) memory along their own fastest axis first, so that every global read
//! and write of a tile is consecutive (coalesced) — a transposed add otherwise reads or
//! writes with a stride and runs at a fraction of the device's bandwidth.
//!
//! What enters a tiled kernel's source besides the expression: which leaves are staged and
//! the tile's shape. The two tiled axes are always the last two (the planner orders a job's
//! axes so), and lengths and strides are arguments, so one kernel serves every pair of axes,
//! every length and every layout that stages the same leaves — a handful of variants per
//! expression at most, usually one.

use std::fmt::Write;

use axes_core::error::{Error, Result};

use crate::dialect::{Group, coordinate};
use crate::emit;
use crate::{Dialect, Spec};

/// How a tiled element-wise kernel cuts its two innermost axes: tiles of `side` × `side`
/// elements, each computed by a work-group of `side` × `rows` threads (each thread takes
/// `side / rows` elements of a column of the tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Elements along each side of a tile.
    pub side: usize,
    /// Rows of threads in a work-group; the group has `side * rows` threads.
    pub rows: usize,
}

impl Tile {
    /// 32 × 32 tiles by groups of 32 × 8 threads: a warp reads one row of a tile.
    pub const DEFAULT: Tile = Tile { side: 32, rows: 8 };

    /// The threads of one work-group: launch tiled kernels with this local size.
    pub fn threads(self) -> usize {
        self.side * self.rows
    }

    /// The bytes of local memory a kernel staging operands of `sizes` bytes an element takes
    /// (each tile padded by a column, so that reading it across does not hit one bank).
    pub fn local_bytes(self, sizes: impl IntoIterator<Item = usize>) -> usize {
        sizes.into_iter().sum::<usize>() * self.side * (self.side + 1)
    }

    /// The work-groups (tiles) a kernel over `lens` runs, the last two axes tiled.
    pub fn groups(self, lens: &[usize]) -> usize {
        match lens {
            [outer @ .., down, across] => {
                outer.iter().product::<usize>()
                    * down.div_ceil(self.side)
                    * across.div_ceil(self.side)
            }
            _ => 0,
        }
    }
}

/// A tiled kernel's shape: its tiles, and the leaves it stages through local memory (those
/// whose fastest axis is the second-to-last).
#[derive(Clone, Copy, Debug)]
pub struct Tiling<'a> {
    /// The leaves read through local memory, by position.
    pub staged: &'a [usize],
    /// The tiles' size and their groups' threads.
    pub tile: Tile,
}

/// The body of a tiled kernel of rank `rank` ≥ 2 (see [`crate::elementwise_tiled`]): the
/// statements inside the kernel's braces. The results of `roots` are written to `out_j`, or
/// over the leaves `over` when given.
pub(crate) fn body(
    spec: &Spec<'_>,
    roots: &[usize],
    over: Option<&[usize]>,
    rank: usize,
    tiling: &Tiling<'_>,
    idx: &str,
    dialect: Dialect,
) -> Result<String> {
    let Tiling { staged, tile } = *tiling;
    let unsupported = |what: String| Err(Error::Unsupported { what });
    if rank < 2 || tile.side == 0 || tile.rows == 0 || tile.rows > tile.side {
        return unsupported(format!(
            "a tiled kernel of rank {rank} with tiles of {} by {} threads",
            tile.side, tile.rows
        ));
    }
    if let Some(&k) = (staged.iter()).find(|&&k| k >= spec.leaves.len()) {
        return unsupported(format!(
            "leaf {k} staged in a kernel of {} leaves",
            spec.leaves.len()
        ));
    }
    if let Some(over) = over
        && over.iter().any(|k| staged.contains(k))
    {
        return unsupported("a tiled kernel writing over a leaf it stages".into());
    }
    let Group {
        local,
        tid,
        group,
        groups,
        sync,
    } = Group::of(dialect, idx);
    let (side, rows) = (tile.side, tile.rows);
    // The tile's axes: `a` (the last, along which the results are written) and `b`.
    let (a, b) = (rank - 1, rank - 2);
    let outputs = if over.is_some() { 0 } else { roots.len() };
    let leaves = spec.leaves.len();
    let mut body = String::new();
    for &k in staged {
        let ty = spec.leaves[k].compute().c_name(dialect);
        writeln!(body, "  {local} {ty} tile_{k}[{side}][{}];", side + 1).unwrap();
    }
    writeln!(body, "  {idx} tid = {tid};").unwrap();
    writeln!(body, "  {idx} tx = tid % {side};").unwrap();
    writeln!(body, "  {idx} ty = tid / {side};").unwrap();
    writeln!(body, "  {idx} across = (len_{a} + {}) / {side};", side - 1).unwrap();
    writeln!(body, "  {idx} down = (len_{b} + {}) / {side};", side - 1).unwrap();
    writeln!(
        body,
        "  {idx} tiles = n / (len_{a} * len_{b}) * across * down;"
    )
    .unwrap();
    writeln!(
        body,
        "  for ({idx} t = {group}; t < tiles; t += {groups}) {{"
    )
    .unwrap();
    writeln!(body, "    {idx} rest = t;").unwrap();
    writeln!(
        body,
        "    {idx} a0 = rest % across * {side}; rest /= across;"
    )
    .unwrap();
    writeln!(body, "    {idx} b0 = rest % down * {side}; rest /= down;").unwrap();
    for j in 0..outputs {
        writeln!(body, "    {idx} o_{j} = out_{j}_off;").unwrap();
    }
    for k in 0..leaves {
        writeln!(body, "    {idx} p_{k} = in_{k}_off;").unwrap();
    }
    for axis in (0..rank - 2).rev() {
        let c = coordinate(idx, axis, "rest", &format!("len_{axis}"));
        writeln!(body, "    {{ {c}").unwrap();
        for j in 0..outputs {
            writeln!(body, "      o_{j} += c * out_{j}_s_{axis};").unwrap();
        }
        for k in 0..leaves {
            writeln!(body, "      p_{k} += c * in_{k}_s_{axis};").unwrap();
        }
        writeln!(body, "    }}").unwrap();
    }
    // The staged leaves, read along `b` (their fastest axis): thread (tx, ty) reads column
    // tx of rows ty, ty + rows, …, and stores them transposed.
    let bounds = "ca < len_A && cb < len_B"
        .replace("len_A", &format!("len_{a}"))
        .replace("len_B", &format!("len_{b}"));
    let rows_loop = format!("for ({idx} r = ty; r < {side}; r += {rows})");
    if !staged.is_empty() {
        writeln!(body, "    {rows_loop} {{").unwrap();
        writeln!(body, "      {idx} ca = a0 + r, cb = b0 + tx;").unwrap();
        writeln!(body, "      if ({bounds}) {{").unwrap();
        for &k in staged {
            let at = format!("p_{k} + ca * in_{k}_s_{a} + cb * in_{k}_s_{b}");
            let value = emit::load(&format!("in_{k}"), &at, spec.leaves[k], dialect);
            writeln!(body, "        tile_{k}[r][tx] = {value};").unwrap();
        }
        writeln!(body, "      }}").unwrap();
        writeln!(body, "    }}").unwrap();
        writeln!(body, "    {sync}").unwrap();
    }
    // The results, computed and written along `a`: thread (tx, ty) takes row tx of columns
    // ty, ty + rows, …
    writeln!(body, "    {rows_loop} {{").unwrap();
    writeln!(body, "      {idx} ca = a0 + tx, cb = b0 + r;").unwrap();
    writeln!(body, "      if ({bounds}) {{").unwrap();
    let at =
        |base: &str, strides: &str| format!("{base} + ca * {strides}_s_{a} + cb * {strides}_s_{b}");
    for j in 0..outputs {
        writeln!(
            body,
            "        {idx} w_{j} = {};",
            at(&format!("o_{j}"), &format!("out_{j}"))
        )
        .unwrap();
    }
    let mut loads = Vec::with_capacity(leaves);
    for (k, &ty) in spec.leaves.iter().enumerate() {
        if staged.contains(&k) {
            loads.push(format!("tile_{k}[tx][r]"));
        } else {
            let position = at(&format!("p_{k}"), &format!("in_{k}"));
            writeln!(body, "        {idx} q_{k} = {position};").unwrap();
            loads.push(emit::load(
                &format!("in_{k}"),
                &format!("q_{k}"),
                ty,
                dialect,
            ));
        }
    }
    let values = emit::expressions(spec, roots, dialect, &loads, &mut body, "        ")?;
    for (j, value) in values.iter().enumerate() {
        let (array, index) = match over {
            Some(over) => (format!("in_{}", over[j]), format!("q_{}", over[j])),
            None => (format!("out_{j}"), format!("w_{j}")),
        };
        let store = emit::store(&array, &index, value, spec.out, dialect);
        writeln!(body, "        {store}").unwrap();
    }
    writeln!(body, "      }}").unwrap();
    writeln!(body, "    }}").unwrap();
    if !staged.is_empty() {
        // No thread stages the next tile before every thread has read this one.
        writeln!(body, "    {sync}").unwrap();
    }
    body.push_str("  }\n");
    Ok(body)
}
