//! How a backend of generated kernels runs the device protocol's jobs, shared by the OpenCL
//! and CUDA backends through [`KernelDevice`], a small trait over their buffers and
//! launches: which plan a job's results take ([`run`]), its launch arguments, and the
//! second job that combines a split reduction's parts.

use axes_core::error::{Error, Result};
use axes_core::protocol::{
    Backend, DeviceMemory, Job, JobLeaf, JobTarget, OutputJob, WriteTo, run_each_output,
};
use axes_kernels::{Dialect, Kernel};

use crate::Index;
use crate::plan::{Destination, JobPlan, Slot, plain_copy};
use crate::tuning::Tuning;

/// What the shared launchers need of a backend of generated kernels besides [`Backend`]'s
/// uploads: its buffers, new ones, and its two kinds of launch.
pub(crate) trait KernelDevice: Backend {
    /// The backend's buffer.
    type Buffer;
    /// The dialect its kernels are generated in.
    const DIALECT: Dialect;
    /// The buffer inside `memory`, or an error when another backend made it.
    fn buffer<'m>(&self, memory: &'m DeviceMemory) -> Result<&'m Self::Buffer>;
    /// [`KernelDevice::buffer`] for a buffer a launch writes (held mutably by its caller).
    fn buffer_mut<'m>(&self, memory: &'m mut DeviceMemory) -> Result<&'m Self::Buffer>;
    /// A new buffer of `bytes` bytes (none for 0), not initialised.
    fn fresh(&self, bytes: usize) -> Result<DeviceMemory>;
    /// How the device's kernels are cut.
    fn tuning(&self) -> &Tuning;
    /// Queues a job's kernel: elementwise over `items` work items (`group` `None`), or over
    /// `items` work-groups of `group` threads (reductions, tiles).
    ///
    /// # Safety
    /// `args` must be the kernel's arguments in its generator's order and keep every element
    /// the kernel reads or writes inside its buffer; no buffer written may be read by another
    /// argument except where the kernel reads each position before writing it.
    unsafe fn launch_job(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, Self::Buffer>],
        items: usize,
        group: Option<usize>,
    ) -> Result<()>;
    /// Queues an attention kernel over `groups` groups of
    /// [`ATTENTION_GROUP`](axes_kernels::ATTENTION_GROUP) threads (fewer where the device caps
    /// them: the kernels loop over their groups' work).
    ///
    /// # Safety
    /// `args` must be the kernel's arguments ([`axes_kernels::AttentionArg::ALL`]) and keep
    /// every element the kernel reads or writes inside its buffer.
    unsafe fn launch_attention(
        &self,
        kernel: &Kernel,
        wide: bool,
        args: &[LaunchArg<'_, Self::Buffer>],
        groups: usize,
    ) -> Result<()>;
}

/// An argument of a launch: an index, or a buffer of the backend.
pub(crate) enum LaunchArg<'a, B> {
    /// An index, length, offset or step.
    Index(Index),
    /// A buffer.
    Buffer(&'a B),
}

/// Runs `job` on `device`, its results written where `to` says ([`Backend::run`]): a job of
/// one result as one kernel (a split reduction as two), several results written into
/// targets or over leaves as one kernel where each keeps every axis, and several new
/// results one kernel each.
pub(crate) fn run<D: KernelDevice>(
    device: &D,
    job: &Job<'_>,
    to: WriteTo<'_>,
) -> Result<Vec<DeviceMemory>> {
    job.output_counts()?;
    match to {
        WriteTo::New => match job.single() {
            Some(single) => Ok(vec![new_result(device, &single)?]),
            None => run_each_output(device, job),
        },
        WriteTo::Into(targets) => {
            job.check_into(&targets)?;
            into_targets(device, job, targets)?;
            Ok(Vec::new())
        }
        WriteTo::Over(over) => {
            if let Some(plan) = JobPlan::in_place(job, over, D::DIALECT, device.tuning())? {
                launch_plan(device, &plan, &job.leaves, &[])?;
            }
            Ok(Vec::new())
        }
    }
}

/// `job`'s result in a new buffer (the driver's copy where it copies consecutive elements).
fn new_result<D: KernelDevice>(device: &D, job: &OutputJob<'_>) -> Result<DeviceMemory> {
    if let Some((bytes, from)) = plain_copy(job, None)
        && let Some(copy) = device.copied_bytes(job.leaves[0].memory, from, bytes)?
    {
        return Ok(copy);
    }
    let Some(plan) = JobPlan::new(job, D::DIALECT, device.tuning(), Destination::Fresh)? else {
        return device.fresh(0);
    };
    let out = device.fresh(plan.out_bytes)?;
    launch_plan(device, &plan, &job.leaves, &[device.buffer(&out)?])?;
    if plan.splits > 1 {
        return new_result(device, &plan.combine(job, &out));
    }
    Ok(out)
}

