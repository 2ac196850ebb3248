//! Buffers made, filled, copied and moved by jobs on whatever device they live on: the
//! helpers above [`run_output`] that autodiff, optimizers and checkpoints use.

use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::ir::{Ir, ReduceOp};
use crate::layout::Layout;
use crate::num::Num;
use crate::protocol::{Device, Job, JobOutput, WriteTo};
use crate::storage::{self, HostVec, Storage};

use super::lower::device_storage;
use super::outputs::{Input, Output, mismatch, run_output};

/// Makes `storage` a buffer that only this handle holds, with no host copy, for a job that
/// writes it in place ([`run_in_place`]): a shared device buffer is copied first (the other
/// handles keep the values they had). Host buffers are left as they are.
pub(crate) fn unique_for_writing<T: Num>(storage: &mut Storage<T>) -> Result<()> {
    if storage.device() == Device::Cpu || storage.unique_memory().is_some() {
        return Ok(());
    }
    *storage = written_out(storage, &Layout::row_major(&[storage.len()]))?.0;
    storage.unique_memory();
    Ok(())
}

/// Writes `values` (as many as `storage` holds) over `storage`'s elements, in the same
/// buffer where nothing else holds it — a recorded step goes on reading it — else in a new
/// one: in host memory directly, on a device by the device's byte copy from an upload (a new
/// buffer where the device has no such copy). An error leaves `storage` as it was.
pub(crate) fn overwrite<T: Num>(storage: &mut Storage<T>, values: &[T]) -> Result<()> {
    if values.len() != storage.len() {
        return Err(Error::ElementCount {
            lengths: "a buffer written over".into(),
            expected: storage.len(),
            got: values.len(),
        });
    }
    let Device::Backend(backend) = storage.device() else {
        storage.try_make_mut()?.copy_from_slice(values);
        return Ok(());
    };
    let read = placed(crate::storage::copied(values)?, storage.device())?;
    let from = read
        .device_memory()
        .ok_or_else(|| mismatch(Device::Cpu, storage.device()))?;
    unique_for_writing(storage)?;
    if let Some(to) = storage.unique_memory()
        && backend.copy_bytes(from, 0, to, 0, std::mem::size_of_val(values))?
    {
        return Ok(());
    }
    *storage = read;
    Ok(())
}

/// `from` (viewed by `from_layout`) written over the region `layout` of `buffer`, on their
/// device.
pub(crate) fn copied_into<T: Element>(
    from: &Storage<T>,
    from_layout: &Layout,
    buffer: Storage<T>,
    layout: Layout,
) -> Result<(Storage<T>, Layout)> {
    let mut ir = Ir::default();
    let root = ir.leaf();
    let axes: Vec<usize> = (0..layout.rank()).collect();
    let input = Input::new(from, from_layout, &axes, axes.len())?;
    let output =
        Output::combined_by(root, axes, ReduceOp::Sum, T::zero()).written_into(buffer, layout);
    run_output(&ir, from_layout.lens(), &[input], output)
}

/// A buffer of `len` elements on `device` holding each part (a buffer, how to read it, and
/// the region of the result it goes to, of the same lengths), zeros elsewhere: how a model's
/// gradients are gathered into its arena's layout. In host memory, regions laid out
/// row-major in increasing order are filled in one pass; otherwise, and on a device, each
/// part is one copy job into a buffer of zeros.
pub(crate) fn assembled<T: Num>(
    device: Device,
    len: usize,
    parts: &[(Storage<T>, Layout, Layout)],
) -> Result<Storage<T>> {
    let row_major = |l: &Layout| l.strides() == Layout::row_major(l.lens()).strides();
    let mut end = 0;
    let in_order = parts.iter().all(|(_, from, to)| {
        let starts_after = to.offset() >= end;
        end = to.offset() + to.element_count().unwrap_or(0);
        starts_after && row_major(to) && from.lens() == to.lens() && !from.is_padded() && end <= len
    });
    if device.is_host() && in_order {
        let mut values = storage::with_capacity(len)?;
        for (storage, from, to) in parts {
            let data = storage.host()?;
            values.resize(to.offset(), T::zero());
            match from.element_count() {
                Some(count) if row_major(from) => {
                    values.extend_from_slice(&data[from.offset()..from.offset() + count]);
                }
                _ => values.extend(from.positions().map(|p| p.map_or(T::zero(), |p| data[p]))),
            }
        }
        values.resize(len, T::zero());
        return Ok(Storage::from_host_vec(values));
    }
    let mut flat = filled(device, len, T::zero())?;
    for (storage, from, to) in parts {
        flat = copied_into(storage, from, flat, *to)?.0;
    }
    Ok(flat)
}

