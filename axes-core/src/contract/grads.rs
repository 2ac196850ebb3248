//! The gradients of a contraction: two more contractions, their axes paired by the roles of
//! the forward one.

use super::contract;
use super::roles::{Roles, dot_roles};
use crate::error::Result;
use crate::list::{AxisSet, DotAxes, DotWith};
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
