//! The loop planner: one iteration space, a stride per operand and axis, canonicalised.

use std::any::TypeId;
use std::borrow::Cow;

use smallvec::SmallVec;

use super::CHUNK;
use super::canonical::{CanonicalAxis, canonical_axes};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::MAX_RANK;

/// How a leaf of an expression sees its tensor, for planning (borrowed from the tensor).
#[derive(Clone, Copy)]
pub struct LeafLayout<'a> {
    /// The axes' type ids, in the layout's order.
    pub ids: &'a [TypeId],
    /// The layout.
    pub layout: &'a Layout,
    /// The axes' names, for messages.
    pub names: fn() -> Vec<Cow<'static, str>>,
}

/// The leaves of one expression, in visiting order: inline up to four, so that planning a
/// small expression allocates nothing.
pub type Leaves<'a> = SmallVec<[LeafLayout<'a>; 4]>;

/// The destination of a plan.
pub enum Destination<'a> {
    /// An existing tensor with this layout (its lengths are checked).
    Existing(&'a Layout),
    /// A fresh tensor: the planner writes its row-major layout (in the order of the
    /// destination's axes) here.
    Fresh(&'a mut Layout),
}

/// Per operand, per canonical axis: where the operand's elements are.
#[derive(Clone, Copy, Debug, Default)]
pub struct Access {
    /// Buffer position of the stored element at index 0 on every axis.
    pub offset: isize,
    /// Stride per canonical axis.
    pub strides: [isize; MAX_RANK],
    /// Whether any canonical axis is padded for this operand (see [`Plan::padding`]).
    pub padded: bool,
}

/// Per operand, per canonical axis: the stored part of a padded view.
#[derive(Clone, Copy, Debug, Default)]
pub struct Padding {
    /// Padding before the stored part.
    pub pad_before: [usize; MAX_RANK],
    /// Stored length.
    pub stored: [usize; MAX_RANK],
}

/// A canonical loop nest: axes (outermost first) with a length each and, per operand, a
/// stride per axis. Operand 0 is the destination, then the leaves in visiting order.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Number of canonical axes (0: a single element).
    pub rank: usize,
    /// Canonical axis lengths.
    pub lens: [usize; MAX_RANK],
    /// Operand accesses, destination first.
    pub access: SmallVec<[Access; 4]>,
    /// Per operand, where its stored part lies: empty when no operand is padded (the common
    /// case, kept free of the extra bookkeeping), else one per operand.
    pub padding: Vec<Padding>,
    /// Total number of iterations.
    pub count: usize,
    /// Elements per chunk of the innermost axis: [`CHUNK`] when some leaf is gathered into
    /// a buffer, longer when every leaf is read in place.
    pub chunk: usize,
    /// Whether the leaves' accesses are left out of `access`, which then holds only the
    /// destination's: the plan has one axis, and every leaf reads it with stride 1 from its
    /// own layout's offset ([`FLAT_LEAF`]). [`Plan::build`] makes such a plan for dense
    /// operands of one axis order (listing their accesses took a fifth of a 1,024-element
    /// sum).
    pub flat: bool,
    /// The operands whose position moves over the iteration space (the leaves that do not
    /// broadcast to one element, and the destination unless everything reduces into one
    /// element): what a thread split weighs the bytes streamed by.
    pub streams: usize,
}

/// The access of every leaf of a [`Plan::flat`] plan, relative to the leaf's own offset.
pub static FLAT_LEAF: Access = Access {
    offset: 0,
    strides: {
        let mut strides = [0; MAX_RANK];
        strides[0] = 1;
        strides
    },
    padded: false,
};

/// Whether `a` and `b` hold the same items in the same order, compared one by one: the axis
/// lists and lengths planning compares are a few entries long, and a slice comparison
/// calls `memcmp`.
#[inline]
pub(crate) fn same_items<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Chunk length when every leaf reads its innermost axis in place (stride 1): long chunks
/// make the per-chunk cost negligible.
pub const LONG_CHUNK: usize = 8192;

/// The iteration space of one evaluation, as the CPU planner and the device lowering both
/// see it: its axes (the result's kept axes, then the reduced ones) with their lengths, taken
/// from the operands (a shared axis must agree; an axis no operand has takes the
/// destination's length, else 1), checked against the destination's when there is one.
pub(crate) struct IterSpace<'s> {
    kept: &'s [TypeId],
    reduced: &'s [TypeId],
    /// The number of axes.
    pub(crate) rank: usize,
    /// The length of each axis.
    pub(crate) lens: [usize; MAX_RANK],
}

