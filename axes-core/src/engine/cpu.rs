//! The CPU as a backend of the device protocol: a [`Job`] runs on the IR interpreter (every
//! element type, one `match` per instruction per block), a [`MatmulJob`] on the engine's
//! matrix product and an [`AttentionJob`] on the engine's fused attention, over buffers in
//! host memory, which each op reads and writes in place (`buffers`, `launch`).
//!
//! It is a test device: `axes_backends::cpu` makes it public, as
//! `Device::Backend(&CPU_BACKEND)`, so that the device lowering runs on every `cargo test`.

use std::sync::Arc;

use half::{bf16, f16};

use super::attention::{self as kernel, MaskRows, RowMajorRows, Rows, Saved};
use super::matmul::{HostMatrix, batched_matmul};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::num::{Float, Num};
use crate::protocol::{
    AttentionJob, AttentionOperand, AttentionSaved, Backend, DeviceKind, DeviceMemory, Job,
    JobTarget, MatmulJob, MatrixSide, Meter, OutputJob, Recording, WriteTo, as_bytes,
};
use crate::storage;
use buffers::{
    Buffer, Guards, buffer_of, bytes_of, handle, memory_of_bytes, new_buffer, typed, typed_mut,
};
use launch::{Launch, count_of};

/// The CPU backend (one per process: devices are equal when they are the same backend).
pub static CPU_BACKEND: CpuBackend = CpuBackend {
    name: "the CPU through the device protocol",
    meter: Meter::new(),
    recorder: record::Recorder::new(),
};

mod buffers;
mod launch;
mod record;
#[cfg(test)]
mod tests;

/// The CPU as a backend: see the [module docs](self).
#[derive(Debug)]
pub struct CpuBackend {
    name: &'static str,
    /// Its launches (each job, product and attention) and reads; it compiles an
    /// interpreter program per job and looks up no kernel.
    meter: Meter,
    recorder: record::Recorder,
}

/// A buffer of this backend holding `values`.
fn memory_of<T: Element>(values: &[T]) -> Result<DeviceMemory> {
    Ok(memory_of_bytes(storage::copied(as_bytes(values))?))
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

/// The buffers an attention job reads, in the order `q, k, v, mask`, then `out, grad, lse`
/// of its saved forward pass where given.
fn attention_buffers<'m>(
    job: &AttentionJob<'m>,
    saved: Option<&AttentionSaved<'m>>,
) -> Result<Vec<&'m Buffer>> {
    let mut memories = vec![job.q.memory, job.k.memory, job.v.memory];
    memories.extend(job.mask.map(|m| m.memory));
    if let Some(saved) = saved {
        memories.extend([saved.out.memory, saved.grad.memory, saved.lse]);
    }
    memories.into_iter().map(buffer_of).collect()
}

/// The elements of an attention job's operands and mask, read in place as `T`.
struct AttentionInputs<'a, T> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    mask: Option<&'a [T]>,
}

impl<'a, T: Float> AttentionInputs<'a, T> {
    /// The operands in `guards`, which lock `buffers` (from [`attention_buffers`]).
    fn read(job: &AttentionJob<'_>, guards: &'a Guards<'_>, buffers: &[&Buffer]) -> Result<Self> {
        let at = |k: usize| typed::<T>(guards.bytes(guards.at(buffers[k])));
        Ok(AttentionInputs {
            q: at(0)?,
            k: at(1)?,
            v: at(2)?,
            mask: job.mask.map(|_| at(3)).transpose()?,
        })
    }

