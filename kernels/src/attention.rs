//! The fused attention kernels: `softmax(scale · q·kᵀ + mask) · v` for every batch entry, and
//! its gradients, in FlashAttention-2's scheme — no pass writes the query × key
//! probabilities.
//!
//! - [`AttentionPass::Forward`]: a group per (batch entry, block of [`ATTENTION_GROUP`]
//!   queries), a thread per query. Key and value rows pass through local (shared) memory a
//!   tile at a time; an online softmax keeps each query's running maximum and sum, rescaling
//!   its output row when the maximum grows. Writes the result and each query's log-sum-exp.
//! - [`AttentionPass::RowProducts`]: `D = rowsum(dO ∘ O)`, a thread per query.
//! - [`AttentionPass::KeyGradients`]: a group per (batch entry, block of keys), a thread per
//!   key. Query rows (scaled), their output gradients, log-sum-exps and `D` pass through
//!   local memory; each thread recomputes its key's probabilities and sums its key's and
//!   value's gradients.
//! - [`AttentionPass::QueryGradients`]: as the forward, each thread summing its query's
//!   gradient.
//!
//! Every element of every result is summed by one thread in one order (no atomics: the same
//! bits on every run). Under a causal mask (query `i` sees keys `0..=i`) no pass reads the
//! tiles wholly after a group's last query or before its first key.
//!
//! The widths and the scale are compiled in (a model compiles one kernel per pass); lengths,
//! steps and offsets are arguments ([`AttentionArg::ALL`], in order).

use std::fmt::Write;

use axes_core::error::{Error, Result};
use axes_core::ir::Ir;

use crate::dialect::{Group, finish, index_type, pointer};
use crate::emit::{literal, load, math, store};
use crate::{CType, Dialect, Kernel, Spec};

/// Threads per group of every attention pass: each owns one query (forward, query
/// gradients) or one key (key and value gradients).
pub const ATTENTION_GROUP: usize = 64;

/// The widest heads the kernels take (queries' and keys' width, and values' width).
pub const ATTENTION_MAX_WIDTH: usize = axes_core::protocol::FUSED_ATTENTION_MAX_WIDTH;

/// From this `width + value_width`, CUDA kernels keep their loops rolled.
const WIDE_HEADS: usize = 128;

/// The most bytes of local (shared) memory a group's staged rows take.
const STAGED_BYTES: usize = 16 * 1024;

/// One of the four kernels of fused attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionPass {
    /// Results: the output (`[batch][query][value column]`, the element type) and each
    /// query's log-sum-exp (`[batch][query]`, the compute type; +∞ where a query sees no key).
    Forward,
    /// Result: `D = rowsum(dO ∘ O)` of each query (`[batch][query]`, the compute type).
    RowProducts,
    /// Results: the keys' and the values' gradients (`[batch][key][column]` each).
    KeyGradients,
    /// Result: the queries' gradients (`[batch][query][column]`).
    QueryGradients,
}

/// An input of the attention kernels, with its offset lists in the offsets buffer: element
/// `c` of row `i` of batch entry `b` at `batch[b] + i·row + cols[c]` (the mask: the score of
/// query `i` and key `j` at `batch[b] + i·row + j·key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionInput {
    /// The queries.
    Queries,
    /// The keys.
    Keys,
    /// The values.
    Values,
    /// The additive mask (read only by kernels generated `masked`).
    Mask,
    /// The forward's result (read by [`AttentionPass::RowProducts`]).
    Out,
    /// The result's gradient (read by the backward passes).
    Grad,
}

impl AttentionPass {
    /// The forward's pass, then the backward's, in the order they run.
    pub const ALL: [AttentionPass; 4] = [
        AttentionPass::Forward,
        AttentionPass::RowProducts,
        AttentionPass::KeyGradients,
        AttentionPass::QueryGradients,
    ];
}

impl AttentionInput {
    /// Every input, in argument order.
    pub const ALL: [AttentionInput; 6] = [
        AttentionInput::Queries,
        AttentionInput::Keys,
        AttentionInput::Values,
        AttentionInput::Mask,
        AttentionInput::Out,
        AttentionInput::Grad,
    ];

    fn short(self) -> &'static str {
        match self {
            AttentionInput::Queries => "q",
            AttentionInput::Keys => "k",
            AttentionInput::Values => "v",
            AttentionInput::Mask => "m",
            AttentionInput::Out => "o",
            AttentionInput::Grad => "g",
        }
    }
}

