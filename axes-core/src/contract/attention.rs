//! Fused attention: `softmax(scale · q·kᵀ + mask) · v` over named axes, in one pass that never
//! writes the query × key probabilities.

use std::any::TypeId;
use std::marker::PhantomData;

use super::DotOverAxes;
use crate::axis::Axis;
use crate::dispatch::{common_device, device_storage};
use crate::engine::attention::{self as kernel, RowsOut, Saved};
use crate::error::Result;
use crate::layout::Layout;
use crate::list::{
    AxisSet, ConcatWith, Difference, DifferenceWith, DotOverWith, HasAxis, Includes, SubsetOf,
};
use crate::num::Float;
use crate::protocol::{AttentionSaved, AttentionShape, Backend, Device};
use crate::storage::{self, Storage};
use crate::tensor::Tensor;
use operands::{
    Described, GradientTarget, MaskOperand, Operand, RowsOfAxes, describe, device_job,
    mask_operand, memory_on, readable,
};

/// The axes of the scores of queries over `LQ` and keys over `LK`: the queries' axes but the
/// width `W`, then the key axis.
pub type AttentionScores<LQ, LK, W> = DotOverAxes<LQ, LK, (W,)>;

/// The axes of attention's result: the queries' axes but the width `W` (the batch axes and the
/// query axis, in the queries' order), then the values' width axes.
pub type AttentionAxes<LQ, LK, LV, Kx, W> = DotOverAxes<AttentionScores<LQ, LK, W>, LV, (Kx,)>;

/// Scaled dot-product attention, fused: for every query, the softmax over the keys of
/// `scale · q·k` (plus a mask), mixing the values — what `dot_over`, a scale, a mask,
/// `softmax` along the key axis and `dot_over` again compute, without writing the query × key
/// scores or probabilities anywhere.
///
/// The axes are named by type: queries over the query axis `Qx` and the width `W`, keys over
/// the key axis `Kx` and `W`, values over `Kx` and their own width axes (which may be `W`
/// itself); every other axis of the queries is a batch axis, kept in the result (keys and
/// values may lack a batch axis: they are then shared along it, as in multi-query attention).
/// Queries over `Kx`, keys or values over `Qx`, or keys over an axis the queries lack are
/// compile errors. The result has the queries' axes but `W`, in their order, then the values'
/// width axes.
///
/// The scale is `1/√len(W)` unless [`Attention::with_scale`] gives one. [`Attention::causal`]
/// hides from query `i` the keys after position `i` (top-left aligned, as PyTorch's
/// `is_causal`); [`Attention::run_masked`] adds a constant mask (−∞ hides a key) over any of
/// the score axes. A query that sees no key gets zeros (and passes no gradient), not NaN.
/// Elements are computed in `f32` for the half types.
///
/// In host memory it runs on the engine's kernel, for heads of any width; on a device, as the
/// backend's [`AttentionJob`](crate::protocol::AttentionJob) (OpenCL's and CUDA's generated
/// kernels take heads up to
/// [`FUSED_ATTENTION_MAX_WIDTH`](crate::protocol::FUSED_ATTENTION_MAX_WIDTH) wide, and answer
/// [`Error::Unsupported`](crate::Error::Unsupported) beyond). The gradient of keys or values
/// shared along a batch axis is summed over it.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::contract::Attention;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Query;
/// #[derive(Axis)] struct Key;
/// #[derive(Axis)] struct Dim;
///
/// let q = Tensor::<f32, (Batch, Query, Dim)>::random_uniform((Batch.len(2), Query.len(5), Dim.len(8)), -1.0, 1.0, 0)?;
/// let k = Tensor::<f32, (Batch, Key, Dim)>::random_uniform((Batch.len(2), Key.len(5), Dim.len(8)), -1.0, 1.0, 1)?;
/// let v = Tensor::<f32, (Batch, Key, Dim)>::random_uniform((Batch.len(2), Key.len(5), Dim.len(8)), -1.0, 1.0, 2)?;
/// let out: Tensor<f32, (Batch, Query, Dim)> = Attention::<Query, Key, Dim>::causal().run(&q, &k, &v)?;
/// // the composition it fuses
/// let scores = (dot_over::<(Dim,), _, _, _>(&q, &k)? * (1.0 / 8f32.sqrt())).eval()?;
/// let hidden = Tensor::<f32, (Query, Key)>::from_fn((Query.len(5), Key.len(5)), |ix| {
///     if ix.of::<Key>() > ix.of::<Query>() { f32::NEG_INFINITY } else { 0.0 }
/// })?;
/// let p = (&scores + &hidden).eval()?.softmax::<Key>()?;
/// let composed: Tensor<f32, (Batch, Query, Dim)> = dot_over::<(Key,), _, _, _>(&p, &v)?;
/// let error = (&out - &composed).abs().max_over::<(Batch, Query, Dim)>()?.to_vec()[0];
/// assert!(error < 1e-6);
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Attention<Qx, Kx, W> {
    causal: bool,
    scale: Option<f64>,
    axes: PhantomData<AxesOf<Qx, Kx, W>>,
}

