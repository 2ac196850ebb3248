//! Device kernel source generated from the `axes` expression IR ([`axes_core::ir::Ir`]), in
//! two dialects from one generator: CUDA C (compiled with NVRTC) and OpenCL C.
//!
//! Kernels are generic over lengths, strides and offsets, which are passed by value as
//! arguments: one kernel serves every shape of an expression of a given rank, so a device
//! compiles it once. Generation needs no device, so its output can be checked anywhere.
//!
//! - [`elementwise`]: `out[i] = f(leaves[i])` over any strides (stride 0 broadcasts, negative
//!   strides reverse); casts and contiguous copies are elementwise kernels of `cast(leaf0)`
//!   and `leaf0`. [`elementwise_outputs`] writes several results of one pass.
//! - [`reduction`]: `out[kept] = ⊕ over reduced of f(leaves)`, one work-group (block) per
//!   output element: its threads stride over the reduced elements, then combine their
//!   partial results in a tree in local (shared) memory.
//! - [`matmul`]: a tiled, batched matrix product over any strides.
//! - [`attention`]: fused attention's forward and backward passes ([`AttentionPass`]), the
//!   query × key probabilities never written.
//!
//! The files follow the stages: `emit.rs` spells the IR as C (from the op table's kernel
//! templates), `dialect.rs` holds what differs between CUDA C and OpenCL C and assembles a
//! named kernel, and `elementwise.rs`, `reduction.rs`, `matmul.rs` and `attention.rs` write each
//! kind's body.
//!
//! Indices are 32-bit unless a tensor has 2^30 elements or more ([`Spec::wide`],
//! [`Spec::needs_wide`]).
//!
//! ```
//! use axes_core::ir::{BinaryOp, Ir, IrNode};
//! use axes_kernels::{CType, Dialect, Spec, elementwise};
//!
//! // a * x + y
//! let mut ir = Ir::default();
//! let (x, y) = (ir.leaf(), ir.leaf());
//! let a = ir.push(IrNode::Scalar(2.0));
//! let ax = ir.push(IrNode::Binary(BinaryOp::Mul, a, x));
//! ir.push(IrNode::Binary(BinaryOp::Add, ax, y));
//! let spec = Spec { ir: &ir, leaves: &[CType::F32, CType::F32], out: CType::F32, wide: false };
//! let cuda = elementwise(&spec, 2, Dialect::Cuda)?;
//! assert!(cuda.source.contains("extern \"C\" __global__ void"));
//! let opencl = elementwise(&spec, 2, Dialect::OpenCl)?;
//! assert!(opencl.source.contains("__kernel void"));
//! # Ok::<(), axes_core::Error>(())
//! ```

mod attention;
mod dialect;
mod elementwise;
mod emit;
mod matmul;
mod reduction;
mod tiled;

pub use attention::{
    ATTENTION_GROUP, ATTENTION_MAX_WIDTH, AttentionArg, AttentionInput, AttentionPass,
    AttentionSpec, attention,
};
pub use elementwise::{elementwise, elementwise_in_place, elementwise_outputs, elementwise_tiled};
pub use matmul::{MatmulTile, matmul};
pub use reduction::{REDUCE_GROUP, REDUCE_UNROLL, REDUCE_VECTOR, ReduceShape, reduction};
pub use tiled::{Tile, Tiling};

use axes_core::element::DType;
use axes_core::error::Result;
use axes_core::ir::Ir;

/// The source language of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// CUDA C++ for NVRTC.
    Cuda,
    /// OpenCL C 1.2.
    OpenCl,
}

/// An element type as stored in device buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// `float`
    F32,
    /// `double`
    F64,
    /// `int`
    I32,
    /// `long long` (CUDA) / `long` (OpenCL)
    I64,
    /// `unsigned char`
    U8,
    /// `unsigned char` holding 0 or 1.
    Bool,
    /// IEEE half, stored in 16 bits and computed in `float`.
    F16,
    /// bfloat16, stored in 16 bits and computed in `float`.
    BF16,
}

impl CType {
    /// The type of an element type on devices.
    pub fn of(dtype: DType) -> Result<CType> {
        Ok(match dtype {
            DType::F32 => CType::F32,
            DType::F64 => CType::F64,
            DType::I32 => CType::I32,
            DType::I64 => CType::I64,
            DType::U8 => CType::U8,
            DType::Bool => CType::Bool,
            DType::F16 => CType::F16,
            DType::BF16 => CType::BF16,
        })
    }

    /// The element type this is the device type of.
    pub fn dtype(self) -> DType {
        match self {
            CType::F32 => DType::F32,
            CType::F64 => DType::F64,
            CType::I32 => DType::I32,
            CType::I64 => DType::I64,
            CType::U8 => DType::U8,
            CType::Bool => DType::Bool,
            CType::F16 => DType::F16,
            CType::BF16 => DType::BF16,
        }
    }

