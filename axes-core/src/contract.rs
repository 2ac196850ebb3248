//! Contractions: [`dot`] over the axes two tensors share, and [`dot_over`] over named axes
//! with the other shared axes kept as batch axes, at BLAS speed on the CPU.
//!
//! A contraction is mapped onto one (batched) GEMM of the `gemm` crate: the kept axes of
//! each operand and the contracted axes are merged into single matrix dimensions when the
//! strides allow it (as they do for any operand stored in a compatible order, including a
//! transposed view), so no copy is made; an operand whose strides do not allow it is packed
//! once. f32 and f64 run on `gemm`; f16 and bf16 are computed in f32; integers use a plain
//! loop (wrapping arithmetic).

use std::any::TypeId;

use half::{bf16, f16};

use crate::dispatch;
use crate::element::Element;
use crate::engine::threads;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::{
    AxisSet, Difference, DifferenceWith, DotAxes, DotWith, MAX_RANK, SubsetOf, Union, UnionWith,
};
use crate::num::Num;
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::Tensor;

thread_local! {
    /// Operands packed (copied) on this thread because their strides did not allow a GEMM
    /// view; tests use it to check that views which allow one are not copied.
    static PACKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The number of operands contractions called from this thread have packed (copied).
#[doc(hidden)]
pub fn packed_operands() -> usize {
    PACKED.with(std::cell::Cell::get)
}

/// How the axes of a contraction are assigned: pairs of (left axis, right axis) positions.
#[derive(Default, Debug)]
struct Roles {
    /// Contracted pairs.
    k: Vec<(usize, usize)>,
    /// Batch pairs (kept once, on both sides).
    b: Vec<(usize, usize)>,
    /// Left axes kept (not batch).
    m: Vec<usize>,
    /// Right axes kept (not batch).
    n: Vec<usize>,
}

/// `dot(x, y)`: contracts the axes `x` and `y` pair (DESIGN.md §2: first each `Dual<A>` on one
/// side with `A` on the other, then every other axis both have); the result has `x`'s
/// remaining axes, then `y`'s. Computed when called.
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
    let (data, layout) = contract(x, y, &roles)?;
    Ok(Tensor::from_parts(data, layout).expect("a fresh result fits its buffer"))
}

