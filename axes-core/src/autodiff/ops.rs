//! Operations on variables that are not element-wise: reductions, contractions, the
//! softmax cross-entropy loss.

use std::any::TypeId;

use super::fused::{IntoVar, IntoVarExpr};
use super::tape::Var;
use crate::axis::Axis;
use crate::contract::{self, dot_grads};
use crate::engine::interp::{self, Program, Sink, Source};
use crate::error::{Error, Result};
use crate::expr::Reducible;
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::{AxisSet, Difference, DifferenceWith, DotAxes, DotWith, HasAxis};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::{IndexElement, Tensor};

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The sum over the axes `Over` (a fused reduction, see [`super::VarExpr::sum`]).
    pub fn sum<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        self.into_var_expr().sum::<Over>()
    }

    /// The mean over the axes `Over`.
    pub fn mean<Over: AxisSet>(&self) -> Result<Var<T, Difference<A, Over>>>
    where
        A: Reducible<Over>,
    {
        self.into_var_expr().mean::<Over>()
    }
}

/// `dot(x, y)` of variables: contracts the axes they pair (as [`crate::dot`]); its backward
/// is two contractions, each over the axes the forward one kept.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::{self, Tape};
/// #[derive(Axis)] struct B;
/// #[derive(Axis)] struct I;
/// #[derive(Axis)] struct O;
///
/// let tape = Tape::<f64>::new();
/// let x = tape.constant(Tensor::<f64, (B, I)>::ones((B.len(2), I.len(3)))?);
/// let w = tape.var(Tensor::<f64, (I, O)>::ones((I.len(3), O.len(4)))?);
/// let y: autodiff::Var<f64, (B, O)> = autodiff::dot(&x, &w)?;
/// let grads = y.sum::<(B, O)>()?.backward()?;
/// let gw: Tensor<f64, (I, O)> = grads.get(&w)?; // the gradient has w's axes
/// assert!(gw.to_vec().iter().all(|&g| g == 2.0));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn dot<T, L, R, X, Y>(x: X, y: Y) -> Result<Var<T, DotAxes<L, R>>>
where
    T: Float,
    L: AxisSet + DotWith<R>,
    R: AxisSet,
    X: IntoVar<Elem = T, Axes = L>,
    Y: IntoVar<Elem = T, Axes = R>,
{
    let (x, y) = (x.into_var()?, y.into_var()?);
    if !x.tape().same_as(y.tape()) {
        return Err(Error::Unsupported {
            what: "combining variables of different tapes".into(),
        });
    }
    let value = contract::dot(x.value(), y.value())?;
    let (xv, yv) = (x.value().clone(), y.value().clone());
    let (xid, yid) = (x.id(), y.id());
    let (x_needs, y_needs) = (x.needs_grad(), y.needs_grad());
    Ok(x.tape()
        .record(value, x_needs || y_needs, move |grads, id| {
            let Some(dz) = grads.tensor::<DotAxes<L, R>>(id) else {
                return Ok(());
            };
            let (dx, dy) = dot_grads(&xv, &yv, &dz, (x_needs, y_needs))?;
            if let Some(dx) = dx {
                grads.accumulate(xid, dx)?;
            }
            if let Some(dy) = dy {
                grads.accumulate(yid, dy)?;
            }
            Ok(())
        }))
}