/// `job`'s result written into `target` (by the driver's copy where it copies consecutive
/// elements into consecutive elements).
fn into_target<D: KernelDevice>(
    device: &D,
    job: &OutputJob<'_>,
    target: JobTarget<'_>,
) -> Result<()> {
    target.check(job.out, &job.kept)?;
    if let Some((bytes, from)) = plain_copy(job, Some(&target.strides)) {
        let to = target.offset * job.out.size();
        if device.copy_bytes(job.leaves[0].memory, from, target.memory, to, bytes)? {
            return Ok(());
        }
    }
    let Some(plan) = JobPlan::new(job, D::DIALECT, device.tuning(), Destination::Into(&target))?
    else {
        return Ok(());
    };
    if plan.splits > 1 {
        let partial = device.fresh(plan.out_bytes)?;
        launch_plan(device, &plan, &job.leaves, &[device.buffer(&partial)?])?;
        return into_target(device, &plan.combine(job, &partial), target);
    }
    let out = device.buffer_mut(target.memory)?;
    launch_plan(device, &plan, &job.leaves, &[out])
}

/// `job`'s results written into `targets` (checked to be one per result, none starting
/// from values): those that keep every axis in one launch when there are several, the
/// others (and a lone one) a job each.
fn into_targets<D: KernelDevice>(
    device: &D,
    job: &Job<'_>,
    targets: Vec<JobTarget<'_>>,
) -> Result<()> {
    let (whole, alone) = launches_into(job);
    let mut targets: Vec<Option<JobTarget<'_>>> = targets.into_iter().map(Some).collect();
    if !whole.is_empty() {
        let together = Job {
            outputs: whole.iter().map(|&k| job.outputs[k].clone()).collect(),
            ..job.clone()
        };
        let mut written: Vec<JobTarget<'_>> = (whole.iter())
            .map(|&k| targets[k].take().expect("one target per result"))
            .collect();
        if let Some(plan) = JobPlan::outputs(&together, &written, D::DIALECT, device.tuning())? {
            let outs = (written.iter_mut())
                .map(|target| device.buffer_mut(target.memory))
                .collect::<Result<Vec<_>>>()?;
            launch_plan(device, &plan, &job.leaves, &outs)?;
        }
    }
    for k in alone {
        let target = targets[k].take().expect("one target per result");
        into_target(device, &job.output_job(k).0, target)?;
    }
    Ok(())
}

/// How [`run`] writes `job`'s results into targets: the results written together by one
/// kernel (those that keep every axis, where there are several), and those written one job
/// each.
fn launches_into(job: &Job<'_>) -> (Vec<usize>, Vec<usize>) {
    let rank = job.lens.len();
    let (mut whole, mut alone): (Vec<usize>, Vec<usize>) =
        (0..job.outputs.len()).partition(|&k| job.outputs[k].kept.len() == rank);
    if whole.len() < 2 {
        alone.append(&mut whole);
    }
    (whole, alone)
}

/// Launches `plan` (made for a job of these `leaves`), writing into `outs`.
fn launch_plan<D: KernelDevice>(
    device: &D,
    plan: &JobPlan,
    leaves: &[JobLeaf<'_>],
    outs: &[&D::Buffer],
) -> Result<()> {
    let inputs = (leaves.iter())
        .map(|leaf| device.buffer(leaf.memory))
        .collect::<Result<Vec<_>>>()?;
    let args = (plan.args.iter())
        .map(|slot| match *slot {
            Slot::Index(v) => Ok(LaunchArg::Index(v)),
            Slot::Out(j) => {
                outs.get(j)
                    .map(|&b| LaunchArg::Buffer(b))
                    .ok_or_else(|| Error::Unsupported {
                        what: format!("a launch of {} results given {}", j + 1, outs.len()),
                    })
            }
            Slot::Leaf(k) => Ok(LaunchArg::Buffer(inputs[k])),
        })
        .collect::<Result<Vec<_>>>()?;
    // SAFETY: `JobPlan` lays the arguments out in the generator's order for this kernel and
    // checked that every element each leaf reads lies in its buffer (its whole buffer on
    // this device); each of `outs` is a new buffer of `plan.out_bytes` or a target region the
    // plan checked, held mutably, so no leaf reads it; a plan that writes over leaves
    // (`JobPlan::in_place`) checked that no other leaf reads the positions written, and its
    // kernel reads each before writing it.
    unsafe { device.launch_job(&plan.kernel, plan.wide, &args, plan.items, plan.group) }
}