impl<'s> IterSpace<'s> {
    /// The space of `kept` (the result's axes, named by `kept_names`) then `reduced`, over
    /// `leaves`, into a destination of the lengths `dest` (in `kept`'s order) when given.
    #[inline]
    pub(crate) fn new(
        kept: &'s [TypeId],
        kept_names: &dyn Fn() -> Vec<Cow<'static, str>>,
        reduced: &'s [TypeId],
        dest: Option<&[usize]>,
        leaves: &[LeafLayout<'_>],
    ) -> Result<IterSpace<'s>> {
        let mut space = IterSpace::over(kept, reduced)?;
        space.measure(kept_names, dest, leaves)?;
        Ok(space)
    }

    /// The axes `kept` then `reduced`, their lengths not known yet ([`IterSpace::measure`]).
    #[inline]
    pub(crate) fn over(kept: &'s [TypeId], reduced: &'s [TypeId]) -> Result<IterSpace<'s>> {
        let rank = kept.len() + reduced.len();
        if rank > MAX_RANK {
            return Err(Error::Unsupported {
                what: format!("{rank} axes in one evaluation (at most {MAX_RANK})"),
            });
        }
        Ok(IterSpace {
            kept,
            reduced,
            rank,
            lens: [1; MAX_RANK],
        })
    }

    /// Takes the lengths from `leaves` and `dest` (see [`IterSpace::new`]).
    #[inline]
    pub(crate) fn measure(
        &mut self,
        kept_names: &dyn Fn() -> Vec<Cow<'static, str>>,
        dest: Option<&[usize]>,
        leaves: &[LeafLayout<'_>],
    ) -> Result<()> {
        // `usize::MAX` marks an axis no leaf has given a length yet.
        self.lens = [usize::MAX; MAX_RANK];
        for leaf in leaves {
            for (axis, id) in leaf.ids.iter().enumerate() {
                let Some(s) = self.position(id) else {
                    // The type checker placed every operand axis among the result's and the
                    // reduced ones: only two axis types with one type-level id get here.
                    let mut evaluation = kept_names().join(", ");
                    if !self.reduced.is_empty() {
                        evaluation += &format!(" and {} reduced", self.reduced.len());
                    }
                    return Err(Error::AxisIdCollision {
                        left: (leaf.names)().join(", "),
                        right: evaluation,
                    });
                };
                let len = leaf.layout.lens()[axis];
                match self.lens[s] {
                    usize::MAX => self.lens[s] = len,
                    first if first != len => {
                        return Err(Error::LengthMismatch {
                            axis: (leaf.names)()[axis].to_string(),
                            left: first,
                            right: len,
                        });
                    }
                    _ => {}
                }
            }
        }
        for (a, len) in self.lens.iter_mut().enumerate() {
            if *len == usize::MAX {
                *len = dest.and_then(|d| d.get(a).copied()).unwrap_or(1);
            }
        }
        if let Some(dest) = dest {
            for (axis, (&mine, &expr)) in dest.iter().zip(&self.lens[..self.kept.len()]).enumerate()
            {
                if mine != expr {
                    return Err(Error::LengthMismatch {
                        axis: kept_names()[axis].to_string(),
                        left: mine,
                        right: expr,
                    });
                }
            }
        }
        Ok(())
    }

    /// Where the axis `id` lies in the space.
    #[inline]
    pub(crate) fn position(&self, id: &TypeId) -> Option<usize> {
        (self.kept.iter().position(|x| x == id))
            .or_else(|| Some(self.kept.len() + self.reduced.iter().position(|x| x == id)?))
    }

    /// The lengths of the axes.
    #[inline]
    pub(crate) fn lens(&self) -> &[usize] {
        &self.lens[..self.rank]
    }

    /// Writes into `out` the stride on every axis of the space of an operand with the axes
    /// `ids` and the `strides` (`out` holds zeros: they stay on the axes it does not have).
    #[inline]
    pub(crate) fn write_strides(&self, ids: &[TypeId], strides: &[isize], out: &mut [isize]) {
        for (id, &stride) in ids.iter().zip(strides) {
            if let Some(s) = self.position(id) {
                out[s] = stride;
            }
        }
    }
}

impl Plan {
    /// A plan of nothing yet, for [`Plan::build`] to fill.
    pub fn empty() -> Plan {
        Plan {
            rank: 0,
            lens: [1; MAX_RANK],
            access: SmallVec::new(),
            padding: Vec::new(),
            count: 0,
            chunk: CHUNK,
            flat: false,
            streams: 0,
        }
    }

