//! The canonical form of an iteration space, shared by the loop planner ([`Plan`]) and the
//! interpreter: length-1 axes dropped, axes ordered by stride (the sum of |stride| over
//! every operand, largest outermost; ties keep their given order), and each axis merged into
//! the next outer one where every operand steps over the inner axis exactly into the outer
//! one. Only lengths and strides decide it, so a run over the same layouts always takes the
//! same order (and adds in the same order).
//!
//! Device jobs merge axes differently ([`OutputJob::merged`]): they keep the given order, and
//! kept axes apart from reduced ones, since a kernel's result index and its reduction loop
//! follow them.
//!
//! [`Plan`]: super::plan::Plan
//! [`OutputJob::merged`]: crate::protocol::OutputJob::merged

use std::cmp::Reverse;

/// One axis of a canonical space: the given axis whose strides it steps by (the innermost of
/// those merged into it), and its length (the product of theirs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CanonicalAxis {
    pub(crate) axis: usize,
    pub(crate) len: usize,
}

/// Writes the canonical form of the space of the lengths `lens` into `axes`, outermost first,
/// and returns how many axes it has. `operands` gives each operand's strides (one per axis of
/// `lens`); an axis where `pinned` holds is neither dropped nor merged (one where an operand
/// reads padding). `axes` has room for an entry per axis of `lens`: the planner passes an
/// array on its stack, so planning allocates nothing.
pub(crate) fn canonical_axes<'s>(
    lens: &[usize],
    operands: impl Iterator<Item = &'s [isize]> + Clone,
    pinned: impl Fn(usize) -> bool,
    axes: &mut [CanonicalAxis],
) -> usize {
    let mut rank = 0;
    for (axis, &len) in lens.iter().enumerate() {
        if len != 1 || pinned(axis) {
            axes[rank] = CanonicalAxis { axis, len };
            rank += 1;
        }
    }
    let weight = |axis: usize| -> u128 {
        (operands.clone())
            .map(|strides| strides[axis].unsigned_abs() as u128)
            .sum()
    };
    // Stable: ties keep the given order.
    axes[..rank].sort_by_key(|c| Reverse(weight(c.axis)));
    let mut merged = 0;
    for k in 0..rank {
        let inner = axes[k];
        if merged > 0 {
            let outer = axes[merged - 1];
            let steps_into = !pinned(outer.axis)
                && !pinned(inner.axis)
                && (operands.clone())
                    .all(|strides| strides[outer.axis] == strides[inner.axis] * inner.len as isize);
            if steps_into {
                axes[merged - 1] = CanonicalAxis {
                    axis: inner.axis,
                    len: outer.len * inner.len,
                };
                continue;
            }
        }
        axes[merged] = inner;
        merged += 1;
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(lens: &[usize], operands: &[&[isize]], pinned: &[usize]) -> Vec<(usize, usize)> {
        let mut axes = vec![CanonicalAxis::default(); lens.len()];
        let rank = canonical_axes(
            lens,
            operands.iter().copied(),
            |a| pinned.contains(&a),
            &mut axes,
        );
        axes[..rank].iter().map(|c| (c.axis, c.len)).collect()
    }

    #[test]
    fn contiguous_operands_become_one_axis() {
        // A row-major [2, 3, 4] read twice: one axis of 24, stepping like the innermost.
        let strides: &[isize] = &[12, 4, 1];
        assert_eq!(canonical(&[2, 3, 4], &[strides, strides], &[]), [(2, 24)]);
        // Transposed in one operand: ordered by the summed strides, nothing merges.
        let transposed: &[isize] = &[1, 2, 6];
        assert_eq!(
            canonical(&[2, 3, 4], &[strides, transposed], &[]),
            [(0, 2), (2, 4), (1, 3)]
        );
    }

    #[test]
    fn length_one_axes_drop_unless_pinned_and_pinned_axes_stay_apart() {
        let strides: &[isize] = &[4, 4, 1];
        assert_eq!(canonical(&[1, 3, 4], &[strides], &[]), [(2, 12)]);
        assert_eq!(canonical(&[1, 3, 4], &[strides], &[0]), [(0, 1), (2, 12)]);
        assert_eq!(canonical(&[1, 3, 4], &[strides], &[2]), [(1, 3), (2, 4)]);
        // Broadcast axes (stride 0) go innermost, ties in the given order, and merge.
        let broadcast: &[isize] = &[0, 1, 0];
        assert_eq!(canonical(&[5, 3, 2], &[broadcast], &[]), [(1, 3), (2, 10)]);
        assert_eq!(
            canonical(&[5, 3, 2], &[broadcast], &[0]),
            [(1, 3), (0, 5), (2, 2)]
        );
    }
}
