//! The operands of fused attention as its kernels read them: each tensor's rows
//! `[batch][position][column]` as offsets into its buffer, the mask's, and where the
//! backward pass writes each gradient.

use std::any::TypeId;

use super::Plan;
use crate::dispatch::device_storage;
use crate::element::Element;
use crate::engine::attention::{MaskRows, RowMajorRows, Rows, RowsOut};
use crate::error::{Error, Result};
use crate::ir::{Ir, ReduceOp};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::num::Float;
use crate::protocol::{
    AttentionJob, AttentionMask, AttentionOperand, Backend, Device, DeviceMemory, JobLeaf,
    OutputJob, run_one,
};
use crate::storage::{self, HostVec, Storage};
use crate::tensor::Tensor;

/// An operand as the kernel reads it: its buffer and the offsets of its rows and columns.
pub(super) struct Operand<T: Float> {
    pub(super) storage: Storage<T>,
    pub(super) batch: Vec<isize>,
    pub(super) row: isize,
    pub(super) cols: Vec<isize>,
}

impl<T: Float> Operand<T> {
    pub(super) fn rows(&self) -> Result<Rows<'_, T>> {
        Ok(Rows {
            data: self.storage.host()?,
            batch: &self.batch,
            row: self.row,
            cols: &self.cols,
        })
    }
}

impl<T: Float> Operand<T> {
    /// The operand as a device job reads it.
    pub(super) fn on_device(&self, backend: &'static dyn Backend) -> Result<AttentionOperand<'_>> {
        Ok(AttentionOperand {
            memory: memory_on(&self.storage, backend)?,
            batch: &self.batch,
            row: self.row,
            cols: &self.cols,
        })
    }
}

/// `storage`'s buffer on `backend`'s device.
pub(super) fn memory_on<'a, T: Element>(
    storage: &'a Storage<T>,
    backend: &'static dyn Backend,
) -> Result<&'a DeviceMemory> {
    storage
        .device_memory()
        .ok_or_else(|| Error::DeviceMismatch {
            left: storage.device().to_string(),
            right: Device::Backend(backend).to_string(),
        })
}

/// The job `backend` runs for a call.
pub(super) fn device_job<'a, T: Float>(
    backend: &'static dyn Backend,
    plan: &Plan,
    operands: &'a [Operand<T>; 3],
    mask: Option<&'a MaskOperand<T>>,
) -> Result<AttentionJob<'a>> {
    let [q, k, v] = operands;
    Ok(AttentionJob {
        dtype: T::DTYPE,
        shape: plan.shape,
        q: q.on_device(backend)?,
        k: k.on_device(backend)?,
        v: v.on_device(backend)?,
        mask: match mask {
            Some(m) => Some(AttentionMask {
                memory: memory_on(&m.storage, backend)?,
                batch: &m.batch,
                query: m.query,
                key: m.key,
            }),
            None => None,
        },
    })
}

/// A tensor's axes as a device job's rows `[batch][position][column]` put them: the batch
/// axes of the plan, `row_axis`, then `cols`, each row-major.
pub(super) struct RowsOfAxes<'a> {
    pub(super) ids: &'a [TypeId],
    pub(super) lens: &'a [usize],
    pub(super) row_axis: TypeId,
    pub(super) cols: &'a [(TypeId, usize)],
}

impl<'a> RowsOfAxes<'a> {
    pub(super) fn of<T: Float, A: AxisSet>(
        x: &'a Tensor<T, A>,
        row_axis: TypeId,
        cols: &'a [(TypeId, usize)],
    ) -> Self {
        RowsOfAxes {
            ids: A::IDS,
            lens: x.lens(),
            row_axis,
            cols,
        }
    }

