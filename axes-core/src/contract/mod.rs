//! Contractions: [`dot`] over the axes two tensors share, and [`dot_over`] over named axes
//! with the other shared axes kept as batch axes, at BLAS speed on the CPU; and [`outer`],
//! the product of two tensors that share no axis.
//!
//! A contraction is mapped onto one (batched) GEMM of the `gemm` crate: the kept axes of
//! each operand and the contracted axes are merged into single matrix dimensions when the
//! strides allow it (as they do for any operand stored in a compatible order, including a
//! transposed view), so no copy is made; an operand whose strides do not allow it is packed
//! once. On the CPU the engine runs it (f32 and f64 on `gemm`; f16 and bf16 computed in
//! f32; integers by a plain loop, wrapping); on a device, the backend's matrix product.
//!
//! The parts: which axes pair, and how (`roles`), the operands as matrices and where the
//! product runs (`matrices`), and the gradients (`grads`).

mod attention;
mod grads;
mod matrices;
mod roles;

pub use attention::{Attention, AttentionAxes, AttentionScores};

pub(crate) use grads::{DotGrads, dot_grads, dot_over_grads};

pub(crate) use matrices::Operand;
pub(crate) use roles::Roles;

use matrices::Matrices;
use roles::{dot_roles, over_roles};

use crate::dispatch;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::layout::Layout;
use crate::list::{AxisSet, Concat, ConcatWith, DotAxes, DotOverWith, DotWith};
use crate::num::Num;
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::{FlatParts, Tensor};

#[cfg(feature = "test-hooks")]
thread_local! {
    /// Operands packed (copied) on this thread because their strides did not allow a GEMM
    /// view; tests use it to check that views which allow one are not copied.
    static PACKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The number of operands contractions called from this thread have packed (copied): tests
/// check with it that views which allow a GEMM view are not copied (feature `test-hooks`).
#[cfg(feature = "test-hooks")]
pub fn packed_operands() -> usize {
    PACKED.with(std::cell::Cell::get)
}

/// `dot(x, y)`: contracts the axes `x` and `y` pair (the pairing rule of
/// `axes::doc::semantics`: first each `Dual<A>` on one side with `A` on the other, then every
/// other axis both have); the result has `x`'s remaining axes, then `y`'s. Computed when
/// called.
///
/// `dot` contracts *every* axis the operands share, as NumPy's `tensordot` over all common
/// axes does — not as `x @ w` does for batched operands. For attention's
/// (Batch, Head, Query, Dim)·(Batch, Head, Key, Dim), `dot` would sum Batch and Head too; name
/// the contracted axes with [`dot_over`] (`dot_over::<(Dim,), _, _, _>` keeps Batch and Head as
/// batch axes) or write the product in index notation (`tensor!`). Operands that share no
/// axis are a compile error: an outer product is [`outer`].
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
/// let x = Tensor::<f32, (Batch, In)>::from_vec((Batch.len(1), In.len(2)), vec![1., 2.])?;
/// let w = Tensor::<f32, (In, Out)>::from_vec((In.len(2), Out.len(3)), vec![1., 0., 1., 0., 1., 1.])?;
/// let y: Tensor<f32, (Batch, Out)> = dot(&x, &w)?;
/// assert_eq!(y.to_vec(), [1., 2., 3.]);
/// // a square weight pairs its Dual<In> with x's In and keeps its own In
/// let sq = Tensor::<f32, (Dual<In>, In)>::eye(In.len(2))?;
/// let same: Tensor<f32, (Batch, In)> = dot(&x, &sq)?;
/// assert_eq!(same, x);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn dot<T: Num, L: AxisSet + DotWith<R>, R: AxisSet>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
) -> Result<Tensor<T, DotAxes<L, R>>> {
    let roles = dot_roles::<L, R>();
    check_pairing::<L, R, DotAxes<L, R>>(&roles)?;
    let (data, layout) = contract(x, y, &roles)?;
    let result = Tensor::from_parts(data, layout).expect("a fresh result fits its buffer");
    Ok(result.with_flat_parts(FlatParts::merged(&[x.flat_parts(), y.flat_parts()])))
}

