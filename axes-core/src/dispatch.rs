//! Where work runs: the tensor-level half of the device protocol. Finds the one device an
//! expression's operands are on, lowers expressions to [`Job`]s for a backend, and moves
//! tensors between devices ([`Tensor::to`]).
//!
//! A [`Device`] is [`Device::Cpu`] (host memory; the loop engine, gemm and rayon) or an
//! accelerator a backend runs (`axes-backends`: CUDA, and OpenCL on any GPU or on the CPU).
//! Every tensor knows its device ([`Tensor::device`]); [`Tensor::to`] copies it to another.
//! Expressions, reductions, assignments and `dot` over tensors on one accelerator run there,
//! as generated kernels, and their results stay there: the same user code, nothing changed
//! but the device. Operands on different devices are an error that names both.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![1., 2., 3.])?;
//! assert_eq!(x.device(), Device::Cpu);
//! // with `axes-backends` (feature `opencl` or `cuda`):
//! // let gpu = axes_backends::cuda::Cuda::device(0)?;
//! // let y = (&x.to(&gpu)? * 2.0).exp().eval()?;   // runs on the GPU, stays there
//! // let back = y.to(&Device::Cpu)?;
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! The protocol the backends implement is [`crate::protocol`]: device memory (upload, download), and
//! [`Job`]s — an expression's run-time IR, its leaves' device buffers with their strides over
//! the iteration axes, the lengths, and the reduction — and [`MatmulJob`](crate::protocol::MatmulJob)s.
//! [`ExprExt::eval_on`](crate::ExprExt::eval_on), the `*_on` reductions and
//! [`dot_on`](crate::dot_on) run host tensors on a device for one call (copied there and back).

use std::any::TypeId;
use std::borrow::Cow;

use crate::element::Element;
use crate::engine::plan::{LeafLayout, Leaves};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::ir::{Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::protocol::{
    Backend, BufferRef, Buffers, Device, DeviceMemory, Job, JobLeaf, LeafBuffer, as_bytes,
};
use crate::storage::Storage;
use crate::tensor::Tensor;

/// The one device that `expr`'s tensor leaves and `dest` (when given) are on (`None` for an
/// expression without leaves and no `dest`), or an error naming two that differ.
pub(crate) fn expr_device<E: Expr>(expr: &E, dest: Option<Device>) -> Result<Option<Device>> {
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    common_device(
        dest.into_iter()
            .chain(buffers.iter().map(LeafBuffer::device)),
    )
}

/// The one device all of `devices` are on (`None` for none), or an error naming two that
/// differ.
pub(crate) fn common_device(devices: impl IntoIterator<Item = Device>) -> Result<Option<Device>> {
    let mut found: Option<Device> = None;
    for device in devices {
        match found {
            None => found = Some(device),
            Some(first) if first == device => {}
            Some(first) => {
                return Err(Error::DeviceMismatch {
                    left: first.to_string(),
                    right: device.to_string(),
                });
            }
        }
    }
    Ok(found)
}

/// Runs `expr` on `backend` into a fresh buffer, row-major over the axes `kept` (type ids, in
/// the result's order), combining over the axes `reduced` with `reduce`. Leaves in host memory
/// are copied to the device for this job; leaves on another device are an error. `dest`
/// gives the kept axes' lengths when the result goes into an existing tensor (an axis no
/// leaf has takes its length from there).
pub(crate) fn run_expr<E: Expr>(
    expr: &E,
    backend: &'static dyn Backend,
    kept: &[TypeId],
    names: &dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &[TypeId],
    reduce: ReduceOp,
    dest: Option<&[usize]>,
) -> Result<(Storage<E::Elem>, Layout)> {
    let mut layouts = Leaves::new();
    expr.operands(&mut layouts);
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    let work = Work {
        kept,
        names,
        reduced,
        reduce,
        dest,
    };
    run_ir(expr.ir(), &layouts, &buffers, backend, &work)
}

/// What a device job computes besides its expression: see [`run_expr`].
pub(crate) struct Work<'w> {
    pub(crate) kept: &'w [TypeId],
    pub(crate) names: &'w dyn Fn() -> Vec<Cow<'static, str>>,
    pub(crate) reduced: &'w [TypeId],
    pub(crate) reduce: ReduceOp,
    pub(crate) dest: Option<&'w [usize]>,
}

