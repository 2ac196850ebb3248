//! The CPU as a backend of the device protocol: a [`Job`] runs on the IR interpreter (every
//! element type, one `match` per instruction per block), a [`MatmulJob`] on the engine's
//! matrix product and an [`AttentionJob`] on the engine's fused attention, over buffers in
//! host memory.
//!
//! It is a test device: `axes_backends::cpu` makes it public, as
//! `Device::Backend(&CPU_BACKEND)`, so that the device lowering runs on every `cargo test`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use half::{bf16, f16};

use super::attention::{self as kernel, MaskRows, RowMajorRows, Rows, Saved};
use super::interp::{self, Program, StridedSink, StridedSource, Values, with_values};
use super::matmul::{HostMatrix, batched_matmul};
use crate::element::{DType, Element, with_dtype};
use crate::error::{Error, Result};
use crate::num::{Float, Num};
use crate::protocol::{
    AttentionJob, AttentionOperand, AttentionSaved, Backend, Device, DeviceKind, DeviceMemory, Job,
    JobLeaf, JobTarget, MatmulJob, MatrixSide, Meter, OutputJob, Recording, WriteTo, as_bytes,
    row_major_strides,
};
use crate::storage::{HostVec, from_bytes};

/// The CPU backend (one per process: devices are equal when they are the same backend).
pub static CPU_BACKEND: CpuBackend = CpuBackend {
    name: "the CPU through the device protocol",
    meter: Meter::new(),
    recorder: record::Recorder::new(),
};

mod record;

/// The CPU as a backend: see the [module docs](self).
#[derive(Debug)]
pub struct CpuBackend {
    name: &'static str,
    /// Its launches (each job, product and attention) and reads; it compiles an
    /// interpreter program per job and looks up no kernel.
    meter: Meter,
    recorder: record::Recorder,
}

/// A buffer of the CPU backend: bytes in host memory, behind a lock so that a job can write
/// a buffer its leaves hold in place ([`WriteTo::Over`]), as a device kernel does,
/// and shared, so that a recording keeps the buffers it names.
struct HostBytes(Arc<Mutex<Vec<u8>>>);

