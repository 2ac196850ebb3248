//! Matrix products where their operands live: host memory to the CPU's GEMM (`gemm` for
//! floats), a backend's device to its backend as a [`MatmulJob`].

use crate::dispatch::{common_device, device_storage};
use crate::element::Element;
use crate::engine::matmul::{HostMatrix, batched_matmul_into};
use crate::error::{Error, Result};
use crate::num::Num;
use crate::protocol::{Backend, Device, MatmulJob, MatrixSide};
use crate::storage::Storage;

/// One operand of a batched matrix product: element (0, 0) of the first matrix at `offset`
/// of `storage`, and the strides between matrices, rows and columns.
pub(crate) struct MatrixOperand<'a, T> {
    pub(crate) storage: &'a Storage<T>,
    pub(crate) offset: usize,
    pub(crate) batch_stride: isize,
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

/// The `batch` products `lhs` (`m`×`k`) · `rhs` (`k`×`n`), row-major `[batch, m, n]` in a
/// fresh buffer on the device both operands are on.
pub(crate) fn matmul<T: Num>(
    batch: usize,
    (m, n, k): (usize, usize, usize),
    lhs: &MatrixOperand<'_, T>,
    rhs: &MatrixOperand<'_, T>,
) -> Result<Storage<T>> {
    let count = [batch, m, n]
        .iter()
        .try_fold(1usize, |c, &l| c.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{batch} products of {m}×{n}"),
        })?;
    let device = common_device([lhs.storage.device(), rhs.storage.device()])?;
    if let Some(Device::Backend(backend)) = device {
        let memory = if count == 0 {
            backend.upload(&[])?
        } else {
            let job = MatmulJob {
                dtype: T::DTYPE,
                batch,
                m,
                n,
                k,
                lhs: on_device(lhs, backend)?,
                rhs: on_device(rhs, backend)?,
            };
            backend.matmul(&job)?
        };
        return device_storage(backend, memory, count);
    }
    // Written by the product alone: no zeros first.
    let mut out = crate::storage::with_capacity(count)?;
    let (l, r) = (in_host(lhs)?, in_host(rhs)?);
    batched_matmul_into(
        &mut out.spare_capacity_mut()[..count],
        &[batch],
        (m, n, k),
        &l,
        &r,
    )?;
    // SAFETY: `batched_matmul_into` returned Ok, so it wrote every one of the `count`
    // elements, and `out` has room for them.
    unsafe { out.set_len(count) };
    Ok(Storage::from_host_vec(out))
}

/// An operand in host memory as the CPU's GEMM reads it.
fn in_host<'a, T: Element>(operand: &'a MatrixOperand<'a, T>) -> Result<HostMatrix<'a, T>> {
    Ok(HostMatrix {
        data: operand.storage.host()?,
        offset: operand.offset,
        batch_strides: std::slice::from_ref(&operand.batch_stride),
        row_stride: operand.row_stride,
        col_stride: operand.col_stride,
    })
}

/// An operand on `backend` as its matrix product reads it.
fn on_device<'a, T: Element>(
    operand: &'a MatrixOperand<'a, T>,
    backend: &'static dyn Backend,
) -> Result<MatrixSide<'a>> {
    let memory = operand
        .storage
        .device_memory()
        .ok_or_else(|| Error::DeviceMismatch {
            left: operand.storage.device().to_string(),
            right: Device::Backend(backend).to_string(),
        })?;
    Ok(MatrixSide {
        memory,
        offset: operand.offset,
        batch_stride: operand.batch_stride,
        row_stride: operand.row_stride,
        col_stride: operand.col_stride,
    })
}