/// The per-example softmax cross-entropy of `logits` over the class axis `C` with integer
/// `labels` (one per example, in `0..len(C)`): `logsumexp(logits) - logits[label]`, computed
/// stably (shifted by the maximum). The result has the logits' other axes.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::{softmax_cross_entropy, Tape};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Class;
///
/// let tape = Tape::<f64>::new();
/// let logits = tape.var(Tensor::<f64, (Batch, Class)>::zeros((Batch.len(2), Class.len(4)))?);
/// let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![3, 0])?;
/// let loss = softmax_cross_entropy::<Class, _, _, _, _>(&logits, &labels)?;
/// assert!((loss.value().to_vec()[0] - 4f64.ln()).abs() < 1e-12);
/// # Ok::<(), axes::Error>(())
/// ```
pub fn softmax_cross_entropy<C, T, A, X, Ix>(
    logits: X,
    labels: &Tensor<Ix, Difference<A, (C,)>>,
) -> Result<Var<T, Difference<A, (C,)>>>
where
    C: Axis,
    T: Float,
    A: AxisSet + HasAxis<C> + DifferenceWith<(C,)>,
    X: IntoVar<Elem = T, Axes = A>,
    Ix: IndexElement,
{
    let logits = logits.into_var()?;
    // Read through plain strides: padded views are materialised first.
    let x = &if logits.value().layout().is_padded() {
        logits.value().contiguous()
    } else {
        logits.value().clone()
    };
    let labels = &if labels.layout().is_padded() {
        labels.contiguous()
    } else {
        labels.clone()
    };
    let ids = A::IDS;
    let class = ids
        .iter()
        .position(|&id| id == TypeId::of::<C>())
        .expect("HasAxis<C>");
    let rest: Vec<usize> = (0..A::RANK).filter(|&a| a != class).collect();
    let rest_lens: Vec<usize> = rest.iter().map(|&a| x.lens()[a]).collect();
    let classes = x.lens()[class];
    for (p, &a) in rest.iter().enumerate() {
        if labels.lens()[p] != x.lens()[a] {
            return Err(Error::LengthMismatch {
                axis: A::names()[a].to_string(),
                left: x.lens()[a],
                right: labels.lens()[p],
            });
        }
    }
    // The gradient with respect to the logits, softmax - one_hot, row-major in A's order.
    let d_layout = Layout::row_major(x.lens());
    let mut d_logits = vec![T::zero(); x.element_count()];
    let mut loss = vec![T::zero(); rest_lens.iter().product()];
    let (xs, xl) = (x.storage().as_slice(), x.layout());
    let (ls, ll) = (labels.storage().as_slice(), labels.layout());
    let mut index = vec![0usize; rest.len()];
    let mut row = vec![T::zero(); classes];
    for out in loss.iter_mut() {
        let base = |layout: &Layout, axes: &[usize]| -> isize {
            layout.offset() as isize
                + axes
                    .iter()
                    .zip(&index)
                    .map(|(&a, &i)| layout.strides()[a] * i as isize)
                    .sum::<isize>()
        };
        let x0 = base(xl, &rest);
        let d0 = base(&d_layout, &rest) as usize;
        let label_axes: Vec<usize> = (0..rest.len()).collect();
        let label = ls[base(ll, &label_axes) as usize].to_index();
        if label < 0 || label as usize >= classes {
            return Err(Error::LabelOutOfRange {
                axis: C::name().to_string(),
                label,
                len: classes,
            });
        }
        let mut max = T::lowest();
        for (c, r) in row.iter_mut().enumerate() {
            *r = xs[(x0 + c as isize * xl.strides()[class]) as usize];
            max = max.max(*r);
        }
        let mut total = T::zero();
        for r in &mut row {
            *r = r.sub(max).exp();
            total = total.add(*r);
        }
        let label = label as usize;
        let shifted_label = xs[(x0 + label as isize * xl.strides()[class]) as usize].sub(max);
        *out = total.ln().sub(shifted_label);
        let dc = d_layout.strides()[class] as usize;
        for (c, &r) in row.iter().enumerate() {
            let one_hot = if c == label { T::one() } else { T::zero() };
            d_logits[d0 + c * dc] = r.div(total).sub(one_hot);
        }
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < rest_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    let value = Tensor::from_parts(Storage::new(loss), Layout::row_major(&rest_lens))
        .expect("fresh buffer fits");
    let d_logits = Storage::new(d_logits);
    let (xid, lens) = (logits.id(), x.lens().to_vec());
    let rest_ids: Vec<TypeId> = rest.iter().map(|&a| ids[a]).collect();
    let all_ids = ids.to_vec();
    Ok(logits
        .tape()
        .record(value, logits.needs_grad(), move |grads, id| {
            let Some(upstream) = grads.buf(id) else {
                return Ok(());
            };
            // d logits = (softmax - one_hot) * upstream (broadcast along C), in one pass.
            let mut ir = Ir::default();
            let (a, b) = (ir.leaf(), ir.leaf());
            let root = ir.push(IrNode::Binary(BinaryOp::Mul, a, b));
            let program = Program::compile_uniform(&ir, &[root], T::DTYPE)?;
            let upstream_strides = all_ids
                .iter()
                .map(|id| {
                    rest_ids
                        .iter()
                        .position(|r| r == id)
                        .map_or(0, |p| upstream.layout.strides()[p])
                })
                .collect();
            let sources = [
                Source {
                    data: T::elements(d_logits.as_slice()),
                    offset: 0,
                    strides: d_layout.strides().to_vec(),
                },
                Source {
                    data: T::elements(upstream.storage.as_slice()),
                    offset: upstream.layout.offset(),
                    strides: upstream_strides,
                },
            ];
            let mut buf = grads.take_for_write(xid, &lens);
            let strides = buf.layout.strides().to_vec();
            let offset = buf.layout.offset();
            let result = interp::run(
                &program,
                &lens,
                &sources,
                &mut [Sink {
                    data: T::elements_mut(buf.storage.make_mut()),
                    offset,
                    strides,
                    combine: Some(ReduceOp::Sum),
                }],
            );
            grads.put(xid, buf);
            result
        }))
}