/// The axes an [`Attention`] names, as a marker that owns none of them.
type AxesOf<Qx, Kx, W> = fn() -> (Qx, Kx, W);

impl<Qx, Kx, W> Clone for Attention<Qx, Kx, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Qx, Kx, W> Copy for Attention<Qx, Kx, W> {}

impl<Qx: Axis, Kx: Axis, W: Axis> Default for Attention<Qx, Kx, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Qx: Axis, Kx: Axis, W: Axis> std::fmt::Debug for Attention<Qx, Kx, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attention")
            .field("query", &Qx::name())
            .field("key", &Kx::name())
            .field("width", &W::name())
            .field("causal", &self.causal)
            .field("scale", &self.scale)
            .finish()
    }
}

/// A call's plan, and its queries, keys, values and mask as the kernel reads them.
struct Prepared<T: Float> {
    plan: Plan,
    operands: [Operand<T>; 3],
    mask: Option<MaskOperand<T>>,
    /// The backend whose device the operands are on; `None` in host memory.
    backend: Option<&'static dyn Backend>,
}

/// The axes of one call, by role, and their lengths.
pub(crate) struct Plan {
    shape: AttentionShape,
    /// The batch axes (the queries' axes but `Qx` and `W`), in the queries' order.
    batch: Vec<(TypeId, usize)>,
    /// The values' width axes, in the values' order, and their lengths.
    value_width: Vec<(TypeId, usize)>,
}

// The result types name every axis list they are computed from.
#[allow(clippy::type_complexity)]
impl<Qx: Axis, Kx: Axis, W: Axis> Attention<Qx, Kx, W> {
    /// Attention with no mask: every query sees every key.
    pub fn new() -> Self {
        Attention {
            causal: false,
            scale: None,
            axes: PhantomData,
        }
    }

    /// Causal attention: query `i` sees keys `0..=i` (positions along `Qx` and `Kx`).
    pub fn causal() -> Self {
        Attention {
            causal: true,
            ..Self::new()
        }
    }

    /// The same attention with the scores scaled by `scale` (instead of `1/√len(W)`).
    pub fn with_scale(self, scale: f64) -> Self {
        Attention {
            scale: Some(scale),
            ..self
        }
    }

    /// Whether the attention is causal.
    pub fn is_causal(&self) -> bool {
        self.causal
    }

