//! Lowering to device jobs: an expression (or an IR and its leaves) becomes a [`Job`] for a
//! backend, its host leaves staged on the device for the job.

use std::any::TypeId;
use std::borrow::Cow;

use crate::element::{DType, Element};
use crate::engine::plan::{IterSpace, LeafLayout, Leaves};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::ir::{BinaryOp, CompareOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::protocol::{
    Backend, BufferRef, Buffers, Device, DeviceMemory, JobLeaf, JobTarget, LeafBuffer, OutputJob,
    WriteTo, run_one,
};
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Runs `expr` on `backend` into a fresh buffer, row-major over the axes `kept` (type ids, in
/// the result's order), combining over the axes `reduced` with `reduce`. Leaves in host memory
/// are copied to the device for this job; leaves on another device are an error. `dest`
/// gives the kept axes' lengths when the result goes into an existing tensor (an axis no
/// leaf has takes its length from there).
pub(crate) fn run_expr<E: Expr>(
    expr: &E,
    backend: &'static dyn Backend,
    kept: &[TypeId],
    names: &dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &[TypeId],
    reduce: ReduceOp,
    dest: Option<&[usize]>,
) -> Result<(Storage<E::Elem>, Layout)> {
    let mut layouts = Leaves::new();
    expr.operands(&mut layouts);
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    let work = JobAxes {
        kept,
        names,
        reduced,
        reduce,
        dest,
    };
    run_ir(expr.ir(), &layouts, &buffers, backend, &work)
}

/// [`run_expr`] written into `target`, a region of an existing buffer on `backend` over the
/// axes `kept` (one stride per kept axis; no repeated positions), instead of a fresh buffer.
pub(crate) fn run_expr_into<E: Expr>(
    expr: &E,
    backend: &'static dyn Backend,
    work: &JobAxes<'_>,
    target: JobTarget<'_>,
) -> Result<()> {
    let mut layouts = Leaves::new();
    expr.operands(&mut layouts);
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    with_job::<E::Elem, _>(expr.ir(), &layouts, &buffers, backend, work, |job, _| {
        backend.run(&job.into(), WriteTo::Into(vec![target]))?;
        Ok(())
    })
}

/// The axes of a device job: those it keeps (`names` for messages) and those it reduces by
/// `reduce`, and the destination's strides over the kept axes where it writes into one; see
/// [`run_expr`].
pub(crate) struct JobAxes<'w> {
    pub(crate) kept: &'w [TypeId],
    pub(crate) names: &'w dyn Fn() -> Vec<Cow<'static, str>>,
    pub(crate) reduced: &'w [TypeId],
    pub(crate) reduce: ReduceOp,
    pub(crate) dest: Option<&'w [usize]>,
}

/// [`run_expr`] for an IR and its leaves.
pub(crate) fn run_ir<T: Element>(
    ir: Ir,
    layouts: &[LeafLayout<'_>],
    buffers: &[LeafBuffer<'_>],
    backend: &'static dyn Backend,
    work: &JobAxes<'_>,
) -> Result<(Storage<T>, Layout)> {
    with_job::<T, _>(ir, layouts, buffers, backend, work, |job, count| {
        let layout = Layout::row_major(&job.kept);
        let memory = run_one(backend, job)?;
        Ok((device_storage(backend, memory, count)?, layout))
    })
}

/// The job of `ir` over its leaves on `backend` (host leaves uploaded for it), handed to
/// `run` with the number of elements of its result.
fn with_job<T: Element, R>(
    ir: Ir,
    layouts: &[LeafLayout<'_>],
    buffers: &[LeafBuffer<'_>],
    backend: &'static dyn Backend,
    work: &JobAxes<'_>,
    run: impl FnOnce(OutputJob<'_>, usize) -> Result<R>,
) -> Result<R> {
    let JobAxes {
        kept,
        names,
        reduced,
        reduce,
        dest,
    } = *work;
    for leaf in layouts {
        if leaf.layout.is_padded() {
            return Err(Error::Unsupported {
                what: format!(
                    "a padded view on {}: kernels do not read padding; write it out with \
                     `.contiguous()` first",
                    Device::Backend(backend)
                ),
            });
        }
    }
    let space = IterSpace::new(kept, names, reduced, dest, layouts)?;
    let lens = space.lens();
    let count = lens[..kept.len()]
        .iter()
        .try_fold(1usize, |n, &l| n.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{:?}", &lens[..kept.len()]),
        })?;
    // Host leaves go to the device for this job.
    let device = Device::Backend(backend);
    let staged = (buffers.iter())
        .map(|buffer| match buffer.data {
            BufferRef::Host(bytes) => backend.upload(bytes).map(Staged::Uploaded),
            BufferRef::Device(owner, memory) if Device::Backend(owner) == device => {
                Ok(Staged::Resident(memory))
            }
            BufferRef::Device(..) => Err(Error::DeviceMismatch {
                left: buffer.device().to_string(),
                right: device.to_string(),
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    let leaves = layouts
        .iter()
        .zip(buffers)
        .zip(&staged)
        .map(|((leaf, buffer), staged)| {
            let memory = match staged {
                Staged::Uploaded(memory) => memory,
                Staged::Resident(memory) => memory,
            };
            JobLeaf {
                dtype: buffer.dtype,
                memory,
                offset: leaf.layout.offset(),
                strides: {
                    let mut strides = vec![0; space.rank];
                    space.write_strides(leaf.ids, leaf.layout.strides(), &mut strides);
                    strides
                },
            }
        })
        .collect();
    let job = OutputJob {
        ir,
        leaves,
        kept: lens[..kept.len()].to_vec(),
        reduced: lens[kept.len()..].to_vec(),
        reduce,
        out: T::DTYPE,
    };
    check_integer_divisors(backend, &job)?;
    run(job, count)
}

/// For a job that divides integers (`/`, `%`), a job run first that tells whether any divisor is zero
/// (a maximum over every axis of `divisor == 0`, one `i32` read back): such a job is then
/// [`Error::DivisionByZero`] on a device as on the CPU, where kernels would give 0.
fn check_integer_divisors(backend: &'static dyn Backend, job: &OutputJob<'_>) -> Result<()> {
    let leaf_types: Vec<DType> = job.leaves.iter().map(|leaf| leaf.dtype).collect();
    let types = node_types(&job.ir, &leaf_types, job.out);
    let divisors: Vec<usize> = (job.ir.nodes.iter().enumerate())
        .filter_map(|(i, node)| match *node {
            IrNode::Binary(BinaryOp::Div | BinaryOp::Rem, _, b)
                if types[i].is_some_and(is_integer) =>
            {
                Some(b)
            }
            _ => None,
        })
        .collect();
    let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
    if divisors.is_empty() || lens.contains(&0) {
        return Ok(());
    }
    let mut ir = job.ir.clone();
    let zero = ir.push(IrNode::Scalar(0.0));
    let mut any_zero = None;
    for divisor in divisors {
        let is_zero = ir.push(IrNode::Compare(CompareOp::Equal, divisor, zero));
        let flag = ir.push(IrNode::Cast(DType::I32, is_zero));
        any_zero = Some(match any_zero {
            None => flag,
            Some(before) => ir.push(IrNode::Binary(BinaryOp::Max, before, flag)),
        });
    }
    let check = OutputJob {
        ir,
        leaves: job.leaves.clone(),
        kept: Vec::new(),
        reduced: lens,
        reduce: ReduceOp::Max,
        out: DType::I32,
    };
    let flag = backend.download(&run_one(backend, check)?)?;
    if flag.iter().any(|&byte| byte != 0) {
        return Err(Error::DivisionByZero);
    }
    Ok(())
}

fn is_integer(dtype: DType) -> bool {
    matches!(dtype, DType::I32 | DType::I64 | DType::U8)
}

/// The element type of each node of `ir` over leaves of the types `leaf_types`, as the kernel
/// generator assigns them: an operation takes its first typed operand's type, else the
/// result's `out`; constants and comparisons have none of their own.
fn node_types(ir: &Ir, leaf_types: &[DType], out: DType) -> Vec<Option<DType>> {
    let mut types: Vec<Option<DType>> = Vec::with_capacity(ir.nodes.len());
    for node in &ir.nodes {
        let ty = match *node {
            IrNode::Scalar(_) | IrNode::Compare(..) | IrNode::Map(_) => None,
            IrNode::Leaf(k) => leaf_types.get(k).copied(),
            IrNode::Unary(_, a) => Some(types[a].unwrap_or(out)),
            IrNode::Binary(_, a, b) | IrNode::Select(_, a, b) => {
                Some(types[a].or(types[b]).unwrap_or(out))
            }
            IrNode::Cast(to, _) => Some(to),
        };
        types.push(ty);
    }
    types
}

/// A leaf's buffer on the job's device: copied there for the job, or already there.
enum Staged<'a> {
    Uploaded(DeviceMemory),
    Resident(&'a DeviceMemory),
}

/// A device buffer a backend returned, checked to hold `count` elements of `T`.
pub(crate) fn device_storage<T: Element>(
    backend: &'static dyn Backend,
    memory: DeviceMemory,
    count: usize,
) -> Result<Storage<T>> {
    if memory.bytes() != count * std::mem::size_of::<T>() {
        return Err(Error::Unsupported {
            what: format!(
                "{} returned {} bytes for {count} elements of {}",
                Device::Backend(backend),
                memory.bytes(),
                T::DTYPE.name()
            ),
        });
    }
    Ok(Storage::on_device(backend, memory, count))
}

/// `a ⊕ b` element-wise on `backend` (both with axes `A`, on that device): accumulating
/// into a tensor on a device (`+=` of [`Tensor::add_sum`]).
pub(crate) fn combine<T: Element, A: AxisSet>(
    a: &Tensor<T, A>,
    b: &Tensor<T, A>,
    backend: &'static dyn Backend,
    kind: ReduceOp,
) -> Result<(Storage<T>, Layout)> {
    let mut ir = Ir::default();
    let (left, right) = (ir.leaf(), ir.leaf());
    ir.push(IrNode::Binary(kind.combine_op(), left, right));
    let (mut layouts, mut buffers) = (Leaves::new(), Buffers::new());
    for t in [a, b] {
        t.operands(&mut layouts);
        t.buffers(&mut buffers);
    }
    let work = JobAxes {
        kept: A::IDS,
        names: &A::names,
        reduced: &[],
        reduce: ReduceOp::Sum,
        dest: Some(a.lens()),
    };
    run_ir(ir, &layouts, &buffers, backend, &work)
}
