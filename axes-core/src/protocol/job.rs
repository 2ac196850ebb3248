//! The work a backend runs.

use super::DeviceMemory;
use crate::element::DType;
use crate::ir::{Ir, ReduceOp};

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
