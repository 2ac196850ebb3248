//! The CPU as a backend of the device protocol: a [`Job`] runs on the IR interpreter (every
//! element type, one `match` per instruction per block) and a [`MatmulJob`] on the engine's
//! matrix product, over buffers in host memory.
//!
//! As a [`Device`](crate::protocol::Device) (`Device::Accelerator(&CPU_BACKEND)`), it runs every job
//! the device lowering makes, on any machine: the shared backend tests run through it on
//! every `cargo test`, beside OpenCL and CUDA where those exist.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! use axes::CPU_BACKEND;
//! #[derive(Axis)] struct Row;
//! let backend = Device::Accelerator(&CPU_BACKEND);
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![1., 2., 3.])?.to(&backend)?;
//! let y = (&x * 2.0).exp().eval()?;          // a job, run by the interpreter
//! assert_eq!(y.device(), backend);
//! let host = (&x.to(&Device::Cpu)? * 2.0).exp().eval()?;
//! assert_eq!(y.to(&Device::Cpu)?.to_vec(), host.to_vec());
//! # Ok::<(), axes::Error>(())
//! ```

use super::interp::{self, Block, Program, Sink, Source, with_block};
use super::matmul::{HostMatrix, batched_matmul};
use crate::element::{DType, Element, Elements, ElementsMut};
use crate::error::{Error, Result};
use crate::ir::Ir;
use crate::ir::ReduceOp;
use crate::ir::ops::identity_of;
use crate::num::Num;
use crate::protocol::{
    Backend, Device, DeviceKind, DeviceMemory, Job, JobLeaf, JobTarget, MatmulJob, MatrixSide,
    MultiJob, as_bytes, row_major_strides,
};
use crate::storage::{self, HostVec, from_bytes};

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

impl Block {
    /// The elements of a buffer of this backend, read as `dtype`.
    fn read(memory: &DeviceMemory, dtype: DType) -> Result<Block> {
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
                Device::Accelerator(&CPU_BACKEND),
            )
        }
        Ok(match dtype {
            DType::F32 => Block::F32(typed(bytes)?),
            DType::F64 => Block::F64(typed(bytes)?),
            DType::F16 => Block::F16(typed(bytes)?),
            DType::BF16 => Block::BF16(typed(bytes)?),
            DType::I32 => Block::I32(typed(bytes)?),
            DType::I64 => Block::I64(typed(bytes)?),
            DType::U8 => Block::U8(typed(bytes)?),
            DType::Bool => Block::Bool(typed(bytes)?),
        })
    }

    /// `count` elements of type `dtype`, each the identity of `reduce` when given, else 0.
    /// An error when the host has no room for them.
    pub(crate) fn filled(dtype: DType, count: usize, reduce: Option<ReduceOp>) -> Result<Block> {
        fn typed<T: Num>(count: usize, reduce: Option<ReduceOp>) -> Result<HostVec<T>> {
            storage::filled(
                count,
                reduce.map_or(T::zero(), |op| identity_of(op.identity())),
            )
        }
        Ok(match dtype {
            DType::F32 => Block::F32(typed(count, reduce)?),
            DType::F64 => Block::F64(typed(count, reduce)?),
            DType::F16 => Block::F16(typed(count, reduce)?),
            DType::BF16 => Block::BF16(typed(count, reduce)?),
            DType::I32 => Block::I32(typed(count, reduce)?),
            DType::I64 => Block::I64(typed(count, reduce)?),
            DType::U8 => Block::U8(typed(count, reduce)?),
            DType::Bool => Block::Bool(storage::filled(count, false)?),
        })
    }

    #[inline(always)]
    pub(crate) fn elements(&self) -> Elements<'_> {
        with_block!(self, v => Element::elements(v))
    }

    pub(crate) fn elements_mut(&mut self) -> ElementsMut<'_> {
        with_block!(self, v => Element::elements_mut(v))
    }

    /// A buffer of this backend holding the values.
    fn into_memory(self) -> DeviceMemory {
        let bytes = with_block!(&self, v => as_bytes(v).to_vec());
        let len = bytes.len();
        DeviceMemory::new(HostBytes(bytes), len)
    }
}

