//! Moving tensors: the device a tensor is on, copies to another device ([`Tensor::to`]),
//! and contiguous copies on the tensor's own device.

use std::any::TypeId;

use super::{device_storage, evaluate_parts, run_expr};
use crate::element::Element;
use crate::engine::exec::Assign;
use crate::error::{Error, Result};
use crate::ir::ReduceOp;
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::protocol::{Device, as_bytes};
use crate::storage::{self, Storage};
use crate::tensor::Tensor;

/// Tensors up to this size keep a host copy when copied to a device (see [`Tensor::to`]).
const KEEP_ON_HOST_BYTES: usize = 64 << 10;

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The device that holds this tensor's elements.
    pub fn device(&self) -> Device {
        self.storage().device()
    }

    /// This tensor on `device`: the same tensor (no copy) when it is there already, else a
    /// copy. Copying to a device copies only what the view reaches (a view that skips or
    /// repeats elements is made contiguous first); copying back keeps the layout. A tensor
    /// of at most 64 KiB copied from host memory keeps its host copy too, so reading it
    /// (labels checked by [`softmax_cross_entropy`](crate::autodiff::softmax_cross_entropy))
    /// does not wait for the device.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// let x = Tensor::<f32, (Row,)>::from_vec(Row.len(2), vec![1., 2.])?;
    /// let same = x.to(&Device::Cpu)?;
    /// assert!(same.shares_storage_with(&x));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn to(&self, device: &Device) -> Result<Tensor<T, A>> {
        let here = self.device();
        if here == *device {
            return Ok(self.clone());
        }
        let host = if here.is_host() {
            self.clone()
        } else {
            let values = self.storage().host()?.to_vec();
            self.with_storage(Storage::new(values))
        };
        let Device::Backend(backend) = *device else {
            return Ok(host);
        };
        let layout = host.layout();
        let whole = layout.is_injective()
            && !layout.is_padded()
            && layout.element_count() == Some(host.storage().len());
        let host = if whole { host } else { host.contiguous()? };
        let values = host.storage().host()?;
        let memory = backend.upload(as_bytes(values))?;
        let storage = device_storage(backend, memory, values.len())?;
        // A small tensor (labels, indices) keeps its host copy: reading it, as the label check
        // of `softmax_cross_entropy` does each step, then waits for nothing on the device.
        let storage = match std::mem::size_of_val(values) <= KEEP_ON_HOST_BYTES {
            true => storage.with_host_copy(storage::copied(values)?),
            false => storage,
        };
        Ok(host.with_storage(storage))
    }

    /// The elements copied row-major with the axes in `order` (positions in `A`), on the
    /// tensor's device: packing for flattening and contractions.
    pub(crate) fn packed_in(&self, order: &[usize]) -> Result<Storage<T>> {
        match self.device() {
            Device::Cpu => Ok(Storage::from_host_vec(
                self.read_in(&self.layout().permuted(order))?,
            )),
            Device::Backend(backend) => {
                let kept: Vec<TypeId> = order.iter().map(|&a| A::IDS[a]).collect();
                let names = || {
                    let all = A::names();
                    order.iter().map(|&a| all[a].clone()).collect()
                };
                let packed = run_expr(self, backend, &kept, &names, &[], ReduceOp::Sum, None)?;
                Ok(packed.0)
            }
        }
    }

    /// An error naming `what` when this tensor is not in host memory (for operations that
    /// run on the CPU only).
    pub(crate) fn require_host(&self, what: &str) -> Result<()> {
        match self.device() {
            Device::Cpu => Ok(()),
            device => Err(Error::Unsupported {
                what: format!(
                    "{what} on a tensor on {device}: it runs on the CPU only; copy the tensor \
                     with `.to(&Device::Cpu)` first"
                ),
            }),
        }
    }

    /// A copy of the elements into a fresh row-major buffer in the order of `A` (padding
    /// written out as zeros, broadcast axes repeated), on the tensor's device. (Kernels do
    /// not read padded views: a padded view on a device is written out through the host.)
    /// An error when the device fails or has no room ([`Error::OutOfMemory`]).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<f32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1., 2., 3., 4.])?;
    /// let t = x.axes_with_order::<(Col, Row)>().contiguous()?;
    /// assert_eq!(t.storage().as_slice(), &[1., 3., 2., 4.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn contiguous(&self) -> Result<Self> {
        let device = self.device();
        if !device.is_host() && self.layout().is_padded() {
            return self.to(&Device::Cpu)?.contiguous()?.to(&device);
        }
        if let Device::Backend(..) = device {
            let (storage, layout) = evaluate_parts(self, A::IDS, &A::names, &[], Assign)?;
            return Ok(self.with_parts(storage, layout));
        }
        Ok(self.with_parts(
            Storage::from_host_vec(self.read_in(self.layout())?),
            Layout::row_major(self.lens()),
        ))
    }

    /// A copy of the elements into a fresh row-major buffer in the axis order `O` (any
    /// order of `A`'s axes).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<u8, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1, 2, 3, 4])?;
    /// let t = x.to_layout::<(Col, Row)>()?;
    /// assert_eq!(t.storage().as_slice(), &[1, 3, 2, 4]);
    /// assert_eq!(t, x);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn to_layout<O: AxisSet>(&self) -> Result<Tensor<T, O>>
    where
        A: SameAxes<O>,
    {
        self.axes_with_order::<O>().contiguous()
    }
}
