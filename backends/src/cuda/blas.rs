//! Products on cuBLAS, on the device's stream.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axes_core::DType;
use axes_core::error::{Error, Result};
use axes_core::protocol::{DeviceMemory, MatmulJob, MatrixSide};
use cudarc::cublas::CudaBlas;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::CudaSlice;

use super::record::{self, Command, GemmCall, address};
use super::{Cuda, buffer_of, cublas_available};

/// cuBLAS on the device's stream, with a workspace of its own.
pub(super) struct Blas {
    blas: CudaBlas,
    _workspace: CudaSlice<u8>,
}

/// One operand as cuBLAS takes it (column-major): whether to transpose the stored matrix and
/// its leading dimension. `rows`×`cols` is the operand the row-major product wants
/// transposed (cuBLAS computes Cᵀ = Bᵀ·Aᵀ); `None` when neither stride is 1.
fn blas_operand(
    side: &MatrixSide<'_>,
    rows: usize,
    cols: usize,
) -> Option<(cublasOperation_t, i32)> {
    let fits = |ld: isize, min: usize| ld >= min.max(1) as isize;
    if side.col_stride == 1 && fits(side.row_stride, cols) {
        // Row-major rows×cols is column-major cols×rows: the transpose, as wanted.
        Some((cublasOperation_t::CUBLAS_OP_N, side.row_stride as i32))
    } else if side.row_stride == 1 && fits(side.col_stride, rows) {
        Some((cublasOperation_t::CUBLAS_OP_T, side.col_stride as i32))
    } else {
        None
    }
}

impl Cuda {
    /// cuBLAS on this device, or why not.
    pub(super) fn blas(&self) -> Result<&CudaBlas> {
        let blas = self.blas.get_or_init(|| {
            cublas_available().map_err(|e| e.to_string())?;
            let blas = CudaBlas::new(Arc::clone(&self.stream)).map_err(|e| format!("{e:?}"))?;
            let workspace = self.workspace().map_err(|e| e.to_string())?;
            // SAFETY: `Blas` keeps the workspace as long as the handle.
            unsafe { record::set_workspace(*blas.handle(), &workspace, &self.stream) }
                .map_err(|e| e.to_string())?;
            Ok(Blas {
                blas,
                _workspace: workspace,
            })
        });
        blas.as_ref()
            .map(|b| &b.blas)
            .map_err(|what| Error::Unsupported { what: what.clone() })
    }

    /// A cuBLAS workspace: the same size for the device's handle and the one captures use,
    /// so that both choose the same algorithms.
    pub(super) fn workspace(&self) -> Result<CudaSlice<u8>> {
        let bytes = record::BLAS_WORKSPACE;
        // SAFETY: u8 has no invalid bit patterns; cuBLAS writes the workspace before reading.
        unsafe { self.stream.alloc::<u8>(bytes) }.map_err(|e| self.allocation_error(bytes, e))
    }

    /// `job` through cuBLAS strided batched GEMM when its element type is f32, f64, f16 or
    /// bf16 and each operand has a unit stride; `None` when it does not apply (the tiled
    /// kernel runs). cuBLAS computes Cᵀ = Bᵀ·Aᵀ column-major, which is the row-major C = A·B.
    pub(super) fn blas_matmul(&self, job: &MatmulJob<'_>) -> Result<Option<DeviceMemory>> {
        let (m, n, k) = (job.m, job.n, job.k);
        let dims_fit = [m, n, k, job.batch]
            .iter()
            .all(|&d| i32::try_from(d).is_ok());
        let (Some((op_b, ld_b)), Some((op_a, ld_a))) =
            (blas_operand(&job.rhs, k, n), blas_operand(&job.lhs, m, k))
        else {
            return Ok(None);
        };
        let supported = matches!(
            job.dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16
        );
        if !dims_fit || k == 0 || !supported {
            return Ok(None);
        }
        let Ok(blas) = self.blas() else {
            return Ok(None);
        };
        let size = job.dtype.size();
        let bytes = job.batch * m * n * size;
        let out = self.result_buffer(bytes)?;
        let (lhs, rhs) = (buffer_of(job.lhs.memory)?, buffer_of(job.rhs.memory)?);
        let at = |buffer: &CudaSlice<u8>, offset: usize| {
            let bytes = offset * size;
            if bytes > buffer.len() {
                return Err(Error::Unsupported {
                    what: format!("CUDA: an operand offset {offset} outside its buffer"),
                });
            }
            Ok(address(buffer, &self.stream) + bytes as u64)
        };
        let call = GemmCall {
            dtype: job.dtype,
            tf32: job.dtype == DType::F32 && self.tf32.load(Ordering::Relaxed),
            transa: op_b,
            transb: op_a,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            a: at(rhs, job.rhs.offset)?,
            lda: ld_b,
            stride_a: job.rhs.batch_stride as i64,
            b: at(lhs, job.lhs.offset)?,
            ldb: ld_a,
            stride_b: job.lhs.batch_stride as i64,
            c: address(&out, &self.stream),
            ldc: n as i32,
            stride_c: (m * n) as i64,
            batch: job.batch as i32,
        };
        // SAFETY: cuBLAS reads each operand within the lengths, leading dimensions and batch
        // strides of the job's matrix views, which the core keeps inside their buffers, and
        // writes batch×m×n elements of `out`, which holds exactly that many.
        unsafe { call.enqueue(*blas.handle())? };
        self.meter.launched();
        let names = [
            address(lhs, &self.stream),
            address(rhs, &self.stream),
            call.c,
        ];
        self.recordings.push(Command::Gemm(call), &names);
        Ok(Some(self.metered_memory(out, bytes)))
    }
}
