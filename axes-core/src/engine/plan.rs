//! The loop planner: one iteration space, a stride per operand and axis, canonicalised.

use std::any::TypeId;
use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::MAX_RANK;

/// The most operands (destination included) one fused evaluation takes.
pub const MAX_OPERANDS: usize = 32;

/// How a leaf of an expression sees its tensor, for planning.
#[derive(Clone, Copy)]
pub struct LeafLayout {
    /// The axes' type ids, in the layout's order.
    pub ids: [TypeId; MAX_RANK],
    /// The layout.
    pub layout: Layout,
    /// The axes' names, for messages.
    pub names: fn() -> Vec<Cow<'static, str>>,
}

/// Per operand, per canonical axis: where the operand's elements are.
#[derive(Clone, Copy, Debug, Default)]
pub struct Access {
    /// Buffer position of the stored element at index 0 on every axis.
    pub offset: isize,
    /// Stride per canonical axis.
    pub strides: [isize; MAX_RANK],
    /// Padding before the stored part, per canonical axis.
    pub pad_before: [usize; MAX_RANK],
    /// Stored length per canonical axis.
    pub stored: [usize; MAX_RANK],
    /// Whether any canonical axis is padded for this operand.
    pub padded: bool,
}

/// A canonical loop nest: axes (outermost first) with a length each and, per operand, a
/// stride per axis. LeafLayout 0 is the destination, then the leaves in visiting order.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Number of canonical axes (0: a single element).
    pub rank: usize,
    /// Canonical axis lengths.
    pub lens: [usize; MAX_RANK],
    /// LeafLayout accesses; only the first `operands` are used.
    pub access: [Access; MAX_OPERANDS],
    /// Number of operands, destination included.
    pub operands: usize,
    /// Total number of iterations.
    pub count: usize,
}

impl Plan {
    /// Plans the iteration space `out` (the destination's axes, in its layout's order) then
    /// `reduced` (summed-over axes, stride 0 in the destination).
    ///
    /// `dest` gives the destination's layout when it exists already (its lengths are
    /// checked); `None` plans for a fresh row-major destination in `out`'s order.
    pub fn new(
        out: &[TypeId],
        out_names: &[Cow<'static, str>],
        reduced: &[TypeId],
        dest: Option<&Layout>,
        leaves: &[LeafLayout],
    ) -> Result<(Plan, Layout)> {
        let space: Vec<TypeId> = out.iter().chain(reduced).copied().collect();
        let rank = space.len();
        assert!(leaves.len() < MAX_OPERANDS, "at most {} leaves in one expression", MAX_OPERANDS - 1);
        // Lengths, from the leaves; a shared axis must agree.
        let mut lens: [Option<usize>; MAX_RANK] = [None; MAX_RANK];
        for leaf in leaves {
            let names = (leaf.names)();
            for (axis, id) in leaf.ids[..leaf.layout.rank()].iter().enumerate() {
                let s = space.iter().position(|x| x == id).expect("every leaf axis is in the space");
                let len = leaf.layout.lens()[axis];
                match lens[s] {
                    None => lens[s] = Some(len),
                    Some(known) if known != len => {
                        return Err(Error::LengthMismatch {
                            axis: names[axis].to_string(),
                            left: known,
                            right: len,
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        let lens: Vec<usize> = lens[..rank].iter().map(|l| l.unwrap_or(1)).collect();
        let dest_layout = match dest {
            Some(layout) => {
                for (axis, (&mine, &expr)) in layout.lens().iter().zip(&lens).enumerate() {
                    if mine != expr {
                        return Err(Error::LengthMismatch {
                            axis: out_names[axis].to_string(),
                            left: mine,
                            right: expr,
                        });
                    }
                }
                *layout
            }
            None => Layout::row_major(&lens[..out.len()]),
        };

        // Accesses over the full space.
        let mut access = [Access::default(); MAX_OPERANDS];
        let full = |layout: &Layout, ids: &[TypeId]| {
            let mut a = Access {
                offset: layout.offset() as isize,
                ..Access::default()
            };
            for (s, id) in space.iter().enumerate() {
                a.stored[s] = lens[s];
                if let Some(axis) = ids.iter().position(|x| x == id) {
                    a.strides[s] = layout.strides()[axis];
                    a.pad_before[s] = layout.pad_before()[axis];
                    a.stored[s] = layout.stored_lens()[axis];
                }
            }
            a.padded = layout.is_padded();
            a
        };
        access[0] = full(&dest_layout, out);
        for (k, leaf) in leaves.iter().enumerate() {
            access[k + 1] = full(&leaf.layout, &leaf.ids[..leaf.layout.rank()]);
        }
        let operands = leaves.len() + 1;
        let mut plan = Plan {
            rank,
            lens: [1; MAX_RANK],
            access,
            operands,
            count: lens.iter().product(),
        };
        plan.lens[..rank].copy_from_slice(&lens);
        plan.canonicalise();
        Ok((plan, dest_layout))
    }

    fn ops(&self) -> &[Access] {
        &self.access[..self.operands]
    }

    fn padded_on(&self, axis: usize) -> bool {
        self.ops().iter().any(|a| a.stored[axis] != self.lens[axis] || a.pad_before[axis] != 0)
    }

    /// Keeps only the axes in `keep`, in that order.
    fn select(&mut self, keep: &[usize]) {
        let old = self.clone();
        self.rank = keep.len();
        for (to, &from) in keep.iter().enumerate() {
            self.lens[to] = old.lens[from];
            for op in 0..self.operands {
                let (src, dst) = (&old.access[op], &mut self.access[op]);
                dst.strides[to] = src.strides[from];
                dst.pad_before[to] = src.pad_before[from];
                dst.stored[to] = src.stored[from];
            }
        }
    }

    /// Drops length-1 axes, orders axes by stride (largest outermost) and merges axes that
    /// are contiguous in every operand.
    fn canonicalise(&mut self) {
        if self.count == 0 {
            return;
        }
        // Drop length-1 axes (unless padded: a padded length-1 axis may read padding).
        let keep: Vec<usize> = (0..self.rank).filter(|&a| self.lens[a] != 1 || self.padded_on(a)).collect();
        self.select(&keep);
        // Order by the sum of |stride| over operands, largest outermost (a stable sort keeps
        // the destination's order on ties).
        let weight = |plan: &Plan, a: usize| -> u128 {
            plan.ops().iter().map(|op| op.strides[a].unsigned_abs() as u128).sum()
        };
        let mut order: Vec<usize> = (0..self.rank).collect();
        order.sort_by(|&a, &b| weight(self, b).cmp(&weight(self, a)));
        self.select(&order);
        // Merge an axis into the next inner one when every operand steps over the inner
        // axis exactly into the outer one.
        let mut axis = 0;
        while axis + 1 < self.rank {
            let (outer, inner) = (axis, axis + 1);
            let mergeable = !self.padded_on(outer)
                && !self.padded_on(inner)
                && self
                    .ops()
                    .iter()
                    .all(|op| op.strides[outer] == op.strides[inner] * self.lens[inner] as isize);
            if mergeable {
                let len = self.lens[outer] * self.lens[inner];
                let keep: Vec<usize> = (0..self.rank).filter(|&a| a != outer).collect();
                self.select(&keep);
                self.lens[axis] = len;
                for op in 0..self.operands {
                    self.access[op].stored[axis] = len;
                }
            } else {
                axis += 1;
            }
        }
    }
}