/// A buffer of `count` copies of `value` on `device` (on a backend's device, written by a job
/// unless `value` is a `bool` or does not survive the IR's `f64` constants: then uploaded).
pub(crate) fn filled<T: Element>(device: Device, count: usize, value: T) -> Result<Storage<T>> {
    match device {
        Device::Cpu => Ok(Storage::from_host_vec(storage::filled(count, value)?)),
        Device::Backend(backend)
            if T::DTYPE != DType::Bool && T::from_f64(value.to_f64()) == value =>
        {
            let mut ir = Ir::default();
            ir.push(crate::ir::IrNode::Scalar(value.to_f64()));
            let job = Job {
                ir,
                leaves: Vec::new(),
                lens: vec![count],
                out: T::DTYPE,
                outputs: vec![JobOutput {
                    root: 0,
                    kept: vec![0],
                    reduce: ReduceOp::Sum,
                    start: None,
                }],
            };
            let memory =
                backend
                    .run(&job, WriteTo::New)?
                    .pop()
                    .ok_or_else(|| Error::Unsupported {
                        what: format!("{} returned no result", Device::Backend(backend)),
                    })?;
            device_storage(backend, memory, count)
        }
        Device::Backend(_) => placed(storage::filled(count, value)?, device),
    }
}

/// `storage` viewed by `layout`, written out row-major into a fresh buffer on its device
/// (every padding element and every repeated position becomes an element of its own).
pub(crate) fn written_out<T: Element>(
    storage: &Storage<T>,
    layout: &Layout,
) -> Result<(Storage<T>, Layout)> {
    let mut ir = Ir::default();
    let root = ir.leaf();
    let axes: Vec<usize> = (0..layout.rank()).collect();
    let output = Output::combined_by(root, axes.clone(), ReduceOp::Sum, T::zero());
    let input = Input::new(storage, layout, &axes, axes.len())?;
    run_output(&ir, layout.lens(), &[input], output)
}

/// `storage` viewed by `layout`, packed row-major into a fresh buffer on its device: read on
/// the host, a copy job on a device.
pub(crate) fn packed<T: Num>(storage: &Storage<T>, layout: &Layout) -> Result<Storage<T>> {
    match storage.device() {
        Device::Cpu => Ok(Storage::from_host_vec(crate::tensor::read_layout(
            storage.host()?,
            layout,
        )?)),
        Device::Backend(_) if layout.is_padded() => {
            // The stored part written over a buffer of zeros.
            let lens = layout.lens();
            let stored = Layout::new(
                layout.stored_lens(),
                layout.strides(),
                layout.offset(),
                storage.len(),
            )
            .expect("a tensor's stored part fits its buffer");
            let whole = Layout::row_major(lens);
            let count = whole.element_count().ok_or_else(|| Error::SizeOverflow {
                lengths: format!("{lens:?}"),
            })?;
            let zeros = filled(storage.device(), count, T::zero())?;
            if stored.element_count() == Some(0) {
                return Ok(zeros);
            }
            let mut region = whole;
            for (axis, (&before, &len)) in
                (layout.pad_before().iter().zip(layout.stored_lens())).enumerate()
            {
                region = region.sliced(axis, before, before + len, 1);
            }
            Ok(copied_into(storage, &stored, zeros, region)?.0)
        }
        Device::Backend(_) => Ok(written_out(storage, layout)?.0),
    }
}

/// `storage`'s elements in a buffer on `device` (through the host).
pub(crate) fn moved<T: Element>(storage: &Storage<T>, device: Device) -> Result<Storage<T>> {
    placed(crate::storage::copied(storage.host()?)?, device)
}

/// `values` in a buffer on `device` (copied there from the host).
pub(crate) fn placed<T: Element>(values: HostVec<T>, device: Device) -> Result<Storage<T>> {
    match device {
        Device::Cpu => Ok(Storage::from_host_vec(values)),
        Device::Backend(backend) => {
            let memory = backend.upload(crate::protocol::as_bytes(&values))?;
            device_storage(backend, memory, values.len())
        }
    }
}
