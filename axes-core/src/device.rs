//! Running expressions on a device — a GPU, or OpenCL on any CPU — through the protocol the
//! backends (`axes-backends`) implement: a [`Job`] is the expression's run-time IR, its leaves'
//! buffers with their strides over the iteration axes, and the lengths; the device returns the
//! result's elements.
//!
//! Tensors stay in host memory for now: [`ExprExt::eval_on`](crate::ExprExt::eval_on), the
//! `*_on` reductions and [`dot_on`](crate::dot_on) copy the operands to the device, run one
//! generated kernel, and copy the result back — the same expression as on the CPU, with
//! nothing changed but the device. Devices: `axes_backends::opencl::OpenCl::shared()`,
//! `axes_backends::cuda::Cuda::new(0)` (cargo features `opencl`, `cuda` of `axes-backends`).

use std::any::TypeId;

use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::expr::{Expr, Ir, LeafBuffer};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// How a reduction combines elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Σ
    Sum,
    /// Π
    Prod,
    /// The largest (NaN if any is NaN).
    Max,
    /// The smallest (NaN if any is NaN).
    Min,
}

/// One leaf of a [`Job`]: its whole buffer, and where its elements are for each iteration
/// axis (kept axes, then reduced ones; stride 0 where it is broadcast).
#[derive(Clone, Debug)]
pub struct JobLeaf<'a> {
    /// The element type.
    pub dtype: DType,
    /// The buffer's bytes.
    pub bytes: &'a [u8],
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
    pub reduce: ReduceKind,
    /// The result's element type.
    pub out: DType,
}

/// One operand of a [`MatmulJob`]: its buffer and the strides of its two dimensions.
#[derive(Clone, Copy, Debug)]
pub struct MatrixSide<'a> {
    /// The buffer's bytes.
    pub bytes: &'a [u8],
    /// The position of element (0, 0).
    pub offset: usize,
    /// Stride between rows, in elements.
    pub row_stride: isize,
    /// Stride between columns, in elements.
    pub col_stride: isize,
}

/// A matrix product for a device: `lhs` (`m`×`k`) times `rhs` (`k`×`n`), the result row-major.
#[derive(Clone, Copy, Debug)]
pub struct MatmulJob<'a> {
    /// The element type of both operands and the result.
    pub dtype: DType,
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

/// A device that runs [`Job`]s (implemented by the OpenCL and CUDA backends).
pub trait Device: Sync {
    /// The device's name, for messages.
    fn name(&self) -> String;
    /// Runs `job` and returns the result's elements as bytes (row-major over the kept axes).
    fn run(&self, job: &Job<'_>) -> Result<Vec<u8>>;
    /// Runs a matrix product and returns the result's elements as bytes (row-major `m`×`n`).
    fn matmul(&self, job: &MatmulJob<'_>) -> Result<Vec<u8>> {
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
pub(crate) fn from_bytes<T: Element>(
    bytes: &[u8],
    count: usize,
    device: &dyn Device,
) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if bytes.len() != count * size {
        return Err(Error::Unsupported {
            what: format!(
                "{} returned {} bytes for {count} elements of {}",
                device.name(),
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

/// The job for `expr` with the result axes `kept` and the reduced axes `reduced` (type ids).
fn job<'a, E: Expr>(
    expr: &'a E,
    kept: &[TypeId],
    reduced: &[TypeId],
    reduce: ReduceKind,
    out: DType,
) -> Result<Job<'a>> {
    let mut layouts = Vec::new();
    expr.operands(&mut layouts);
    let mut buffers: Vec<LeafBuffer<'a>> = Vec::new();
    expr.buffers(&mut buffers);
    let axes: Vec<TypeId> = kept.iter().chain(reduced).copied().collect();
    let mut lens = vec![1usize; axes.len()];
    let mut seen = vec![false; axes.len()];
    for leaf in &layouts {
        if leaf.layout.is_padded() {
            return Err(Error::Unsupported {
                what: "a padded view on a device (make it contiguous first)".into(),
            });
        }
        for (p, id) in leaf.ids[..leaf.layout.rank()].iter().enumerate() {
            let Some(a) = axes.iter().position(|x| x == id) else {
                continue;
            };
            let len = leaf.layout.lens()[p];
            if seen[a] && lens[a] != len {
                return Err(Error::LengthMismatch {
                    axis: (leaf.names)()[p].to_string(),
                    left: lens[a],
                    right: len,
                });
            }
            lens[a] = len;
            seen[a] = true;
        }
    }
    let leaves = layouts
        .iter()
        .zip(buffers)
        .map(|(leaf, buffer)| {
            let own = &leaf.ids[..leaf.layout.rank()];
            JobLeaf {
                dtype: buffer.dtype,
                bytes: buffer.bytes,
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
    Ok(Job {
        ir: expr.ir(),
        leaves,
        kept: lens[..kept.len()].to_vec(),
        reduced: lens[kept.len()..].to_vec(),
        reduce,
        out,
    })
}

/// Runs `expr` on `device` into a tensor with axes `R` (the expression's axes less `over`).
pub(crate) fn run_on<E: Expr, R: AxisSet>(
    expr: &E,
    device: &dyn Device,
    over: &[TypeId],
    reduce: ReduceKind,
) -> Result<Tensor<E::Elem, R>> {
    let kept = R::type_ids();
    let job = job(expr, &kept[..R::RANK], over, reduce, E::Elem::DTYPE)?;
    let bytes = device.run(&job)?;
    let count: usize = job.kept.iter().product();
    let values = from_bytes::<E::Elem>(&bytes, count, device)?;
    Ok(
        Tensor::from_parts(Storage::new(values), Layout::row_major(&job.kept))
            .expect("a fresh result fits"),
    )
}
