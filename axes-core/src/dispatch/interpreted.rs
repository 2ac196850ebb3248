//! Expressions in host memory nested deeper than [`MAX_FUSED_DEPTH`](super::MAX_FUSED_DEPTH): their IR runs on the
//! CPU's interpreter over the leaves in place, instead of a loop nest compiled for the
//! expression. A compiled loop nest instantiates an evaluator per node, each as deep as the
//! tree below it, so its compile time grows with the square of the depth; what the
//! interpreter needs of an expression (its IR, its leaves) costs the compiler a little per
//! node, and the interpreter's code is compiled once.

use std::any::TypeId;

use super::Fresh;

use crate::element::{Element, Elements};
use crate::engine::exec::{self, Assign, Combine};
use crate::engine::interp::{self, Values};
use crate::engine::leaf::LeafEval;
use crate::engine::plan::{Destination, IterSpace, LeafLayout, Leaves, Plan};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::ir::{Ir, OpWeights, ReduceOp};
use crate::layout::Layout;
use crate::list::{AxisList, AxisSet};
use crate::protocol::{BufferRef, Buffers, Device, host_elements};
use crate::storage::{self, HostVec, Storage};
use crate::tensor::Tensor;

/// An expression as the interpreter takes it: its IR and root, and its leaves' layouts and
/// buffers.
struct Described<'e> {
    ir: Ir,
    root: usize,
    layouts: Leaves<'e>,
    buffers: Buffers<'e>,
}

fn described<E: Expr>(expr: &E) -> Described<'_> {
    let mut ir = Ir::default();
    let root = expr.describe(&mut ir);
    let mut layouts = Leaves::new();
    expr.operands(&mut layouts);
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    Described {
        ir,
        root,
        layouts,
        buffers,
    }
}

/// Where the results go: `data` read at `offset` with a stride per axis of the space (0 on
/// the reduced ones), each value combined in by `combine` (`None`: written over).
struct Results<'d, T> {
    data: &'d mut [T],
    offset: usize,
    strides: Vec<isize>,
    combine: Option<ReduceOp>,
}

