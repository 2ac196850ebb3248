//! The gradients of a contraction: two more contractions, their axes paired by the roles of
//! the forward one.

use super::contract;
use super::roles::{Roles, dot_roles, over_roles};
use crate::error::Result;
use crate::list::{AxisSet, DotAxes, DotOverWith, DotWith};
use crate::num::Num;
use crate::tensor::Tensor;

/// The gradients of both operands of a contraction, each when asked for.
pub(crate) type DotGrads<T, L, R> = (Option<Tensor<T, L>>, Option<Tensor<T, R>>);

/// The gradients of `z = dot(x, y)` given `dz`: `dx` contracts `dz` with `y` over `y`'s kept
/// axes, `dy` contracts `x` with `dz` over `x`'s kept axes — the axes are paired by the roles
/// of the forward contraction, so a `Dual<A>` contracted with `A` gets its gradient on the
/// right axis. The results are views in the operands' axis order (no copy); each is computed
/// only when `want` asks for it.
pub(crate) fn dot_grads<T: Num, L: AxisSet + DotWith<R>, R: AxisSet>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
    dz: &Tensor<T, DotAxes<L, R>>,
    want: (bool, bool),
) -> Result<DotGrads<T, L, R>> {
    let roles = dot_roles::<L, R>();
    let (nm, nn) = (roles.m.len(), roles.n.len());
    // dz's axes: x's kept axes (in x's order), then y's kept axes (in y's order).
    let mut dx_roles = Roles {
        k: (0..nn).map(|j| (nm + j, roles.n[j])).collect(),
        m: (0..nm).collect(),
        ..Roles::default()
    };
    // y's contracted axes, in y's order; the result has dz's kept axes, then these.
    let mut y_k: Vec<(usize, usize)> = roles.k.iter().map(|&(a, b)| (b, a)).collect();
    y_k.sort_unstable();
    dx_roles.n = y_k.iter().map(|&(b, _)| b).collect();
    let dx = if want.0 {
        let (dx, dx_layout) = contract(dz, y, &dx_roles)?;
        // Position in the result of each of x's axes.
        let dx_order: Vec<usize> = (0..L::RANK)
            .map(|a| match roles.m.iter().position(|&m| m == a) {
                Some(p) => p,
                None => {
                    nm + y_k
                        .iter()
                        .position(|&(_, xa)| xa == a)
                        .expect("a contracted axis")
                }
            })
            .collect();
        let layout = dx_layout.permuted(&dx_order);
        Some(Tensor::from_parts(dx, layout).expect("a fresh result fits"))
    } else {
        None
    };
    if !want.1 {
        return Ok((dx, None));
    }
    let mut x_k: Vec<(usize, usize)> = roles.k.clone();
    x_k.sort_unstable();
    let dy_roles = Roles {
        k: (0..nm).map(|i| (roles.m[i], i)).collect(),
        m: x_k.iter().map(|&(a, _)| a).collect(),
        n: (0..nn).map(|j| nm + j).collect(),
        ..Roles::default()
    };
    let (dy, dy_layout) = contract(x, dz, &dy_roles)?;
    let dy_order: Vec<usize> = (0..R::RANK)
        .map(|b| match roles.n.iter().position(|&n| n == b) {
            Some(p) => x_k.len() + p,
            None => x_k
                .iter()
                .position(|&(_, yb)| yb == b)
                .expect("a contracted axis"),
        })
        .collect();
    let layout = dy_layout.permuted(&dy_order);
    Ok((
        dx,
        Some(Tensor::from_parts(dy, layout).expect("a fresh result fits")),
    ))
}

/// The gradients of `z = dot_over::<Over>(x, y)` given `dz` (whose axes are x's batch and
/// kept axes in x's order, then y's kept axes): `dx` contracts `dz` with `y` over y's kept
/// axes, `dy` contracts `x` with `dz` over x's kept axes, both keeping the batch axes as batch
/// axes. Views in the operands' axis order; each computed only when `want` asks for it.
pub(crate) fn dot_over_grads<T: Num, L, R, Over>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
    dz: &Tensor<T, <L as DotOverWith<R, Over>>::Output>,
    want: (bool, bool),
) -> Result<DotGrads<T, L, R>>
where
    L: DotOverWith<R, Over>,
    R: AxisSet,
    Over: AxisSet,
{
    let roles = over_roles::<L, R>(Over::IDS);
    // x's axes that z keeps (batch or not), in x's order: z's first axes.
    let mut kept: Vec<usize> = roles
        .b
        .iter()
        .map(|&(a, _)| a)
        .chain(roles.m.iter().copied())
        .collect();
    kept.sort_unstable();
    let in_z = |a: usize| kept.iter().position(|&k| k == a).expect("an axis z keeps");
    let nk = kept.len();
    let dx = if want.0 {
        // y's contracted axes in y's order: the last axes of dx before the reorder.
        let mut y_k: Vec<(usize, usize)> = roles.k.iter().map(|&(a, b)| (b, a)).collect();
        y_k.sort_unstable();
        let dx_roles = Roles {
            k: roles
                .n
                .iter()
                .enumerate()
                .map(|(j, &b)| (nk + j, b))
                .collect(),
            b: roles.b.iter().map(|&(a, b)| (in_z(a), b)).collect(),
            m: roles.m.iter().map(|&a| in_z(a)).collect(),
            n: y_k.iter().map(|&(b, _)| b).collect(),
        };
        let (dx, layout) = contract(dz, y, &dx_roles)?;
        // dx's axes: z's kept axes (x's order), then x's contracted axes in y's order.
        let order: Vec<usize> = (0..L::RANK)
            .map(|a| match kept.iter().position(|&k| k == a) {
                Some(p) => p,
                None => {
                    nk + y_k
                        .iter()
                        .position(|&(_, xa)| xa == a)
                        .expect("a contracted axis")
                }
            })
            .collect();
        Some(Tensor::from_parts(dx, layout.permuted(&order)).expect("a fresh result fits"))
    } else {
        None
    };
    if !want.1 {
        return Ok((dx, None));
    }
    // dy's first axes: x's batch and contracted axes in x's order, then z's y-side axes.
    let mut first: Vec<(usize, usize)> = roles.b.iter().chain(&roles.k).copied().collect();
    first.sort_unstable();
    let is_batch = |a: usize| roles.b.iter().any(|&(ba, _)| ba == a);
    let dy_roles = Roles {
        k: roles.m.iter().map(|&a| (a, in_z(a))).collect(),
        b: roles.b.iter().map(|&(a, _)| (a, in_z(a))).collect(),
        m: first
            .iter()
            .filter(|&&(a, _)| !is_batch(a))
            .map(|&(a, _)| a)
            .collect(),
        n: (0..roles.n.len()).map(|j| nk + j).collect(),
    };
    let (dy, layout) = contract(x, dz, &dy_roles)?;
    let order: Vec<usize> = (0..R::RANK)
        .map(|b| match first.iter().position(|&(_, yb)| yb == b) {
            Some(p) => p,
            None => first.len() + roles.n.iter().position(|&n| n == b).expect("a kept axis"),
        })
        .collect();
    Ok((
        dx,
        Some(Tensor::from_parts(dy, layout.permuted(&order)).expect("a fresh result fits")),
    ))
}