/// An argument of the attention kernels. Every pass takes all of [`AttentionArg::ALL`] in
/// that order (the buffers a pass does not read may be any buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionArg {
    /// Batch entries.
    Batch,
    /// Query positions.
    Queries,
    /// Key positions.
    Keys,
    /// 1 when query `i` sees only keys `0..=i`, else 0.
    Causal,
    /// The buffer of every offset list (of the index type).
    Offsets,
    /// Where an input's batch offsets start in the offsets buffer.
    BatchOffsets(AttentionInput),
    /// Where an input's column offsets start in the offsets buffer (not the mask's).
    ColumnOffsets(AttentionInput),
    /// The step between an input's rows (the mask's step along the queries).
    RowStep(AttentionInput),
    /// The mask's step along the keys.
    MaskKeyStep,
    /// An input's buffer (of the element type).
    Buffer(AttentionInput),
    /// Each query's log-sum-exp, from the forward (the compute type).
    LogSumExp,
    /// Each query's `D`, from [`AttentionPass::RowProducts`] (the compute type).
    RowProducts,
    /// The pass's result 0 or 1 ([`AttentionPass`] says which).
    Result(usize),
}

impl AttentionArg {
    /// Every argument, in order.
    pub const ALL: [AttentionArg; 33] = {
        use AttentionArg::*;
        use AttentionInput::{
            Grad as G, Keys as K, Mask as M, Out as O, Queries as Q, Values as V,
        };
        [
            Batch,
            Queries,
            Keys,
            Causal,
            Offsets,
            BatchOffsets(Q),
            BatchOffsets(K),
            BatchOffsets(V),
            BatchOffsets(M),
            BatchOffsets(O),
            BatchOffsets(G),
            ColumnOffsets(Q),
            ColumnOffsets(K),
            ColumnOffsets(V),
            ColumnOffsets(O),
            ColumnOffsets(G),
            RowStep(Q),
            RowStep(K),
            RowStep(V),
            RowStep(M),
            RowStep(O),
            RowStep(G),
            MaskKeyStep,
            Buffer(Q),
            Buffer(K),
            Buffer(V),
            Buffer(M),
            Buffer(O),
            Buffer(G),
            LogSumExp,
            RowProducts,
            Result(0),
            Result(1),
        ]
    };

    fn name(self) -> String {
        match self {
            AttentionArg::Batch => "batch".into(),
            AttentionArg::Queries => "queries".into(),
            AttentionArg::Keys => "keys".into(),
            AttentionArg::Causal => "causal".into(),
            AttentionArg::Offsets => "offsets".into(),
            AttentionArg::BatchOffsets(x) => format!("{}_batch", x.short()),
            AttentionArg::ColumnOffsets(x) => format!("{}_cols", x.short()),
            AttentionArg::RowStep(x) => format!("{}_row", x.short()),
            AttentionArg::MaskKeyStep => "m_key".into(),
            AttentionArg::Buffer(x) => x.short().into(),
            AttentionArg::LogSumExp => "lse".into(),
            AttentionArg::RowProducts => "delta".into(),
            AttentionArg::Result(j) => format!("r{j}"),
        }
    }
}

/// What the attention kernels of one call are compiled for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    /// The element type of the inputs and results (computed in [`CType::compute`]).
    pub ty: CType,
    /// The width queries and keys share.
    pub width: usize,
    /// The width of the values and of the result.
    pub value_width: usize,
    /// The scores' scale.
    pub scale: f64,
    /// Whether a mask is added to the scores.
    pub masked: bool,
    /// 64-bit indices and offsets.
    pub wide: bool,
}

impl AttentionSpec {
    /// Rows per tile staged in local memory, for rows of `row` compute-type elements.
    fn tile(&self, row: usize) -> usize {
        let bytes = row.max(1) * self.ty.compute().size();
        (STAGED_BYTES / bytes).clamp(1, ATTENTION_GROUP)
    }
}

/// The names a kernel body spells its types, constants and math with.
struct Words {
    idx: &'static str,
    w: &'static str,
    zero: String,
    one: String,
    minus_inf: String,
    inf: String,
    scale: String,
    exp: String,
    log: String,
    group: Group,
}