/// The roles of `dot(x, y)`'s axes: first each `Dual<A>` on one side with `A` on the other,
/// then every other axis both have.
fn dot_roles<L: AxisSet, R: AxisSet>() -> Roles {
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
pub type DotOverAxes<L, R, Over> = Union<Difference<L, Over>, Difference<R, Over>>;

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
    Over: AxisSet + SubsetOf<L> + SubsetOf<R>,
    T: Num,
    L: AxisSet + DifferenceWith<Over>,
    R: AxisSet + DifferenceWith<Over>,
    Difference<L, Over>: UnionWith<Difference<R, Over>>,
{
    let (left, right, over) = (L::IDS, R::IDS, Over::IDS);
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
    // The result type lists the batch axes where they stand among x's kept axes.
    let (data, layout) = contract(x, y, &roles)?;
    Ok(Tensor::from_parts(data, layout).expect("a fresh result fits its buffer"))
}

/// One matrix dimension of an operand: merged length and stride, if its axes merge.
fn merge(layout: &Layout, axes: &[usize]) -> Option<(usize, isize)> {
    let (lens, strides) = (layout.lens(), layout.strides());
    if axes.iter().any(|&a| lens[a] == 0) {
        return Some((0, 1));
    }
    let mut len = 1usize;
    let mut stride = 0isize;
    let mut next: Option<isize> = None;
    for &a in axes.iter().rev() {
        if lens[a] == 1 {
            continue;
        }
        if strides[a] < 0 {
            return None;
        }
        match next {
            Some(expected) if expected != strides[a] => return None,
            None => stride = strides[a],
            _ => {}
        }
        next = Some(strides[a] * lens[a] as isize);
        len *= lens[a];
    }
    Some((len, if len <= 1 { 1 } else { stride }))
}

/// Orders axes by decreasing |stride| of `layout` (the order in which they merge).
fn by_stride(layout: &Layout, axes: &[usize]) -> Vec<usize> {
    let mut sorted = axes.to_vec();
    sorted.sort_by_key(|&a| std::cmp::Reverse(layout.strides()[a].unsigned_abs()));
    sorted
}

/// A matrix view of one operand: buffer, offset of each batch entry, and strides of the two
/// merged dimensions.
struct MatrixOperand<T> {
    /// The operand packed into `[batch, rows, cols]` order, when its strides allow no view.
    packed: Option<Storage<T>>,
    offset: usize,
    batch_strides: Vec<isize>,
    /// The batch axes merged into one (length, stride), where they merge.
    batch: Option<(usize, isize)>,
    rows: (usize, isize),
    cols: (usize, isize),
}

/// Makes `t` a [batch..., rows..., cols...] matrix operand, packing it (on its device) only
/// when its strides do not allow a view. On a device the batch axes must merge into one too.
fn matrix_operand<T: Element, A: AxisSet>(
    t: &Tensor<T, A>,
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
) -> Result<MatrixOperand<T>> {
    let layout = *t.layout();
    let on_device = !t.device().is_cpu();
    if !layout.is_padded()
        && let (Some(r), Some(c)) = (merge(&layout, rows), merge(&layout, cols))
        && (!on_device || merge(&layout, batch).is_some())
    {
        return Ok(MatrixOperand {
            packed: None,
            offset: layout.offset(),
            batch_strides: batch.iter().map(|&a| layout.strides()[a]).collect(),
            batch: merge(&layout, batch),
            rows: r,
            cols: c,
        });
    }
    // Pack into [batch, rows, cols] row-major order.
    PACKED.with(|p| p.set(p.get() + 1));
    let order: Vec<usize> = batch.iter().chain(rows).chain(cols).copied().collect();
    let data = t.packed_in(&order)?;
    let lens: Vec<usize> = order.iter().map(|&a| layout.lens()[a]).collect();
    let packed = Layout::row_major(&lens);
    let nb = batch.len();
    let all: Vec<usize> = (0..order.len()).collect();
    let r = merge(&packed, &all[nb..nb + rows.len()]).expect("row-major axes merge");
    let c = merge(&packed, &all[nb + rows.len()..]).expect("row-major axes merge");
    Ok(MatrixOperand {
        packed: Some(data),
        offset: 0,
        batch_strides: packed.strides()[..nb].to_vec(),
        batch: merge(&packed, &all[..nb]),
        rows: r,
        cols: c,
    })
}

/// Runs the contraction described by `roles`; returns the result buffer and its layout in
/// the result type's axis order (batch and m axes in x's order, then n axes in y's).
/// A contraction laid out as (batched) matrices: the axes of each matrix dimension, each
/// operand's matrix view, and the result's lengths in `[batch, m, n]` order.
struct Matrices<T> {
    batch_x: Vec<usize>,
    m_axes: Vec<usize>,
    n_axes: Vec<usize>,
    lhs: MatrixOperand<T>,
    rhs: MatrixOperand<T>,
    comp_lens: Vec<usize>,
}

impl<T: Num> Matrices<T> {
    /// Checks the paired lengths and views `x` and `y` as matrices for `roles`.
    fn new<L: AxisSet, R: AxisSet>(
        x: &Tensor<T, L>,
        y: &Tensor<T, R>,
        roles: &Roles,
    ) -> Result<Self> {
        let (xl, yl) = (x.lens(), y.lens());
        for &(a, b) in roles.k.iter().chain(&roles.b) {
            if xl[a] != yl[b] {
                return Err(Error::LengthMismatch {
                    axis: L::names()[a].to_string(),
                    left: xl[a],
                    right: yl[b],
                });
            }
        }
        // Orders: m and k by x's strides, n by y's; batch in x's order.
        let m_axes = by_stride(x.layout(), &roles.m);
        let mut k_pairs = roles.k.clone();
        k_pairs.sort_by_key(|&(a, _)| std::cmp::Reverse(x.layout().strides()[a].unsigned_abs()));
        let n_axes = by_stride(y.layout(), &roles.n);
        let batch_x: Vec<usize> = roles.b.iter().map(|&(a, _)| a).collect();
        let batch_y: Vec<usize> = roles.b.iter().map(|&(_, b)| b).collect();
        let kx: Vec<usize> = k_pairs.iter().map(|&(a, _)| a).collect();
        let ky: Vec<usize> = k_pairs.iter().map(|&(_, b)| b).collect();
        let lhs = matrix_operand(x, &batch_x, &m_axes, &kx)?;
        let rhs = matrix_operand(y, &batch_y, &ky, &n_axes)?;
        let comp_lens: Vec<usize> = (batch_x.iter().map(|&a| xl[a]))
            .chain(m_axes.iter().map(|&a| xl[a]))
            .chain(n_axes.iter().map(|&b| yl[b]))
            .collect();
        Ok(Matrices {
            batch_x,
            m_axes,
            n_axes,
            lhs,
            rhs,
            comp_lens,
        })
    }

    /// Runs the product on `backend`, where `x`, `y` and the packed operands are.
    fn run_on<L: AxisSet, R: AxisSet>(
        &self,
        backend: &'static dyn crate::protocol::Backend,
        x: &Tensor<T, L>,
        y: &Tensor<T, R>,
    ) -> Result<(Storage<T>, Layout)> {
        let (lhs, rhs) = (&self.lhs, &self.rhs);
        let count = self
            .comp_lens
            .iter()
            .try_fold(1usize, |n, &l| n.checked_mul(l))
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{} · {}", x.describe_lengths(), y.describe_lengths()),
            })?;
        let layout = self.result_layout(L::RANK, R::RANK);
        let (m, k, n) = (lhs.rows.0, lhs.cols.0, rhs.cols.0);
        let memory = if count == 0 {
            backend.upload(&[])?
        } else {
            fn side<'s, T: Element>(
                op: &'s MatrixOperand<T>,
                storage: &'s Storage<T>,
                backend: &'static dyn crate::protocol::Backend,
            ) -> Result<crate::protocol::MatrixSide<'s>> {
                let storage = op.packed.as_ref().unwrap_or(storage);
                let memory = storage.memory().ok_or_else(|| Error::DeviceMismatch {
                    left: storage.device().to_string(),
                    right: Device::Accelerator(backend).to_string(),
                })?;
                Ok(crate::protocol::MatrixSide {
                    memory,
                    offset: op.offset,
                    batch_stride: op.batch.map_or(0, |b| b.1),
                    row_stride: op.rows.1,
                    col_stride: op.cols.1,
                })
            }
            let job = crate::protocol::MatmulJob {
                dtype: T::DTYPE,
                batch: lhs.batch.map_or(1, |b| b.0),
                m,
                n,
                k,
                lhs: side(lhs, x.storage(), backend)?,
                rhs: side(rhs, y.storage(), backend)?,
            };
            backend.matmul(&job)?
        };
        Ok((dispatch::device_storage(backend, memory, count)?, layout))
    }

    /// The row-major `[batch, m, n]` result viewed in the type's order: x's kept axes (batch
    /// and m) in x's order, then y's n axes in y's order.
    fn result_layout(&self, left_rank: usize, right_rank: usize) -> Layout {
        let nb = self.batch_x.len();
        let mut type_order: Vec<usize> = Vec::new();
        for a in 0..left_rank {
            if let Some(p) = self.batch_x.iter().position(|&b| b == a) {
                type_order.push(p);
            } else if let Some(p) = self.m_axes.iter().position(|&b| b == a) {
                type_order.push(nb + p);
            }
        }
        for b in 0..right_rank {
            if let Some(p) = self.n_axes.iter().position(|&c| c == b) {
                type_order.push(nb + self.m_axes.len() + p);
            }
        }
        Layout::row_major(&self.comp_lens).permuted(&type_order)
    }
}