/// [`run_expr`] for an IR and its leaves.
pub(crate) fn run_ir<T: Element>(
    ir: Ir,
    layouts: &[LeafLayout<'_>],
    buffers: &[LeafBuffer<'_>],
    backend: &'static dyn Backend,
    work: &Work<'_>,
) -> Result<(Storage<T>, Layout)> {
    let Work {
        kept,
        names,
        reduced,
        reduce,
        dest,
    } = *work;
    let axes: Vec<TypeId> = kept.iter().chain(reduced).copied().collect();
    let mut lens = vec![1usize; axes.len()];
    let mut seen = vec![false; axes.len()];
    if let Some(dest) = dest {
        lens[..kept.len()].copy_from_slice(dest);
        seen[..kept.len()].fill(true);
    }
    for leaf in layouts {
        if leaf.layout.is_padded() {
            return Err(Error::Unsupported {
                what: format!(
                    "a padded view on {}: kernels do not read padding; write it out with \
                     `.contiguous()` first",
                    Device::Accelerator(backend)
                ),
            });
        }
        for (p, id) in leaf.ids.iter().enumerate() {
            let Some(a) = axes.iter().position(|x| x == id) else {
                continue;
            };
            let len = leaf.layout.lens()[p];
            if seen[a] && lens[a] != len {
                let axis = match kept.iter().position(|k| k == id) {
                    Some(k) => names()[k].to_string(),
                    None => (leaf.names)()[p].to_string(),
                };
                return Err(Error::LengthMismatch {
                    axis,
                    left: lens[a],
                    right: len,
                });
            }
            lens[a] = len;
            seen[a] = true;
        }
    }
    let count = lens[..kept.len()]
        .iter()
        .try_fold(1usize, |n, &l| n.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{:?}", &lens[..kept.len()]),
        })?;
    // Host leaves go to the device for this job.
    let device = Device::Accelerator(backend);
    let staged = (buffers.iter())
        .map(|buffer| match buffer.data {
            BufferRef::Host(bytes) => backend.upload(bytes).map(Staged::Uploaded),
            BufferRef::Device(owner, memory) if Device::Accelerator(owner) == device => {
                Ok(Staged::Resident(memory))
            }
            BufferRef::Device(..) => Err(Error::DeviceMismatch {
                left: buffer.device().to_string(),
                right: device.to_string(),
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    let leaves = layouts
        .iter()
        .zip(buffers)
        .zip(&staged)
        .map(|((leaf, buffer), staged)| {
            let own = leaf.ids;
            let memory = match staged {
                Staged::Uploaded(memory) => memory,
                Staged::Resident(memory) => memory,
            };
            JobLeaf {
                dtype: buffer.dtype,
                memory,
                offset: leaf.layout.offset(),
                strides: axes
                    .iter()
                    .map(|id| {
                        own.iter()
                            .position(|o| o == id)
                            .map_or(0, |p| leaf.layout.strides()[p])
                    })
                    .collect(),
            }
        })
        .collect();
    let job = Job {
        ir,
        leaves,
        kept: lens[..kept.len()].to_vec(),
        reduced: lens[kept.len()..].to_vec(),
        reduce,
        out: T::DTYPE,
    };
    let memory = backend.run(&job)?;
    Ok((
        device_storage(backend, memory, count)?,
        Layout::row_major(&job.kept),
    ))
}

/// A leaf's buffer on the job's device: copied there for the job, or already there.
enum Staged<'a> {
    Uploaded(DeviceMemory),
    Resident(&'a DeviceMemory),
}

/// A device buffer a backend returned, checked to hold `count` elements of `T`.
pub(crate) fn device_storage<T: Element>(
    backend: &'static dyn Backend,
    memory: DeviceMemory,
    count: usize,
) -> Result<Storage<T>> {
    if memory.bytes() != count * std::mem::size_of::<T>() {
        return Err(Error::Unsupported {
            what: format!(
                "{} returned {} bytes for {count} elements of {}",
                Device::Accelerator(backend),
                memory.bytes(),
                T::DTYPE.name()
            ),
        });
    }
    Ok(Storage::on_device(backend, memory, count))
}

/// `a ⊕ b` element-wise on `backend` (both with axes `A`, on that device): accumulating
/// into a tensor on a device (`+=` of [`Tensor::add_sum`]).
pub(crate) fn combine<T: Element, A: AxisSet>(
    a: &Tensor<T, A>,
    b: &Tensor<T, A>,
    backend: &'static dyn Backend,
    kind: ReduceOp,
) -> Result<(Storage<T>, Layout)> {
    let mut ir = Ir::default();
    let (left, right) = (ir.leaf(), ir.leaf());
    ir.push(IrNode::Binary(kind.combine_op(), left, right));
    let (mut layouts, mut buffers) = (Leaves::new(), Buffers::new());
    for t in [a, b] {
        t.operands(&mut layouts);
        t.buffers(&mut buffers);
    }
    let work = Work {
        kept: A::IDS,
        names: &A::names,
        reduced: &[],
        reduce: ReduceOp::Sum,
        dest: Some(a.lens()),
    };
    run_ir(ir, &layouts, &buffers, backend, &work)
}

/// Runs `expr` on `device` for one call into a host tensor with axes `R` (the expression's
/// axes less `over`): host leaves are copied there, the result back.
pub(crate) fn run_on<E: Expr, R: AxisSet>(
    expr: &E,
    device: &Device,
    over: &[TypeId],
    reduce: ReduceOp,
) -> Result<Tensor<E::Elem, R>> {
    let Device::Accelerator(backend) = *device else {
        return Err(Error::Unsupported {
            what: "`*_on(&Device::Cpu)`: evaluate on the CPU with `eval`, `sum`, …".into(),
        });
    };
    let (storage, layout) = run_expr(expr, backend, R::IDS, &R::names, over, reduce, None)?;
    let values = storage.host()?.to_vec();
    Ok(Tensor::from_parts(Storage::new(values), layout).expect("a fresh result fits"))
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// The device that holds this tensor's elements.
    pub fn device(&self) -> Device {
        self.storage().device()
    }

    /// This tensor on `device`: the same tensor (no copy) when it is there already, else a
    /// copy. Copying to a device copies only what the view reaches (a view that skips or
    /// repeats elements is made contiguous first); copying back keeps the layout.
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
        let host = if here.is_cpu() {
            self.clone()
        } else {
            let values = self.storage().host()?.to_vec();
            self.with_storage(Storage::new(values))
        };
        let Device::Accelerator(backend) = *device else {
            return Ok(host);
        };
        let layout = host.layout();
        let whole = layout.is_injective()
            && !layout.is_padded()
            && layout.element_count() == Some(host.storage().len());
        let host = if whole { host } else { host.contiguous() };
        let len = host.storage().len();
        let memory = backend.upload(as_bytes(host.storage().host()?))?;
        Ok(host.with_storage(device_storage(backend, memory, len)?))
    }

    /// The elements copied row-major with the axes in `order` (positions in `A`), on the
    /// tensor's device: packing for flattening and contractions.
    pub(crate) fn packed_in(&self, order: &[usize]) -> Result<Storage<T>> {
        match self.device() {
            Device::Cpu => Ok(Storage::new(self.read_in(&self.layout().permuted(order)))),
            Device::Accelerator(backend) => {
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
}