/// The source of one pass of fused attention: its arguments are [`AttentionArg::ALL`].
///
/// ```
/// use axes_kernels::{AttentionPass, AttentionSpec, CType, Dialect, attention};
/// let spec = AttentionSpec {
///     ty: CType::F32, width: 32, value_width: 32, scale: 0.125, masked: false, wide: false,
/// };
/// let kernel = attention(&spec, AttentionPass::Forward, Dialect::OpenCl)?;
/// assert!(kernel.source.contains("__local float"));
/// # Ok::<(), axes_core::Error>(())
/// ```
pub fn attention(spec: &AttentionSpec, pass: AttentionPass, dialect: Dialect) -> Result<Kernel> {
    if !spec.ty.is_float() {
        return Err(Error::Unsupported {
            what: format!("{:?} attention on a device", spec.ty),
        });
    }
    if spec.width > ATTENTION_MAX_WIDTH || spec.value_width > ATTENTION_MAX_WIDTH {
        return Err(Error::Unsupported {
            what: format!(
                "fused attention on a device over heads {} wide with values {} wide (at most \
                 {ATTENTION_MAX_WIDTH})",
                spec.width, spec.value_width
            ),
        });
    }
    let wty = spec.ty.compute();
    let idx = index_type(spec.wide, dialect);
    let words = Words {
        idx,
        w: wty.c_name(dialect),
        zero: literal(0.0, wty, dialect),
        one: literal(1.0, wty, dialect),
        minus_inf: literal(f64::NEG_INFINITY, wty, dialect),
        inf: literal(f64::INFINITY, wty, dialect),
        scale: literal(spec.scale, wty, dialect),
        exp: math("exp", wty, dialect),
        log: math("log", wty, dialect),
        group: Group::of(dialect, idx),
    };
    let results = match pass {
        AttentionPass::Forward => [spec.ty, wty],
        AttentionPass::RowProducts => [wty, wty],
        AttentionPass::KeyGradients | AttentionPass::QueryGradients => [spec.ty, spec.ty],
    };
    let params: Vec<String> = (AttentionArg::ALL.iter())
        .map(|&arg| {
            let kind = match arg {
                AttentionArg::Offsets => match dialect {
                    Dialect::Cuda => format!("const {idx}* __restrict__"),
                    Dialect::OpenCl => format!("__global const {idx}*"),
                },
                AttentionArg::Buffer(_) => pointer(dialect, spec.ty, true),
                AttentionArg::LogSumExp | AttentionArg::RowProducts => pointer(dialect, wty, true),
                AttentionArg::Result(j) => pointer(dialect, results[j], false),
                _ => idx.to_string(),
            };
            format!("{kind} {}", arg.name())
        })
        .collect();
    let body = match pass {
        AttentionPass::Forward => forward(spec, dialect, &words),
        AttentionPass::RowProducts => row_products(spec, dialect, &words),
        AttentionPass::KeyGradients => key_gradients(spec, dialect, &words),
        AttentionPass::QueryGradients => query_gradients(spec, dialect, &words),
    };
    // Unrolled, the loops over wide heads make kernels that take NVRTC many seconds to
    // compile, and their rows spill out of registers anyway.
    let body = if dialect == Dialect::Cuda && spec.width + spec.value_width > WIDE_HEADS {
        body.replace("for (", "#pragma unroll 1\nfor (")
    } else {
        body
    };
    let kind = match pass {
        AttentionPass::Forward => "attention",
        AttentionPass::RowProducts => "attention_rows",
        AttentionPass::KeyGradients => "attention_dkv",
        AttentionPass::QueryGradients => "attention_dq",
    };
    let ir = Ir::default();
    let preamble = Spec {
        ir: &ir,
        leaves: &[spec.ty],
        out: spec.ty,
        wide: spec.wide,
    };
    Ok(finish(&preamble, dialect, kind, &params, &body))
}

/// The index of element (`b`, `row`, `col`) of input `x`.
fn at(x: AttentionInput, b: &str, row: &str, col: &str) -> String {
    let s = x.short();
    format!("offsets[{s}_batch + {b}] + ({row}) * {s}_row + offsets[{s}_cols + {col}]")
}

