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

mod blocks;
mod kernels;
mod program;
mod split;
#[cfg(test)]
mod tests;

use half::{bf16, f16};
use smallvec::SmallVec;

use crate::element::{
    DType, Element, Elements, ElementsMut, dtype_of, narrow_from_f32, widen_to_f32, with_dtype,
};
use crate::engine::canonical::{CanonicalAxis, canonical_axes};
use crate::error::{Error, Result};
use crate::ir::ops::identity_of;
use crate::ir::{Ir, ReduceOp};
use crate::layout::within;
use crate::num::Num;
use crate::storage::{self, HostVec};

pub(crate) use program::Program;
use program::{Inst, unsupported};
use split::run_split;

/// Elements per block: enough that each instruction's dispatch is paid over 64 vectors of
/// f32. A long program's registers then spill from L1 to L2, which costs less than dispatching
/// four times as often did (`benches/NOTES.md`).
pub(crate) const BLOCK: usize = 1024;

/// One stride per iteration axis, in elements (inline up to six axes: a run's operands are
/// described without allocating).
pub(crate) type Strides = SmallVec<[isize; 6]>;

/// One operand read by the interpreter: a buffer and, for each iteration axis, a stride
/// (0 where the operand is broadcast).
pub(crate) struct StridedSource<'a> {
    pub(crate) data: Elements<'a>,
    pub(crate) offset: usize,
    pub(crate) strides: Strides,
}

/// The results of one run, as [`split::run_split`] takes them.
type Sinks<'a> = SmallVec<[StridedSink<'a>; 4]>;

/// One result written by the interpreter.
pub(crate) struct StridedSink<'a> {
    pub(crate) data: ElementsMut<'a>,
    pub(crate) offset: usize,
    pub(crate) strides: Strides,
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
        with_values!(self, v => dtype_of(v))
    }

    /// `len` zeros (`false`) of type `ty`.
    pub(crate) fn new(ty: DType, len: usize) -> Values {
        with_dtype!(ty, T => Values::from(std::iter::repeat_n(T::zero(), len).collect::<HostVec<T>>()))
    }
}

/// Each element type's vector as the variant holding it.
macro_rules! values_from {
    ($($t:ty => $variant:ident),*) => {
        $(impl From<HostVec<$t>> for Values {
            fn from(values: HostVec<$t>) -> Values {
                Values::$variant(values)
            }
        })*
    };
}
values_from!(f32 => F32, f64 => F64, f16 => F16, bf16 => BF16, i32 => I32, i64 => I64, u8 => U8, bool => Bool);

/// What an element of a result starts as: the identity of `reduce` when given, else 0.
fn start_value<T: Num>(reduce: Option<ReduceOp>) -> T {
    reduce.map_or(T::zero(), |op| identity_of(op.identity()))
}

/// Sets every element of `data` to what a result's elements start as: the identity of
/// `reduce` when given, else 0 (`false` for bool), as [`Values::filled`] makes them.
pub(crate) fn fill(data: ElementsMut<'_>, reduce: Option<ReduceOp>) {
    match data {
        ElementsMut::F32(d) => d.fill(start_value(reduce)),
        ElementsMut::F64(d) => d.fill(start_value(reduce)),
        ElementsMut::F16(d) => d.fill(start_value(reduce)),
        ElementsMut::BF16(d) => d.fill(start_value(reduce)),
        ElementsMut::I32(d) => d.fill(start_value(reduce)),
        ElementsMut::I64(d) => d.fill(start_value(reduce)),
        ElementsMut::U8(d) => d.fill(start_value(reduce)),
        ElementsMut::Bool(d) => d.fill(false),
    }
}

impl Values {
    /// `count` elements of type `dtype`, each the identity of `reduce` when given, else 0.
    /// An error when the host has no room for them.
    pub(crate) fn filled(dtype: DType, count: usize, reduce: Option<ReduceOp>) -> Result<Values> {
        fn typed<T: Num>(count: usize, reduce: Option<ReduceOp>) -> Result<HostVec<T>> {
            storage::filled(count, start_value(reduce))
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
    // The iteration space in canonical form ([`canonical_axes`]), each operand's strides over
    // it; built in place (a training step runs this for every small job).
    let mut axes: SmallVec<[CanonicalAxis; 6]> =
        smallvec::smallvec![CanonicalAxis::default(); lens.len()];
    let all_strides =
        (sources.iter().map(|s| &s.strides[..])).chain(sinks.iter().map(|s| &s.strides[..]));
    let rank = canonical_axes(lens, all_strides, |_| false, &mut axes);
    axes.truncate(rank);
    let pick = |s: &[isize]| -> Strides { axes.iter().map(|c| s[c.axis]).collect() };
    let canonical_lens: SmallVec<[usize; 6]> = axes.iter().map(|c| c.len).collect();
    let mut canonical_sources: SmallVec<[StridedSource<'_>; 8]> = SmallVec::new();
    for s in sources {
        canonical_sources.push(StridedSource {
            data: s.data,
            offset: s.offset,
            strides: pick(&s.strides),
        });
    }
    let mut canonical_sinks: Sinks<'_> = SmallVec::new();
    for s in sinks.iter_mut() {
        canonical_sinks.push(StridedSink {
            data: s.data.reborrow(),
            offset: s.offset,
            strides: pick(&s.strides),
            combine: s.combine,
        });
    }
    if run_split(
        program,
        &canonical_lens,
        &canonical_sources,
        canonical_sinks,
    )? {
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
        let mut span: HostVec<f32> = std::iter::repeat_n(0.0, end - start).collect();
        match &sink.data {
            ElementsMut::F16(v) => widen_to_f32(&v[start..end], &mut span),
            ElementsMut::BF16(v) => widen_to_f32(&v[start..end], &mut span),
            _ => unreachable!("only half-type sinks are widened"),
        }
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
            ElementsMut::F16(out) => narrow_from_f32(span, &mut out[at]),
            ElementsMut::BF16(out) => narrow_from_f32(span, &mut out[at]),
            _ => unreachable!("only half-type sinks are widened"),
        }
    }
    Ok(())
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