    /// The rows in `memory`, fresh from `backend`, as a tensor of these axes: a view in
    /// their order where the tensor has every batch axis; else summed over the batch axes it
    /// lacks (it was shared along them) by one reduction job on the device.
    pub(super) fn tensor<T: Float, A: AxisSet>(
        &self,
        backend: &'static dyn Backend,
        memory: DeviceMemory,
        plan: &Plan,
    ) -> Result<Tensor<T, A>> {
        // The stride of each of the rows' axes, row-major `[batch][row][column]`.
        let row = [(self.row_axis, self.lens[self.at(self.row_axis)])];
        let axes: Vec<(TypeId, usize)> = (plan.batch.iter())
            .chain(&row)
            .chain(self.cols)
            .copied()
            .collect();
        let mut strides = vec![0isize; axes.len()];
        let mut step = 1isize;
        for (stride, &(_, len)) in strides.iter_mut().zip(&axes).rev() {
            *stride = step;
            step *= len as isize;
        }
        let stride_of = |id: TypeId| {
            (axes.iter().zip(&strides))
                .find(|((axis, _), _)| *axis == id)
                .map_or(0, |(_, &s)| s)
        };
        let kept: Vec<isize> = self.ids.iter().map(|&id| stride_of(id)).collect();
        let count: usize = self.lens.iter().product();
        let lacked: Vec<(TypeId, usize)> = (plan.batch.iter())
            .filter(|(id, _)| !self.ids.contains(id))
            .copied()
            .collect();
        if lacked.is_empty() {
            let layout = Layout::new(self.lens, &kept, 0, count)
                .expect("rows of the tensor's lengths fit its count");
            return Ok(
                Tensor::from_parts(device_storage(backend, memory, count)?, layout)
                    .expect("a fresh result fits its buffer"),
            );
        }
        let mut ir = Ir::default();
        ir.leaf();
        let job = OutputJob {
            ir,
            leaves: vec![JobLeaf {
                dtype: T::DTYPE,
                memory: &memory,
                offset: 0,
                strides: (kept.iter().copied())
                    .chain(lacked.iter().map(|&(id, _)| stride_of(id)))
                    .collect(),
            }],
            kept: self.lens.to_vec(),
            reduced: lacked.iter().map(|&(_, len)| len).collect(),
            reduce: ReduceOp::Sum,
            out: T::DTYPE,
        };
        let summed = run_one(backend, job)?;
        Ok(Tensor::from_parts(
            device_storage(backend, summed, count)?,
            Layout::row_major(self.lens),
        )
        .expect("a fresh result fits its buffer"))
    }

    /// The position of axis `id` among the tensor's.
    pub(super) fn at(&self, id: TypeId) -> usize {
        (self.ids.iter())
            .position(|&i| i == id)
            .expect("the rows' axes are the tensor's")
    }
}

/// A tensor's description by axis id: its layout, ids and names.
pub(super) struct Described<'a> {
    pub(super) ids: &'a [TypeId],
    pub(super) names: Vec<std::borrow::Cow<'static, str>>,
    pub(super) layout: &'a Layout,
}

impl Described<'_> {
    pub(super) fn position(&self, id: TypeId) -> Option<usize> {
        self.ids.iter().position(|&i| i == id)
    }

    /// The stride of axis `id` (0 where the tensor lacks it).
    pub(super) fn stride(&self, id: TypeId) -> isize {
        self.position(id).map_or(0, |a| self.layout.strides()[a])
    }

    /// Checks that axis `id`, where the tensor has it, has length `len`.
    pub(super) fn check(&self, id: TypeId, len: usize) -> Result<()> {
        match self.position(id) {
            Some(a) if self.layout.lens()[a] != len => Err(Error::LengthMismatch {
                axis: self.names[a].to_string(),
                left: len,
                right: self.layout.lens()[a],
            }),
            _ => Ok(()),
        }
    }

    /// The offset in the buffer of every position of the axes `axes` (row-major over them).
    pub(super) fn offsets(&self, axes: &[(TypeId, usize)]) -> Vec<isize> {
        let mut out = vec![self.layout.offset() as isize];
        for &(id, len) in axes {
            let stride = self.stride(id);
            out = out
                .iter()
                .flat_map(|&o| (0..len).map(move |i| o + i as isize * stride))
                .collect();
        }
        out
    }
}

/// A tensor as a kernel may read it: padded views written out first.
pub(super) fn readable<T: Float, A: AxisSet>(x: &Tensor<T, A>) -> Result<Tensor<T, A>> {
    if x.layout().is_padded() {
        x.contiguous()
    } else {
        Ok(x.clone())
    }
}

/// The mask as the kernel reads it.
pub(super) struct MaskOperand<T: Float> {
    pub(super) storage: Storage<T>,
    pub(super) batch: Vec<isize>,
    pub(super) query: isize,
    pub(super) key: isize,
}

impl<T: Float> MaskOperand<T> {
    pub(super) fn rows(&self) -> Result<MaskRows<'_, T>> {
        Ok(MaskRows {
            data: self.storage.host()?,
            batch: &self.batch,
            query: self.query,
            key: self.key,
        })
    }
}

