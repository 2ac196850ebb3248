//! A chunked interpreter for run-time IR ([`Ir`]): each op runs over a block of up to
//! [`CHUNK`] elements, so the dispatch on the op is paid once per block, not per element
//! (numexpr-style). Several roots may be written in one pass (the backward of a fused node
//! writes the gradient of every leaf at once).

use crate::error::{Error, Result};
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, UnaryOp};
use crate::num::Float;

/// Elements per block.
pub(crate) const CHUNK: usize = 256;

#[derive(Clone, Copy, Debug)]
enum Inst {
    Leaf(usize),
    Const(f64),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Compare(CompareOp, usize, usize),
    /// `select(cond != 0, a, b)`.
    Select(usize, usize, usize),
    /// Not needed by any root: skipped.
    Dead,
}

/// An [`Ir`] compiled for the interpreter: nodes no root needs removed.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    insts: Vec<Inst>,
    roots: Vec<usize>,
}

impl Program {
    /// The program that reads its one source: with an accumulating sink, a strided add.
    pub(crate) fn copy() -> Program {
        Program {
            insts: vec![Inst::Leaf(0)],
            roots: vec![0],
        }
    }

    /// Compiles `ir` to compute the nodes `roots`.
    pub(crate) fn compile(ir: &Ir, roots: &[usize]) -> Result<Program> {
        let live = ir.live(roots);
        let unsupported = |what: String| Error::Unsupported { what };
        let insts = ir
            .nodes
            .iter()
            .zip(&live)
            .map(|(node, &live)| {
                if !live {
                    return Ok(Inst::Dead);
                }
                Ok(match *node {
                    IrNode::Leaf(k) => Inst::Leaf(k),
                    IrNode::Scalar(v) => Inst::Const(v),
                    IrNode::Unary(op, a) => Inst::Unary(op, a),
                    IrNode::Binary(op, a, b) => Inst::Binary(op, a, b),
                    IrNode::Compare(op, a, b) => Inst::Compare(op, a, b),
                    IrNode::Select(c, a, b) => Inst::Select(c, a, b),
                    IrNode::Cast(to, _) => {
                        return Err(unsupported(format!(
                            "a cast to {} in a run-time expression",
                            to.name()
                        )));
                    }
                    IrNode::Map(_) => {
                        return Err(unsupported(
                            "a Rust closure in a run-time expression".into(),
                        ));
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Program {
            insts,
            roots: roots.to_vec(),
        })
    }
}

/// One operand read by the interpreter: a buffer and, for each iteration axis, a stride
/// (0 where the operand is broadcast).
pub(crate) struct Source<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) offset: usize,
    pub(crate) strides: Vec<isize>,
}

/// One result written by the interpreter; strides of 0 sum over that axis (accumulation
/// only).
pub(crate) struct Sink<'a, T> {
    pub(crate) data: &'a mut [T],
    pub(crate) offset: usize,
    pub(crate) strides: Vec<isize>,
    /// Add into the buffer instead of overwriting it.
    pub(crate) accumulate: bool,
}

/// Checks that every position `lens` and `strides` reach from `offset` lies in `0..len`.
fn check_bounds(lens: &[usize], strides: &[isize], offset: usize, len: usize) -> bool {
    if lens.contains(&0) {
        return true;
    }
    let (mut low, mut high) = (offset as isize, offset as isize);
    for (&l, &s) in lens.iter().zip(strides) {
        let reach = (l as isize - 1) * s;
        if reach < 0 {
            low += reach;
        } else {
            high += reach;
        }
    }
    low >= 0 && (high as usize) < len
}

/// Runs `program` over the iteration space `lens`: root `r` goes to `sinks[r]`.
///
/// Positions are checked against the buffers up front, so a wrong stride is an error, never
/// an out-of-bounds access; an overwriting sink must not have stride 0 on an axis longer
/// than 1 (the caller passes only accumulating sinks for sums).
pub(crate) fn run<T: Float>(
    program: &Program,
    lens: &[usize],
    sources: &[Source<'_, T>],
    sinks: &mut [Sink<'_, T>],
) -> Result<()> {
    assert_eq!(sinks.len(), program.roots.len(), "one sink per root");
    let rank = lens.len();
    let fits = sources
        .iter()
        .all(|s| s.strides.len() == rank && check_bounds(lens, &s.strides, s.offset, s.data.len()))
        && sinks.iter().all(|s| {
            s.strides.len() == rank && check_bounds(lens, &s.strides, s.offset, s.data.len())
        });
    if !fits {
        return Err(Error::Unsupported {
            what: "an operand layout that leaves its buffer".into(),
        });
    }
    if lens.contains(&0) {
        return Ok(());
    }
    let inner = lens.last().copied().unwrap_or(1);
    let outer_lens = &lens[..rank.saturating_sub(1)];
    let inner_stride = |strides: &[isize]| strides.last().copied().unwrap_or(0);
    let n_insts = program.insts.len();
    let mut regs = vec![T::zero(); n_insts * CHUNK];
    let mut index = vec![0usize; outer_lens.len()];
    let outer_count: usize = outer_lens.iter().product();
    let mut source_base = vec![0isize; sources.len()];
    let mut sink_base = vec![0isize; sinks.len()];
    for _ in 0..outer_count {
        let base = |offset: usize, strides: &[isize]| {
            offset as isize
                + index
                    .iter()
                    .zip(strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()
        };
        for (b, s) in source_base.iter_mut().zip(sources) {
            *b = base(s.offset, &s.strides);
        }
        for (b, s) in sink_base.iter_mut().zip(sinks.iter()) {
            *b = base(s.offset, &s.strides);
        }
        let mut start = 0;
        while start < inner {
            let n = CHUNK.min(inner - start);
            for (i, inst) in program.insts.iter().enumerate() {
                let (done, rest) = regs.split_at_mut(i * CHUNK);
                let out = &mut rest[..n];
                let arg = |k: usize| &done[k * CHUNK..k * CHUNK + n];
                match *inst {
                    Inst::Dead => {}
                    Inst::Leaf(k) => {
                        let s = &sources[k];
                        let stride = inner_stride(&s.strides);
                        let first = source_base[k] + start as isize * stride;
                        gather(out, s.data, first, stride);
                    }
                    Inst::Const(v) => out.fill(T::from_f64(v)),
                    Inst::Unary(op, a) => op.apply_all(out, arg(a)),
                    Inst::Binary(op, a, b) => op.apply_all(out, arg(a), arg(b)),
                    Inst::Compare(op, a, b) => {
                        let (a, b) = (arg(a), arg(b));
                        for j in 0..n {
                            out[j] = if op.apply(a[j], b[j]) {
                                T::one()
                            } else {
                                T::zero()
                            };
                        }
                    }
                    Inst::Select(c, a, b) => {
                        let (c, a, b) = (arg(c), arg(a), arg(b));
                        for j in 0..n {
                            out[j] = if c[j] != T::zero() { a[j] } else { b[j] };
                        }
                    }
                }
            }
            for (r, sink) in sinks.iter_mut().enumerate() {
                let values = &regs[program.roots[r] * CHUNK..program.roots[r] * CHUNK + n];
                let stride = inner_stride(&sink.strides);
                let first = sink_base[r] + start as isize * stride;
                scatter(sink.data, first, stride, values, sink.accumulate);
            }
            start += n;
        }
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < outer_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(())
}

/// `out[j] = data[first + j * stride]`; `run` checked the positions.
fn gather<T: Float>(out: &mut [T], data: &[T], first: isize, stride: isize) {
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

/// Writes or adds `values` at `first + j * stride`; stride 0 sums them into one element.
fn scatter<T: Float>(data: &mut [T], first: isize, stride: isize, values: &[T], accumulate: bool) {
    let first = first as usize;
    match (stride, accumulate) {
        (0, _) => {
            let sum = values.iter().fold(T::zero(), |s, &v| s.add(v));
            data[first] = if accumulate {
                data[first].add(sum)
            } else {
                sum
            };
        }
        (1, true) => {
            for (d, &v) in data[first..first + values.len()].iter_mut().zip(values) {
                *d = d.add(v);
            }
        }
        (1, false) => data[first..first + values.len()].copy_from_slice(values),
        _ => {
            for (j, &v) in values.iter().enumerate() {
                let d = &mut data[(first as isize + j as isize * stride) as usize];
                *d = if accumulate { d.add(v) } else { v };
            }
        }
    }
}