/// Element (`b`, `row`, `col`) of input `x`, as a compute-type value.
fn read(
    spec: &AttentionSpec,
    dialect: Dialect,
    x: AttentionInput,
    b: &str,
    row: &str,
    col: &str,
) -> String {
    load(x.short(), &at(x, b, row, col), spec.ty, dialect)
}

/// The mask's value for query `i` and key `j` of batch entry `b`.
fn mask_value(spec: &AttentionSpec, dialect: Dialect, b: &str, i: &str, j: &str) -> String {
    let index = format!("offsets[m_batch + {b}] + ({i}) * m_row + ({j}) * m_key");
    load("m", &index, spec.ty, dialect)
}

/// The statements that make `x` the score of query `i` against key `j` of batch entry `b`,
/// given the dot product of the scaled query and the key already in `x`: the mask added,
/// causally hidden keys at −∞.
fn finish_score(spec: &AttentionSpec, dialect: Dialect, words: &Words, i: &str, j: &str) -> String {
    let mut out = String::new();
    if spec.masked {
        writeln!(out, "x += {};", mask_value(spec, dialect, "b", i, j)).unwrap();
    }
    writeln!(out, "if (causal && ({j}) > ({i})) x = {};", words.minus_inf).unwrap();
    out
}

/// The start shared by the passes with a thread per query: the key and value tiles in local
/// memory (`ks`, `vs`, `tile` rows), and the group loop's header — `b`, the block's first
/// query `q0`, this thread's query `i`, whether it has one (`live`), and `k_end`, the end of
/// the keys the block's queries see.
fn query_block_header(spec: &AttentionSpec, words: &Words, tile: usize) -> String {
    let (idx, w, g) = (words.idx, words.w, ATTENTION_GROUP);
    let Group {
        local,
        tid,
        group,
        groups,
        ..
    } = &words.group;
    format!(
        "  {local} {w} ks[{}];
  {local} {w} vs[{}];
  {idx} tid = {tid};
  {idx} blocks = (queries + {}) / {g};
  for ({idx} grp = {group}; grp < batch * blocks; grp += {groups}) {{
    {idx} b = grp / blocks, q0 = (grp % blocks) * {g}, i = q0 + tid;
    int live = i < queries;
    {idx} q_end = q0 + {g} < queries ? q0 + {g} : queries;
    {idx} k_end = causal && q_end < keys ? q_end : keys;
",
        (tile * spec.width).max(1),
        (tile * spec.value_width).max(1),
        g - 1
    )
}

/// The statements staging keys `k0..k0 + nk` (and their values) of batch entry `b` in `ks`
/// (rows of `width`) and `vs` (rows of `value_width`), between barriers.
fn stage_keys(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (idx, g, d, dv) = (words.idx, ATTENTION_GROUP, spec.width, spec.value_width);
    let sync = words.group.sync;
    let k = read(
        spec,
        dialect,
        AttentionInput::Keys,
        "b",
        &format!("k0 + e / {d}"),
        &format!("e % {d}"),
    );
    let v = read(
        spec,
        dialect,
        AttentionInput::Values,
        "b",
        &format!("k0 + e / {dv}"),
        &format!("e % {dv}"),
    );
    format!(
        "      {sync}
      for ({idx} e = tid; e < nk * {d}; e += {g}) ks[e] = {k};
      for ({idx} e = tid; e < nk * {dv}; e += {g}) vs[e] = {v};
      {sync}
"
    )
}

/// The statements making `x` the score of this thread's query (`qr`, scaled) against staged
/// key `j` (`ks`).
fn staged_score(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (w, d) = (words.w, spec.width);
    format!(
        "{w} x = {};
for (int c = 0; c < {d}; c++) x += qr[c] * ks[j * {d} + c];
{}",
        words.zero,
        finish_score(spec, dialect, words, "i", "k0 + j")
    )
}

fn forward(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (w, d, dv) = (words.w, spec.width, spec.value_width);
    let tk = spec.tile(d + dv);
    let Words {
        zero,
        one,
        minus_inf,
        inf,
        scale,
        exp,
        log,
        idx,
        ..
    } = words;
    let q = read(spec, dialect, AttentionInput::Queries, "b", "i", "c");
    let mut body = query_block_header(spec, words, tk);
    write!(
        body,
        "    {w} qr[{}], acc[{}];
    {w} most = {minus_inf}, total = {zero};
    for (int c = 0; c < {d}; c++) qr[c] = live ? {q} * {scale} : {zero};
    for (int c = 0; c < {dv}; c++) acc[c] = {zero};
    for ({idx} k0 = 0; k0 < k_end; k0 += {tk}) {{
      {idx} nk = k_end - k0 < {tk} ? k_end - k0 : {tk};
",
        d.max(1),
        dv.max(1)
    )
    .unwrap();
    body.push_str(&stage_keys(spec, dialect, words));
    write!(
        body,
        "      if (live) {{
        {w} s[{tk}];
        {w} top = {minus_inf};
        for (int j = 0; j < {tk}; j++) {{
          if (j < nk) {{
{}
            s[j] = x;
            top = x > top ? x : top;
          }}
        }}
        if (top > {minus_inf}) {{
          {w} next = top > most ? top : most;
          {w} rescale = {exp}(most - next);
          total *= rescale;
          for (int c = 0; c < {dv}; c++) acc[c] *= rescale;
          for (int j = 0; j < {tk}; j++) {{
            if (j < nk) {{
              {w} p = {exp}(s[j] - next);
              total += p;
              for (int c = 0; c < {dv}; c++) acc[c] += p * vs[j * {dv} + c];
            }}
          }}
          most = next;
        }}
      }}
    }}
    if (live) {{
      {idx} row = b * queries + i;
      {w} inv = total == {zero} ? {zero} : {one} / total;
      for (int c = 0; c < {dv}; c++) {}
      r1[row] = total == {zero} ? {inf} : most + {log}(total);
    }}
  }}