/// The bytes of a buffer of this backend.
fn bytes_of(memory: &DeviceMemory) -> Result<MutexGuard<'_, Vec<u8>>> {
    let HostBytes(bytes) = memory
        .buffer::<HostBytes>()
        .ok_or_else(|| Error::Unsupported {
            what: "a buffer of another device in a job on the CPU backend".into(),
        })?;
    Ok(bytes.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The elements of a buffer of this backend, read as `T`.
fn host_elements<T: Element>(memory: &DeviceMemory) -> Result<HostVec<T>> {
    let bytes = bytes_of(memory)?;
    // `from_bytes` refuses a length that is not a whole number of elements.
    from_bytes(
        &bytes,
        bytes.len() / std::mem::size_of::<T>(),
        Device::Backend(&CPU_BACKEND),
    )
}

/// A buffer of this backend holding `bytes`.
fn memory_of_bytes(bytes: Vec<u8>) -> DeviceMemory {
    let len = bytes.len();
    DeviceMemory::new(HostBytes(Arc::new(Mutex::new(bytes))), len)
}

/// A buffer of this backend holding `values`.
fn memory_of<T: Element>(values: &[T]) -> DeviceMemory {
    memory_of_bytes(as_bytes(values).to_vec())
}

/// An operand of an attention job as the kernel reads it, its elements `data`.
fn attention_rows<'a, T>(operand: &AttentionOperand<'a>, data: &'a [T]) -> Rows<'a, T> {
    Rows {
        data,
        batch: operand.batch,
        row: operand.row,
        cols: operand.cols,
    }
}

/// The elements of an attention job's operands and mask, read as `T`.
struct AttentionInputs<T> {
    q: HostVec<T>,
    k: HostVec<T>,
    v: HostVec<T>,
    mask: Option<HostVec<T>>,
}

impl<T: Float> AttentionInputs<T> {
    fn read(job: &AttentionJob<'_>) -> Result<Self> {
        Ok(AttentionInputs {
            q: host_elements(job.q.memory)?,
            k: host_elements(job.k.memory)?,
            v: host_elements(job.v.memory)?,
            mask: job.mask.map(|m| host_elements(m.memory)).transpose()?,
        })
    }

    fn mask<'a>(&'a self, job: &AttentionJob<'a>) -> Option<MaskRows<'a, T>> {
        Some(MaskRows {
            data: self.mask.as_deref()?,
            batch: job.mask?.batch,
            query: job.mask?.query,
            key: job.mask?.key,
        })
    }
}

fn attention_forward<T: Float>(job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
    let inputs = AttentionInputs::<T>::read(job)?;
    let mut out =
        RowMajorRows::<T>::new(job.shape.batch, job.shape.queries, job.shape.value_width)?;
    let mut lse = RowMajorRows::<T::Wide>::new(job.shape.batch, job.shape.queries, 1)?;
    kernel::forward(
        &job.shape,
        attention_rows(&job.q, &inputs.q),
        attention_rows(&job.k, &inputs.k),
        attention_rows(&job.v, &inputs.v),
        inputs.mask(job),
        &out.out(),
        &lse.out(),
    )?;
    Ok((memory_of(&out.data), memory_of(&lse.data)))
}

fn attention_backward<T: Float>(
    job: &AttentionJob<'_>,
    saved: &AttentionSaved<'_>,
) -> Result<[DeviceMemory; 3]> {
    let inputs = AttentionInputs::<T>::read(job)?;
    let (out, grad) = (
        host_elements::<T>(saved.out.memory)?,
        host_elements::<T>(saved.grad.memory)?,
    );
    let lse = host_elements::<T::Wide>(saved.lse)?;
    let mut dq = RowMajorRows::<T>::new(job.shape.batch, job.shape.queries, job.shape.width)?;
    let mut dk = RowMajorRows::<T>::new(job.shape.batch, job.shape.keys, job.shape.width)?;
    let mut dv = RowMajorRows::<T>::new(job.shape.batch, job.shape.keys, job.shape.value_width)?;
    kernel::backward(
        &job.shape,
        attention_rows(&job.q, &inputs.q),
        attention_rows(&job.k, &inputs.k),
        attention_rows(&job.v, &inputs.v),
        inputs.mask(job),
        &Saved {
            out: attention_rows(&saved.out, &out),
            grad: attention_rows(&saved.grad, &grad),
            lse: &lse,
        },
        &dq.out(),
        &dk.out(),
        &dv.out(),
    )?;
    Ok([dq, dk, dv].map(|g| memory_of(&g.data)))
}

impl Values {
    /// The elements of a buffer of this backend, read as `dtype`.
    fn read(memory: &DeviceMemory, dtype: DType) -> Result<Values> {
        Ok(with_dtype!(dtype, T => Values::from(host_elements::<T>(memory)?)))
    }

    /// A buffer of this backend holding the values.
    fn into_memory(self) -> DeviceMemory {
        with_values!(&self, v => memory_of(v))
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

/// The interpreter program of `job`: its IR's last node from its leaves.
fn compiled(job: &OutputJob<'_>) -> Result<Program> {
    let Some(root) = job.ir.nodes.len().checked_sub(1) else {
        return Err(Error::Unsupported {
            what: "an empty expression".into(),
        });
    };
    let types: Vec<DType> = job.leaves.iter().map(|leaf| leaf.dtype).collect();
    Program::compile(&job.ir, &[root], &types, job.out)
}

/// The interpreter program of `job`: each output's root from its leaves.
fn compiled_multi(job: &Job<'_>) -> Result<Program> {
    let roots: Vec<usize> = job.outputs.iter().map(|o| o.root).collect();
    let types: Vec<DType> = job.leaves.iter().map(|leaf| leaf.dtype).collect();
    Program::compile(&job.ir, &roots, &types, job.out)
}

/// Writes `fresh`, `job`'s result (row-major over its kept axes), into `target`.
fn write_into(job: &OutputJob<'_>, fresh: &DeviceMemory, target: JobTarget<'_>) -> Result<()> {
    let fresh = Values::read(fresh, job.out)?;
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
    *bytes_of(target.memory)? = with_values!(&block, v => as_bytes(v).to_vec());
    Ok(())
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        self.name.into()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn upload(&self, bytes: &[u8]) -> Result<DeviceMemory> {
        let memory = memory_of_bytes(bytes.to_vec());
        self.record_upload(&memory, bytes)?;
        Ok(memory)
    }

    fn meter(&self) -> Option<&Meter> {
        Some(&self.meter)
    }

    fn copy_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        to: &mut DeviceMemory,
        to_at: usize,
        bytes: usize,
    ) -> Result<bool> {
        if self.recording() {
            return Ok(false);
        }
        from.check_span(from_at, bytes)?;
        to.check_span(to_at, bytes)?;
        let same = matches!(
            (from.buffer::<HostBytes>(), to.buffer::<HostBytes>()),
            (Some(HostBytes(a)), Some(HostBytes(b))) if Arc::ptr_eq(a, b)
        );
        if same {
            bytes_of(to)?.copy_within(from_at..from_at + bytes, to_at);
        } else {
            let source = bytes_of(from)?;
            bytes_of(to)?[to_at..to_at + bytes].copy_from_slice(&source[from_at..from_at + bytes]);
        }
        self.meter.launched();
        Ok(true)
    }

    fn copied_bytes(
        &self,
        from: &DeviceMemory,
        from_at: usize,
        bytes: usize,
    ) -> Result<Option<DeviceMemory>> {
        if self.recording() {
            return Ok(None);
        }
        from.check_span(from_at, bytes)?;
        let copy = bytes_of(from)?[from_at..from_at + bytes].to_vec();
        self.meter.launched();
        Ok(Some(memory_of_bytes(copy)))
    }

    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>> {
        self.refuse_reads()?;
        self.meter.read();
        Ok(bytes_of(memory)?.clone())
    }

    /// A job of one result that starts from nothing runs over merged axes
    /// ([`OutputJob::merged`]), as the device backends run it; results written into targets
    /// are computed one job each (a launch each) and copied in.
    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> Result<Vec<DeviceMemory>> {
        job.output_counts()?;
        match to {
            WriteTo::New => {
                self.meter.launched();
                if let Some(single) = job.single() {
                    let result = self.run_now(&single)?;
                    self.record_run(&single, &result)?;
                    return Ok(vec![result]);
                }
                let results = self.run_multi_now(job)?;
                self.record_multi(job, &results, None)?;
                Ok(results)
            }
            WriteTo::Into(targets) => {
                job.check_into(&targets)?;
                for (k, target) in targets.into_iter().enumerate() {
                    self.meter.launched();
                    let (single, _) = job.output_job(k);
                    self.record_run_into(&single, &target)?;
                    self.run_into_now(&single, target)?;
                }
                Ok(Vec::new())
            }
            WriteTo::Over(over) => {
                self.meter.launched();
                self.run_in_place_now(job, over)?;
                self.record_multi(job, &[], Some(over))?;
                Ok(Vec::new())
            }
        }
    }

    fn attention(&self, job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
        self.meter.launched();
        let (out, lse) = self.attention_now(job)?;
        self.record_attention(job, [&out, &lse])?;
        Ok((out, lse))
    }

    fn attention_backward(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
    ) -> Result<[DeviceMemory; 3]> {
        self.meter.launched();
        let grads = self.attention_backward_now(job, saved)?;
        self.record_attention_backward(job, saved, &grads)?;
        Ok(grads)
    }

    fn matmul(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
        self.meter.launched();
        let result = self.matmul_now(job)?;
        self.record_matmul(job, &result)?;
        Ok(result)
    }

    fn begin_recording(&self) -> Result<()> {
        self.begin()
    }

    fn end_recording(&self) -> Result<Recording> {
        self.end()
    }

    fn replay(&self, recording: &Recording) -> Result<()> {
        self.replay_recording(recording)
    }
}

/// The ops of the backend, run now.
impl CpuBackend {
    fn run_now(&self, job: &OutputJob<'_>) -> Result<DeviceMemory> {
        // Over merged axes, as the device backends run it (the result's layout is the same).
        let (job, _) = job.merged(None);
        self.run_compiled(&job, &compiled(&job)?)
    }

    /// Runs `job`, over merged axes ([`OutputJob::merged`]), with its interpreter program
    /// (from [`compiled`]).
    fn run_compiled(&self, job: &OutputJob<'_>, program: &Program) -> Result<DeviceMemory> {
        let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
        let inputs = (job.leaves.iter())
            .map(|leaf| Values::read(leaf.memory, leaf.dtype))
            .collect::<Result<Vec<_>>>()?;
        let count = count_of(&job.kept)?;
        let reduce = (!job.reduced.is_empty()).then_some(job.reduce);
        let mut out = Values::filled(job.out, count, reduce)?;
        // Row-major over the kept axes; 0 over the reduced ones, which combine.
        let mut strides = row_major_strides(&job.kept);
        strides.resize(lens.len(), 0);
        let sources: Vec<StridedSource<'_>> = (job.leaves.iter().zip(&inputs))
            .map(|(leaf, values)| source(leaf, values))
            .collect();
        interp::run(
            program,
            &lens,
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

    fn run_into_now(&self, job: &OutputJob<'_>, target: JobTarget<'_>) -> Result<()> {
        target.check(job.out, &job.kept)?;
        let fresh = self.run_now(job)?;
        write_into(job, &fresh, target)
    }

    fn run_multi_now(&self, job: &Job<'_>) -> Result<Vec<DeviceMemory>> {
        self.run_multi_compiled(job, &compiled_multi(job)?)
    }

    /// Runs `job` with its interpreter program (from [`compiled_multi`]).
    fn run_multi_compiled(&self, job: &Job<'_>, program: &Program) -> Result<Vec<DeviceMemory>> {
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
        interp::run(program, &job.lens, &sources, &mut sinks)?;
        drop(sinks);
        Ok(outs.into_iter().map(Values::into_memory).collect())
    }

    /// The results computed as into new buffers, then each copied over its leaf.
    fn run_in_place_now(&self, job: &Job<'_>, over: &[usize]) -> Result<()> {
        self.run_in_place_compiled(job, over, &compiled_multi(job)?)
    }

    /// [`CpuBackend::run_in_place_now`] with the job's interpreter program (from
    /// [`compiled_multi`]).
    fn run_in_place_compiled(
        &self,
        job: &Job<'_>,
        over: &[usize],
        program: &Program,
    ) -> Result<()> {
        job.check_in_place(over)?;
        let results = self.run_multi_compiled(job, program)?;
        for ((output, fresh), &k) in job.outputs.iter().zip(&results).zip(over) {
            let leaf = &job.leaves[k];
            let kept: Vec<usize> = output.kept.iter().map(|&a| job.lens[a]).collect();
            let fresh = Values::read(fresh, job.out)?;
            let mut block = Values::read(leaf.memory, job.out)?;
            interp::run(
                &Program::copy(job.out),
                &kept,
                &[StridedSource {
                    data: fresh.elements(),
                    offset: 0,
                    strides: row_major_strides(&kept),
                }],
                &mut [StridedSink {
                    data: block.elements_mut(),
                    offset: leaf.offset,
                    strides: output.kept.iter().map(|&a| leaf.strides[a]).collect(),
                    combine: None,
                }],
            )?;
            *bytes_of(leaf.memory)? = with_values!(&block, v => as_bytes(v).to_vec());
        }
        Ok(())
    }

    fn attention_now(&self, job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
        job.check(None)?;
        match job.dtype {
            DType::F32 => attention_forward::<f32>(job),
            DType::F64 => attention_forward::<f64>(job),
            DType::F16 => attention_forward::<f16>(job),
            DType::BF16 => attention_forward::<bf16>(job),
            other => unreachable!("`check` refuses {} attention", other.name()),
        }
    }

    fn attention_backward_now(
        &self,
        job: &AttentionJob<'_>,
        saved: &AttentionSaved<'_>,
    ) -> Result<[DeviceMemory; 3]> {
        job.check(Some(saved))?;
        match job.dtype {
            DType::F32 => attention_backward::<f32>(job, saved),
            DType::F64 => attention_backward::<f64>(job, saved),
            DType::F16 => attention_backward::<f16>(job, saved),
            DType::BF16 => attention_backward::<bf16>(job, saved),
            other => unreachable!("`check` refuses {} attention", other.name()),
        }
    }

    fn matmul_now(&self, job: &MatmulJob<'_>) -> Result<DeviceMemory> {
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