/// Computes the nodes `roots` of `ir` (results of type `out`) over the iteration axes `lens`
/// in one pass: root `r` goes into `sinks[r]`, which hold their starting values. What the CPU
/// backend runs, for its own buffers and for tensors in host memory alike.
pub(crate) fn run_host(
    ir: &Ir,
    roots: &[usize],
    lens: &[usize],
    out: DType,
    sources: &[Source<'_>],
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    let leaf_types: Vec<DType> = sources.iter().map(|s| s.data.dtype()).collect();
    let program = Program::compile(ir, roots, &leaf_types, out)?;
    interp::run(&program, lens, sources, sinks)
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
fn source<'a>(leaf: &JobLeaf<'_>, values: &'a Block) -> Source<'a> {
    Source {
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
            .map(|leaf| Block::read(leaf.memory, leaf.dtype))
            .collect::<Result<Vec<_>>>()?;
        let Some(root) = job.ir.nodes.len().checked_sub(1) else {
            return Err(Error::Unsupported {
                what: "an empty expression".into(),
            });
        };
        let count = count_of(&job.kept)?;
        let reduce = (!job.reduced.is_empty()).then_some(job.reduce);
        let mut out = Block::filled(job.out, count, reduce)?;
        // Row-major over the kept axes; 0 over the reduced ones, which combine.
        let mut strides = row_major_strides(&job.kept);
        strides.resize(lens.len(), 0);
        let sources: Vec<Source<'_>> = (job.leaves.iter().zip(&inputs))
            .map(|(leaf, values)| source(leaf, values))
            .collect();
        run_host(
            &job.ir,
            &[root],
            &lens,
            job.out,
            &sources,
            &mut [Sink {
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
        let fresh = Block::read(&fresh, job.out)?;
        let mut block = Block::read(target.memory, job.out)?;
        interp::run(
            &Program::copy(job.out),
            &job.kept,
            &[Source {
                data: fresh.elements(),
                offset: 0,
                strides: row_major_strides(&job.kept),
            }],
            &mut [Sink {
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
            .map(|leaf| Block::read(leaf.memory, leaf.dtype))
            .collect::<Result<Vec<_>>>()?;
        let counts = job.output_counts()?;
        // Each result starts as its starting values (copied row-major over its kept axes) or
        // the identity of its reduction.
        let mut outs = Vec::with_capacity(counts.len());
        for (output, &count) in job.outputs.iter().zip(&counts) {
            let mut block = Block::filled(job.out, count, Some(output.reduce))?;
            if let Some(start) = &output.start {
                let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
                let from = Block::read(start.memory, start.dtype)?;
                let strides = output.kept.iter().map(|&a| start.strides[a]).collect();
                interp::run(
                    &Program::copy(start.dtype),
                    &kept,
                    &[Source {
                        data: from.elements(),
                        offset: start.offset,
                        strides,
                    }],
                    &mut [Sink {
                        data: block.elements_mut(),
                        offset: 0,
                        strides: row_major_strides(&kept),
                        combine: None,
                    }],
                )?;
            }
            outs.push(block);
        }
        let sources: Vec<Source<'_>> = (job.leaves.iter().zip(&inputs))
            .map(|(leaf, values)| source(leaf, values))
            .collect();
        let mut sinks: Vec<Sink<'_>> = (job.outputs.iter().zip(&mut outs))
            .map(|(output, block)| {
                let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
                let row_major = row_major_strides(&kept);
                let mut strides = vec![0isize; job.lens.len()];
                for (&a, &s) in output.kept.iter().zip(&row_major) {
                    strides[a] = s;
                }
                let accumulates = output.start.is_some() || kept.len() < job.lens.len();
                Sink {
                    data: block.elements_mut(),
                    offset: 0,
                    strides,
                    combine: accumulates.then_some(output.reduce),
                }
            })
            .collect();
        let roots: Vec<usize> = job.outputs.iter().map(|o| o.root).collect();
        run_host(&job.ir, &roots, &job.lens, job.out, &sources, &mut sinks)?;
        drop(sinks);
        Ok(outs.into_iter().map(Block::into_memory).collect())
    }

    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        let (lhs, rhs) = (
            Block::read(job.lhs.memory, job.dtype)?,
            Block::read(job.rhs.memory, job.dtype)?,
        );
        let count = count_of(&[job.batch, job.m, job.n])?;
        let mut out = Block::filled(job.dtype, count, None)?;
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
            (Block::F32(o), Block::F32(l), Block::F32(r)) => typed(job, o, l, r)?,
            (Block::F64(o), Block::F64(l), Block::F64(r)) => typed(job, o, l, r)?,
            (Block::F16(o), Block::F16(l), Block::F16(r)) => typed(job, o, l, r)?,
            (Block::BF16(o), Block::BF16(l), Block::BF16(r)) => typed(job, o, l, r)?,
            (Block::I32(o), Block::I32(l), Block::I32(r)) => typed(job, o, l, r)?,
            (Block::I64(o), Block::I64(l), Block::I64(r)) => typed(job, o, l, r)?,
            (Block::U8(o), Block::U8(l), Block::U8(r)) => typed(job, o, l, r)?,
            _ => {
                return Err(Error::Unsupported {
                    what: format!("{} matrix products", job.dtype.name()),
                });
            }
        }
        Ok(out.into_memory())
    }
}
