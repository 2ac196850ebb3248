//! The loop planner: one iteration space, a stride per operand and axis, canonicalised.

use std::any::TypeId;
use std::borrow::Cow;

use super::CHUNK;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::MAX_RANK;

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
    pub access: Vec<Access>,
    /// Number of operands, destination included.
    pub operands: usize,
    /// Total number of iterations.
    pub count: usize,
    /// Elements per chunk of the innermost axis: [`CHUNK`] when some leaf is gathered into
    /// a buffer, longer when every leaf is read in place.
    pub chunk: usize,
}

/// Chunk length when every leaf reads its innermost axis in place (stride 1): long chunks
/// make the per-chunk cost negligible.
pub const LONG_CHUNK: usize = 8192;

impl Plan {
    /// Plans the iteration space `out` (the destination's axes, in its layout's order) then
    /// `reduced` (summed-over axes, stride 0 in the destination).
    ///
    /// `dest` gives the destination's layout when it exists already (its lengths are
    /// checked); `None` plans for a fresh row-major destination in `out`'s order.
    pub fn new(
        out: &[TypeId],
        out_names: &dyn Fn() -> Vec<Cow<'static, str>>,
        reduced: &[TypeId],
        dest: Option<&Layout>,
        leaves: &[LeafLayout],
    ) -> Result<(Plan, Layout)> {
        let rank = out.len() + reduced.len();
        assert!(
            rank <= MAX_RANK,
            "at most {MAX_RANK} axes in one evaluation"
        );
        let mut space_ids = [TypeId::of::<()>(); MAX_RANK];
        space_ids[..out.len()].copy_from_slice(out);
        space_ids[out.len()..rank].copy_from_slice(reduced);
        let space = &space_ids[..rank];
        // Lengths, from the leaves; a shared axis must agree.
        let mut lens: [Option<usize>; MAX_RANK] = [None; MAX_RANK];
        for leaf in leaves {
            for (axis, id) in leaf.ids[..leaf.layout.rank()].iter().enumerate() {
                let s = space
                    .iter()
                    .position(|x| x == id)
                    .expect("every leaf axis is in the space");
                let len = leaf.layout.lens()[axis];
                match lens[s] {
                    None => lens[s] = Some(len),
                    Some(known) if known != len => {
                        return Err(Error::LengthMismatch {
                            axis: (leaf.names)()[axis].to_string(),
                            left: known,
                            right: len,
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        let mut known = [1usize; MAX_RANK];
        for (k, l) in known.iter_mut().zip(&lens[..rank]) {
            *k = l.unwrap_or(1);
        }
        let lens = &known[..rank];
        let dest_layout = match dest {
            Some(layout) => {
                for (axis, (&mine, &expr)) in layout.lens().iter().zip(lens).enumerate() {
                    if mine != expr {
                        return Err(Error::LengthMismatch {
                            axis: out_names()[axis].to_string(),
                            left: mine,
                            right: expr,
                        });
                    }
                }
                *layout
            }
            None => Layout::row_major(&lens[..out.len()]),
        };

        // Accesses over the full space, filled in place (an access is a few hundred bytes).
        let operands = leaves.len() + 1;
        let mut access = vec![Access::default(); operands];
        let fill = |a: &mut Access, layout: &Layout, ids: &[TypeId]| {
            a.offset = layout.offset() as isize;
            for (s, id) in space.iter().enumerate() {
                a.stored[s] = lens[s];
                if let Some(axis) = ids.iter().position(|x| x == id) {
                    a.strides[s] = layout.strides()[axis];
                    a.pad_before[s] = layout.pad_before()[axis];
                    a.stored[s] = layout.stored_lens()[axis];
                }
            }
            a.padded = layout.is_padded();
        };
        fill(&mut access[0], &dest_layout, out);
        for (a, leaf) in access[1..].iter_mut().zip(leaves) {
            fill(a, &leaf.layout, &leaf.ids[..leaf.layout.rank()]);
        }
        let mut plan = Plan {
            rank,
            lens: [1; MAX_RANK],
            access,
            operands,
            count: lens.iter().product(),
            chunk: CHUNK,
        };
        plan.lens[..rank].copy_from_slice(lens);
        plan.canonicalise();
        let in_place = plan.rank > 0
            && plan.access[1..operands]
                .iter()
                .all(|leaf| !leaf.padded && leaf.strides[plan.rank - 1] == 1);
        if in_place {
            plan.chunk = LONG_CHUNK;
        }
        Ok((plan, dest_layout))
    }

    fn ops(&self) -> &[Access] {
        &self.access[..self.operands]
    }

    fn padded_on(&self, axis: usize) -> bool {
        self.ops()
            .iter()
            .any(|a| a.stored[axis] != self.lens[axis] || a.pad_before[axis] != 0)
    }

    /// Keeps only the axes in `keep`, in that order.
    fn select(&mut self, keep: &[usize]) {
        if keep.iter().enumerate().all(|(to, &from)| to == from) {
            self.rank = keep.len();
            return;
        }
        let lens = self.lens;
        self.rank = keep.len();
        for (to, &from) in keep.iter().enumerate() {
            self.lens[to] = lens[from];
        }
        for op in 0..self.operands {
            let old = self.access[op];
            let dst = &mut self.access[op];
            for (to, &from) in keep.iter().enumerate() {
                dst.strides[to] = old.strides[from];
                dst.pad_before[to] = old.pad_before[from];
                dst.stored[to] = old.stored[from];
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
        let mut keep = [0usize; MAX_RANK];
        let mut kept = 0;
        for a in 0..self.rank {
            if self.lens[a] != 1 || self.padded_on(a) {
                keep[kept] = a;
                kept += 1;
            }
        }
        self.select(&keep[..kept]);
        // Order by the sum of |stride| over operands, largest outermost (a stable sort keeps
        // the destination's order on ties).
        let weight = |plan: &Plan, a: usize| -> u128 {
            plan.ops()
                .iter()
                .map(|op| op.strides[a].unsigned_abs() as u128)
                .sum()
        };
        let mut order = [0usize; MAX_RANK];
        for (a, slot) in order.iter_mut().enumerate() {
            *slot = a;
        }
        let rank = self.rank;
        order[..rank].sort_by_key(|&a| std::cmp::Reverse(weight(self, a)));
        self.select(&order[..rank]);
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
                let mut keep = [0usize; MAX_RANK];
                for (k, slot) in keep.iter_mut().enumerate().take(self.rank - 1) {
                    *slot = if k < outer { k } else { k + 1 };
                }
                self.select(&keep[..self.rank - 1]);
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