    /// The number of elements of a flat evaluation of `leaves` (see [`Plan::flat`]): every
    /// leaf dense, with the first leaf's axes in its order and its lengths; `None` otherwise
    /// (or with no leaf, or no element).
    #[inline]
    pub fn flat_count(leaves: &[LeafLayout<'_>]) -> Option<usize> {
        let (first, rest) = leaves.split_first()?;
        let lens = first.layout.lens();
        let like_first = |leaf: &LeafLayout<'_>| {
            same_items(leaf.ids, first.ids)
                && same_items(leaf.layout.lens(), lens)
                && leaf.layout.is_dense()
        };
        if !first.layout.is_dense() || !rest.iter().all(like_first) {
            return None;
        }
        let count = lens.iter().product();
        (count > 0).then_some(count)
    }

    /// The plan the evaluators of a flat evaluation are made for (see [`Plan::flat_count`]
    /// and [`exec::run_flat`](super::exec::run_flat)): one axis, each leaf read along it
    /// from its own offset; it lists no access and no length, which the caller holds.
    pub fn flat_evaluators() -> Plan {
        Plan {
            rank: 1,
            flat: true,
            chunk: LONG_CHUNK,
            ..Plan::empty()
        }
    }

    /// Plans the iteration space `out` (the destination's axes, in its layout's order) then
    /// `reduced` (summed-over axes, stride 0 in the destination), into `dest`, replacing what
    /// `self` held.
    ///
    /// (Filled in place rather than returned: a plan is a few hundred bytes, and moving it
    /// out of a `Result` copied it twice per evaluation.)
    pub fn build(
        &mut self,
        out: &[TypeId],
        out_names: &dyn Fn() -> Vec<Cow<'static, str>>,
        reduced: &[TypeId],
        dest: Destination<'_>,
        leaves: &[LeafLayout<'_>],
    ) -> Result<()> {
        match self.build_dense(out, reduced, dest, leaves) {
            Ok(()) => Ok(()),
            Err(dest) => self.build_general(out, out_names, reduced, dest, leaves),
        }
    }

    /// [`Plan::build`] for any operands: the space measured axis by axis, then
    /// canonicalised.
    fn build_general(
        &mut self,
        out: &[TypeId],
        out_names: &dyn Fn() -> Vec<Cow<'static, str>>,
        reduced: &[TypeId],
        dest: Destination<'_>,
        leaves: &[LeafLayout<'_>],
    ) -> Result<()> {
        let dest_lens = match &dest {
            Destination::Existing(layout) => Some(layout.lens()),
            Destination::Fresh(_) => None,
        };
        let mut space = IterSpace::over(out, reduced)?;
        space.measure(out_names, dest_lens, leaves)?;
        let (rank, lens) = (space.rank, space.lens());
        let dest_layout: &Layout = match dest {
            Destination::Existing(layout) => layout,
            Destination::Fresh(layout) => {
                *layout = Layout::row_major(&lens[..out.len()]);
                layout
            }
        };

        let plan = self;
        plan.rank = rank;
        plan.count = lens.iter().product();
        plan.lens = [1; MAX_RANK];
        plan.lens[..rank].copy_from_slice(lens);
        plan.access.clear();
        plan.padding.clear();
        plan.chunk = CHUNK;
        plan.flat = false;
        plan.add_operand(&space, dest_layout, out);
        for leaf in leaves {
            plan.add_operand(&space, leaf.layout, leaf.ids);
        }
        if plan.access.iter().any(|a| a.padded) {
            plan.add_padding(&space, dest_layout, out);
            for leaf in leaves {
                plan.add_padding(&space, leaf.layout, leaf.ids);
            }
        }
        plan.canonicalise();
        let in_place = plan.rank > 0
            && plan.access[1..]
                .iter()
                .all(|leaf| !leaf.padded && leaf.strides[plan.rank - 1] == 1);
        if in_place {
            plan.chunk = LONG_CHUNK;
        }
        let rank = plan.rank;
        plan.streams = (plan.access.iter())
            .filter(|a| a.strides[..rank].iter().any(|&s| s != 0))
            .count();
        Ok(())
    }

    /// The plan [`Plan::build`] would make, made directly where it is simple: every leaf has
    /// the axes `out` then `reduced` in that order, the same lengths, and a dense layout, and
    /// the destination is dense with those lengths too (or fresh). The space is then one
    /// axis, or two (kept, reduced) when both are longer than 1 — what canonicalising gives —
    /// with no axis to look up or sort; with one axis, the plan is [`Plan::flat`]. Gives
    /// `dest` back where the case is not this one.
    fn build_dense<'d>(
        &mut self,
        out: &[TypeId],
        reduced: &[TypeId],
        dest: Destination<'d>,
        leaves: &[LeafLayout<'_>],
    ) -> std::result::Result<(), Destination<'d>> {
        // Every leaf dense, like the first, with at least one element.
        if Plan::flat_count(leaves).is_none() {
            return Err(dest);
        }
        let first = &leaves[0];
        let lens = first.layout.lens();
        let simple = first.ids.len() == out.len() + reduced.len()
            && same_items(&first.ids[..out.len()], out)
            && same_items(&first.ids[out.len()..], reduced)
            && match &dest {
                Destination::Existing(layout) => {
                    same_items(layout.lens(), &lens[..out.len()]) && layout.is_dense()
                }
                Destination::Fresh(_) => true,
            };
        if !simple {
            return Err(dest);
        }
        let kept: usize = lens[..out.len()].iter().product();
        let summed: usize = lens[out.len()..].iter().product();
        let dest_offset = match dest {
            Destination::Existing(layout) => layout.offset(),
            Destination::Fresh(layout) => {
                *layout = Layout::row_major(&lens[..out.len()]);
                0
            }
        };
        self.padding.clear();
        self.access.clear();
        self.count = kept * summed;
        self.lens = [1; MAX_RANK];
        let axes: &[(usize, isize)] = match (kept, summed) {
            (1, 1) => &[],
            (_, 1) => &[(kept, 1)],
            (1, _) => &[(summed, 0)],
            _ => &[(kept, 1), (summed, 0)],
        };
        self.rank = axes.len();
        let mut dest_strides = [0; MAX_RANK];
        let mut leaf_strides = [0; MAX_RANK];
        for (a, &(len, dest_stride)) in axes.iter().enumerate() {
            self.lens[a] = len;
            dest_strides[a] = dest_stride;
        }
        let dest_access = Access {
            offset: dest_offset as isize,
            strides: dest_strides,
            padded: false,
        };
        self.access.push(dest_access);
        self.flat = self.rank == 1;
        self.streams = leaves.len() * usize::from(self.rank > 0) + usize::from(kept > 1);
        if !self.flat {
            if let [(_, _), (inner, _)] = axes {
                leaf_strides[..2].copy_from_slice(&[*inner as isize, 1]);
            }
            (self.access).extend(leaves.iter().map(|leaf| Access {
                offset: leaf.layout.offset() as isize,
                strides: leaf_strides,
                padded: false,
            }));
        }
        self.chunk = if self.rank > 0 { LONG_CHUNK } else { CHUNK };
        Ok(())
    }

    /// Appends the access of an operand with axes `ids` laid out by `layout` to the space
    /// `space` (an axis the operand lacks has stride 0).
    fn add_operand(&mut self, space: &IterSpace<'_>, layout: &Layout, ids: &[TypeId]) {
        self.access.push(Access {
            offset: layout.offset() as isize,
            strides: [0; MAX_RANK],
            padded: layout.is_padded(),
        });
        let access = self.access.last_mut().expect("just pushed");
        space.write_strides(ids, layout.strides(), &mut access.strides);
    }

    /// Appends the padding of an operand, as [`Plan::add_operand`] its access.
    fn add_padding(&mut self, space: &IterSpace<'_>, layout: &Layout, ids: &[TypeId]) {
        let mut padding = Padding::default();
        padding.stored[..self.rank].copy_from_slice(&self.lens[..self.rank]);
        for (axis, id) in ids.iter().enumerate() {
            if let Some(s) = space.position(id) {
                padding.pad_before[s] = layout.pad_before()[axis];
                padding.stored[s] = layout.stored_lens()[axis];
            }
        }
        self.padding.push(padding);
    }

    fn padded_on(&self, axis: usize) -> bool {
        self.padding
            .iter()
            .any(|p| p.stored[axis] != self.lens[axis] || p.pad_before[axis] != 0)
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
        for access in &mut self.access {
            let strides = access.strides;
            for (to, &from) in keep.iter().enumerate() {
                access.strides[to] = strides[from];
            }
        }
        for padding in &mut self.padding {
            let old = *padding;
            for (to, &from) in keep.iter().enumerate() {
                padding.pad_before[to] = old.pad_before[from];
                padding.stored[to] = old.stored[from];
            }
        }
    }

    /// Puts the space in canonical form ([`canonical_axes`]): length-1 axes dropped, axes
    /// ordered by stride (largest outermost), axes contiguous in every operand merged.
    fn canonicalise(&mut self) {
        if self.count == 0 {
            return;
        }
        let mut axes = [CanonicalAxis::default(); MAX_RANK];
        let rank = canonical_axes(
            &self.lens[..self.rank],
            self.access.iter().map(|op| &op.strides[..]),
            |a| self.padded_on(a),
            &mut axes,
        );
        let mut keep = [0usize; MAX_RANK];
        for (slot, canonical) in keep.iter_mut().zip(&axes[..rank]) {
            *slot = canonical.axis;
        }
        self.select(&keep[..rank]);
        for (a, canonical) in axes[..rank].iter().enumerate() {
            // A merged axis: its length the product of two or more, none padded.
            if canonical.len != self.lens[a] {
                self.lens[a] = canonical.len;
                for padding in &mut self.padding {
                    padding.stored[a] = canonical.len;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct P;
    struct Q;
    struct R;

    fn names() -> Vec<Cow<'static, str>> {
        vec!["P".into(), "Q".into(), "R".into()]
    }

    fn destination<'a>(fresh: bool, made: &'a mut Layout, existing: &'a Layout) -> Destination<'a> {
        if fresh {
            Destination::Fresh(made)
        } else {
            Destination::Existing(existing)
        }
    }

    /// The dense shortcut makes the plan the general planner makes, for every split of
    /// three axes into kept and reduced ones, lengths 1 included, a fresh or an existing
    /// destination, and leaves at offsets.
    #[test]
    fn the_dense_plan_is_the_general_plan() {
        let ids = [TypeId::of::<P>(), TypeId::of::<Q>(), TypeId::of::<R>()];
        for lens in [[2, 3, 4], [1, 5, 1], [3, 1, 2], [1, 1, 1], [7, 1, 1]] {
            for kept in 0..=3 {
                let (out, reduced) = ids.split_at(kept);
                let leaf = Layout::new(&lens, Layout::row_major(&lens).strides(), 5, 100).unwrap();
                let other = Layout::row_major(&lens);
                let leaves = [&leaf, &other].map(|layout| LeafLayout {
                    ids: &ids,
                    layout,
                    names,
                });
                let existing = Layout::row_major(&lens[..kept]);
                for fresh in [true, false] {
                    let (mut dense, mut general) = (Plan::empty(), Plan::empty());
                    let (mut made_dense, mut made_general) =
                        (Layout::row_major(&[]), Layout::row_major(&[]));
                    let dest = |made| destination(fresh, made, &existing);
                    assert!(
                        dense
                            .build_dense(out, reduced, dest(&mut made_dense), &leaves)
                            .is_ok()
                    );
                    general
                        .build_general(out, &names, reduced, dest(&mut made_general), &leaves)
                        .unwrap();
                    let what = format!("{lens:?}, {kept} kept, fresh {fresh}");
                    assert_eq!(made_dense, made_general, "{what}");
                    assert_eq!(
                        (dense.rank, dense.count, dense.chunk),
                        (general.rank, general.count, general.chunk),
                        "{what}"
                    );
                    assert_eq!(
                        dense.lens[..dense.rank],
                        general.lens[..general.rank],
                        "{what}"
                    );
                    assert_eq!(dense.streams, general.streams, "{what}");
                    // A flat plan lists the destination only: every leaf reads its one axis
                    // with stride 1 from its own offset.
                    assert_eq!(dense.flat, dense.rank == 1, "{what}");
                    let flat_leaf = |leaf: &LeafLayout<'_>| Access {
                        offset: leaf.layout.offset() as isize,
                        ..FLAT_LEAF
                    };
                    let listed = dense.access.iter().copied();
                    let dense_access: Vec<Access> = if dense.flat {
                        listed.chain(leaves.iter().map(flat_leaf)).collect()
                    } else {
                        listed.collect()
                    };
                    assert_eq!(dense_access.len(), general.access.len());
                    for (d, g) in dense_access.iter().zip(&general.access) {
                        assert_eq!(d.offset, g.offset, "{what}");
                        assert_eq!(d.strides[..dense.rank], g.strides[..dense.rank], "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn strided_or_other_axes_take_the_general_path() {
        let ids = [TypeId::of::<P>(), TypeId::of::<Q>()];
        let reversed = Layout::new(&[2, 3], &[3, -1], 2, 6).unwrap();
        let dense = Layout::row_major(&[2, 3]);
        let mut made = Layout::row_major(&[]);
        for (leaf_ids, layout) in [(&ids[..], &reversed), (&ids[1..], &dense)] {
            let leaves = [LeafLayout {
                ids: leaf_ids,
                layout,
                names,
            }];
            let mut plan = Plan::empty();
            let dest = Destination::Fresh(&mut made);
            assert!(plan.build_dense(&ids, &[], dest, &leaves).is_err());
        }
    }
}
