//! Typed expressions computed together as one job of several results: how an update written
//! once as typed expressions (an optimizer's next parameters and moments) runs on a device
//! in one launch, while host memory runs each expression as a pass of the typed engine.

use std::any::TypeId;

use crate::engine::plan::{LeafLayout, Leaves};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::ir::Ir;
use crate::protocol::{BufferRef, Buffers, Device, LeafBuffer, host_elements};

use super::outputs::{Input, InputData};

/// The IR of several expressions over one set of iteration axes, with their leaves: a leaf
/// the expressions share (the same buffer, read through the same layout) is read once.
#[derive(Default)]
pub(crate) struct JointJob<'a> {
    ir: Ir,
    leaves: Vec<(LeafLayout<'a>, LeafBuffer<'a>)>,
}

impl<'a> JointJob<'a> {
    /// Adds `expr`'s nodes; the node holding its value.
    pub(crate) fn add<E: Expr>(&mut self, expr: &'a E) -> usize {
        let mut layouts = Leaves::new();
        expr.operands(&mut layouts);
        let mut buffers = Buffers::new();
        expr.buffers(&mut buffers);
        let map: Vec<usize> = (layouts.into_iter().zip(buffers))
            .map(|(layout, buffer)| self.leaf(layout, buffer))
            .collect();
        self.ir.splice(&expr.ir(), &map)
    }

    /// The index of the leaf reading `tensor`, added where it is new.
    pub(crate) fn leaf_of<T: crate::element::Element, A: crate::list::AxisSet>(
        &mut self,
        tensor: &'a crate::tensor::Tensor<T, A>,
    ) -> usize {
        let node = self.add(tensor);
        match self.ir.nodes[node] {
            crate::ir::IrNode::Leaf(k) => k,
            _ => unreachable!("a tensor is one leaf"),
        }
    }

    /// The index of the leaf reading `buffer` through `layout`, added where it is new.
    fn leaf(&mut self, layout: LeafLayout<'a>, buffer: LeafBuffer<'a>) -> usize {
        let same = |(l, b): &(LeafLayout<'a>, LeafBuffer<'a>)| {
            l.ids == layout.ids
                && l.layout == layout.layout
                && b.dtype == buffer.dtype
                && same_buffer(b.data, buffer.data)
        };
        match self.leaves.iter().position(same) {
            Some(k) => k,
            None => {
                self.leaves.push((layout, buffer));
                self.leaves.len() - 1
            }
        }
    }

    /// The joint IR (leaf `k` reads input `k` of [`JointJob::inputs`]).
    pub(crate) fn ir(&self) -> &Ir {
        &self.ir
    }

    /// The leaves as inputs of a job over the iteration axes `ids` (every leaf's axes among
    /// them).
    pub(crate) fn inputs(&self, ids: &[TypeId]) -> Result<Vec<Input<'a>>> {
        (self.leaves.iter())
            .map(|(layout, buffer)| {
                let axes = (layout.ids.iter())
                    .map(|id| ids.iter().position(|i| i == id))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| Error::Unsupported {
                        what: format!(
                            "a leaf over {:?} in a job over {} axes",
                            (layout.names)(),
                            ids.len()
                        ),
                    })?;
                let data = match buffer.data {
                    BufferRef::Host(bytes) => InputData::Host(host_elements(buffer.dtype, bytes)),
                    BufferRef::Device(backend, memory) => {
                        InputData::Device(Device::Backend(backend), buffer.dtype, memory)
                    }
                };
                Input::laid_out(data, layout.layout, &axes, ids.len())
            })
            .collect()
    }
}

/// Whether two leaves' buffers are one buffer.
fn same_buffer(a: BufferRef<'_>, b: BufferRef<'_>) -> bool {
    match (a, b) {
        (BufferRef::Host(a), BufferRef::Host(b)) => std::ptr::eq(a, b),
        (BufferRef::Device(_, a), BufferRef::Device(_, b)) => std::ptr::eq(a, b),
        _ => false,
    }
}
