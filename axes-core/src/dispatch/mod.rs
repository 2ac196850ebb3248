//! Where work runs: the tensor-level half of the device protocol. An expression runs where
//! its operands are (the one device they share): in host memory by the CPU loop engine, on
//! a backend's device as a [`Job`](crate::protocol::Job) lowered here. Tensors move between
//! devices by [`Tensor::to`].
//!
//! A [`Device`] is [`Device::Cpu`] (host memory; the loop engine, gemm and rayon) or a
//! [`Device::Backend`] (`axes-backends`: CUDA, and OpenCL on any GPU or on the CPU).
//! Every tensor knows its device ([`Tensor::device`]); [`Tensor::to`] copies it to another.
//! Expressions, reductions, assignments and `dot` over tensors on one backend's device run there,
//! as generated kernels, and their results stay there: the same user code, nothing changed
//! but the device. Operands on different devices are an error that names both.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![1., 2., 3.])?;
//! assert_eq!(x.device(), Device::Cpu);
//! // through the `axes` crate (features `opencl` and `cuda`, on by default):
//! // let gpu = axes::device("cuda:0")?;
//! // let y = (&x.to(&gpu)? * 2.0).exp().eval()?;   // runs on the GPU, stays there
//! // let back = y.to(&Device::Cpu)?;
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! The protocol the backends implement is [`crate::protocol`]: device memory (upload,
//! download), [`Job`](crate::protocol::Job)s — an expression's run-time IR, its leaves' device
//! buffers with their strides over the iteration axes, the lengths, and the reduction — and
//! [`MatmulJob`](crate::protocol::MatmulJob)s.
//! [`ExprExt::eval_on`](crate::ExprExt::eval_on), the `*_on` reductions and
//! [`dot_on`](crate::dot_on) run host tensors on a device for one call (copied there and back).

mod buffers;
mod interpreted;
mod join;
mod joint;
mod lower;
mod matmul;
mod outputs;
mod transfer;
mod widened;

pub(crate) use buffers::{
    assembled, copied_into, filled, moved, overwrite, packed, placed, unique_for_writing,
    written_out,
};
pub(crate) use join::{gather_axes, index_range, out_of_range, scattered, unpadded};
pub(crate) use joint::JointJob;
pub(crate) use lower::{JobAxes, combine, device_storage, run_expr, run_expr_into};
pub(crate) use matmul::{MatrixOperand, matmul};
pub(crate) use outputs::{Input, Output, run_in_place, run_output, run_outputs};

use std::any::TypeId;
use std::borrow::Cow;
use std::marker::PhantomData;

use crate::element::Element;
use crate::engine::exec::{self, Combine, FlatTarget};
use crate::engine::plan::{Destination, LeafLayout, Leaves, Plan, same_items};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::ir::ReduceOp;
use crate::layout::Layout;
use crate::list::{AxisList, AxisSet};
use crate::protocol::{Backend, Buffers, Device, JobTarget, LeafBuffer};
use crate::storage::{HostVec, Storage};
use crate::tensor::{FlatParts, FlatPartsList, Tensor};

/// Runs `expr` into a fresh row-major tensor with axes `O` (the expression's axes, in any
/// order), reducing over `reduced` with `sink` (the destination starts at its identity).
/// Runs on the device the leaves are on (host memory: the CPU engine).
pub(crate) fn evaluate<E: Expr, O: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    reduced: &[TypeId],
    sink: S,
) -> Result<Tensor<E::Elem, O>> {
    let (storage, layout) = evaluate_parts(expr, O::IDS, &O::names, reduced, sink)?;
    Tensor::<E::Elem, O>::checked_shape(layout.lens())?;
    let mut parts = FlatPartsList::new();
    expr.flat_parts(&mut parts);
    let result = Tensor::from_parts(storage, layout).expect("a fresh row-major layout fits");
    Ok(result.with_flat_parts(FlatParts::merged(&parts)))
}

/// [`evaluate`] for the result axes `out` (type ids) named by `names`: the fresh buffer and
/// its row-major layout.
pub(crate) fn evaluate_parts<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    out: &[TypeId],
    names: &dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &[TypeId],
    sink: S,
) -> Result<(Storage<E::Elem>, Layout)> {
    if let Some(backend) = backend_of(expr, None)? {
        let kind = sink.reduce_op().unwrap_or(ReduceOp::Sum);
        return run_expr(expr, backend, out, names, reduced, kind, None);
    }
    let fresh = Fresh {
        out,
        names,
        reduced,
        sink,
    };
    (OnTheCpu::<E, S>::PARTS)(expr, fresh)
}