    fn mask(&self, job: &AttentionJob<'a>) -> Option<MaskRows<'a, T>> {
        Some(MaskRows {
            data: self.mask?,
            batch: job.mask?.batch,
            query: job.mask?.query,
            key: job.mask?.key,
        })
    }
}

fn attention_forward<T: Float>(job: &AttentionJob<'_>) -> Result<(DeviceMemory, DeviceMemory)> {
    let buffers = attention_buffers(job, None)?;
    let guards = Guards::lock(buffers.iter().copied());
    let inputs = AttentionInputs::<T>::read(job, &guards, &buffers)?;
    let mut out =
        RowMajorRows::<T>::new(job.shape.batch, job.shape.queries, job.shape.value_width)?;
    let mut lse = RowMajorRows::<T::Wide>::new(job.shape.batch, job.shape.queries, 1)?;
    kernel::forward(
        &job.shape,
        attention_rows(&job.q, inputs.q),
        attention_rows(&job.k, inputs.k),
        attention_rows(&job.v, inputs.v),
        inputs.mask(job),
        &out.out(),
        &lse.out(),
    )?;
    Ok((memory_of(&out.data)?, memory_of(&lse.data)?))
}

fn attention_backward<T: Float>(
    job: &AttentionJob<'_>,
    saved: &AttentionSaved<'_>,
) -> Result<[DeviceMemory; 3]> {
    let buffers = attention_buffers(job, Some(saved))?;
    let guards = Guards::lock(buffers.iter().copied());
    let inputs = AttentionInputs::<T>::read(job, &guards, &buffers)?;
    let at = |k: usize| guards.bytes(guards.at(buffers[buffers.len() - 3 + k]));
    let (out, grad, lse) = (
        typed::<T>(at(0))?,
        typed::<T>(at(1))?,
        typed::<T::Wide>(at(2))?,
    );
    let mut dq = RowMajorRows::<T>::new(job.shape.batch, job.shape.queries, job.shape.width)?;
    let mut dk = RowMajorRows::<T>::new(job.shape.batch, job.shape.keys, job.shape.width)?;
    let mut dv = RowMajorRows::<T>::new(job.shape.batch, job.shape.keys, job.shape.value_width)?;
    kernel::backward(
        &job.shape,
        attention_rows(&job.q, inputs.q),
        attention_rows(&job.k, inputs.k),
        attention_rows(&job.v, inputs.v),
        inputs.mask(job),
        &Saved {
            out: attention_rows(&saved.out, out),
            grad: attention_rows(&saved.grad, grad),
            lse,
        },
        &dq.out(),
        &dk.out(),
        &dv.out(),
    )?;
    Ok([
        memory_of(&dq.data)?,
        memory_of(&dk.data)?,
        memory_of(&dv.data)?,
    ])
}

/// A matrix product on this backend's buffers: the product's shape and operands' layouts,
/// the buffers of its operands and of its result (row-major `[batch][m][n]`).
struct Product {
    job: MatmulJob<'static>,
    lhs: Buffer,
    rhs: Buffer,
    out: Buffer,
}

impl Product {
    /// `job` into a new buffer.
    fn new(job: &MatmulJob<'_>) -> Result<Product> {
        let count = count_of(&[job.batch, job.m, job.n])?;
        let unbound = |side: &MatrixSide<'_>| MatrixSide {
            memory: record::placeholder(),
            ..*side
        };
        Ok(Product {
            job: MatmulJob {
                lhs: unbound(&job.lhs),
                rhs: unbound(&job.rhs),
                ..*job
            },
            lhs: Arc::clone(buffer_of(job.lhs.memory)?),
            rhs: Arc::clone(buffer_of(job.rhs.memory)?),
            out: new_buffer(job.dtype, count)?,
        })
    }

    /// A handle on the result's buffer.
    fn result(&self) -> DeviceMemory {
        handle(&self.out)
    }