    /// The C spelling of values of this type in `dialect`: how kernels compute with it
    /// (`float` for the half types).
    pub fn c_name(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (CType::F32 | CType::F16 | CType::BF16, _) => "float",
            (CType::F64, _) => "double",
            (CType::I32, _) => "int",
            (CType::I64, Dialect::Cuda) => "long long",
            (CType::I64, Dialect::OpenCl) => "long",
            (CType::U8 | CType::Bool, _) => "unsigned char",
        }
    }

    /// The C spelling of the unsigned integer type as wide as this one (for shifts of the
    /// bits of signed values).
    pub fn unsigned_name(self, dialect: Dialect) -> &'static str {
        match (self.size(), dialect) {
            (8, Dialect::Cuda) => "unsigned long long",
            (8, Dialect::OpenCl) => "ulong",
            (4, _) => "unsigned int",
            (2, _) => "unsigned short",
            _ => "unsigned char",
        }
    }

    /// The C spelling of elements of this type in buffers: [`CType::c_name`], except for
    /// the half types (OpenCL's `half`, read and written by `vload_half`/`vstore_half_rte`;
    /// 16-bit integers holding the bits otherwise).
    pub fn storage_name(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (CType::F16, Dialect::OpenCl) => "half",
            (CType::F16 | CType::BF16, _) => "unsigned short",
            _ => self.c_name(dialect),
        }
    }

    /// The type kernels compute and accumulate this type's values in (`F32` for the halves).
    pub fn compute(self) -> CType {
        match self {
            CType::F16 | CType::BF16 => CType::F32,
            other => other,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, CType::F32 | CType::F64 | CType::F16 | CType::BF16)
    }

    /// Whether this is one of the 16-bit float types.
    pub fn is_half(self) -> bool {
        matches!(self, CType::F16 | CType::BF16)
    }

    /// The size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            CType::F64 | CType::I64 => 8,
            CType::F32 | CType::I32 => 4,
            CType::F16 | CType::BF16 => 2,
            CType::U8 | CType::Bool => 1,
        }
    }
}

/// What a kernel computes: the expression, the element types of its leaves (in leaf order)
/// and of its result, and whether indices need 64 bits.
#[derive(Clone, Copy, Debug)]
pub struct Spec<'a> {
    /// The expression; its last node is the result.
    pub ir: &'a Ir,
    /// The element type of each leaf.
    pub leaves: &'a [CType],
    /// The element type written.
    pub out: CType,
    /// 64-bit indexing (needed from 2^31 elements).
    pub wide: bool,
}

impl Spec<'_> {
    /// Whether a tensor of `elements` elements (or a buffer spanning as many) needs 64-bit
    /// indices. The bound is 2^30, not 2^31: grid-stride loops step past the last index by up
    /// to one launch (at most 2^30 work items, see [`MAX_LAUNCH`]) before they stop, and that
    /// must not overflow a 32-bit `int`.
    pub fn needs_wide(elements: usize) -> bool {
        elements >= 1 << 30
    }
}

/// The most work items one launch may have with 32-bit indices (see [`Spec::needs_wide`]).
pub const MAX_LAUNCH: usize = 1 << 30;

/// Generated kernel source and how to call it.
///
/// Arguments, in order — `IDX` is `int`, or the 64-bit integer type when [`Spec::wide`]:
/// - elementwise of rank `R`: `n` (element count), `len_0 .. len_{R-1}`, then each output
///   (pointer, offset, `R` strides; one, or one per root of [`elementwise_outputs`]), then
///   each leaf (pointer, offset, `R` strides);
/// - reduction with `K` kept and `Q` reduced axes: `m` (outputs), `r` (elements reduced per
///   output), `splits` (parts each output's elements are cut into), the `K` kept lengths,
///   the `Q` reduced lengths, then the output (pointer, offset, `K` strides, the stride
///   between the partial results of one output's parts), then each leaf (pointer, offset,
///   `K` kept strides, `Q` reduced strides). With `splits` = 1 it writes the results; with
///   more, each part's partial result (so that few outputs still fill a device), which a
///   second reduction over the parts combines;
/// - matrix product ([`matmul`]): `batches`, `m`, `n`, `k`, then the output (pointer,
///   offset, batch, row and column strides), then the left operand (`m`×`k`) and the right
///   operand (`k`×`n`), each the same way;
/// - fused attention ([`attention`]): [`AttentionArg::ALL`], in that order.
///
/// Offsets and strides count elements and may be negative; stride 0 broadcasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The entry point's name (derived from the source, so equal kernels share it).
    pub name: String,
    /// The complete source.
    pub source: String,
    /// Its dialect.
    pub dialect: Dialect,
}