/// A fresh result in host memory, as [`evaluate_parts`] asks for it: row-major over the axes
/// `out` (type ids, named by `names`), reduced over `reduced` by `sink` from its identity.
struct Fresh<'w, S> {
    out: &'w [TypeId],
    names: &'w dyn Fn() -> Vec<Cow<'static, str>>,
    reduced: &'w [TypeId],
    sink: S,
}

impl<'w, S> Fresh<'w, S> {
    /// The same result asked of another sink.
    fn with_sink<R>(&self, sink: R) -> Fresh<'w, R> {
        Fresh {
            out: self.out,
            names: self.names,
            reduced: self.reduced,
            sink,
        }
    }

    /// The buffer for `layout`: starting from the sink's identity where values combine into
    /// it (a reduction), uninitialised where each element is written once.
    fn buffer<T: Element>(&self, layout: &Layout) -> Result<HostVec<T>>
    where
        S: Combine<T>,
    {
        let count = layout.element_count().ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{:?}", layout.lens()),
        })?;
        if S::REDUCES || !self.reduced.is_empty() {
            crate::storage::filled(count, self.sink.identity())
        } else {
            crate::storage::for_overwrite(count)
        }
    }
}

/// The signature of [`evaluate_parts`] in host memory.
type PartsFn<E, S> = for<'w> fn(&E, Fresh<'w, S>) -> Result<(Storage<<E as Expr>::Elem>, Layout)>;

/// The deepest expression tree the CPU runs as one loop nest compiled for it. Deeper ones
/// run on the IR interpreter, over the leaves in place: a compiled loop nest has an evaluator
/// per node, each as deep as the tree below it, so its build time grows with the square of
/// the depth, while the interpreter is compiled once.
pub const MAX_FUSED_DEPTH: usize = 64;

/// How the CPU runs expression `E` into sink `S`: the loop nest compiled for it, or for a
/// tree deeper than [`MAX_FUSED_DEPTH`] the interpreter. Chosen in constants, so that the
/// compiler builds only the chosen one: a branch on `E::DEPTH` in a function would still
/// compile the loop nest for every expression.
struct OnTheCpu<E, S>(PhantomData<(E, S)>);

impl<E: Expr, S: Combine<E::Elem>> OnTheCpu<E, S> {
    const FUSED: bool = E::DEPTH <= MAX_FUSED_DEPTH || E::FUSED_ONLY;
    const PARTS: PartsFn<E, S> = if widened::applies::<E::Elem, S>() {
        widened::parts::<E, S>
    } else {
        Self::PARTS_IN_OWN_TYPE
    };
    /// [`OnTheCpu::PARTS`] combining in the element type itself.
    const PARTS_IN_OWN_TYPE: PartsFn<E, S> = if Self::FUSED {
        fused_parts::<E, S>
    } else {
        interpreted::parts::<E, S>
    };
    const ALL: fn(&E, S) -> Result<E::Elem> = if widened::applies::<E::Elem, S>() {
        widened::all::<E, S>
    } else if Self::FUSED {
        fused_all::<E, S>
    } else {
        interpreted::all::<E, S>
    };
}

/// The signature of [`evaluate_into`].
type IntoFn<E, A, S> = fn(&E, &mut Tensor<<E as Expr>::Elem, A>, &[TypeId], S) -> Result<()>;

/// The same for writing into a tensor with axes `A`.
struct IntoOnTheCpu<E, A, S>(PhantomData<(E, A, S)>);

impl<E: Expr, A: AxisSet, S: Combine<E::Elem>> IntoOnTheCpu<E, A, S> {
    const INTO: IntoFn<E, A, S> = if widened::applies::<E::Elem, S>() {
        widened::into::<E, A, S>
    } else {
        Self::INTO_IN_OWN_TYPE
    };
    /// [`IntoOnTheCpu::INTO`] combining in the element type itself.
    const INTO_IN_OWN_TYPE: IntoFn<E, A, S> = if OnTheCpu::<E, S>::FUSED {
        fused_into::<E, A, S>
    } else {
        interpreted::into::<E, A, S>
    };
}

