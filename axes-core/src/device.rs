//! Devices: where a tensor's elements live and where its expressions run.
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
//! The protocol the backends implement is [`Backend`]: device memory (upload, download), and
//! [`Job`]s — an expression's run-time IR, its leaves' device buffers with their strides over
//! the iteration axes, the lengths, and the reduction — and [`MatmulJob`]s.
//! [`ExprExt::eval_on`](crate::ExprExt::eval_on), the `*_on` reductions and
//! [`dot_on`](crate::dot_on) run host tensors on a device for one call (copied there and back).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::fmt;

use crate::element::{DType, Element};
use crate::engine::plan::{LeafLayout, Leaves};
use crate::error::{Error, Result};
use crate::expr::{Buffers, Expr, LeafBuffer, LeafData};
use crate::ir::{Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Where a tensor's elements live and where expressions over it run.
///
/// Cheap to copy. Two accelerator devices are equal when they are the same backend instance
/// (backends keep one per physical device).
#[derive(Clone, Copy)]
pub enum Device {
    /// Host memory; the CPU engine runs.
    Cpu,
    /// A device run by a backend (made by `axes_backends`, e.g. `Cuda::device(0)`).
    Accelerator(&'static dyn Backend),
}

/// What kind of device, and which one: for matching and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host.
    Cpu,
    /// CUDA device `ordinal`.
    Cuda(usize),
    /// OpenCL device `index` (in the runtime's list).
    OpenCl(usize),
}

impl Device {
    /// The kind of device and its number.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Accelerator(backend) => backend.kind(),
        }
    }

    /// Whether this is the host.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Accelerator(a), Device::Accelerator(b)) => std::ptr::addr_eq(*a, *b),
            _ => false,
        }
    }
}

impl Eq for Device {}

impl fmt::Display for Device {
    /// `cpu`, `cuda:0 (NVIDIA H100 80GB HBM3)`, `opencl:0 (pthread-…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Accelerator(backend) => match backend.kind() {
                DeviceKind::Cuda(n) => write!(f, "cuda:{n} ({})", backend.name()),
                DeviceKind::OpenCl(n) => write!(f, "opencl:{n} ({})", backend.name()),
                DeviceKind::Cpu => write!(f, "cpu ({})", backend.name()),
            },
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A buffer in a device's memory, owned by the backend that made it (opaque to the core).
pub struct DeviceMemory {
    buffer: Box<dyn Any + Send + Sync>,
    bytes: usize,
}

impl DeviceMemory {
    /// Wraps a backend's buffer of `bytes` bytes.
    pub fn new<B: Any + Send + Sync>(buffer: B, bytes: usize) -> DeviceMemory {
        DeviceMemory {
            buffer: Box::new(buffer),
            bytes,
        }
    }

    /// The size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The backend's buffer, if it is a `B`.
    pub fn buffer<B: Any>(&self) -> Option<&B> {
        self.buffer.downcast_ref()
    }
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceMemory({} bytes)", self.bytes)
    }
}

/// One leaf of a [`Job`]: its whole device buffer, and where its elements are for each
/// iteration axis (kept axes, then reduced ones; stride 0 where it is broadcast).
#[derive(Clone, Debug)]
pub struct JobLeaf<'a> {
    /// The element type.
    pub dtype: DType,
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The position of the element at index 0 on every axis.
    pub offset: usize,
    /// One stride per iteration axis, in elements.
    pub strides: Vec<isize>,
}

/// Work for a device: compute `ir` over the kept axes (row-major result of `out` elements),
/// combining over the reduced axes with `reduce` when there are any.
#[derive(Clone, Debug)]
pub struct Job<'a> {
    /// The expression; leaf `k` reads `leaves[k]`.
    pub ir: Ir,
    /// The leaves.
    pub leaves: Vec<JobLeaf<'a>>,
    /// The lengths of the result's axes, in its order.
    pub kept: Vec<usize>,
    /// The lengths of the reduced axes (empty for an element-wise job).
    pub reduced: Vec<usize>,
    /// How reduced elements combine.
    pub reduce: ReduceOp,
    /// The result's element type.
    pub out: DType,
}

/// One operand of a [`MatmulJob`]: its device buffer and the strides of its two dimensions.
#[derive(Clone, Copy, Debug)]
pub struct MatrixSide<'a> {
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The position of element (0, 0) of the first matrix.
    pub offset: usize,
    /// Stride between matrices of the batch, in elements.
    pub batch_stride: isize,
    /// Stride between rows, in elements.
    pub row_stride: isize,
    /// Stride between columns, in elements.
    pub col_stride: isize,
}

/// A batch of matrix products for a device: `lhs` (`m`×`k`) times `rhs` (`k`×`n`) for each of
/// `batch` pairs; the result is row-major `[batch, m, n]`.
#[derive(Clone, Copy, Debug)]
pub struct MatmulJob<'a> {
    /// The element type of both operands and the result.
    pub dtype: DType,
    /// The number of products.
    pub batch: usize,
    /// Rows of the result.
    pub m: usize,
    /// Columns of the result.
    pub n: usize,
    /// The contracted length.
    pub k: usize,
    /// The left operand.
    pub lhs: MatrixSide<'a>,
    /// The right operand.
    pub rhs: MatrixSide<'a>,
}

/// A device's runtime, as the core drives it (implemented by the OpenCL and CUDA backends).
/// Backends live for the whole process (one per physical device), so devices are
/// `&'static dyn Backend`.
pub trait Backend: Send + Sync {
    /// The device's name, for messages.
    fn name(&self) -> String;
    /// The kind of device and its number.
    fn kind(&self) -> DeviceKind;
    /// A device buffer holding a copy of `bytes`.
    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory>;
    /// A host copy of a buffer this backend made.
    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>>;
    /// Runs `job` into a new buffer (row-major over the kept axes).
    fn run(&self, job: &Job<'_>) -> Result<DeviceMemory>;
    /// Runs a matrix product into a new buffer (row-major `m`×`n`).
    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        let _ = job;
        Err(Error::Unsupported {
            what: format!("matrix products on {}", self.name()),
        })
    }
}

/// The bytes of a slice of elements.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: element types are plain numbers (f32 f64 f16 bf16 i32 i64 u8, and bool, whose
    // byte is 0 or 1): every byte is initialised, and the byte view covers exactly the
    // slice's memory, borrowed for as long as the slice.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// `count` elements from the bytes a device returned, or an error naming the device.
pub(crate) fn from_bytes<T: Element>(bytes: &[u8], count: usize, device: Device) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if bytes.len() != count * size {
        return Err(Error::Unsupported {
            what: format!(
                "{device} returned {} bytes for {count} elements of {}",
                bytes.len(),
                T::DTYPE.name()
            ),
        });
    }
    let mut values: Vec<T> = vec![T::zero(); count];
    // SAFETY: `values` holds `count` plain elements, `count * size` bytes, all overwritten by
    // exactly that many bytes (checked above); for bool, devices write 0 or 1 (kernels store
    // booleans as `(x != 0)`).
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            values.as_mut_ptr().cast::<u8>(),
            bytes.len(),
        );
    }
    Ok(values)
}

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
            LeafData::Host(bytes) => backend.upload(bytes).map(Staged::Uploaded),
            LeafData::Device(owner, memory) if Device::Accelerator(owner) == device => {
                Ok(Staged::Resident(memory))
            }
            LeafData::Device(..) => Err(Error::DeviceMismatch {
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
