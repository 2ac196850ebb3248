//! A chunked interpreter for run-time IR ([`Ir`]), for every element type: each instruction
//! runs over a block of up to [`BLOCK`] elements, so the `match` on its op and element type
//! is paid once per block, not per element (numexpr-style). Several roots may be written in
//! one pass (the backward of a fused node writes the gradient of every leaf at once), and a
//! result may be combined into what its buffer holds (sums, products, maxima, minima over the
//! axes where its stride is 0).
//!
//! Types follow the kernel generator's rule: a leaf has its buffer's type, a constant takes
//! the type of its use, an op the type of its operands, a comparison gives `bool`, a cast its
//! target; an op defined on floats only (`exp`) on an integer is an error when compiling.
//! One difference: a comparison used as an arithmetic operand (`(a < b) * x`, which typed
//! expressions never build) is an error here, where generated C converts it silently.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use half::{bf16, f16};

use crate::element::{DType, Element, Elements, ElementsMut};
use crate::error::{Error, Result};
use crate::ir::ops::identity_of;
use crate::ir::reduce::{MaxOp, MinOp, ProdOp, SumOp};
use crate::ir::{BinaryOp, CompareOp, Domain, Ir, IrNode, ReduceFn, ReduceOp, UnaryOp};
use crate::layout::within;
use crate::num::{Num, take_division_by_zero};
use crate::storage::{self, HostVec};

use super::{cost, threads};

/// Elements per block.
pub(crate) const BLOCK: usize = 256;

#[derive(Clone, Copy, Debug)]
enum Inst {
    /// The block of source `k`.
    Leaf(usize),
    Const(f64),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Compare(CompareOp, usize, usize),
    /// `select(cond, a, b)`; a numeric condition is true where it is not 0.
    Select(usize, usize, usize),
    /// The argument converted to this instruction's type ([`Element::cast`]).
    Cast(usize),
}

/// An [`Ir`] compiled for the interpreter: one typed instruction per needed node (a constant
/// once per type it is used in), in order.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    insts: Vec<Inst>,
    types: Vec<DType>,
    roots: Vec<usize>,
}

impl Program {
    /// The program that reads its one source of type `dtype`: with a combining sink, a
    /// strided accumulation.
    pub(crate) fn copy(dtype: DType) -> Program {
        Program {
            insts: vec![Inst::Leaf(0)],
            types: vec![dtype],
            roots: vec![0],
        }
    }

    /// This program with every f16 and bf16 value computed in f32: half-precision leaves are
    /// read, and casts to a half type rounded, then widened; root `k` is left in f32 where
    /// `wide[k]`, else rounded back to its type.
    fn in_f32(&self, wide: &[bool]) -> Program {
        let half = |ty: DType| matches!(ty, DType::F16 | DType::BF16);
        let mut out = Program {
            insts: Vec::with_capacity(self.insts.len()),
            types: Vec::with_capacity(self.insts.len()),
            roots: Vec::with_capacity(self.roots.len()),
        };
        let mut at: Vec<usize> = Vec::with_capacity(self.insts.len());
        for (&inst, &ty) in self.insts.iter().zip(&self.types) {
            let inst = match inst {
                Inst::Leaf(_) | Inst::Const(_) => inst,
                Inst::Unary(op, a) => Inst::Unary(op, at[a]),
                Inst::Binary(op, a, b) => Inst::Binary(op, at[a], at[b]),
                Inst::Compare(op, a, b) => Inst::Compare(op, at[a], at[b]),
                Inst::Select(c, a, b) => Inst::Select(at[c], at[a], at[b]),
                Inst::Cast(a) => Inst::Cast(at[a]),
            };
            let slot = match inst {
                Inst::Leaf(_) | Inst::Cast(_) if half(ty) => {
                    let value = out.push(inst, ty);
                    out.push(Inst::Cast(value), DType::F32)
                }
                _ if half(ty) => out.push(inst, DType::F32),
                _ => out.push(inst, ty),
            };
            at.push(slot);
        }
        for (k, &root) in self.roots.iter().enumerate() {
            let ty = self.types[root];
            let slot = match half(ty) && !wide[k] {
                true => out.push(Inst::Cast(at[root]), ty),
                false => at[root],
            };
            out.roots.push(slot);
        }
        out
    }

    fn push(&mut self, inst: Inst, ty: DType) -> usize {
        self.insts.push(inst);
        self.types.push(ty);
        self.insts.len() - 1
    }

    /// Compiles `ir` to compute the nodes `roots`, each of type `out`, from leaves of the
    /// types `leaves` (leaf `k` has type `leaves[k]`).
    pub(crate) fn compile(ir: &Ir, roots: &[usize], leaves: &[DType], out: DType) -> Result<Self> {
        Compiler {
            ir,
            leaves,
            out,
            live: ir.live(roots),
            program: Program {
                insts: Vec::new(),
                types: Vec::new(),
                roots: Vec::new(),
            },
            slots: vec![None; ir.nodes.len()],
            constants: HashMap::new(),
        }
        .compile(roots)
    }
}

/// The state of [`Program::compile`].
struct Compiler<'a> {
    ir: &'a Ir,
    leaves: &'a [DType],
    out: DType,
    live: Vec<bool>,
    program: Program,
    /// The instruction of each node compiled so far (constants are in `constants`).
    slots: Vec<Option<usize>>,
    constants: HashMap<(u64, DType), usize>,
}

impl Compiler<'_> {
    fn compile(mut self, roots: &[usize]) -> Result<Program> {
        for (i, node) in self.ir.nodes.iter().enumerate() {
            if !self.live[i] {
                continue;
            }
            let compiled = match *node {
                IrNode::Scalar(_) => None,
                IrNode::Leaf(k) => {
                    let ty = *self.leaves.get(k).ok_or_else(|| {
                        unsupported(format!(
                            "leaf {k} of an expression with {} leaves",
                            self.leaves.len()
                        ))
                    })?;
                    Some((Inst::Leaf(k), ty))
                }
                IrNode::Unary(op, a) => {
                    let ty = self.type_of(&[a]);
                    check_domain(op.name(), op.domain(), ty)?;
                    Some((Inst::Unary(op, self.operand(a, ty)?), ty))
                }
                IrNode::Binary(op, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    check_domain(op.name(), op.domain(), ty)?;
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Binary(op, a, b), ty))
                }
                IrNode::Compare(op, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Compare(op, a, b), DType::Bool))
                }
                IrNode::Select(c, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    let c = match self.slots[c] {
                        Some(slot) => slot,
                        None => self.operand(c, DType::Bool)?,
                    };
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Select(c, a, b), ty))
                }
                IrNode::Cast(to, a) => {
                    let from = self.type_of(&[a]);
                    Some((Inst::Cast(self.operand(a, from)?), to))
                }
                IrNode::Map(_) => {
                    return Err(unsupported(
                        "a Rust closure in a run-time expression".into(),
                    ));
                }
            };
            if let Some((inst, ty)) = compiled {
                self.slots[i] = Some(self.push(inst, ty));
            }
        }
        for &root in roots {
            if let Some(slot) = self.slots[root] {
                let ty = self.program.types[slot];
                if ty != self.out {
                    return Err(unsupported(format!(
                        "a result of type {} evaluated into elements of type {}",
                        ty.name(),
                        self.out.name()
                    )));
                }
            }
            let slot = self.operand(root, self.out)?;
            self.program.roots.push(slot);
        }
        Ok(self.program)
    }

    fn push(&mut self, inst: Inst, ty: DType) -> usize {
        self.program.insts.push(inst);
        self.program.types.push(ty);
        self.program.insts.len() - 1
    }

    /// The type of the first of `nodes` that is not a constant (constants take the type of
    /// their use), else the result's.
    fn type_of(&self, nodes: &[usize]) -> DType {
        nodes
            .iter()
            .find_map(|&node| self.slots[node].map(|slot| self.program.types[slot]))
            .unwrap_or(self.out)
    }

    /// The instruction computing `node` as type `ty`: a constant is made for that type; any
    /// other node must have it.
    fn operand(&mut self, node: usize, ty: DType) -> Result<usize> {
        if let IrNode::Scalar(v) = self.ir.nodes[node] {
            let key = (v.to_bits(), ty);
            if let Some(&slot) = self.constants.get(&key) {
                return Ok(slot);
            }
            let slot = self.push(Inst::Const(v), ty);
            self.constants.insert(key, slot);
            return Ok(slot);
        }
        let slot = self.slots[node].expect("nodes refer to earlier nodes");
        let found = self.program.types[slot];
        if found != ty {
            return Err(unsupported(format!(
                "operands of types {} and {} in one operation",
                found.name(),
                ty.name()
            )));
        }
        Ok(slot)
    }
}

fn unsupported(what: String) -> Error {
    Error::Unsupported { what }
}