/// Runs `expr` over `space` into `dest`.
fn run<T: Element>(
    expr: &Described<'_>,
    space: &IterSpace<'_>,
    dest: Results<'_, T>,
) -> Result<()> {
    // The interpreter reads no padding: padded leaves are written out first.
    let written: Vec<Option<(Values, Layout)>> = (expr.layouts.iter())
        .zip(&expr.buffers)
        .map(|(leaf, buffer)| match buffer.data {
            BufferRef::Host(bytes) if leaf.layout.is_padded() => {
                written_out(leaf, host_elements(buffer.dtype, bytes)).map(Some)
            }
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let sources = (expr.layouts.iter())
        .zip(&expr.buffers)
        .zip(&written)
        .map(|((leaf, buffer), written)| {
            let (data, layout) = match (buffer.data, written) {
                (_, Some((block, layout))) => (block.elements(), layout),
                (BufferRef::Host(bytes), None) => (host_elements(buffer.dtype, bytes), leaf.layout),
                (BufferRef::Device(..), None) => {
                    return Err(Error::DeviceMismatch {
                        left: buffer.device().to_string(),
                        right: Device::Cpu.to_string(),
                    });
                }
            };
            let mut strides = vec![0; space.rank];
            space.write_strides(leaf.ids, layout.strides(), &mut strides);
            Ok(interp::StridedSource {
                data,
                offset: layout.offset(),
                strides,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut sinks = [interp::StridedSink {
        data: T::elements_mut(dest.data),
        offset: dest.offset,
        strides: dest.strides,
        combine: dest.combine,
    }];
    interp::compile_and_run(
        &expr.ir,
        &[expr.root],
        space.lens(),
        T::DTYPE,
        &sources,
        &mut sinks,
    )
}

/// A padded leaf's elements written out row-major over its whole lengths, padding included,
/// by the loop nest compiled for one leaf of its element type (compiled once, not per
/// expression).
fn written_out(leaf: &LeafLayout<'_>, data: Elements<'_>) -> Result<(Values, Layout)> {
    fn typed<T: Element>(leaf: &LeafLayout<'_>, data: &[T]) -> Result<(HostVec<T>, Layout)> {
        let mut leaves = Leaves::new();
        leaves.push(LeafLayout {
            ids: leaf.ids,
            layout: leaf.layout,
            names: leaf.names,
        });
        let mut layout = Layout::row_major(&[]);
        let mut plan = Plan::empty();
        let fresh = Destination::Fresh(&mut layout);
        plan.build(leaf.ids, &leaf.names, &[], fresh, &leaves)?;
        let count = layout.element_count().ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{:?}", layout.lens()),
        })?;
        let mut out = storage::for_overwrite(count)?;
        exec::run(
            &plan,
            &mut out,
            Assign,
            &|| LeafEval::new(data, leaf.layout.offset(), &plan, 0),
            OpWeights::NONE,
        )?;
        Ok((out, layout))
    }
    Ok(match data {
        Elements::F32(d) => typed(leaf, d).map(|(v, l)| (Values::F32(v), l))?,
        Elements::F64(d) => typed(leaf, d).map(|(v, l)| (Values::F64(v), l))?,
        Elements::F16(d) => typed(leaf, d).map(|(v, l)| (Values::F16(v), l))?,
        Elements::BF16(d) => typed(leaf, d).map(|(v, l)| (Values::BF16(v), l))?,
        Elements::I32(d) => typed(leaf, d).map(|(v, l)| (Values::I32(v), l))?,
        Elements::I64(d) => typed(leaf, d).map(|(v, l)| (Values::I64(v), l))?,
        Elements::U8(d) => typed(leaf, d).map(|(v, l)| (Values::U8(v), l))?,
        Elements::Bool(d) => typed(leaf, d).map(|(v, l)| (Values::Bool(v), l))?,
    })
}

/// How results combine into the destination: by the sink's reduction, by a sum where axes
/// are reduced under a plain assignment (as on a device), else written over.
fn combining<T: Element, S: Combine<T>>(sink: S, reduced: &[TypeId]) -> Option<ReduceOp> {
    sink.reduce_op()
        .or((!reduced.is_empty()).then_some(ReduceOp::Sum))
}

/// Row-major strides over the first `kept` axes of `space`, 0 on the rest.
fn row_major_over(space: &IterSpace<'_>, kept: usize) -> Vec<isize> {
    let mut strides = vec![0; space.rank];
    let row_major = Layout::row_major(&space.lens()[..kept]);
    strides[..kept].copy_from_slice(row_major.strides());
    strides
}

/// [`super::evaluate_parts`] on the interpreter.
pub(super) fn parts<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    fresh: Fresh<'_, E::Elem, S>,
) -> Result<(Storage<E::Elem>, Layout)> {
    let expr = described(expr);
    let space = IterSpace::new(fresh.out, fresh.names, fresh.reduced, None, &expr.layouts)?;
    let kept = fresh.out.len();
    let layout = Layout::row_major(&space.lens()[..kept]);
    let mut data = fresh.buffer(&layout)?;
    let dest = Results {
        data: &mut data,
        offset: 0,
        strides: row_major_over(&space, kept),
        combine: combining(fresh.sink, fresh.reduced),
    };
    run(&expr, &space, dest)?;
    Ok((Storage::from_host_vec(data), layout))
}

/// [`super::evaluate_all`] on the interpreter.
pub(super) fn all<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    sink: S,
    init: E::Elem,
) -> Result<E::Elem> {
    let all = E::Axes::IDS;
    let expr = described(expr);
    let space = IterSpace::new(&[], &Vec::new, all, None, &expr.layouts)?;
    let mut total = [init];
    let dest = Results {
        data: &mut total,
        offset: 0,
        strides: vec![0; space.rank],
        combine: Some(sink.reduce_op().unwrap_or(ReduceOp::Sum)),
    };
    run(&expr, &space, dest)?;
    Ok(total[0])
}

/// [`super::evaluate_into`] on the interpreter, for a target with an injective layout.
pub(super) fn into<E: Expr, A: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    target: &mut Tensor<E::Elem, A>,
    reduced: &[TypeId],
    sink: S,
) -> Result<()> {
    let expr = described(expr);
    let layout = *target.layout();
    let space = IterSpace::new(
        A::IDS,
        &A::names,
        reduced,
        Some(layout.lens()),
        &expr.layouts,
    )?;
    let mut strides = vec![0; space.rank];
    space.write_strides(A::IDS, layout.strides(), &mut strides);
    let dest = Results {
        data: target.storage_mut().try_make_mut()?,
        offset: layout.offset(),
        strides,
        combine: combining(sink, reduced),
    };
    run(&expr, &space, dest)
}