pub(super) fn mask_operand<T: Float, M: AxisSet>(
    plan: &Plan,
    mask: &Tensor<T, M>,
    qx: TypeId,
    kx: TypeId,
) -> MaskOperand<T> {
    let d = describe(mask);
    MaskOperand {
        batch: d.offsets(&plan.batch),
        query: d.stride(qx),
        key: d.stride(kx),
        storage: mask.storage().clone(),
    }
}

pub(super) fn describe<T: Float, A: AxisSet>(x: &Tensor<T, A>) -> Described<'_> {
    Described {
        ids: A::IDS,
        names: A::names(),
        layout: x.layout(),
    }
}

/// Where the kernel writes the gradient of an operand `x` (every row of it): straight into a
/// dense buffer in `x`'s memory order where `x` has every batch axis, else into rows of its own
/// `[batch][position][column]`, folded into `x`'s axes afterwards.
pub(super) struct GradientTarget<T: Float> {
    pub(super) data: HostVec<T>,
    pub(super) batch: Vec<isize>,
    pub(super) row: isize,
    pub(super) cols: Vec<isize>,
    /// The gradient's layout, where the kernel writes into it directly.
    pub(super) direct: Option<Layout>,
}

impl<T: Float> GradientTarget<T> {
    /// A buffer from the host pool (a training step asks for the same sizes every step), not
    /// filled: the kernel writes every row.
    pub(super) fn new<A: AxisSet>(
        plan: &Plan,
        x: &Tensor<T, A>,
        row_axis: TypeId,
        cols: &[(TypeId, usize)],
    ) -> Result<Self> {
        if plan.batch.iter().all(|(id, _)| A::IDS.contains(id)) {
            // In `x`'s own memory order, so that the gradient reaches the producer of `x` (a
            // projection, whose product then reads it without a copy) in the order it wrote.
            let layout = Layout::dense_in_order_of(x.lens(), x.layout());
            let d = Described {
                ids: A::IDS,
                names: Vec::new(),
                layout: &layout,
            };
            return Ok(GradientTarget {
                data: storage::for_overwrite(x.lens().iter().product())?,
                batch: d.offsets(&plan.batch),
                row: d.stride(row_axis),
                cols: d.offsets(cols),
                direct: Some(layout),
            });
        }
        let rows = x.lens()[A::IDS
            .iter()
            .position(|&i| i == row_axis)
            .expect("a typed axis")];
        let width = cols.iter().map(|&(_, len)| len).product();
        let own = RowMajorRows::new(plan.shape.batch, rows, width)?;
        Ok(GradientTarget {
            row: own.row(),
            data: own.data,
            batch: own.batch,
            cols: own.cols,
            direct: None,
        })
    }

    pub(super) fn rows_out(&mut self) -> RowsOut<'_, T> {
        RowsOut::new(&mut self.data, &self.batch, self.row, &self.cols)
    }

    /// The gradient of `x`; where the kernel wrote rows of its own, the rows of batch entries
    /// that share one of `x`'s positions (along a batch axis `x` lacks) summed, in order.
    pub(super) fn into_gradient<A: AxisSet>(
        self,
        plan: &Plan,
        x: &Tensor<T, A>,
        row_axis: TypeId,
        cols: &[(TypeId, usize)],
    ) -> Result<Tensor<T, A>> {
        let layout = match self.direct {
            Some(layout) => {
                return Ok(
                    Tensor::from_parts(Storage::from_host_vec(self.data), layout)
                        .expect("a fresh result fits its buffer"),
                );
            }
            None => Layout::dense_in_order_of(x.lens(), x.layout()),
        };
        let d = Described {
            ids: A::IDS,
            names: Vec::new(),
            layout: &layout,
        };
        let (batch, row, col) = (d.offsets(&plan.batch), d.stride(row_axis), d.offsets(cols));
        let positions = d.layout.lens()[d.position(row_axis).expect("a typed axis")];
        let mut data = storage::filled(layout.lens().iter().product(), T::zero())?;
        let mut source = self.data.iter();
        for &b in &batch {
            for i in 0..positions as isize {
                for &c in &col {
                    let at = (b + i * row + c) as usize;
                    let value = *source.next().expect("a row per batch entry and position");
                    data[at] = data[at].add(value);
                }
            }
        }
        Ok(Tensor::from_parts(Storage::from_host_vec(data), layout)
            .expect("a fresh result fits its buffer"))
    }
}