/// An error unless an op of `domain` applies to `ty`.
fn check_domain(name: &str, domain: Domain, ty: DType) -> Result<()> {
    if domain.accepts(ty) {
        Ok(())
    } else {
        Err(unsupported(format!("`{name}` on {}", ty.name())))
    }
}

/// One operand read by the interpreter: a buffer and, for each iteration axis, a stride
/// (0 where the operand is broadcast).
pub(crate) struct StridedSource<'a> {
    pub(crate) data: Elements<'a>,
    pub(crate) offset: usize,
    pub(crate) strides: Vec<isize>,
}

/// One result written by the interpreter.
pub(crate) struct StridedSink<'a> {
    pub(crate) data: ElementsMut<'a>,
    pub(crate) offset: usize,
    pub(crate) strides: Vec<isize>,
    /// `None`: write each value over the element (no stride 0 on an axis longer than 1).
    /// `Some(op)`: combine each value into the element with `op`, so stride 0 reduces.
    pub(crate) combine: Option<ReduceOp>,
}

/// Owned elements of a run-time type: one instruction's block of values here, a buffer of
/// the CPU backend there.
pub(crate) enum Values {
    F32(HostVec<f32>),
    F64(HostVec<f64>),
    F16(HostVec<f16>),
    BF16(HostVec<bf16>),
    I32(HostVec<i32>),
    I64(HostVec<i64>),
    U8(HostVec<u8>),
    Bool(HostVec<bool>),
}

impl Values {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Values::F32(_) => DType::F32,
            Values::F64(_) => DType::F64,
            Values::F16(_) => DType::F16,
            Values::BF16(_) => DType::BF16,
            Values::I32(_) => DType::I32,
            Values::I64(_) => DType::I64,
            Values::U8(_) => DType::U8,
            Values::Bool(_) => DType::Bool,
        }
    }

    /// `len` zeros (`false`) of type `ty`.
    pub(crate) fn new(ty: DType, len: usize) -> Values {
        match ty {
            DType::F32 => Values::F32(std::iter::repeat_n(0.0, len).collect()),
            DType::F64 => Values::F64(std::iter::repeat_n(0.0, len).collect()),
            DType::F16 => Values::F16(std::iter::repeat_n(f16::ZERO, len).collect()),
            DType::BF16 => Values::BF16(std::iter::repeat_n(bf16::ZERO, len).collect()),
            DType::I32 => Values::I32(std::iter::repeat_n(0, len).collect()),
            DType::I64 => Values::I64(std::iter::repeat_n(0, len).collect()),
            DType::U8 => Values::U8(std::iter::repeat_n(0, len).collect()),
            DType::Bool => Values::Bool(std::iter::repeat_n(false, len).collect()),
        }
    }
}

impl Values {
    /// `count` elements of type `dtype`, each the identity of `reduce` when given, else 0.
    /// An error when the host has no room for them.
    pub(crate) fn filled(dtype: DType, count: usize, reduce: Option<ReduceOp>) -> Result<Values> {
        fn typed<T: Num>(count: usize, reduce: Option<ReduceOp>) -> Result<HostVec<T>> {
            storage::filled(
                count,
                reduce.map_or(T::zero(), |op| identity_of(op.identity())),
            )
        }
        Ok(match dtype {
            DType::F32 => Values::F32(typed(count, reduce)?),
            DType::F64 => Values::F64(typed(count, reduce)?),
            DType::F16 => Values::F16(typed(count, reduce)?),
            DType::BF16 => Values::BF16(typed(count, reduce)?),
            DType::I32 => Values::I32(typed(count, reduce)?),
            DType::I64 => Values::I64(typed(count, reduce)?),
            DType::U8 => Values::U8(typed(count, reduce)?),
            DType::Bool => Values::Bool(storage::filled(count, false)?),
        })
    }

    #[inline(always)]
    pub(crate) fn elements(&self) -> Elements<'_> {
        with_values!(self, v => Element::elements(v))
    }

    pub(crate) fn elements_mut(&mut self) -> ElementsMut<'_> {
        with_values!(self, v => Element::elements_mut(v))
    }
}

