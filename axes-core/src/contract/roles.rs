//! The roles of a contraction's axes: which pairs are contracted, which are batch axes, and
//! which each side keeps.

use std::any::TypeId;

use crate::list::{AxisSet, MAX_RANK};

/// How the axes of a contraction are assigned: pairs of (left axis, right axis) positions.
#[derive(Default, Debug)]
pub(crate) struct Roles {
    /// Contracted pairs.
    pub(crate) k: Vec<(usize, usize)>,
    /// Batch pairs (kept once, on both sides).
    pub(crate) b: Vec<(usize, usize)>,
    /// Left axes kept (not batch).
    pub(crate) m: Vec<usize>,
    /// Right axes kept (not batch).
    pub(crate) n: Vec<usize>,
}

impl Roles {
    /// The type ids of the result's axes: batch and kept axes in `left`'s order, then the
    /// right side's kept axes.
    pub(super) fn result_ids(&self, left: &[TypeId], right: &[TypeId]) -> Vec<TypeId> {
        let mut kept: Vec<usize> = self
            .b
            .iter()
            .map(|&(a, _)| a)
            .chain(self.m.iter().copied())
            .collect();
        kept.sort_unstable();
        kept.iter()
            .map(|&a| left[a])
            .chain(self.n.iter().map(|&b| right[b]))
            .collect()
    }
}

/// The roles of `dot(x, y)`'s axes: first each `Dual<A>` on one side with `A` on the other,
/// then every other axis both have.
pub(super) fn dot_roles<L: AxisSet, R: AxisSet>() -> Roles {
    let (left, right) = (L::IDS, R::IDS);
    let left_t = L::TRANSPOSED_IDS;
    let mut roles = Roles::default();
    let mut left_paired = [false; MAX_RANK];
    let mut right_paired = [false; MAX_RANK];
    // Step 1: dual pairs.
    for a in 0..L::RANK {
        if let Some(b) = (0..R::RANK).find(|&b| !right_paired[b] && right[b] == left_t[a]) {
            roles.k.push((a, b));
            left_paired[a] = true;
            right_paired[b] = true;
        }
    }
    // Step 2: every other axis both have.
    for a in 0..L::RANK {
        if left_paired[a] {
            continue;
        }
        if let Some(b) = (0..R::RANK).find(|&b| !right_paired[b] && right[b] == left[a]) {
            roles.k.push((a, b));
            left_paired[a] = true;
            right_paired[b] = true;
        }
    }
    roles.m = (0..L::RANK).filter(|&a| !left_paired[a]).collect();
    roles.n = (0..R::RANK).filter(|&b| !right_paired[b]).collect();
    roles
}

/// The roles of `dot_over`'s axes: the axes `over` contracted, every other axis both have a
/// batch axis.
pub(super) fn over_roles<L: AxisSet, R: AxisSet>(over: &[TypeId]) -> Roles {
    let (left, right) = (L::IDS, R::IDS);
    let mut roles = Roles::default();
    for (a, id) in left.iter().enumerate() {
        match (0..R::RANK).find(|&b| right[b] == *id) {
            Some(b) if over.contains(id) => roles.k.push((a, b)),
            Some(b) => roles.b.push((a, b)),
            None => roles.m.push(a),
        }
    }
    roles.n = (0..R::RANK)
        .filter(|&b| !left.contains(&right[b]))
        .collect();
    roles
}
