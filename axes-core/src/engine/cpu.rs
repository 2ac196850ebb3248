//! The CPU as a backend of the device protocol: a [`Job`] runs on the IR interpreter (every
//! element type, one `match` per instruction per block) and a [`MatmulJob`] on the engine's
//! matrix product, over buffers in host memory.
//!
//! It is a test device: `axes_backends::cpu` makes it public, as
//! `Device::Backend(&CPU_BACKEND)`, so that the device lowering runs on every `cargo test`.

use super::interp::{self, Program, StridedSink, StridedSource, Values, with_values};
use super::matmul::{HostMatrix, batched_matmul};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::num::Num;
use crate::protocol::{
    Backend, Device, DeviceKind, DeviceMemory, Job, JobLeaf, JobTarget, MatmulJob, MatrixSide,
    MultiJob, as_bytes, row_major_strides,
};
use crate::storage::{HostVec, from_bytes};

/// The CPU backend (one per process: devices are equal when they are the same backend).
pub static CPU_BACKEND: CpuBackend = CpuBackend {
    name: "the CPU through the device protocol",
};

/// The CPU as a backend: see the [module docs](self).
#[derive(Debug)]
pub struct CpuBackend {
    /// Not zero-sized, so that the static has an address of its own.
    name: &'static str,
}

/// A buffer of the CPU backend: bytes in host memory.
struct HostBytes(Vec<u8>);

impl Values {
    /// The elements of a buffer of this backend, read as `dtype`.
    fn read(memory: &DeviceMemory, dtype: DType) -> Result<Values> {
        let HostBytes(bytes) = memory
            .buffer::<HostBytes>()
            .ok_or_else(|| Error::Unsupported {
                what: "a buffer of another device in a job on the CPU backend".into(),
            })?;
        // `from_bytes` refuses a length that is not a whole number of elements.
        fn typed<T: Element>(bytes: &[u8]) -> Result<HostVec<T>> {
            from_bytes(
                bytes,
                bytes.len() / std::mem::size_of::<T>(),
                Device::Backend(&CPU_BACKEND),
            )
        }
        Ok(match dtype {
            DType::F32 => Values::F32(typed(bytes)?),
            DType::F64 => Values::F64(typed(bytes)?),
            DType::F16 => Values::F16(typed(bytes)?),
            DType::BF16 => Values::BF16(typed(bytes)?),
            DType::I32 => Values::I32(typed(bytes)?),
            DType::I64 => Values::I64(typed(bytes)?),
            DType::U8 => Values::U8(typed(bytes)?),
            DType::Bool => Values::Bool(typed(bytes)?),
        })
    }

    /// A buffer of this backend holding the values.
    fn into_memory(self) -> DeviceMemory {
        let bytes = with_values!(&self, v => as_bytes(v).to_vec());
        let len = bytes.len();
        DeviceMemory::new(HostBytes(bytes), len)
    }
}

/// The product of `lens`, or an error naming them.
fn count_of(lens: &[usize]) -> Result<usize> {
    lens.iter()
        .try_fold(1usize, |n, &l| n.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{lens:?}"),
        })
}