",
        indent(&staged_score(spec, dialect, words), 12),
        store(
            "r0",
            &format!("row * {dv} + c"),
            "acc[c] * inv",
            spec.ty,
            dialect
        ),
    )
    .unwrap();
    body
}

fn row_products(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (w, idx, g, dv) = (words.w, words.idx, ATTENTION_GROUP, spec.value_width);
    let Group {
        tid, group, groups, ..
    } = &words.group;
    let o = read(spec, dialect, AttentionInput::Out, "b", "i", "c");
    let grad = read(spec, dialect, AttentionInput::Grad, "b", "i", "c");
    format!(
        "  for ({idx} t = {group} * {g} + {tid}; t < batch * queries; t += {groups} * {g}) {{
    {idx} b = t / queries, i = t % queries;
    {w} x = {};
    for (int c = 0; c < {dv}; c++) x += {o} * {grad};
    r0[t] = x;
  }}
",
        words.zero
    )
}

fn key_gradients(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (w, idx, g, d, dv) = (
        words.w,
        words.idx,
        ATTENTION_GROUP,
        spec.width,
        spec.value_width,
    );
    let tq = spec.tile(d + dv + 2);
    let Group {
        local,
        tid,
        group,
        groups,
        sync,
    } = &words.group;
    let Words {
        zero, scale, exp, ..
    } = words;
    let k = read(spec, dialect, AttentionInput::Keys, "b", "j", "c");
    let v = read(spec, dialect, AttentionInput::Values, "b", "j", "c");
    let q = read(
        spec,
        dialect,
        AttentionInput::Queries,
        "b",
        &format!("i0 + e / {d}"),
        &format!("e % {d}"),
    );
    let grad = read(
        spec,
        dialect,
        AttentionInput::Grad,
        "b",
        &format!("i0 + e / {dv}"),
        &format!("e % {dv}"),
    );
    let mut body = String::new();
    write!(
        body,
        "  {local} {w} qs[{}];
  {local} {w} dos[{}];
  {local} {w} ls[{tq}];
  {local} {w} ds[{tq}];
  {idx} tid = {tid};
  {idx} blocks = (keys + {}) / {g};
  for ({idx} grp = {group}; grp < batch * blocks; grp += {groups}) {{
    {idx} b = grp / blocks, k0 = (grp % blocks) * {g}, j = k0 + tid;
    int live = j < keys;
    {w} kr[{}], vr[{}], dk[{}], dv[{}];
    for (int c = 0; c < {d}; c++) {{ kr[c] = live ? {k} : {zero}; dk[c] = {zero}; }}
    for (int c = 0; c < {dv}; c++) {{ vr[c] = live ? {v} : {zero}; dv[c] = {zero}; }}
    for ({idx} i0 = causal ? k0 : 0; i0 < queries; i0 += {tq}) {{
      {idx} nq = queries - i0 < {tq} ? queries - i0 : {tq};
      {sync}
      for ({idx} e = tid; e < nq * {d}; e += {g}) qs[e] = {q} * {scale};
      for ({idx} e = tid; e < nq * {dv}; e += {g}) dos[e] = {grad};
      for ({idx} e = tid; e < nq; e += {g}) {{
        ls[e] = lse[b * queries + i0 + e];
        ds[e] = delta[b * queries + i0 + e];
      }}
      {sync}
      if (live) {{
        for (int r = 0; r < {tq}; r++) {{
          if (r < nq) {{
            {idx} i = i0 + r;
            {w} x = {zero};
            for (int c = 0; c < {d}; c++) x += qs[r * {d} + c] * kr[c];
{}
            {w} p = {exp}(x - ls[r]);
            {w} dp = {zero};
            for (int c = 0; c < {dv}; c++) dp += dos[r * {dv} + c] * vr[c];
            {w} dx = p * (dp - ds[r]);
            for (int c = 0; c < {dv}; c++) dv[c] += p * dos[r * {dv} + c];
            for (int c = 0; c < {d}; c++) dk[c] += dx * qs[r * {d} + c];
          }}
        }}
      }}
    }}
    if (live) {{
      {idx} row = b * keys + j;
      for (int c = 0; c < {d}; c++) {}
      for (int c = 0; c < {dv}; c++) {}
    }}
  }}
",
        (tq * d).max(1),
        (tq * dv).max(1),
        g - 1,
        d.max(1),
        dv.max(1),
        d.max(1),
        dv.max(1),
        indent(&finish_score(spec, dialect, words, "i", "j"), 12),
        store("r0", &format!("row * {d} + c"), "dk[c]", spec.ty, dialect),
        store("r1", &format!("row * {dv} + c"), "dv[c]", spec.ty, dialect),
    )
    .unwrap();
    body
}