    /// The attention of queries `q` over keys `k` and values `v` (see [`Attention`]).
    pub fn run<T, LQ, LK, LV>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
    ) -> Result<Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)> + HasAxis<Qx>,
        LK: AxisSet + HasAxis<Kx> + DifferenceWith<(Kx,)>,
        LV: AxisSet + HasAxis<Kx>,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)>,
        Difference<LK, (Kx,)>: SubsetOf<LQ>,
        (Kx,): ConcatWith<LQ> + AxisSet,
        (Qx,): ConcatWith<LV>,
        (W,): AxisSet,
    {
        Ok(self.forward::<T, LQ, LK, LV, ()>(q, k, v, None)?.0)
    }

    /// [`Attention::run`] with `mask` added to the scores (before the softmax): over any of
    /// the score axes (the batch axes, `Qx`, `Kx`), e.g. `(Batch, Key)` with −∞ at padding. A
    /// mask over an axis the scores lack is a compile error. The mask is a constant: no
    /// gradient flows to it.
    pub fn run_masked<T, LQ, LK, LV, M>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
        mask: &Tensor<T, M>,
    ) -> Result<Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)> + HasAxis<Qx>,
        LK: AxisSet + HasAxis<Kx> + DifferenceWith<(Kx,)>,
        LV: AxisSet + HasAxis<Kx>,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)> + Includes<M>,
        Difference<LK, (Kx,)>: SubsetOf<LQ>,
        (Kx,): ConcatWith<LQ> + AxisSet,
        (Qx,): ConcatWith<LV>,
        (W,): AxisSet,
        M: AxisSet,
    {
        Ok(self.forward::<T, LQ, LK, LV, M>(q, k, v, Some(mask))?.0)
    }

    /// The roles and lengths of one call, checked.
    fn plan<T: Float, LQ: AxisSet, LK: AxisSet, LV: AxisSet, M: AxisSet>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<Plan> {
        let (qx, kx, w) = (TypeId::of::<Qx>(), TypeId::of::<Kx>(), TypeId::of::<W>());
        let [dq, dk, dv] = [
            describe::<T, LQ>(q),
            describe::<T, LK>(k),
            describe::<T, LV>(v),
        ];
        let len = |d: &Described<'_>, id| d.layout.lens()[d.position(id).expect("a typed axis")];
        let queries = len(&dq, qx);
        let width = len(&dq, w);
        let keys = len(&dk, kx);
        dk.check(w, width)?;
        dv.check(kx, keys)?;
        let batch: Vec<(TypeId, usize)> = (LQ::IDS.iter().zip(q.lens()))
            .filter(|&(&id, _)| id != qx && id != w)
            .map(|(&id, &l)| (id, l))
            .collect();
        for &(id, l) in &batch {
            dk.check(id, l)?;
            dv.check(id, l)?;
        }
        let value_width: Vec<(TypeId, usize)> = (LV::IDS.iter().zip(v.lens()))
            .filter(|&(&id, _)| id != kx && !batch.iter().any(|&(b, _)| b == id))
            .map(|(&id, &l)| (id, l))
            .collect();
        if let Some(mask) = mask {
            let dm = describe::<T, M>(mask);
            dm.check(qx, queries)?;
            dm.check(kx, keys)?;
            for &(id, l) in &batch {
                dm.check(id, l)?;
            }
        }
        let scale = self.scale.unwrap_or(1.0 / (width as f64).sqrt());
        Ok(Plan {
            shape: AttentionShape {
                batch: batch.iter().map(|&(_, l)| l).product(),
                queries,
                keys,
                width,
                value_width: value_width.iter().map(|&(_, l)| l).product(),
                scale,
                causal: self.causal,
            },
            batch,
            value_width,
        })
    }

    /// The result and each query's log-sum-exp (batch-major).
    pub(crate) fn forward<T, LQ, LK, LV, M>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<(
        Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>,
        Storage<T::Wide>,
    )>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)>,
        LK: AxisSet,
        LV: AxisSet,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)>,
        (Kx,): AxisSet,
        (W,): AxisSet,
        M: AxisSet,
    {
        let Prepared {
            plan,
            operands,
            mask,
            backend,
        } = self.prepare(q, k, v, mask)?;
        let shape = plan.shape;
        type Out<LQ, LK, LV, Kx, W> = AttentionAxes<LQ, LK, LV, Kx, W>;
        let out_ids = <Out<LQ, LK, LV, Kx, W> as crate::list::AxisList>::IDS;
        let out_lens: Vec<usize> = out_ids.iter().map(|&id| plan.len_of(id, q, v)).collect();
        if let Some(backend) = backend {
            let job = device_job::<T>(backend, &plan, &operands, mask.as_ref())?;
            let (memory, lse) = backend.attention(&job)?;
            let rows = RowsOfAxes {
                ids: out_ids,
                lens: &out_lens,
                row_axis: TypeId::of::<Qx>(),
                cols: &plan.value_width,
            };
            let result = rows.tensor(backend, memory, &plan)?;
            let lse = device_storage(backend, lse, shape.batch * shape.queries)?;
            return Ok((result, lse));
        }
        // The result: dense, its axes in memory in the queries' order (the value width, which
        // the queries may lack, innermost), so that a product reading it as the queries were
        // written (the heads' mix into the output projection) needs no copy.
        let stride_in_q = |id: &TypeId| {
            let at = LQ::IDS.iter().position(|q_id| q_id == id);
            at.map_or(0, |at| q.layout().strides()[at].unsigned_abs())
        };
        let layout = Layout::dense_by_stride(&out_lens, |a| stride_in_q(&out_ids[a]));
        let count: usize = out_lens.iter().product();
        let mut data = storage::for_overwrite::<T>(count)?;
        let described = Described {
            ids: out_ids,
            names: Vec::new(),
            layout: &layout,
        };
        let (batch, row, cols) = (
            described.offsets(&plan.batch),
            described.stride(TypeId::of::<Qx>()),
            described.offsets(&plan.value_width),
        );
        let mut lse = storage::for_overwrite(shape.batch * shape.queries)?;
        {
            let lse_batch: Vec<isize> = (0..shape.batch)
                .map(|b| (b * shape.queries) as isize)
                .collect();
            let out = RowsOut::new(&mut data, &batch, row, &cols);
            let lse_out = RowsOut::new(&mut lse, &lse_batch, 1, &[0]);
            let [oq, ok, ov] = &operands;
            let mask_rows = mask.as_ref().map(MaskOperand::rows).transpose()?;
            kernel::forward(
                &shape,
                oq.rows()?,
                ok.rows()?,
                ov.rows()?,
                mask_rows,
                &out,
                &lse_out,
            )?;
        }
        let result = Tensor::from_parts(Storage::from_host_vec(data), layout)
            .expect("a fresh result fits its buffer");
        Ok((result, Storage::from_host_vec(lse)))
    }

    /// The gradients of the queries, keys and values, given the forward's result `out`, its
    /// gradient `grad` and its log-sum-exp `lse`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backward<T, LQ, LK, LV, M>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
        mask: Option<&Tensor<T, M>>,
        out: &Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>,
        grad: &Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>,
        lse: &Storage<T::Wide>,
    ) -> Result<(Tensor<T, LQ>, Tensor<T, LK>, Tensor<T, LV>)>
    where
        T: Float,
        LQ: DotOverWith<LK, (W,)>,
        LK: AxisSet,
        LV: AxisSet,
        AttentionScores<LQ, LK, W>: DotOverWith<LV, (Kx,)>,
        (Kx,): AxisSet,
        (W,): AxisSet,
        M: AxisSet,
    {
        let Prepared {
            plan,
            operands,
            mask,
            backend,
        } = self.prepare(q, k, v, mask)?;
        let (out, grad) = (readable(out)?, readable(grad)?);
        let shape = plan.shape;
        let (qx, w) = (TypeId::of::<Qx>(), TypeId::of::<W>());
        let saved_operand = |x: &Tensor<T, AttentionAxes<LQ, LK, LV, Kx, W>>| {
            let d = describe(x);
            Operand {
                batch: d.offsets(&plan.batch),
                row: d.stride(qx),
                cols: d.offsets(&plan.value_width),
                storage: x.storage().clone(),
            }
        };
        let (saved_out, saved_grad) = (saved_operand(&out), saved_operand(&grad));
        let width = [(w, shape.width)];
        let kx = TypeId::of::<Kx>();
        if let Some(backend) = backend {
            let rows = [
                RowsOfAxes::of(q, qx, &width),
                RowsOfAxes::of(k, kx, &width),
                RowsOfAxes::of(v, kx, &plan.value_width),
            ];
            let job = device_job::<T>(backend, &plan, &operands, mask.as_ref())?;
            let saved = AttentionSaved {
                out: saved_out.on_device(backend)?,
                grad: saved_grad.on_device(backend)?,
                lse: memory_on(lse, backend)?,
            };
            let [dq, dk, dv] = backend.attention_backward(&job, &saved)?;
            let [rq, rk, rv] = rows;
            return Ok((
                rq.tensor(backend, dq, &plan)?,
                rk.tensor(backend, dk, &plan)?,
                rv.tensor(backend, dv, &plan)?,
            ));
        }
        let mut dq = GradientTarget::new(&plan, q, qx, &width)?;
        let mut dk = GradientTarget::new(&plan, k, kx, &width)?;
        let mut dv = GradientTarget::new(&plan, v, kx, &plan.value_width)?;
        {
            let [oq, ok, ov] = &operands;
            let mask_rows = mask.as_ref().map(MaskOperand::rows).transpose()?;
            let saved = Saved {
                out: saved_out.rows()?,
                grad: saved_grad.rows()?,
                lse: lse.host()?,
            };
            kernel::backward(
                &shape,
                oq.rows()?,
                ok.rows()?,
                ov.rows()?,
                mask_rows,
                &saved,
                &dq.rows_out(),
                &dk.rows_out(),
                &dv.rows_out(),
            )?;
        }
        Ok((
            dq.into_gradient(&plan, q, qx, &width)?,
            dk.into_gradient(&plan, k, kx, &width)?,
            dv.into_gradient(&plan, v, kx, &plan.value_width)?,
        ))
    }

    /// The plan of a call and its operands as the kernel reads them.
    fn prepare<T: Float, LQ: AxisSet, LK: AxisSet, LV: AxisSet, M: AxisSet>(
        &self,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
        mask: Option<&Tensor<T, M>>,
    ) -> Result<Prepared<T>> {
        let (q, k, v) = (readable(q)?, readable(k)?, readable(v)?);
        let mask = mask.map(readable).transpose()?;
        let devices = [q.device(), k.device(), v.device()];
        let backend =
            match common_device(devices.into_iter().chain(mask.iter().map(|m| m.device())))? {
                Some(Device::Backend(backend)) => Some(backend),
                _ => None,
            };
        let plan = self.plan(&q, &k, &v, mask.as_ref())?;
        let operands = self.operands(&plan, &q, &k, &v)?;
        let mask = mask
            .as_ref()
            .map(|m| mask_operand(&plan, m, TypeId::of::<Qx>(), TypeId::of::<Kx>()));
        Ok(Prepared {
            plan,
            operands,
            mask,
            backend,
        })
    }

    /// The queries, keys and values as the kernel reads them.
    fn operands<T: Float, LQ: AxisSet, LK: AxisSet, LV: AxisSet>(
        &self,
        plan: &Plan,
        q: &Tensor<T, LQ>,
        k: &Tensor<T, LK>,
        v: &Tensor<T, LV>,
    ) -> Result<[Operand<T>; 3]> {
        let (qx, kx, w) = (TypeId::of::<Qx>(), TypeId::of::<Kx>(), TypeId::of::<W>());
        let operand =
            |storage: &Storage<T>, d: Described<'_>, row: TypeId, cols: &[(TypeId, usize)]| {
                Operand {
                    batch: d.offsets(&plan.batch),
                    row: d.stride(row),
                    cols: d.offsets(cols),
                    storage: storage.clone(),
                }
            };
        let width = [(w, plan.shape.width)];
        Ok([
            operand(q.storage(), describe(q), qx, &width),
            operand(k.storage(), describe(k), kx, &width),
            operand(v.storage(), describe(v), kx, &plan.value_width),
        ])
    }
}

impl Plan {
    /// The length of axis `id` of the result (a batch axis, the query axis, or a values' width
    /// axis).
    fn len_of<T: Float, LQ: AxisSet, LV: AxisSet>(
        &self,
        id: TypeId,
        q: &Tensor<T, LQ>,
        v: &Tensor<T, LV>,
    ) -> usize {
        if let Some(a) = LQ::IDS.iter().position(|&i| i == id) {
            return q.lens()[a];
        }
        let a = LV::IDS
            .iter()
            .position(|&i| i == id)
            .expect("a result axis is the queries' or the values'");
        v.lens()[a]
    }
}

mod operands;