/// [`evaluate_parts`] in host memory, by the loop nest compiled for `E`.
fn fused_parts<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    fresh: Fresh<'_, S>,
) -> Result<(Storage<E::Elem>, Layout)> {
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    let to = FlatTarget::Along { offset: 0 };
    if let Some(count) = flat_alone::<E>(&leaves, fresh.out, to)
        && fresh.reduced.is_empty()
    {
        let layout = Layout::row_major(leaves[0].layout.lens());
        let mut data = fresh.buffer(&layout)?;
        run_flat(expr, &mut data, to, count, fresh.sink)?;
        return Ok((Storage::from_host_vec(data), layout));
    }
    let mut layout = Layout::row_major(&[]);
    let mut plan = Plan::empty();
    plan.build(
        fresh.out,
        fresh.names,
        fresh.reduced,
        Destination::Fresh(&mut layout),
        &leaves,
    )?;
    let mut data = fresh.buffer(&layout)?;
    let make = || {
        let mut next = 0;
        expr.evaluator(&plan, &mut next)
    };
    exec::run(&plan, &mut data, fresh.sink, &make, E::WEIGHTS)?;
    Ok((Storage::from_host_vec(data), layout))
}

/// Reduces every axis of `expr` with `sink` (from its identity) into one value. On the CPU it
/// runs into a local, with no result buffer (a sum of a few hundred elements costs less
/// than making a tensor for its result); on a device, as [`evaluate`] then one read.
pub(crate) fn evaluate_all<E: Expr, S: Combine<E::Elem>>(expr: &E, sink: S) -> Result<E::Elem> {
    let all = E::Axes::IDS;
    if backend_of(expr, None)?.is_some() {
        let total: Tensor<E::Elem, ()> = evaluate(expr, all, sink)?;
        return Ok(total.storage().host()?[0]);
    }
    (OnTheCpu::<E, S>::ALL)(expr, sink)
}

/// [`evaluate_all`] in host memory, by the loop nest compiled for `E`.
fn fused_all<E: Expr, S: Combine<E::Elem>>(expr: &E, sink: S) -> Result<E::Elem> {
    let all = E::Axes::IDS;
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    let mut total = [sink.identity()];
    // Any axis order: every axis is reduced.
    let order = leaves.first().map_or(&[][..], |leaf| leaf.ids);
    if let Some(count) = flat_alone::<E>(&leaves, order, FlatTarget::IntoOne) {
        run_flat(expr, &mut total, FlatTarget::IntoOne, count, sink)?;
        return Ok(total[0]);
    }
    let mut plan = Plan::empty();
    plan.build(
        &[],
        &Vec::new,
        all,
        Destination::Existing(&Layout::SCALAR),
        &leaves,
    )?;
    let make = || {
        let mut next = 0;
        expr.evaluator(&plan, &mut next)
    };
    exec::run(&plan, &mut total, sink, &make, E::WEIGHTS)?;
    Ok(total[0])
}

/// The number of iterations where the leaves of `E` evaluate flat on this thread into a
/// destination with the axes `out` in that order (see [`Plan::flat_count`] and
/// [`FlatTarget::runs_alone`]): every leaf dense with the axes `out` in that order.
#[inline]
fn flat_alone<E: Expr>(leaves: &[LeafLayout<'_>], out: &[TypeId], to: FlatTarget) -> Option<usize> {
    let count = Plan::flat_count(leaves)?;
    let in_order = same_items(leaves[0].ids, out);
    (in_order && to.runs_alone::<E::Elem>(count, leaves.len(), E::WEIGHTS)).then_some(count)
}

/// Runs `expr` flat over `count` iterations into `dest` on this thread ([`exec::run_flat`]).
#[inline]
fn run_flat<E: Expr, S: Combine<E::Elem>>(
    expr: &E,
    dest: &mut [E::Elem],
    to: FlatTarget,
    count: usize,
    sink: S,
) -> Result<()> {
    let plan = Plan::flat_evaluators();
    let mut next = 0;
    let mut eval = expr.evaluator(&plan, &mut next);
    exec::run_flat(dest, to, count, sink, &mut eval)
}

/// Runs `expr` into `target` (the expression's axes less `reduced`, in any order), reducing
/// over `reduced` and combining with `target`'s elements by `sink`. Written in place when
/// `target`'s buffer has no other handle — by the CPU engine in host memory, by the backend
/// on a device; otherwise (and on a device when combining) into a copy or a fresh buffer that
/// replaces `target`'s.
pub(crate) fn evaluate_into<E: Expr, A: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    target: &mut Tensor<E::Elem, A>,
    reduced: &[TypeId],
    sink: S,
) -> Result<()> {
    if let Some(backend) = backend_of(expr, Some(target.device()))? {
        let kind = sink.reduce_op();
        let layout = *target.layout();
        if kind.is_none() && layout.is_injective() {
            // Overwriting a buffer no other handle shares (so no operand reads it): in place.
            if let Some(memory) = target.storage_mut().unique_memory() {
                let lens = layout.lens();
                let work = JobAxes {
                    kept: A::IDS,
                    names: &A::names,
                    reduced,
                    reduce: ReduceOp::Sum,
                    dest: Some(lens),
                };
                let target = JobTarget {
                    memory,
                    offset: layout.offset(),
                    strides: layout.strides().to_vec(),
                };
                return run_expr_into(expr, backend, &work, target);
            }
        }
        let (storage, layout) = run_expr(
            expr,
            backend,
            A::IDS,
            &A::names,
            reduced,
            kind.unwrap_or(ReduceOp::Sum),
            Some(target.lens()),
        )?;
        let (storage, layout) = match kind {
            Some(kind) if S::REDUCES => {
                let fresh = Tensor::<E::Elem, A>::new_unchecked(storage, layout);
                let mine = target.to(&Device::Backend(backend))?;
                combine(&mine, &fresh, backend, kind)?
            }
            _ => (storage, layout),
        };
        target.replace_parts(storage, layout);
        return Ok(());
    }
    if !target.layout().is_injective() {
        *target = target.contiguous()?;
    }
    (IntoOnTheCpu::<E, A, S>::INTO)(expr, target, reduced, sink)
}