fn contract<T: Num, L: AxisSet, R: AxisSet>(
    x: &Tensor<T, L>,
    y: &Tensor<T, R>,
    roles: &Roles,
) -> Result<(Storage<T>, Layout)> {
    let xl = x.lens();
    let device = dispatch::common_device([x.device(), y.device()])?;
    let matrices = Matrices::new(x, y, roles)?;
    if let Some(Device::Accelerator(backend)) = device {
        return matrices.run_on(backend, x, y);
    }
    let Matrices {
        batch_x,
        lhs,
        rhs,
        comp_lens,
        ..
    } = &matrices;
    // The result, row-major in [batch, m, n] computation order.
    let batch_lens: Vec<usize> = batch_x.iter().map(|&a| xl[a]).collect();
    let count = comp_lens
        .iter()
        .try_fold(1usize, |n, &l| n.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{} · {}", x.describe_lengths(), y.describe_lengths()),
        })?;
    let (m, k, n) = (lhs.rows.0, lhs.cols.0, rhs.cols.0);
    let mut out = vec![T::zero(); count];
    let batches: usize = batch_lens.iter().product();
    let lhs_data = lhs.packed.as_ref().unwrap_or(x.storage()).as_slice();
    let rhs_data = rhs.packed.as_ref().unwrap_or(y.storage()).as_slice();
    if m > 0 && n > 0 && k > 0 {
        let mut index = vec![0usize; batch_lens.len()];
        for b in 0..batches {
            let lo = lhs.offset as isize
                + index
                    .iter()
                    .zip(&lhs.batch_strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>();
            let ro = rhs.offset as isize
                + index
                    .iter()
                    .zip(&rhs.batch_strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>();
            let dst = &mut out[b * m * n..(b + 1) * m * n];
            matmul(
                dst, m, n, k, lhs_data, lo, lhs.rows.1, lhs.cols.1, rhs_data, ro, rhs.rows.1,
                rhs.cols.1,
            );
            for axis in (0..index.len()).rev() {
                index[axis] += 1;
                if index[axis] < batch_lens[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
    }
    let layout = matrices.result_layout(L::RANK, R::RANK);
    Ok((Storage::new(out), layout))
}

/// `dst (m×n, row-major) = lhs (m×k) · rhs (k×n)`, each operand given by buffer, offset and
/// (row, column) strides that keep every element inside its buffer.
#[allow(clippy::too_many_arguments)]
fn matmul<T: Num>(
    dst: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    lhs: &[T],
    lo: isize,
    l_rs: isize,
    l_cs: isize,
    rhs: &[T],
    ro: isize,
    r_rs: isize,
    r_cs: isize,
) {
    // Every position an operand reaches, checked once against its buffer.
    let reach = |len: usize, o: isize, rs: isize, rows: usize, cs: isize, cols: usize| {
        let last = o + (rows as isize - 1) * rs + (cols as isize - 1) * cs;
        o >= 0 && last >= 0 && (o as usize) < len && (last as usize) < len
    };
    assert!(
        reach(lhs.len(), lo, l_rs, m, l_cs, k) && reach(rhs.len(), ro, r_rs, k, r_cs, n),
        "operands inside their buffers"
    );
    assert_eq!(dst.len(), m * n);
    let id = TypeId::of::<T>();
    let parallelism = if threads::threads() > 1 && m * n * k >= 1 << 15 {
        gemm::Parallelism::Rayon(threads::threads())
    } else {
        gemm::Parallelism::None
    };
    if id == TypeId::of::<f32>() || id == TypeId::of::<f64>() {
        let parallel = matches!(parallelism, gemm::Parallelism::Rayon(_));
        let mut run = move || {
            // SAFETY: T is f32 or f64 (checked above), which gemm supports; every position
            // the operands reach lies in their buffers (asserted above; strides are
            // non-negative, so the extreme corners bound them), and dst holds m×n elements
            // with row stride n and column stride 1. Nothing else writes dst meanwhile.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    lhs.as_ptr().offset(lo),
                    l_cs,
                    l_rs,
                    rhs.as_ptr().offset(ro),
                    r_cs,
                    r_rs,
                    T::zero(),
                    T::one(),
                    false,
                    false,
                    false,
                    parallelism,
                )
            }
        };
        // Only a parallel product needs the pool: entering it costs a thread hand-off.
        if parallel {
            threads::install(run);
        } else {
            run();
        }
        return;
    }
    if id == TypeId::of::<f16>() || id == TypeId::of::<bf16>() {
        // Computed in f32: pack both operands as f32, multiply, round back.
        let widen =
            |data: &[T], o: isize, rs: isize, cs: isize, rows: usize, cols: usize| -> Vec<f32> {
                let mut out = Vec::with_capacity(rows * cols);
                for r in 0..rows {
                    for c in 0..cols {
                        out.push(
                            data[(o + r as isize * rs + c as isize * cs) as usize].to_f64() as f32,
                        );
                    }
                }
                out
            };
        let a = widen(lhs, lo, l_rs, l_cs, m, k);
        let b = widen(rhs, ro, r_rs, r_cs, k, n);
        let mut c = vec![0f32; m * n];
        matmul(&mut c, m, n, k, &a, 0, k as isize, 1, &b, 0, n as isize, 1);
        for (d, v) in dst.iter_mut().zip(c) {
            *d = T::from_f64(f64::from(v));
        }
        return;
    }
    // Integers: a plain loop with the element type's (wrapping) arithmetic.
    for i in 0..m {
        for j in 0..n {
            let mut acc = T::zero();
            for p in 0..k {
                let a = lhs[(lo + i as isize * l_rs + p as isize * l_cs) as usize];
                let b = rhs[(ro + p as isize * r_rs + j as isize * r_cs) as usize];
                acc = acc.add(a.mul(b));
            }
            dst[i * n + j] = acc;
        }
    }
}