fn query_gradients(spec: &AttentionSpec, dialect: Dialect, words: &Words) -> String {
    let (w, d, dv) = (words.w, spec.width, spec.value_width);
    let tk = spec.tile(d + dv);
    let Words {
        zero,
        scale,
        exp,
        idx,
        ..
    } = words;
    let q = read(spec, dialect, AttentionInput::Queries, "b", "i", "c");
    let grad = read(spec, dialect, AttentionInput::Grad, "b", "i", "c");
    let mut body = query_block_header(spec, words, tk);
    write!(
        body,
        "    {w} qr[{}], dor[{}], dq[{}];
    {w} li = live ? lse[b * queries + i] : {zero};
    {w} di = live ? delta[b * queries + i] : {zero};
    for (int c = 0; c < {d}; c++) {{ qr[c] = live ? {q} * {scale} : {zero}; dq[c] = {zero}; }}
    for (int c = 0; c < {dv}; c++) dor[c] = live ? {grad} : {zero};
    for ({idx} k0 = 0; k0 < k_end; k0 += {tk}) {{
      {idx} nk = k_end - k0 < {tk} ? k_end - k0 : {tk};
",
        d.max(1),
        dv.max(1),
        d.max(1)
    )
    .unwrap();
    body.push_str(&stage_keys(spec, dialect, words));
    write!(
        body,
        "      if (live) {{
        for (int j = 0; j < {tk}; j++) {{
          if (j < nk) {{
{}
            {w} p = {exp}(x - li);
            {w} dp = {zero};
            for (int c = 0; c < {dv}; c++) dp += dor[c] * vs[j * {dv} + c];
            {w} dx = p * (dp - di);
            for (int c = 0; c < {d}; c++) dq[c] += dx * ks[j * {d} + c];
          }}
        }}
      }}
    }}
    if (live) {{
      {idx} row = b * queries + i;
      for (int c = 0; c < {d}; c++) {}
    }}
  }}
",
        indent(&staged_score(spec, dialect, words), 12),
        store(
            "r0",
            &format!("row * {d} + c"),
            &format!("dq[c] * {scale}"),
            spec.ty,
            dialect
        ),
    )
    .unwrap();
    body
}

/// `text`'s lines, each indented by `by` spaces.
fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    let lines: Vec<String> = text.lines().map(|l| format!("{pad}{l}")).collect();
    lines.join("\n")
}