/// Computes the nodes `roots` of `ir` (results of type `out`) over the iteration axes `lens`
/// in one pass: root `r` goes into `sinks[r]`, which hold their starting values. What the CPU
/// backend runs, for its own buffers, and autodiff for tensors in host memory.
pub(crate) fn compile_and_run(
    ir: &Ir,
    roots: &[usize],
    lens: &[usize],
    out: DType,
    sources: &[StridedSource<'_>],
    sinks: &mut [StridedSink<'_>],
) -> Result<()> {
    let leaf_types: Vec<DType> = sources.iter().map(|s| s.data.dtype()).collect();
    let program = Program::compile(ir, roots, &leaf_types, out)?;
    run(&program, lens, sources, sinks)
}

/// The blocks of one run, taken from this thread's spare blocks and given back after it:
/// a training step runs the interpreter dozens of times, and allocating its registers each
/// time (many small buffers between the large ones) made the allocator return and re-fault
/// pages on every step.
struct Registers {
    blocks: Vec<Values>,
}

/// Spare blocks kept per thread, at most this many.
const SPARE_BLOCKS: usize = 64;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Values>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Registers {
    /// One block of `BLOCK` elements per type in `types`.
    fn take(types: &[DType]) -> Registers {
        SPARE.with_borrow_mut(|spare| Registers {
            blocks: types
                .iter()
                .map(|&ty| match spare.iter().rposition(|b| b.dtype() == ty) {
                    Some(at) => spare.swap_remove(at),
                    None => Values::new(ty, BLOCK),
                })
                .collect(),
        })
    }
}

impl Drop for Registers {
    fn drop(&mut self) {
        SPARE.with_borrow_mut(|spare| {
            let room = SPARE_BLOCKS.saturating_sub(spare.len());
            spare.extend(self.blocks.drain(..).take(room));
        });
    }
}

/// `$body` with `$v` bound to the vector of whichever type `$block` holds.
macro_rules! with_values {
    ($block:expr, $v:ident => $body:expr) => {
        match $block {
            $crate::engine::interp::Values::F32($v) => $body,
            $crate::engine::interp::Values::F64($v) => $body,
            $crate::engine::interp::Values::F16($v) => $body,
            $crate::engine::interp::Values::BF16($v) => $body,
            $crate::engine::interp::Values::I32($v) => $body,
            $crate::engine::interp::Values::I64($v) => $body,
            $crate::engine::interp::Values::U8($v) => $body,
            $crate::engine::interp::Values::Bool($v) => $body,
        }
    };
}
pub(crate) use with_values;

/// `$body` with `$v` bound to the slice of whichever type `$elements` holds.
macro_rules! with_elements {
    ($elements:expr, $v:ident => $body:expr) => {
        match $elements {
            Elements::F32($v) => $body,
            Elements::F64($v) => $body,
            Elements::F16($v) => $body,
            Elements::BF16($v) => $body,
            Elements::I32($v) => $body,
            Elements::I64($v) => $body,
            Elements::U8($v) => $body,
            Elements::Bool($v) => $body,
        }
    };
}

/// Runs `program` over the iteration space `lens`: root `r` goes to `sinks[r]`.
///
/// The sources and sinks are checked up front (their types against the program's, every
/// position they reach against their buffers), so a wrong stride or type is an error, never
/// an out-of-bounds access.
pub(crate) fn run(
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: &mut [StridedSink<'_>],
) -> Result<()> {
    assert_eq!(sinks.len(), program.roots.len(), "one sink per root");
    for (inst, ty) in program.insts.iter().zip(&program.types) {
        if let Inst::Leaf(k) = *inst {
            let source = sources.get(k).ok_or_else(|| {
                unsupported(format!(
                    "leaf {k} of an expression given {} sources",
                    sources.len()
                ))
            })?;
            if source.data.dtype() != *ty {
                return Err(unsupported(format!(
                    "leaf {k} of type {} given a source of type {}",
                    ty.name(),
                    source.data.dtype().name()
                )));
            }
        }
    }
    for (sink, &root) in sinks.iter().zip(&program.roots) {
        let ty = program.types[root];
        if sink.data.dtype() != ty || (ty == DType::Bool && sink.combine.is_some()) {
            return Err(unsupported(format!(
                "a result of type {} written into elements of type {}{}",
                ty.name(),
                sink.data.dtype().name(),
                if sink.combine.is_some() {
                    " by a reduction"
                } else {
                    ""
                }
            )));
        }
    }
    let fits = sources
        .iter()
        .all(|s| within(s.offset, lens, &s.strides, s.data.len()))
        && sinks
            .iter()
            .all(|s| within(s.offset, lens, &s.strides, s.data.len()));
    if !fits {
        return Err(unsupported(
            "an operand layout that leaves its buffer".into(),
        ));
    }
    if lens.contains(&0) {
        return Ok(());
    }
    if sinks.iter().any(|sink| sums_in_half(sink, lens)) {
        return run_widened(program, lens, sources, sinks);
    }
    let space = CanonicalSpace::canonical(lens, sources, sinks);
    let sources: Vec<StridedSource<'_>> = (sources.iter().zip(space.source_strides))
        .map(|(s, strides)| StridedSource {
            data: s.data,
            offset: s.offset,
            strides,
        })
        .collect();
    let sinks: Vec<StridedSink<'_>> = (sinks.iter_mut().zip(space.sink_strides))
        .map(|(s, strides)| StridedSink {
            data: s.data.reborrow(),
            offset: s.offset,
            strides,
            combine: s.combine,
        })
        .collect();
    if run_split(program, &space.lens, &sources, sinks)? {
        return Err(Error::DivisionByZero);
    }
    Ok(())
}

/// Whether `sink` sums or multiplies f16 or bf16 values over an axis of `lens`: such a sink
/// combines in f32 ([`run_widened`]), since a long sum in the half type stalls.
fn sums_in_half(sink: &StridedSink<'_>, lens: &[usize]) -> bool {
    matches!(sink.combine, Some(ReduceOp::Sum | ReduceOp::Prod))
        && matches!(sink.data.dtype(), DType::F16 | DType::BF16)
        && (lens.iter().zip(&sink.strides)).any(|(&len, &stride)| stride == 0 && len > 1)
}

/// [`run`] where some sinks sum in a half type: the program computes every half-precision
/// value in f32 (as device kernels do), and those sinks combine into an f32 copy of the span
/// of their buffer they reach, rounded back once at the end.
fn run_widened(
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: &mut [StridedSink<'_>],
) -> Result<()> {
    let summed: Vec<bool> = sinks.iter().map(|sink| sums_in_half(sink, lens)).collect();
    let program = program.in_f32(&summed);
    // Each summing sink's span (the elements it reaches, checked inside its buffer by `run`)
    // as f32, and where the span starts in the buffer.
    let mut wide: Vec<Option<(HostVec<f32>, usize)>> = Vec::with_capacity(sinks.len());
    for (sink, &summed) in sinks.iter().zip(&summed) {
        if !summed {
            wide.push(None);
            continue;
        }
        let (low, high) = reach(lens, &sink.strides);
        let (start, end) = (
            (sink.offset as isize + low) as usize,
            (sink.offset as isize + high) as usize + 1,
        );
        let span = match &sink.data {
            ElementsMut::F16(v) => v[start..end].iter().map(|x| x.to_f32()).collect(),
            ElementsMut::BF16(v) => v[start..end].iter().map(|x| x.to_f32()).collect(),
            _ => unreachable!("only half-type sinks are widened"),
        };
        wide.push(Some((span, start)));
    }
    let mut widened: Vec<StridedSink<'_>> = (sinks.iter_mut().zip(&mut wide))
        .map(|(sink, wide)| match wide {
            Some((span, start)) => StridedSink {
                data: ElementsMut::F32(span),
                offset: sink.offset - *start,
                strides: sink.strides.clone(),
                combine: sink.combine,
            },
            None => StridedSink {
                data: sink.data.reborrow(),
                offset: sink.offset,
                strides: sink.strides.clone(),
                combine: sink.combine,
            },
        })
        .collect();
    run(&program, lens, sources, &mut widened)?;
    drop(widened);
    for (sink, wide) in sinks.iter_mut().zip(&wide) {
        let Some((span, start)) = wide else { continue };
        let at = *start..*start + span.len();
        match &mut sink.data {
            ElementsMut::F16(out) => {
                (out[at].iter_mut().zip(span.iter())).for_each(|(o, &v)| *o = f16::from_f32(v))
            }
            ElementsMut::BF16(out) => {
                (out[at].iter_mut().zip(span.iter())).for_each(|(o, &v)| *o = bf16::from_f32(v))
            }
            _ => unreachable!("only half-type sinks are widened"),
        }
    }
    Ok(())
}

/// An iteration space in canonical form: length-1 axes dropped, axes ordered by stride
/// (largest outermost, summed over every operand), and axes merged where every operand
/// steps over the inner one exactly into the outer one. Only lengths and strides decide it,
/// so a run over the same layouts always takes the same order (and adds in the same order).
struct CanonicalSpace {
    lens: Vec<usize>,
    source_strides: Vec<Vec<isize>>,
    sink_strides: Vec<Vec<isize>>,
}

impl CanonicalSpace {
    fn canonical(
        lens: &[usize],
        sources: &[StridedSource<'_>],
        sinks: &[StridedSink<'_>],
    ) -> CanonicalSpace {
        let strides =
            || (sources.iter().map(|s| &s.strides[..])).chain(sinks.iter().map(|s| &s.strides[..]));
        let weight = |a: usize| -> u128 { strides().map(|s| s[a].unsigned_abs() as u128).sum() };
        let mut order: Vec<usize> = (0..lens.len()).filter(|&a| lens[a] != 1).collect();
        // Stable: ties keep the given order.
        order.sort_by_key(|&a| std::cmp::Reverse(weight(a)));
        // Runs of axes merged into one (outermost first), each with its total length.
        let mut merged: Vec<(Vec<usize>, usize)> = Vec::with_capacity(order.len());
        for &a in &order {
            if let Some((run, len)) = merged.last_mut() {
                let inner = *run.last().expect("runs are not empty");
                if strides().all(|s| s[inner] == s[a] * lens[a] as isize) {
                    run.push(a);
                    *len *= lens[a];
                    continue;
                }
            }
            merged.push((vec![a], lens[a]));
        }
        // A merged axis steps like the innermost axis of its run.
        let pick = |s: &[isize]| -> Vec<isize> {
            merged
                .iter()
                .map(|(run, _)| s[*run.last().expect("runs are not empty")])
                .collect()
        };
        CanonicalSpace {
            lens: merged.iter().map(|&(_, len)| len).collect(),
            source_strides: sources.iter().map(|s| pick(&s.strides)).collect(),
            sink_strides: sinks.iter().map(|s| pick(&s.strides)).collect(),
        }
    }
}

/// The lowest and highest position, relative to the first, that `strides` reach over `lens`.
fn reach(lens: &[usize], strides: &[isize]) -> (isize, isize) {
    lens.iter()
        .zip(strides)
        .fold((0, 0), |(low, high), (&len, &stride)| {
            let r = (len as isize - 1) * stride;
            (low + r.min(0), high + r.max(0))
        })
}

/// How a sink meets a split of the outermost axis.
enum SinkSplit {
    /// Each part of the axis writes a region of the buffer of its own.
    Regions,
    /// The sink combines over the axis: each part combines into a partial result of its own,
    /// and the partials are combined into the sink in order.
    Partials,
}

/// Parts at most when a run is split into partial results (a fixed count, not the number of
/// threads, so the partial results, and the sums, are the same on every thread count).
const MAX_PARTS: usize = 8;

/// Elements per part at least when a run is split into partial results (each part costs a
/// partial buffer and its combination).
const PART_MIN_ELEMENTS: usize = 1 << 16;

/// Runs `program` (after [`run`]'s checks, over a canonical space), split along the
/// outermost axis. A sink that combines over that axis is always cut into the same parts,
/// from the lengths alone (each part combined into a partial result of its own, the partials
/// into the sink in order), so its sums are the same whatever the thread count and whatever
/// the cost model decides; where every sink keeps that axis in a region of its own, the run
/// is split only when the work pays for other threads (every element is computed as in one
/// run). Parts run on other threads only where the work pays for them. Returns whether an
/// integer was divided by zero; an error when the host has no room for the partial results.
fn run_split(
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: Vec<StridedSink<'_>>,
) -> Result<bool> {
    let count = lens.iter().fold(1usize, |n, &l| n.saturating_mul(l));
    let pays = cost::INTERPRETED.pays(cost::interpreted_ns(count, program.insts.len()));
    let threads = if pays { threads::threads() } else { 1 };
    let splits: Option<Vec<SinkSplit>> = (!lens.is_empty())
        .then(|| {
            (sinks.iter())
                .map(|sink| {
                    let (low, high) = reach(&lens[1..], &sink.strides[1..]);
                    let stride = sink.strides[0];
                    if stride > 0 && high - low < stride {
                        Some(SinkSplit::Regions)
                    } else if stride == 0 && sink.combine.is_some() {
                        Some(SinkSplit::Partials)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .flatten();
    let parts = match &splits {
        None => 1,
        Some(splits) if splits.iter().all(|s| matches!(s, SinkSplit::Regions)) => {
            threads.min(lens[0])
        }
        Some(splits) => {
            // From the lengths alone: these parts decide the order of the sums.
            let parts = (count / PART_MIN_ELEMENTS).clamp(1, MAX_PARTS).min(lens[0]);
            // Combining the partials must cost little beside the run itself.
            let partial: usize = (sinks.iter().zip(splits))
                .filter(|(_, split)| matches!(split, SinkSplit::Partials))
                .map(|(sink, _)| partial_len(&lens[1..], &sink.strides[1..]))
                .sum();
            if partial.saturating_mul(parts) <= count / 4 {
                parts
            } else {
                1
            }
        }
    };
    let Some(splits) = splits.filter(|_| parts >= 2) else {
        let mut sinks = sinks;
        take_division_by_zero();
        run_checked(Isa::detect(), program, lens, sources, &mut sinks);
        return Ok(take_division_by_zero());
    };
    // Part `p` runs positions `bounds[p]..bounds[p + 1]` of the outermost axis.
    let bounds: Vec<usize> = (0..=parts).map(|p| lens[0] * p / parts).collect();
    // One partial result per part for each sink combined from partials.
    let mut partials: Vec<Vec<Values>> = (0..parts)
        .map(|_| {
            (sinks.iter().zip(&splits))
                .filter(|(_, split)| matches!(split, SinkSplit::Partials))
                .map(|(sink, _)| {
                    let len = partial_len(&lens[1..], &sink.strides[1..]);
                    Values::filled(sink.data.dtype(), len, sink.combine)
                })
                .collect::<Result<_>>()
        })
        .collect::<Result<_>>()?;
    let mut part_partials: Vec<_> = partials.iter_mut().map(|p| p.iter_mut()).collect();
    let mut part_sinks: Vec<Vec<StridedSink<'_>>> = (0..parts).map(|_| Vec::new()).collect();
    // The sinks combined from partials, each with the strides of its partials.
    let mut combined: Vec<(StridedSink<'_>, Vec<isize>)> = Vec::new();
    for (sink, split) in sinks.into_iter().zip(&splits) {
        if let SinkSplit::Partials = split {
            let strides = partial_strides(&lens[1..], &sink.strides[1..]);
            let part_strides: Vec<isize> = [0].into_iter().chain(strides.clone()).collect();
            for (sinks, blocks) in part_sinks.iter_mut().zip(&mut part_partials) {
                let block = blocks.next().expect("a partial result per part");
                sinks.push(StridedSink {
                    data: block.elements_mut(),
                    offset: 0,
                    strides: part_strides.clone(),
                    combine: sink.combine,
                });
            }
            combined.push((sink, strides));
            continue;
        }
        let (low, _) = reach(&lens[1..], &sink.strides[1..]);
        let stride = sink.strides[0];
        // Where each part's region starts in the buffer (the first part's at 0).
        let region = |p: usize| -> usize {
            if p == 0 {
                0
            } else {
                (sink.offset as isize + bounds[p] as isize * stride + low) as usize
            }
        };
        let mut rest = sink.data;
        for (p, sinks) in part_sinks.iter_mut().enumerate() {
            let data = if p + 1 < parts {
                let (head, tail) = rest.split_at(region(p + 1) - region(p));
                rest = tail;
                head
            } else {
                std::mem::replace(&mut rest, ElementsMut::Bool(&mut []))
            };
            let first = sink.offset as isize + bounds[p] as isize * stride;
            sinks.push(StridedSink {
                data,
                offset: (first - region(p) as isize) as usize,
                strides: sink.strides.clone(),
                combine: sink.combine,
            });
        }
    }
    let divided = AtomicBool::new(false);
    let run_part = |p: usize, mut sinks: Vec<StridedSink<'_>>| {
        let mut part_lens = lens.to_vec();
        part_lens[0] = bounds[p + 1] - bounds[p];
        let sources: Vec<StridedSource<'_>> = (sources.iter())
            .map(|s| StridedSource {
                data: s.data,
                offset: (s.offset as isize + bounds[p] as isize * s.strides[0]) as usize,
                strides: s.strides.clone(),
            })
            .collect();
        take_division_by_zero();
        run_checked(
            Isa::detect(),
            program,
            &part_lens,
            sources.as_slice(),
            &mut sinks,
        );
        if take_division_by_zero() {
            divided.store(true, Ordering::Relaxed);
        }
    };
    let mut part_list = part_sinks.into_iter().enumerate();
    if threads < 2 {
        part_list.for_each(|(p, sinks)| run_part(p, sinks));
    } else {
        let (_, first) = part_list.next().expect("two parts or more");
        threads::in_place_scope(|scope| {
            for (p, sinks) in part_list {
                let run_part = &run_part;
                scope.spawn(move |_| run_part(p, sinks));
            }
            run_part(0, first);
        });
    }
    // The partial results, combined into their sinks in order.
    for (k, (sink, strides)) in combined.iter_mut().enumerate() {
        let rest = &lens[1..];
        for blocks in &partials {
            let source = StridedSource {
                data: blocks[k].elements(),
                offset: 0,
                strides: strides.clone(),
            };
            let mut target = [StridedSink {
                data: sink.data.reborrow(),
                offset: sink.offset,
                strides: sink.strides[1..].to_vec(),
                combine: sink.combine,
            }];
            run_checked(
                Isa::detect(),
                &Program::copy(source.data.dtype()),
                rest,
                &[source],
                &mut target,
            );
        }
    }
    Ok(divided.into_inner())
}

/// The elements of a partial result over `lens` of a sink with `strides` there: one per
/// position along the axes it keeps (stride not 0).
fn partial_len(lens: &[usize], strides: &[isize]) -> usize {
    (lens.iter().zip(strides))
        .filter(|(_, s)| **s != 0)
        .map(|(l, _)| l)
        .product()
}

/// The strides of a partial result (row-major over the axes the sink keeps, 0 elsewhere).
fn partial_strides(lens: &[usize], strides: &[isize]) -> Vec<isize> {
    let mut out = vec![0isize; lens.len()];
    let mut step = 1isize;
    for a in (0..lens.len()).rev() {
        if strides[a] != 0 {
            out[a] = step;
            step *= lens[a] as isize;
        }
    }
    out
}

/// The vector instructions the interpreter's arithmetic is compiled for: the widest this CPU
/// has, picked once per run (every path gives the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Baseline,
}

impl Isa {
    /// Every path, widest first.
    #[cfg(test)]
    const ALL: &'static [Isa] = &[
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2,
        Isa::Baseline,
    ];

    /// Whether this CPU can run the path.
    fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            Isa::Baseline => true,
        }
    }

    fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        for isa in [Isa::Avx512, Isa::Avx2] {
            if isa.available() {
                return isa;
            }
        }
        Isa::Baseline
    }
}

/// One run on this thread: its program, its operands, the positions where the current row
/// of the innermost axis starts in each, and each one's stride between the rows of a block.
struct Run<'r, 's, 'd> {
    program: &'r Program,
    sources: &'r [StridedSource<'s>],
    source_base: Vec<isize>,
    source_rows: Vec<isize>,
    sinks: &'r mut [StridedSink<'d>],
    sink_base: Vec<isize>,
    sink_rows: Vec<isize>,
}

/// The elements one pass over the program computes: `cols` elements from `col` of the
/// innermost axis in each of `rows` rows from `row` of the next axis (one row where the
/// innermost axis is long), stored row after row in the registers.
#[derive(Clone, Copy)]
struct Block {
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
}

impl Block {
    fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether an operand with strides `inner` (innermost axis) and `between` (between rows)
    /// holds the block's elements in a row of its own, which is read where it lies.
    fn contiguous(&self, inner: isize, between: isize) -> bool {
        inner == 1 && (self.rows == 1 || between == self.cols as isize)
    }

    /// Where element 0 of row `r` of the block lies for an operand at `base`.
    fn first(&self, r: usize, base: isize, inner: isize, between: isize) -> isize {
        base + (self.row + r) as isize * between + self.col as isize * inner
    }
}

/// Runs every instruction of the program on `block` and writes (or combines) its results
/// into the sinks, compiled for `isa`.
fn run_block(isa: Isa, run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX-512F (and with it AVX2 and FMA) on this CPU.
        Isa::Avx512 => unsafe { run_block_avx512(run, blocks, block) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX2 and FMA on this CPU.
        Isa::Avx2 => unsafe { run_block_avx2(run, blocks, block) },
        Isa::Baseline => run_block_body(run, blocks, block),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
fn run_block_avx512(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    run_block_body(run, blocks, block);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_block_avx2(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    run_block_body(run, blocks, block);
}

/// [`run_block`]'s body: the arithmetic and the writes are inlined, so they take the
/// caller's instructions.
#[inline(always)]
fn run_block_body(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    let (program, sources) = (run.program, run.sources);
    let (source_base, source_rows) = (&run.source_base[..], &run.source_rows[..]);
    let n = block.len();
    for (i, inst) in program.insts.iter().enumerate() {
        let (done, rest) = blocks.split_at_mut(i);
        let out = &mut rest[0];
        macro_rules! arg {
            ($j:expr) => {
                operand(
                    program,
                    $j,
                    done,
                    (sources, source_base, source_rows),
                    block,
                )
            };
        }
        match *inst {
            Inst::Leaf(k) => {
                let s = &sources[k];
                let inner = s.strides.last().copied().unwrap_or(0);
                if !block.contiguous(inner, source_rows[k]) {
                    for r in 0..block.rows {
                        let first = block.first(r, source_base[k], inner, source_rows[k]);
                        gather(out, r * block.cols, s.data, first, inner, block.cols);
                    }
                }
            }
            // Filled once per run ([`run_checked`]).
            Inst::Const(_) => {}
            Inst::Unary(op, a) => unary(op, out, arg!(a), n),
            Inst::Binary(op, a, b) => binary(op, out, arg!(a), arg!(b), n),
            Inst::Compare(op, a, b) => compare(op, out, arg!(a), arg!(b), n),
            Inst::Select(c, a, b) => select(out, arg!(c), arg!(a), arg!(b), n),
            Inst::Cast(a) => cast(out, arg!(a), n),
        }
    }
    for (r, sink) in run.sinks.iter_mut().enumerate() {
        let inner = sink.strides.last().copied().unwrap_or(0);
        let (base, between) = (run.sink_base[r], run.sink_rows[r]);
        let root = program.roots[r];
        let values = operand(
            program,
            root,
            blocks,
            (sources, source_base, source_rows),
            block,
        );
        if block.contiguous(inner, between) {
            scatter(sink, block.first(0, base, inner, between), 1, values, n);
        } else {
            for row in 0..block.rows {
                let first = block.first(row, base, inner, between);
                let values = values.slice(row * block.cols, (row + 1) * block.cols);
                scatter(sink, first, inner, values, block.cols);
            }
        }
    }
}

/// The values of instruction `j` in `block`: a leaf that holds the block contiguously is
/// read where it lies (no copy), every other instruction from its register.
#[inline(always)]
fn operand<'b>(
    program: &Program,
    j: usize,
    done: &'b [Values],
    (sources, source_base, source_rows): (&'b [StridedSource<'_>], &[isize], &[isize]),
    block: Block,
) -> Elements<'b> {
    if let Inst::Leaf(k) = program.insts[j] {
        let s = &sources[k];
        let inner = s.strides.last().copied().unwrap_or(0);
        if block.contiguous(inner, source_rows[k]) {
            let first = block.first(0, source_base[k], inner, source_rows[k]) as usize;
            return s.data.slice(first, first + block.len());
        }
    }
    done[j].elements().slice(0, block.len())
}

/// [`run`] after its checks, on this thread, on the vector path `isa` (which this CPU has).
///
/// Rows of the innermost axis shorter than half a block go several to a block (rows of the
/// next axis), so that short rows do not pay the program's dispatch each; every element is
/// computed and combined in the same order either way.
fn run_checked(
    isa: Isa,
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: &mut [StridedSink<'_>],
) {
    let rank = lens.len();
    let inner = lens.last().copied().unwrap_or(1);
    let rows_per_block = match rank {
        2.. if inner <= BLOCK / 2 => (BLOCK / inner).min(lens[rank - 2]),
        _ => 1,
    };
    let tiled = rows_per_block > 1;
    let outer_lens = &lens[..rank.saturating_sub(if tiled { 2 } else { 1 })];
    let row_stride = |strides: &[isize]| if tiled { strides[rank - 2] } else { 0 };
    let mut regs = Registers::take(&program.types);
    // A constant's block is the same in every block: filled once, here.
    for (inst, block) in program.insts.iter().zip(&mut regs.blocks) {
        if let Inst::Const(v) = *inst {
            with_values!(block, o => fill(o, v));
        }
    }
    let mut index = vec![0usize; outer_lens.len()];
    let outer_count: usize = outer_lens.iter().product();
    let mut run = Run {
        program,
        sources,
        source_base: vec![0isize; sources.len()],
        source_rows: sources.iter().map(|s| row_stride(&s.strides)).collect(),
        sink_base: vec![0isize; sinks.len()],
        sink_rows: sinks.iter().map(|s| row_stride(&s.strides)).collect(),
        sinks,
    };
    for _ in 0..outer_count {
        let base = |offset: usize, strides: &[isize]| {
            offset as isize
                + index
                    .iter()
                    .zip(strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()
        };
        for (b, s) in run.source_base.iter_mut().zip(sources) {
            *b = base(s.offset, &s.strides);
        }
        for (b, s) in run.sink_base.iter_mut().zip(run.sinks.iter()) {
            *b = base(s.offset, &s.strides);
        }
        if tiled {
            let row_len = lens[rank - 2];
            let mut row = 0;
            while row < row_len {
                let rows = rows_per_block.min(row_len - row);
                let block = Block {
                    row,
                    rows,
                    col: 0,
                    cols: inner,
                };
                run_block(isa, &mut run, &mut regs.blocks, block);
                row += rows;
            }
        } else {
            let mut col = 0;
            while col < inner {
                let cols = BLOCK.min(inner - col);
                let block = Block {
                    row: 0,
                    rows: 1,
                    col,
                    cols,
                };
                run_block(isa, &mut run, &mut regs.blocks, block);
                col += cols;
            }
        }
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < outer_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

fn fill<T: Element>(out: &mut [T], v: f64) {
    out.fill(T::from_f64(v));
}

/// `out[at + j] = data[first + j * stride]` for `j < n`; `run` checked the positions and
/// types.
fn gather(out: &mut Values, at: usize, data: Elements<'_>, first: isize, stride: isize, n: usize) {
    fn typed<T: Element>(out: &mut [T], data: &[T], first: isize, stride: isize) {
        let first = first as usize;
        match stride {
            0 => out.fill(data[first]),
            1 => out.copy_from_slice(&data[first..first + out.len()]),
            _ => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = data[(first as isize + j as isize * stride) as usize];
                }
            }
        }
    }
    match (out, data) {
        (Values::F32(o), Elements::F32(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::F64(o), Elements::F64(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::F16(o), Elements::F16(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::BF16(o), Elements::BF16(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::I32(o), Elements::I32(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::I64(o), Elements::I64(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::U8(o), Elements::U8(d)) => typed(&mut o[at..at + n], d, first, stride),
        (Values::Bool(o), Elements::Bool(d)) => typed(&mut o[at..at + n], d, first, stride),
        _ => unreachable!("`run` checked each source's type"),
    }
}

#[inline(always)]
fn unary(op: UnaryOp, out: &mut Values, a: Elements<'_>, n: usize) {
    match (out, a) {
        (Values::F32(o), Elements::F32(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::F64(o), Elements::F64(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::F16(o), Elements::F16(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::BF16(o), Elements::BF16(x)) => expect_ran(op.apply_all(&mut o[..n], &x[..n])),
        (Values::I32(o), Elements::I32(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        (Values::I64(o), Elements::I64(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        (Values::U8(o), Elements::U8(x)) => expect_ran(op.apply_all_int(&mut o[..n], &x[..n])),
        _ => unreachable!("the compiler typed the operation"),
    }
}

#[inline(always)]
fn binary(op: BinaryOp, out: &mut Values, a: Elements<'_>, b: Elements<'_>, n: usize) {
    match (out, a, b) {
        (Values::F32(o), Elements::F32(x), Elements::F32(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::F64(o), Elements::F64(x), Elements::F64(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::F16(o), Elements::F16(x), Elements::F16(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::BF16(o), Elements::BF16(x), Elements::BF16(y)) => {
            expect_ran(op.apply_all(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::I32(o), Elements::I32(x), Elements::I32(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::I64(o), Elements::I64(x), Elements::I64(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        (Values::U8(o), Elements::U8(x), Elements::U8(y)) => {
            expect_ran(op.apply_all_int(&mut o[..n], &x[..n], &y[..n]))
        }
        _ => unreachable!("the compiler typed the operation"),
    }
}

/// An op ran: the compiler rejects ops outside their domain (float-only ops on integers,
/// bitwise ops on floats), and a skipped op would leave a reused register's old values in
/// place.
fn expect_ran(ran: bool) {
    assert!(ran, "an op on elements outside its domain");
}

fn compare(op: CompareOp, out: &mut Values, a: Elements<'_>, b: Elements<'_>, n: usize) {
    fn typed<T: Element>(op: CompareOp, out: &mut [bool], a: &[T], b: &[T]) {
        op.apply_all(out, a, b);
    }
    let Values::Bool(o) = out else {
        unreachable!("a comparison gives bool")
    };
    let o = &mut o[..n];
    match (a, b) {
        (Elements::F32(x), Elements::F32(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::F64(x), Elements::F64(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::F16(x), Elements::F16(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::BF16(x), Elements::BF16(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::I32(x), Elements::I32(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::I64(x), Elements::I64(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::U8(x), Elements::U8(y)) => typed(op, o, &x[..n], &y[..n]),
        (Elements::Bool(x), Elements::Bool(y)) => typed(op, o, &x[..n], &y[..n]),
        _ => unreachable!("the compiler typed the comparison"),
    }
}

fn select(out: &mut Values, c: Elements<'_>, a: Elements<'_>, b: Elements<'_>, n: usize) {
    fn typed<T: Element>(out: &mut [T], c: Elements<'_>, a: &[T], b: &[T]) {
        fn each<C: Element, T: Element>(out: &mut [T], c: &[C], a: &[T], b: &[T]) {
            for (((o, &c), &x), &y) in out.iter_mut().zip(c).zip(a).zip(b) {
                *o = if c != C::zero() { x } else { y };
            }
        }
        with_elements!(c, v => each(out, v, a, b))
    }
    match (out, a, b) {
        (Values::F32(o), Elements::F32(x), Elements::F32(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::F64(o), Elements::F64(x), Elements::F64(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::F16(o), Elements::F16(x), Elements::F16(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::BF16(o), Elements::BF16(x), Elements::BF16(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::I32(o), Elements::I32(x), Elements::I32(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::I64(o), Elements::I64(x), Elements::I64(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::U8(o), Elements::U8(x), Elements::U8(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        (Values::Bool(o), Elements::Bool(x), Elements::Bool(y)) => {
            typed(&mut o[..n], c, &x[..n], &y[..n])
        }
        _ => unreachable!("the compiler typed the selection"),
    }
}

fn cast(out: &mut Values, a: Elements<'_>, n: usize) {
    fn typed<U: Element>(out: &mut [U], a: Elements<'_>) {
        fn each<T: Element, U: Element>(out: &mut [U], a: &[T]) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = x.cast::<U>();
            }
        }
        with_elements!(a, v => each(out, v))
    }
    with_values!(out, o => typed(&mut o[..n], a))
}

/// Writes or combines the first `n` values of `block` at `first + j * stride`.
#[inline(always)]
fn scatter(sink: &mut StridedSink<'_>, first: isize, stride: isize, block: Elements<'_>, n: usize) {
    #[inline(always)]
    fn overwrite<T: Element>(data: &mut [T], first: isize, stride: isize, values: &[T]) {
        debug_assert!(
            stride != 0 || values.len() == 1,
            "an overwriting sink reduces nothing"
        );
        match stride {
            0 => data[first as usize] = values[values.len() - 1],
            1 => data[first as usize..first as usize + values.len()].copy_from_slice(values),
            _ => {
                for (j, &v) in values.iter().enumerate() {
                    data[(first + j as isize * stride) as usize] = v;
                }
            }
        }
    }
    #[inline(always)]
    fn combine<T: Num>(op: ReduceOp, data: &mut [T], first: isize, stride: isize, values: &[T]) {
        match op {
            ReduceOp::Sum => combine_by::<T, SumOp>(data, first, stride, values),
            ReduceOp::Prod => combine_by::<T, ProdOp>(data, first, stride, values),
            ReduceOp::Max => combine_by::<T, MaxOp>(data, first, stride, values),
            ReduceOp::Min => combine_by::<T, MinOp>(data, first, stride, values),
        }
    }
    #[inline(always)]
    fn combine_by<T: Num, R: ReduceFn<T>>(
        data: &mut [T],
        first: isize,
        stride: isize,
        values: &[T],
    ) {
        let first = first as usize;
        match stride {
            // Into one element: in 16 lanes (which vectorise and do not wait on each other),
            // then the lanes in a fixed tree: the order depends only on `values.len()`.
            0 => {
                const LANES: usize = 16;
                let mut lanes = [R::identity(); LANES];
                let chunks = values.chunks_exact(LANES);
                let rest = chunks.remainder();
                for chunk in chunks {
                    for (lane, &v) in lanes.iter_mut().zip(chunk) {
                        *lane = R::combine(*lane, v);
                    }
                }
                for (lane, &v) in lanes.iter_mut().zip(rest) {
                    *lane = R::combine(*lane, v);
                }
                let mut width = LANES;
                while width > 1 {
                    width /= 2;
                    for i in 0..width {
                        lanes[i] = R::combine(lanes[i], lanes[i + width]);
                    }
                }
                data[first] = R::combine(data[first], lanes[0]);
            }
            1 => {
                for (d, &v) in data[first..first + values.len()].iter_mut().zip(values) {
                    *d = R::combine(*d, v);
                }
            }
            _ => {
                for (j, &v) in values.iter().enumerate() {
                    let d = &mut data[(first as isize + j as isize * stride) as usize];
                    *d = R::combine(*d, v);
                }
            }
        }
    }
    macro_rules! typed {
        ($($variant:ident),*) => {
            match (&mut sink.data, block, sink.combine) {
                $(
                    (ElementsMut::$variant(d), Elements::$variant(v), None) => {
                        overwrite(d, first, stride, &v[..n])
                    }
                    (ElementsMut::$variant(d), Elements::$variant(v), Some(op)) => {
                        combine(op, d, first, stride, &v[..n])
                    }
                )*
                (ElementsMut::Bool(d), Elements::Bool(v), None) => overwrite(d, first, stride, &v[..n]),
                _ => unreachable!("`run` checked each sink's type"),
            }
        };
    }
    typed!(F32, F64, F16, BF16, I32, I64, U8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::IrNode;

    /// Several element types in one program: `select(cast(a) < b, cast(a), b * 2)`.
    #[test]
    fn mixed_types_and_reductions() {
        let mut ir = Ir::default();
        let (a, b) = (ir.leaf(), ir.leaf());
        let wide = ir.push(IrNode::Cast(DType::I64, a));
        let less = ir.push(IrNode::Compare(CompareOp::Less, wide, b));
        let two = ir.push(IrNode::Scalar(2.0));
        let doubled = ir.push(IrNode::Binary(BinaryOp::Mul, b, two));
        let root = ir.push(IrNode::Select(less, wide, doubled));
        // `a` is i32, `b` i64: the select's branches are both i64.
        let program =
            Program::compile(&ir, &[root], &[DType::I32, DType::I64], DType::I64).unwrap();
        let (xs, ys) = ([1i32, 5, -3], [4i64, 2, -7]);
        let sources = || {
            [Elements::I32(&xs), Elements::I64(&ys)].map(|data| StridedSource {
                data,
                offset: 0,
                strides: vec![1],
            })
        };
        let mut out = [0i64; 3];
        let sink = StridedSink {
            data: ElementsMut::I64(&mut out),
            offset: 0,
            strides: vec![1],
            combine: None,
        };
        run(&program, &[3], &sources(), &mut [sink]).unwrap();
        assert_eq!(out, [1, 4, -14]);
        // A maximum over the one axis: stride 0 into one element that starts at the identity.
        let mut best = [i64::MIN];
        let sink = StridedSink {
            data: ElementsMut::I64(&mut best),
            offset: 0,
            strides: vec![0],
            combine: Some(ReduceOp::Max),
        };
        run(&program, &[3], &sources(), &mut [sink]).unwrap();
        assert_eq!(best, [4]);
    }

    /// Random iteration spaces (lengths 1 to 40 over up to 4 axes) with operands that are
    /// permuted, strided, reversed and broadcast, and two results — one written, one summed
    /// over a random subset of the axes onto its starting values — against a plain loop over
    /// every position, on 1, 2 and 3 threads. The values are small integers, so every sum is
    /// exact whatever the order of additions.
    #[test]
    fn canonical_and_split_runs_match_a_plain_loop() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // `a * b - c` and, for the second result, the same plus 1.
        let mut ir = Ir::default();
        let (a, b, c) = (ir.leaf(), ir.leaf(), ir.leaf());
        let ab = ir.push(IrNode::Binary(BinaryOp::Mul, a, b));
        let first = ir.push(IrNode::Binary(BinaryOp::Sub, ab, c));
        let one = ir.push(IrNode::Scalar(1.0));
        let second = ir.push(IrNode::Binary(BinaryOp::Add, first, one));
        let types = [DType::F64; 3];
        let program = Program::compile(&ir, &[first, second], &types, DType::F64).unwrap();
        for case in 0..60 {
            let rank = rng.random_range(1..=4);
            let lens: Vec<usize> = (0..rank)
                .map(|_| [1, 2, 3, 7, 16, 40][rng.random_range(0..6)])
                .collect();
            let count: usize = lens.iter().product();
            // Row-major strides over a random order of the axes, some reversed, some 0.
            let layout = |rng: &mut rand_chacha::ChaCha8Rng,
                          broadcast: bool|
             -> (usize, Vec<isize>, usize) {
                let mut order: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
                let mut strides = vec![0isize; rank];
                let mut step = 1isize;
                for &axis in order.iter().rev() {
                    if broadcast && rng.random_bool(0.3) {
                        continue;
                    }
                    strides[axis] = step * rng.random_range(1..=2i64) as isize;
                    step = strides[axis] * lens[axis] as isize;
                }
                let len = step as usize;
                let mut offset = 0;
                for (axis, stride) in strides.iter_mut().enumerate() {
                    if rng.random_bool(0.3) {
                        offset += (lens[axis] - 1) * stride.unsigned_abs();
                        *stride = -*stride;
                    }
                }
                (offset, strides, len)
            };
            let mut inputs = Vec::new();
            for _ in 0..3 {
                let (offset, strides, len) = layout(&mut rng, true);
                let values: Vec<f64> = (0..len).map(|_| rng.random_range(-9..=9) as f64).collect();
                inputs.push((values, offset, strides));
            }
            let (written_offset, written_strides, written_len) = layout(&mut rng, false);
            // The sum keeps a random subset of the axes, row-major.
            let kept: Vec<bool> = (0..rank).map(|_| rng.random_bool(0.5)).collect();
            let mut sum_strides = vec![0isize; rank];
            let mut step = 1;
            for axis in (0..rank).rev() {
                if kept[axis] {
                    sum_strides[axis] = step;
                    step *= lens[axis] as isize;
                }
            }
            let sum_len = step as usize;
            let start: Vec<f64> = (0..sum_len).map(|i| i as f64).collect();
            // The plain loop.
            let mut want_written = vec![0.0; written_len];
            let mut want_sum = start.clone();
            let position = |offset: usize, strides: &[isize], index: &[usize]| {
                (offset as isize
                    + index
                        .iter()
                        .zip(strides)
                        .map(|(&i, &s)| i as isize * s)
                        .sum::<isize>()) as usize
            };
            for flat in 0..count {
                let mut index = vec![0; rank];
                let mut rest = flat;
                for axis in (0..rank).rev() {
                    index[axis] = rest % lens[axis];
                    rest /= lens[axis];
                }
                let v: Vec<f64> = (inputs.iter())
                    .map(|(values, offset, strides)| values[position(*offset, strides, &index)])
                    .collect();
                let value = v[0] * v[1] - v[2];
                want_written[position(written_offset, &written_strides, &index)] = value;
                want_sum[position(0, &sum_strides, &index)] += value + 1.0;
            }
            for threads in [1, 2, 3] {
                super::threads::set_threads(threads).unwrap();
                let sources: Vec<StridedSource<'_>> = (inputs.iter())
                    .map(|(values, offset, strides)| StridedSource {
                        data: Elements::F64(values),
                        offset: *offset,
                        strides: strides.clone(),
                    })
                    .collect();
                let mut written = vec![f64::NAN; written_len];
                let mut sum = start.clone();
                let mut sinks = [
                    StridedSink {
                        data: ElementsMut::F64(&mut written),
                        offset: written_offset,
                        strides: written_strides.clone(),
                        combine: None,
                    },
                    StridedSink {
                        data: ElementsMut::F64(&mut sum),
                        offset: 0,
                        strides: sum_strides.clone(),
                        combine: Some(ReduceOp::Sum),
                    },
                ];
                run(&program, &lens, &sources, &mut sinks).unwrap();
                let context = format!("case {case}: lens {lens:?}, {threads} threads");
                // Positions the loop never wrote stay NaN in both.
                let same = |x: &f64, y: &f64| x == y || (x.is_nan() && *y == 0.0);
                assert!(
                    written.iter().zip(&want_written).all(|(x, y)| same(x, y)),
                    "{context}"
                );
                assert_eq!(sum, want_sum, "{context}");
            }
        }
        super::threads::set_threads(2).unwrap();
    }

    /// Short rows run several to a block: every sum is the same bits as running the rows
    /// one at a time — a sum along the rows (each row into one element) and a sum across
    /// them (each column into one element), over a strided, reversed operand.
    #[test]
    fn rows_in_one_block_sum_as_rows_one_at_a_time() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut ir = Ir::default();
        let x = ir.leaf();
        let root = ir.push(IrNode::Unary(crate::ir::UnaryOp::Exp, x));
        let program = Program::compile(&ir, &[root], &[DType::F32], DType::F32).unwrap();
        for (rows, cols) in [(40, 3), (9, 16), (100, 17), (5, 128)] {
            let values: Vec<f32> = (0..2 * rows * cols).map(|_| rng.random()).collect();
            // Row r, column c at 2·(rows·cols − 1 − (r·cols + c)): strided and reversed.
            let source = |offset: usize, strides: Vec<isize>| StridedSource {
                data: Elements::F32(&values),
                offset,
                strides,
            };
            let last = 2 * (rows * cols - 1);
            let whole = [source(last, vec![-2 * cols as isize, -2])];
            let sum = |lens: &[usize], sources: &[StridedSource<'_>], out: &mut [f32], strides| {
                let sink = StridedSink {
                    data: ElementsMut::F32(out),
                    offset: 0,
                    strides,
                    combine: Some(ReduceOp::Sum),
                };
                run(&program, lens, sources, &mut [sink]).unwrap();
            };
            let (mut along, mut across) = (vec![0.0f32; rows], vec![0.0f32; cols]);
            sum(&[rows, cols], &whole, &mut along, vec![1, 0]);
            sum(&[rows, cols], &whole, &mut across, vec![0, 1]);
            let (mut want_along, mut want_across) = (vec![0.0f32; rows], vec![0.0f32; cols]);
            for r in 0..rows {
                let row = [source(last - 2 * r * cols, vec![-2])];
                sum(&[cols], &row, &mut want_along[r..=r], vec![0]);
                sum(&[cols], &row, &mut want_across, vec![1]);
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&along), bits(&want_along), "{rows}×{cols} along");
            assert_eq!(bits(&across), bits(&want_across), "{rows}×{cols} across");
        }
    }

    /// A run long enough to be split, whose parts each see different values: the result is
    /// the same bits on every thread count, and an integer division by zero in any part is
    /// an error.
    #[test]
    fn split_runs_are_the_same_on_every_thread_count() {
        let mut ir = Ir::default();
        let (a, b) = (ir.leaf(), ir.leaf());
        let e = ir.push(IrNode::Unary(UnaryOp::Exp, a));
        let root = ir.push(IrNode::Binary(BinaryOp::Div, e, b));
        let program = Program::compile(&ir, &[root], &[DType::F32; 2], DType::F32).unwrap();
        let (rows, cols) = (300, 257);
        let xs: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let ys: Vec<f32> = (0..rows * cols)
            .map(|i| 1.5 + (i as f32 * 0.11).cos())
            .collect();
        let result = |threads: usize| {
            super::threads::set_threads(threads).unwrap();
            let mut out = vec![0f32; rows * cols];
            let sources = [&xs, &ys].map(|v| row_major_source(Elements::F32(v), cols));
            let sink = row_major_sink(ElementsMut::F32(&mut out), cols);
            run(&program, &[rows, cols], &sources, &mut [sink]).unwrap();
            out
        };
        let one = result(1);
        assert!(
            one.iter()
                .zip(&xs)
                .zip(&ys)
                .all(|((&o, &x), &y)| { ((o - x.exp() / y) / o).abs() < 1e-6 })
        );
        assert!(one == result(2) && one == result(3));
        // An integer division by zero in the last part only.
        let program = Program::compile(&ir_div(), &[2], &[DType::I32; 2], DType::I32).unwrap();
        let mut divisors = vec![3i32; rows * cols];
        divisors[rows * cols - 1] = 0;
        let dividends = vec![7i32; rows * cols];
        for threads in [1, 2, 3] {
            super::threads::set_threads(threads).unwrap();
            let mut out = vec![0i32; rows * cols];
            let sources = [&dividends, &divisors].map(|v| row_major_source(Elements::I32(v), cols));
            let sink = row_major_sink(ElementsMut::I32(&mut out), cols);
            let err = run(&program, &[rows, cols], &sources, &mut [sink]).unwrap_err();
            assert!(
                matches!(err, Error::DivisionByZero),
                "{threads} threads: {err}"
            );
        }
        super::threads::set_threads(2).unwrap();
    }

    /// A bf16 sum over 4,096 rows into a strided view of a larger buffer (every other
    /// element, from the third, running backwards): combined in f32 and rounded once, exact;
    /// the elements the view skips are untouched.
    #[test]
    fn half_sums_into_a_strided_view_combine_in_f32() {
        let mut ir = Ir::default();
        let x = ir.leaf();
        let scale = ir.push(IrNode::Scalar(0.25));
        let quarter = ir.push(IrNode::Binary(BinaryOp::Mul, x, scale));
        let (rows, cols) = (4096, 3);
        let program = Program::compile(&ir, &[quarter], &[DType::BF16], DType::BF16).unwrap();
        let ones = vec![bf16::ONE; rows * cols];
        let source = row_major_source(Elements::BF16(&ones), cols);
        let mut data = vec![bf16::from_f32(8.0); 10];
        let mut sinks = [StridedSink {
            data: ElementsMut::BF16(&mut data),
            offset: 6,
            strides: vec![0, -2],
            combine: Some(ReduceOp::Sum),
        }];
        run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
        let got: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
        // 8 + 4096 × 0.25 at 6, 4 and 2; 8 elsewhere.
        assert_eq!(got, [8., 8., 1032., 8., 1032., 8., 1032., 8., 8., 8.]);
    }

    /// A bias's gradient (a sum over 4,096 rows) is cut into the same partial sums whether
    /// its program is cheap enough to run on one thread or costly enough to split: the sums
    /// are the same bits either way, whatever the cost model says.
    #[test]
    fn outer_sums_do_not_depend_on_the_cost_of_their_program() {
        let (rows, cols) = (4096, 128);
        let xs: Vec<f32> = (0..rows * cols)
            .map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 97) as f32))
            .collect();
        let sum_of = |ones: usize| {
            let mut ir = Ir::default();
            let mut x = ir.leaf();
            let one = ir.push(IrNode::Scalar(1.0));
            for _ in 0..ones {
                x = ir.push(IrNode::Binary(BinaryOp::Mul, x, one));
            }
            let program = Program::compile(&ir, &[x], &[DType::F32], DType::F32).unwrap();
            let pays =
                cost::INTERPRETED.pays(cost::interpreted_ns(rows * cols, program.insts.len()));
            let mut sums = vec![0f32; cols];
            let mut sinks = [StridedSink {
                data: ElementsMut::F32(&mut sums),
                offset: 0,
                strides: vec![0, 1],
                combine: Some(ReduceOp::Sum),
            }];
            let source = row_major_source(Elements::F32(&xs), cols);
            run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
            (pays, sums)
        };
        for threads in [1, 2] {
            super::threads::set_threads(threads).unwrap();
            let (cheap_pays, cheap) = sum_of(0);
            let (costly_pays, costly) = sum_of(4);
            assert!(
                !cheap_pays && costly_pays,
                "the two programs meet the cost model"
            );
            assert_eq!(cheap, costly, "{threads} threads");
            for (c, &sum) in cheap.iter().enumerate() {
                let exact: f64 = (0..rows).map(|r| xs[r * cols + c] as f64).sum();
                let scale: f64 = (0..rows).map(|r| xs[r * cols + c].abs() as f64).sum();
                assert!((sum as f64 - exact).abs() <= 1e-5 * scale, "column {c}");
            }
        }
        super::threads::set_threads(2).unwrap();
    }

    /// Sums and maxima over the outermost axis (a bias's gradient), beside a result that
    /// keeps it: the run is cut into partial results combined in a fixed order, so the
    /// values match a plain loop (exact on integer values) and are the same bits on every
    /// thread count (on float values).
    #[test]
    fn outer_reductions_combine_partials_in_a_fixed_order() {
        let mut ir = Ir::default();
        let x = ir.leaf();
        let two = ir.push(IrNode::Scalar(2.0));
        let doubled = ir.push(IrNode::Binary(BinaryOp::Mul, x, two));
        let e = ir.push(IrNode::Unary(UnaryOp::Exp, x));
        let (rows, cols) = (300, 200);
        let run_with = |xs: &[f64], root: usize, threads: usize| {
            super::threads::set_threads(threads).unwrap();
            let program =
                Program::compile(&ir, &[doubled, root, root], &[DType::F64], DType::F64).unwrap();
            let (mut written, mut sums, mut maxima) = (
                vec![0.0; rows * cols],
                vec![1.0; cols],
                vec![f64::MIN; cols],
            );
            let source = row_major_source(Elements::F64(xs), cols);
            let over_rows = |data, combine| StridedSink {
                data,
                offset: 0,
                strides: vec![0, 1],
                combine: Some(combine),
            };
            let mut sinks = [
                row_major_sink(ElementsMut::F64(&mut written), cols),
                over_rows(ElementsMut::F64(&mut sums), ReduceOp::Sum),
                over_rows(ElementsMut::F64(&mut maxima), ReduceOp::Max),
            ];
            run(&program, &[rows, cols], &[source], &mut sinks).unwrap();
            (written, sums, maxima)
        };
        let ints: Vec<f64> = (0..rows * cols)
            .map(|i| ((i * 37) % 19) as f64 - 9.0)
            .collect();
        let (written, sums, maxima) = run_with(&ints, x, 2);
        assert!(written.iter().zip(&ints).all(|(w, x)| *w == 2.0 * x));
        for c in 0..cols {
            let column = (0..rows).map(|r| ints[r * cols + c]);
            assert_eq!(sums[c], 1.0 + column.clone().sum::<f64>(), "column {c}");
            assert_eq!(maxima[c], column.fold(f64::MIN, f64::max), "column {c}");
        }
        let floats: Vec<f64> = (0..rows * cols).map(|i| (i as f64 * 0.37).sin()).collect();
        let one = run_with(&floats, e, 1);
        assert!(one == run_with(&floats, e, 2) && one == run_with(&floats, e, 3));
        super::threads::set_threads(2).unwrap();
    }

    /// The math functions and an inner sum on every vector path: each path this CPU has
    /// gives the bits of the baseline path; a path it lacks prints SKIPPED.
    #[test]
    fn every_vector_path_gives_the_same_bits() {
        let mut ir = Ir::default();
        let x = ir.leaf();
        let mut total = ir.push(IrNode::Unary(UnaryOp::Exp, x));
        for op in [UnaryOp::Ln, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Gelu] {
            let y = ir.push(IrNode::Unary(op, x));
            total = ir.push(IrNode::Binary(BinaryOp::Add, total, y));
        }
        let program = Program::compile(&ir, &[total, total], &[DType::F32], DType::F32).unwrap();
        let (rows, cols) = (40, 1000);
        let xs: Vec<f32> = (0..rows * cols)
            .map(|i| 1e-3 + 12.0 * (i as f32 * 0.731).sin().abs())
            .collect();
        let on = |isa: Isa| {
            let source = row_major_source(Elements::F32(&xs), cols);
            let (mut values, mut sums) = (vec![0f32; rows * cols], vec![0f32; rows]);
            let mut sinks = [
                row_major_sink(ElementsMut::F32(&mut values), cols),
                StridedSink {
                    data: ElementsMut::F32(&mut sums),
                    offset: 0,
                    strides: vec![1, 0],
                    combine: Some(ReduceOp::Sum),
                },
            ];
            run_checked(isa, &program, &[rows, cols], &[source], &mut sinks);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            (bits(&values), bits(&sums))
        };
        let baseline = on(Isa::Baseline);
        for &isa in Isa::ALL {
            if !isa.available() {
                println!("{isa:?}: SKIPPED (this CPU lacks it)");
                continue;
            }
            assert!(on(isa) == baseline, "{isa:?} differs from the baseline");
            println!("{isa:?}: ran, the same bits as the baseline");
        }
    }

    /// A source over `rows × cols` elements stored row-major.
    fn row_major_source(data: Elements<'_>, cols: usize) -> StridedSource<'_> {
        StridedSource {
            data,
            offset: 0,
            strides: vec![cols as isize, 1],
        }
    }

    /// A sink written over `rows × cols` elements stored row-major.
    fn row_major_sink(data: ElementsMut<'_>, cols: usize) -> StridedSink<'_> {
        StridedSink {
            data,
            offset: 0,
            strides: vec![cols as isize, 1],
            combine: None,
        }
    }

    /// `a / b`.
    fn ir_div() -> Ir {
        let mut ir = Ir::default();
        let (a, b) = (ir.leaf(), ir.leaf());
        ir.push(IrNode::Binary(BinaryOp::Div, a, b));
        ir
    }

    #[test]
    fn float_only_ops_on_integers_and_mismatched_buffers_are_errors() {
        let mut ir = Ir::default();
        let a = ir.leaf();
        let root = ir.push(IrNode::Unary(UnaryOp::Exp, a));
        let err = Program::compile(&ir, &[root], &[DType::I32], DType::I32).unwrap_err();
        assert!(err.to_string().contains("`exp` on i32"), "{err}");
        let program = Program::compile(&ir, &[root], &[DType::F32], DType::F32).unwrap();
        // Runs the program on one source over `len` elements into one f32.
        let run_on = |source: Elements<'_>, len: usize| {
            let mut out = [0f32];
            let source = StridedSource {
                data: source,
                offset: 0,
                strides: vec![1],
            };
            let sink = StridedSink {
                data: ElementsMut::F32(&mut out),
                offset: 0,
                strides: vec![1],
                combine: None,
            };
            run(&program, &[len], &[source], &mut [sink]).map(|()| out)
        };
        let err = run_on(Elements::F64(&[0.0]), 1).unwrap_err();
        assert!(
            err.to_string()
                .contains("leaf 0 of type f32 given a source of type f64"),
            "{err}"
        );
        assert_eq!(run_on(Elements::F32(&[0.0]), 1).unwrap(), [1.0]);
        let err = run_on(Elements::F32(&[0.0]), 2).unwrap_err();
        assert!(err.to_string().contains("leaves its buffer"), "{err}");
    }
}