/// The interpreter's view of a job's leaf, whose elements are `values`.
fn source<'a>(leaf: &JobLeaf<'_>, values: &'a Values) -> StridedSource<'a> {
    StridedSource {
        data: values.elements(),
        offset: leaf.offset,
        strides: leaf.strides.clone(),
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        self.name.into()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory> {
        Ok(DeviceMemory::new(HostBytes(bytes.to_vec()), bytes.len()))
    }

    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>> {
        let HostBytes(bytes) = memory
            .buffer::<HostBytes>()
            .ok_or_else(|| Error::Unsupported {
                what: "downloading a buffer of another device from the CPU backend".into(),
            })?;
        Ok(bytes.clone())
    }

    fn run(&self, job: &Job<'_>) -> Result<DeviceMemory> {
        // Over merged axes, as the device backends run it (the result's layout is the same).
        let (job, _) = job.merged(None);
        let job = &job;
        let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
        let inputs = (job.leaves.iter())
            .map(|leaf| Values::read(leaf.memory, leaf.dtype))
            .collect::<Result<Vec<_>>>()?;
        let Some(root) = job.ir.nodes.len().checked_sub(1) else {
            return Err(Error::Unsupported {
                what: "an empty expression".into(),
            });
        };
        let count = count_of(&job.kept)?;
        let reduce = (!job.reduced.is_empty()).then_some(job.reduce);
        let mut out = Values::filled(job.out, count, reduce)?;
        // Row-major over the kept axes; 0 over the reduced ones, which combine.
        let mut strides = row_major_strides(&job.kept);
        strides.resize(lens.len(), 0);
        let sources: Vec<StridedSource<'_>> = (job.leaves.iter().zip(&inputs))
            .map(|(leaf, values)| source(leaf, values))
            .collect();
        interp::compile_and_run(
            &job.ir,
            &[root],
            &lens,
            job.out,
            &sources,
            &mut [StridedSink {
                data: out.elements_mut(),
                offset: 0,
                strides,
                combine: reduce,
            }],
        )?;
        Ok(out.into_memory())
    }

    fn run_into(&self, job: &Job<'_>, target: JobTarget<'_>) -> Result<()> {
        target.check(job.out, &job.kept)?;
        let fresh = self.run(job)?;
        let fresh = Values::read(&fresh, job.out)?;
        let mut block = Values::read(target.memory, job.out)?;
        interp::run(
            &Program::copy(job.out),
            &job.kept,
            &[StridedSource {
                data: fresh.elements(),
                offset: 0,
                strides: row_major_strides(&job.kept),
            }],
            &mut [StridedSink {
                data: block.elements_mut(),
                offset: target.offset,
                strides: target.strides.clone(),
                combine: None,
            }],
        )?;
        *target.memory = block.into_memory();
        Ok(())
    }

    fn run_multi(&self, job: &MultiJob<'_>) -> Result<Vec<DeviceMemory>> {
        let inputs = (job.leaves.iter())
            .map(|leaf| Values::read(leaf.memory, leaf.dtype))
            .collect::<Result<Vec<_>>>()?;
        let counts = job.output_counts()?;
        // Each result starts as its starting values (copied row-major over its kept axes) or
        // the identity of its reduction.
        let mut outs = Vec::with_capacity(counts.len());
        for (output, &count) in job.outputs.iter().zip(&counts) {
            let mut block = Values::filled(job.out, count, Some(output.reduce))?;
            if let Some(start) = &output.start {
                let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
                let from = Values::read(start.memory, start.dtype)?;
                let strides = output.kept.iter().map(|&a| start.strides[a]).collect();
                interp::run(
                    &Program::copy(start.dtype),
                    &kept,
                    &[StridedSource {
                        data: from.elements(),
                        offset: start.offset,
                        strides,
                    }],
                    &mut [StridedSink {
                        data: block.elements_mut(),
                        offset: 0,
                        strides: row_major_strides(&kept),
                        combine: None,
                    }],
                )?;
            }
            outs.push(block);
        }
        let sources: Vec<StridedSource<'_>> = (job.leaves.iter().zip(&inputs))
            .map(|(leaf, values)| source(leaf, values))
            .collect();
        let mut sinks: Vec<StridedSink<'_>> = (job.outputs.iter().zip(&mut outs))
            .map(|(output, block)| {
                let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
                let row_major = row_major_strides(&kept);
                let mut strides = vec![0isize; job.lens.len()];
                for (&a, &s) in output.kept.iter().zip(&row_major) {
                    strides[a] = s;
                }
                let accumulates = output.start.is_some() || kept.len() < job.lens.len();
                StridedSink {
                    data: block.elements_mut(),
                    offset: 0,
                    strides,
                    combine: accumulates.then_some(output.reduce),
                }
            })
            .collect();
        let roots: Vec<usize> = job.outputs.iter().map(|o| o.root).collect();
        interp::compile_and_run(&job.ir, &roots, &job.lens, job.out, &sources, &mut sinks)?;
        drop(sinks);
        Ok(outs.into_iter().map(Values::into_memory).collect())
    }

    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        let (lhs, rhs) = (
            Values::read(job.lhs.memory, job.dtype)?,
            Values::read(job.rhs.memory, job.dtype)?,
        );
        let count = count_of(&[job.batch, job.m, job.n])?;
        let mut out = Values::filled(job.dtype, count, None)?;
        fn typed<T: Num>(job: &MatmulJob<'_>, out: &mut [T], lhs: &[T], rhs: &[T]) -> Result<()> {
            fn side<'a, T>(side: &'a MatrixSide<'_>, data: &'a [T]) -> HostMatrix<'a, T> {
                HostMatrix {
                    data,
                    offset: side.offset,
                    batch_strides: std::slice::from_ref(&side.batch_stride),
                    row_stride: side.row_stride,
                    col_stride: side.col_stride,
                }
            }
            let (l, r) = (side(&job.lhs, lhs), side(&job.rhs, rhs));
            batched_matmul(out, &[job.batch], (job.m, job.n, job.k), &l, &r)
        }
        match (&mut out, &lhs, &rhs) {
            (Values::F32(o), Values::F32(l), Values::F32(r)) => typed(job, o, l, r)?,
            (Values::F64(o), Values::F64(l), Values::F64(r)) => typed(job, o, l, r)?,
            (Values::F16(o), Values::F16(l), Values::F16(r)) => typed(job, o, l, r)?,
            (Values::BF16(o), Values::BF16(l), Values::BF16(r)) => typed(job, o, l, r)?,
            (Values::I32(o), Values::I32(l), Values::I32(r)) => typed(job, o, l, r)?,
            (Values::I64(o), Values::I64(l), Values::I64(r)) => typed(job, o, l, r)?,
            (Values::U8(o), Values::U8(l), Values::U8(r)) => typed(job, o, l, r)?,
            _ => {
                return Err(Error::Unsupported {
                    what: format!("{} matrix products", job.dtype.name()),
                });
            }
        }
        Ok(out.into_memory())
    }
}