/// The outer product of two tensors that share no axis: every element of `x` times every
/// element of `y`, with `x`'s axes then `y`'s. Computed when called, on the device both
/// operands are on. (An axis in both is a compile error: it would appear twice.)
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Row;
/// #[derive(Axis)] struct Col;
/// let x = Tensor::<i32, (Row,)>::from_vec(Row.len(2), vec![1, 2])?;
/// let y = Tensor::<i32, (Col,)>::from_vec(Col.len(3), vec![1, 10, 100])?;
/// let xy: Tensor<i32, (Row, Col)> = outer(&x, &y)?;
/// assert_eq!(xy.to_vec(), [1, 10, 100, 2, 20, 200]);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn outer<T: Num, L, R>(x: &Tensor<T, L>, y: &Tensor<T, R>) -> Result<Tensor<T, Concat<L, R>>>
where
    L: AxisSet + ConcatWith<R>,
    R: AxisSet,
    Concat<L, R>: AxisSet,
{
    let rank = L::RANK + R::RANK;
    let lens: Vec<usize> = x.lens().iter().chain(y.lens()).copied().collect();
    let spread = |from: &dyn Fn(usize) -> Option<usize>, layout: &Layout| {
        let from: Vec<Option<usize>> = (0..rank).map(from).collect();
        layout.broadcast(&from, &lens)
    };
    let xs = spread(&|axis| (axis < L::RANK).then_some(axis), x.layout());
    let ys = spread(&|axis| axis.checked_sub(L::RANK), y.layout());
    let xs = Tensor::<T, Concat<L, R>>::from_parts(x.storage().clone(), xs)
        .expect("a broadcast view stays inside its buffer");
    let ys = Tensor::<T, Concat<L, R>>::from_parts(y.storage().clone(), ys)
        .expect("a broadcast view stays inside its buffer");
    let product = (&xs * &ys).eval()?;
    Ok(product.with_flat_parts(FlatParts::merged(&[x.flat_parts(), y.flat_parts()])))
}

/// [`dot`] computed on `device` for one call: the operands are copied there (those already
/// there are used in place) and the result comes back to host memory. For tensors kept on a
/// device, `dot` itself runs there.
pub fn dot_on<T: Num, L: AxisSet + DotWith<R>, R: AxisSet>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
    device: &Device,
) -> Result<Tensor<T, DotAxes<L, R>>> {
    dot(&x.to(device)?, &y.to(device)?)?.to(&Device::Cpu)
}

/// The axes of `dot_over::<Over>(x, y)`.
pub type DotOverAxes<L, R, Over> = <L as DotOverWith<R, Over>>::Output;

/// Contracts only the axes `Over` (each in both operands); every other axis the operands share
/// is a batch axis, kept once. The result has `x`'s remaining axes, then `y`'s new ones:
/// `(B, M, K)` and `(B, K, N)` over `(K,)` give `(B, M, N)`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct M;
/// #[derive(Axis)] struct K;
/// #[derive(Axis)] struct N;
/// let x = Tensor::<f64, (B, M, K)>::ones((B.len(2), M.len(3), K.len(4)))?;
/// let y = Tensor::<f64, (B, K, N)>::ones((B.len(2), K.len(4), N.len(5)))?;
/// let z: Tensor<f64, (B, M, N)> = dot_over::<(K,), _, _, _>(&x, &y)?;
/// assert!(z.to_vec().iter().all(|&v| v == 4.0));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn dot_over<Over, T, L, R>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
) -> Result<Tensor<T, DotOverAxes<L, R, Over>>>
where
    Over: AxisSet,
    T: Num,
    L: DotOverWith<R, Over>,
    R: AxisSet,
{
    // The result type lists the batch axes where they stand among x's kept axes.
    let roles = over_roles::<L, R>(Over::IDS);
    check_pairing::<L, R, DotOverAxes<L, R, Over>>(&roles)?;
    if roles.k.len() != Over::RANK {
        return Err(Error::AxisIdCollision {
            left: L::names().join(", "),
            right: R::names().join(", "),
        });
    }
    let (data, layout) = contract(x, y, &roles)?;
    let result = Tensor::from_parts(data, layout).expect("a fresh result fits its buffer");
    Ok(result.with_flat_parts(FlatParts::merged(&[x.flat_parts(), y.flat_parts()])))
}

/// Checks that `roles`, worked out from the axes' type ids, give the result axes `O` the type
/// checker worked out: they differ only when two distinct axis types share a type-level id.
fn check_pairing<L: AxisSet, R: AxisSet, O: AxisSet>(roles: &Roles) -> Result<()> {
    if roles.result_ids(L::IDS, R::IDS) != O::IDS {
        return Err(Error::AxisIdCollision {
            left: L::names().join(", "),
            right: R::names().join(", "),
        });
    }
    Ok(())
}

/// Runs the contraction described by `roles`, on the device both operands are on; returns
/// the result buffer and its layout in the result type's axis order (batch and m axes in
/// x's order, then n axes in y's).
fn contract<T: Num, L: AxisSet, R: AxisSet>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
    roles: &Roles,
) -> Result<(Storage<T>, Layout)> {
    contract_operands(&Operand::of(x), &Operand::of(y), roles)
}

/// [`contract`] over operands of any rank.
pub(crate) fn contract_operands<T: Num>(
    x: &Operand<'_, T>,
    y: &Operand<'_, T>,
    roles: &Roles,
) -> Result<(Storage<T>, Layout)> {
    dispatch::common_device([x.storage.device(), y.storage.device()])?;
    Matrices::new(x, y, roles)?.run(x, y)
}