/// [`evaluate_into`] in host memory, into a target with an injective layout, by the loop
/// nest compiled for `E`.
fn fused_into<E: Expr, A: AxisSet, S: Combine<E::Elem>>(
    expr: &E,
    target: &mut Tensor<E::Elem, A>,
    reduced: &[TypeId],
    sink: S,
) -> Result<()> {
    let mut leaves = Leaves::new();
    expr.operands(&mut leaves);
    let layout = target.layout();
    if let Some(count) = flat_alone::<E>(&leaves, A::IDS, FlatTarget::Along { offset: 0 })
        && reduced.is_empty()
        && layout.is_dense()
        && same_items(layout.lens(), leaves[0].layout.lens())
    {
        let to = FlatTarget::Along {
            offset: layout.offset(),
        };
        let data = target.storage_mut().try_make_mut()?;
        return run_flat(expr, data, to, count, sink);
    }
    let mut plan = Plan::empty();
    plan.build(
        A::IDS,
        &A::names,
        reduced,
        Destination::Existing(target.layout()),
        &leaves,
    )?;
    let data = target.storage_mut().try_make_mut()?;
    let make = || {
        let mut next = 0;
        expr.evaluator(&plan, &mut next)
    };
    exec::run(&plan, data, sink, &make, E::WEIGHTS)?;
    Ok(())
}

/// The backend whose device `expr`'s tensor leaves and `dest` (when given) are on, `None` where
/// they are all in host memory, or an error naming two devices that differ. Answers at once
/// in a process that never made a device buffer.
pub(crate) fn backend_of<E: Expr>(
    expr: &E,
    dest: Option<Device>,
) -> Result<Option<&'static dyn Backend>> {
    if !crate::storage::device_buffers_made() {
        return Ok(None);
    }
    let mut buffers = Buffers::new();
    expr.buffers(&mut buffers);
    let device = common_device(
        dest.into_iter()
            .chain(buffers.iter().map(LeafBuffer::device)),
    )?;
    Ok(match device {
        Some(Device::Backend(backend)) => Some(backend),
        _ => None,
    })
}

/// The one device all of `devices` are on (`None` for none), or an error naming two that
/// differ.
pub(crate) fn common_device(devices: impl IntoIterator<Item = Device>) -> Result<Option<Device>> {
    let mut found: Option<Device> = None;
    for device in devices {
        match found {
            None => found = Some(device),
            Some(first) if first == device => {}
            Some(first) => {
                return Err(Error::DeviceMismatch {
                    left: first.to_string(),
                    right: device.to_string(),
                });
            }
        }
    }
    Ok(found)
}

/// Runs `expr` on `device` for one call into a host tensor with axes `R` (the expression's
/// axes less `over`): host leaves are copied there, the result back.
pub(crate) fn run_on<E: Expr, R: AxisSet>(
    expr: &E,
    device: &Device,
    over: &[TypeId],
    reduce: ReduceOp,
) -> Result<Tensor<E::Elem, R>> {
    let Device::Backend(backend) = *device else {
        return Err(Error::Unsupported {
            what: "`*_on(&Device::Cpu)`: evaluate on the CPU with `eval`, `sum`, …".into(),
        });
    };
    let (storage, layout) = run_expr(expr, backend, R::IDS, &R::names, over, reduce, None)?;
    let values = storage.host()?.to_vec();
    Ok(Tensor::from_parts(Storage::new(values), layout).expect("a fresh result fits"))
}