    fn run(&self) -> Result<()> {
        fn typed_product<T: Num>(product: &Product, guards: &mut Guards<'_>) -> Result<()> {
            let job = &product.job;
            let out = guards.at(&product.out);
            let (lhs, rhs) = (guards.at(&product.lhs), guards.at(&product.rhs));
            let (reads, mut writes) = guards.split(|at| at == out);
            let (Some(lhs), Some(rhs), Some(out)) = (reads[lhs], reads[rhs], writes[out].take())
            else {
                return Err(Error::Unsupported {
                    what: "a matrix product written over its operand on the CPU backend".into(),
                });
            };
            fn side<'a, T>(side: &'a MatrixSide<'_>, data: &'a [T]) -> HostMatrix<'a, T> {
                HostMatrix {
                    data,
                    offset: side.offset,
                    batch_strides: std::slice::from_ref(&side.batch_stride),
                    row_stride: side.row_stride,
                    col_stride: side.col_stride,
                }
            }
            let (l, r) = (
                side(&job.lhs, typed::<T>(lhs)?),
                side(&job.rhs, typed::<T>(rhs)?),
            );
            batched_matmul(
                typed_mut::<T>(out)?,
                &[job.batch],
                (job.m, job.n, job.k),
                &l,
                &r,
            )
        }
        let mut guards = Guards::lock([&self.lhs, &self.rhs, &self.out]);
        match self.job.dtype {
            DType::F32 => typed_product::<f32>(self, &mut guards),
            DType::F64 => typed_product::<f64>(self, &mut guards),
            DType::F16 => typed_product::<f16>(self, &mut guards),
            DType::BF16 => typed_product::<bf16>(self, &mut guards),
            DType::I32 => typed_product::<i32>(self, &mut guards),
            DType::I64 => typed_product::<i64>(self, &mut guards),
            DType::U8 => typed_product::<u8>(self, &mut guards),
            DType::Bool => Err(Error::Unsupported {
                what: "bool matrix products".into(),
            }),
        }
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
        let memory = memory_of_bytes(storage::copied(bytes)?);
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
        let (source, target) = (buffer_of(from)?, buffer_of(to)?);
        let mut guards = Guards::lock([source, target]);
        let (source, target) = (guards.at(source), guards.at(target));
        if source == target {
            guards
                .bytes_mut(target)
                .copy_within(from_at..from_at + bytes, to_at);
        } else {
            let (reads, mut writes) = guards.split(|at| at == target);
            let (Some(source), Some(target)) = (reads[source], writes[target].take()) else {
                unreachable!("two buffers, one read and one written");
            };
            target[to_at..to_at + bytes].copy_from_slice(&source[from_at..from_at + bytes]);
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
        let copy = storage::copied(&bytes_of(from)?[from_at..from_at + bytes])?;
        self.meter.launched();
        Ok(Some(memory_of_bytes(copy)))
    }

    fn download(&self, memory: &DeviceMemory) -> Result<Vec<u8>> {
        self.refuse_reads()?;
        self.meter.read();
        Ok(bytes_of(memory)?.to_vec())
    }

    /// A job of one result that starts from nothing runs over merged axes
    /// ([`OutputJob::merged`]), as the device backends run it; results written into targets
    /// are run one job each (a launch each).
    fn run(&self, job: &Job<'_>, to: WriteTo<'_>) -> Result<Vec<DeviceMemory>> {
        job.output_counts()?;
        match to {
            WriteTo::New => {
                self.meter.launched();
                let launch = match job.single() {
                    Some(single) => Launch::new_result(&single)?,
                    None => Launch::new_results(job)?,
                };
                launch.run()?;
                let results = (0..launch.results()).map(|k| launch.result(k)).collect();
                self.record_launch(launch)?;
                Ok(results)
            }
            WriteTo::Into(targets) => {
                job.check_into(&targets)?;
                for (k, target) in targets.into_iter().enumerate() {
                    self.meter.launched();
                    let (single, _) = job.output_job(k);
                    self.run_into(&single, target)?;
                }
                Ok(Vec::new())
            }
            WriteTo::Over(over) => {
                self.meter.launched();
                job.check_in_place(over)?;
                let launch = Launch::over(job, over)?;
                launch.run()?;
                self.record_launch(launch)?;
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
        let product = Product::new(job)?;
        product.run()?;
        let result = product.result();
        self.record_product(product)?;
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
    fn run_into(&self, job: &OutputJob<'_>, target: JobTarget<'_>) -> Result<()> {
        target.check(job.out, &job.kept)?;
        let launch = Launch::into_target(job, &target)?;
        launch.run()?;
        self.record_launch(launch)
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
}
