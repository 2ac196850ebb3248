//! Expressions in host memory nested deeper than [`MAX_FUSED_DEPTH`](super::MAX_FUSED_DEPTH): lowered
//! to their IR and run as a job of one result ([`run_output`]: the CPU's interpreter, over
//! the leaves in place), instead of a loop nest compiled for the expression. A compiled loop
//! nest instantiates an evaluator per node, each as deep as the tree below it, so its compile
//! time grows with the square of the depth; what a job needs of an expression (its IR, its
//! leaves) costs the compiler a little per node, and the interpreter's code is compiled once.

use std::any::TypeId;
use std::borrow::Cow;

use super::outputs::{Input, InputData, Output, run_output};
use super::{Fresh, IntoOnTheCpu};

use crate::element::{Element, Elements, with_elements};
use crate::engine::exec::{self, Assign, Combine};
use crate::engine::interp::Values;
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

/// `expr` over the axes `kept` (the result's, named by `names`) then `reduced`, into a fresh
/// buffer row-major over `kept` (of the lengths `dest` where given), combined by `sink` from
/// its identity where values meet.
fn lowered<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    kept: &[TypeId],
    names: &dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &[TypeId],
    dest: Option<&[usize]>,
    sink: S,
) -> Result<(Storage<E::Elem>, Layout)> {
    let mut layouts = Leaves::new();
    expr.operands(&mut layouts);
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    let space = IterSpace::new(kept, names, reduced, dest, &layouts)?;
    // The interpreter reads no padding: padded leaves are written out first.
    let written: Vec<Option<(Values, Layout)>> = (layouts.iter())
        .zip(&buffers)
        .map(|(leaf, buffer)| match buffer.data {
            BufferRef::Host(bytes) if leaf.layout.is_padded() => {
                unpadded(leaf, host_elements(buffer.dtype, bytes)).map(Some)
            }
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let inputs = (layouts.iter())
        .zip(&buffers)
        .zip(&written)
        .map(|((leaf, buffer), written)| {
            let (data, layout) = match (buffer.data, written) {
                (_, Some((values, layout))) => (InputData::Host(values.elements()), layout),
                (BufferRef::Host(bytes), None) => (
                    InputData::Host(host_elements(buffer.dtype, bytes)),
                    leaf.layout,
                ),
                (BufferRef::Device(owner, memory), None) => {
                    let device = Device::Backend(owner);
                    (InputData::Device(device, buffer.dtype, memory), leaf.layout)
                }
            };
            let axes: Vec<usize> = (leaf.ids.iter())
                .map(|id| space.position(id).expect("the space has every leaf axis"))
                .collect();
            Input::laid_out(data, layout, &axes, space.rank)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut ir = Ir::default();
    let root = expr.describe(&mut ir);
    let reduce = sink.reduce_op().unwrap_or(ReduceOp::Sum);
    let output = Output::combined_by(root, (0..kept.len()).collect(), reduce, sink.identity());
    run_output(&ir, space.lens(), &inputs, output)
}

/// A padded leaf's elements written out row-major over its whole lengths, padding included,
/// by the loop nest compiled for one leaf of its element type (compiled once, not per
/// expression).
fn unpadded(leaf: &LeafLayout<'_>, data: Elements<'_>) -> Result<(Values, Layout)> {
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
    with_elements!(data, d => typed(leaf, d).map(|(values, layout)| (Values::from(values), layout)))
}

/// [`super::evaluate_parts`] on the interpreter.
pub(super) fn parts<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    fresh: Fresh<'_, S>,
) -> Result<(Storage<E::Elem>, Layout)> {
    lowered(
        expr,
        fresh.out,
        fresh.names,
        fresh.reduced,
        None,
        fresh.sink,
    )
}

/// [`super::evaluate_all`] on the interpreter.
pub(super) fn all<E: Expr, S: Combine<E::Elem>>(expr: &E, sink: S) -> Result<E::Elem> {
    let (total, _) = lowered(expr, &[], &Vec::new, E::Axes::IDS, None, sink)?;
    Ok(total.host()?[0])
}

/// [`super::evaluate_into`] on the interpreter, for a target with an injective layout: the
/// result computed fresh, then combined into `target` by the loop nest compiled for one
/// tensor (a pass over the result, against the interpreter's pass over a tree this deep).
pub(super) fn into<E: Expr, A: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    target: &mut Tensor<E::Elem, A>,
    reduced: &[TypeId],
    sink: S,
) -> Result<()> {
    let lens = target.lens();
    let (storage, layout) = lowered(expr, A::IDS, &A::names, reduced, Some(lens), sink)?;
    let part = Tensor::<E::Elem, A>::from_parts(storage, layout).expect("a fresh result fits");
    (IntoOnTheCpu::<Tensor<E::Elem, A>, A, S>::INTO_IN_OWN_TYPE)(&part, target, &[], sink)
}
