//! [`Convolution`]: every window of the input contracted with a filter.

use std::borrow::Cow;

use super::PerRole;
use super::axes::{ConvAxes, ConvPositions, ConvolveWith, SpatialRole};
use super::windows::{WindowAxis, padded_input, window_layout, window_sums};
use crate::contract::{DotGrads, Operand, Roles, contract_operands};
use crate::dispatch::packed;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::num::Num;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// A convolution (strictly, a cross-correlation, as in every deep-learning library): for
/// every window position, the sum over the input's Channel axis and the window's offsets of
/// input times filter — PyTorch's `conv1d`, `conv2d` and `conv3d`.
///
/// The axes are found by role ([`ConvolveWith`]): the input's Channel axis (role `Channel`);
/// the filter's output channels (role `Channelout`); and one kernel axis in the filter per
/// spatial role it has (`Width`; `Height` and `Width`; or `Depth`, `Height` and `Width`), each
/// moving along the input's axis with that role. The input's other axes are batch axes; a
/// batch axis the filter has too makes the convolution grouped (PyTorch's `groups`): each
/// position along it convolves its own channels with its own filters — an input over
/// (Batch, Group, Chan, …) and a filter over (Group, Maps, Chan, …) for `Group` groups of
/// `Chan` channels, or `Chan` of length 1 for a depthwise convolution. An
/// input without an axis of the filter's spatial roles, with two axes of one role, or a filter
/// without the input's Channel axis is a compile error naming the role or the axis. The result
/// has the input's axes but the Channel axis — the spatial ones as long as the windows that fit
/// — then the filter's Channelout axis.
///
/// Stride, padding (zeros) and dilation are 1, 0 and 1 unless set, for every spatial role or
/// one ([`Convolution::stride_along`]). A window that does not fit its axis is an error naming
/// the axis and the lengths.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::spatial::Convolution;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Channel)] struct Rgb;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
/// #[derive(Axis)] #[axis(role = Width)] struct Cols;
/// #[derive(Axis)] #[axis(role = Channelout)] struct Maps;
/// #[derive(Axis)] #[axis(role = Height)] struct KRows;
/// #[derive(Axis)] #[axis(role = Width)] struct KCols;
///
/// let image = Tensor::<f32, (Batch, Rgb, Rows, Cols)>::random_uniform(
///     (Batch.len(2), Rgb.len(3), Rows.len(8), Cols.len(8)), -1.0, 1.0, 0)?;
/// let filter = Tensor::<f32, (Maps, Rgb, KRows, KCols)>::random_uniform(
///     (Maps.len(4), Rgb.len(3), KRows.len(3), KCols.len(3)), -1.0, 1.0, 1)?;
/// let conv = Convolution::new().padding(1);
/// let maps: Tensor<f32, (Batch, Rows, Cols, Maps)> = conv.run(&image, &filter)?;
/// assert_eq!(maps.len_of::<Rows>(), 8);
/// // channels last: the same convolution, the same numbers
/// let last = image.axes_with_order::<(Batch, Rows, Cols, Rgb)>().contiguous()?;
/// let again: Tensor<f32, (Batch, Rows, Cols, Maps)> = conv.run(&last, &filter)?;
/// assert_eq!(again.to_vec(), maps.to_vec());
/// // stride 2 along Width alone
/// let strided: Tensor<f32, (Batch, Rows, Cols, Maps)> =
///     Convolution::new().stride_along(axes::spatial::SpatialRole::Width, 2).run(&image, &filter)?;
/// assert_eq!((strided.len_of::<Rows>(), strided.len_of::<Cols>()), (6, 3));
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Convolution {
    stride: PerRole,
    padding: PerRole,
    dilation: PerRole,
}

impl Default for Convolution {
    fn default() -> Self {
        Self::new()
    }
}

/// The plan of one call: where the axes are, and each window.
pub(crate) struct ConvPlan {
    pub(crate) positions: ConvPositions,
    pub(crate) windows: Vec<WindowAxis>,
}

impl Convolution {
    /// Stride 1, no padding, dilation 1.
    pub const fn new() -> Self {
        Convolution {
            stride: [1; 3],
            padding: [0; 3],
            dilation: [1; 3],
        }
    }

    /// The step between windows, along every spatial axis.
    pub const fn stride(mut self, stride: usize) -> Self {
        self.stride = [stride; 3];
        self
    }

    /// Zeros added at both ends of every spatial axis.
    pub const fn padding(mut self, padding: usize) -> Self {
        self.padding = [padding; 3];
        self
    }

    /// The step between a window's elements, along every spatial axis.
    pub const fn dilation(mut self, dilation: usize) -> Self {
        self.dilation = [dilation; 3];
        self
    }

    /// The step between windows along the axis with the role `role`.
    pub const fn stride_along(mut self, role: SpatialRole, stride: usize) -> Self {
        self.stride[role.index()] = stride;
        self
    }

    /// Zeros added at both ends of the axis with the role `role`.
    pub const fn padding_along(mut self, role: SpatialRole, padding: usize) -> Self {
        self.padding[role.index()] = padding;
        self
    }

    /// The step between a window's elements along the axis with the role `role`.
    pub const fn dilation_along(mut self, role: SpatialRole, dilation: usize) -> Self {
        self.dilation[role.index()] = dilation;
        self
    }

    /// The convolution of `input` with `filter`, on the device both are on.
    pub fn run<T: Num, A, F>(
        &self,
        input: &Tensor<T, A>,
        filter: &Tensor<T, F>,
    ) -> Result<Tensor<T, ConvAxes<A, F>>>
    where
        A: ConvolveWith<F>,
        F: AxisSet,
    {
        let plan = self.plan(input, filter)?;
        let (padded, layout) = padded_input_of(input, &plan)?;
        let (storage, layout, _) = forward::<T, A, F>(&plan, &padded, &layout, filter)?;
        Ok(Tensor::from_parts(storage, layout).expect("a fresh result fits its buffer"))
    }

    /// Checks the lengths of `input` and `filter` and plans the call.
    pub(crate) fn plan<T: Num, A, F>(
        &self,
        input: &Tensor<T, A>,
        filter: &Tensor<T, F>,
    ) -> Result<ConvPlan>
    where
        A: ConvolveWith<F>,
        F: AxisSet,
    {
        let positions = A::positions();
        let (names, filter_names) = (A::names(), F::names());
        if F::RANK != 2 + positions.spatial.len() + positions.shared.len() {
            let used: Vec<usize> = [positions.filter_channel, positions.filter_out]
                .into_iter()
                .chain(positions.spatial.iter().map(|s| s.2))
                .chain(positions.shared.iter().map(|s| s.1))
                .collect();
            let others: Vec<&str> = (0..F::RANK)
                .filter(|a| !used.contains(a))
                .map(|a| filter_names[a].as_ref())
                .collect();
            return Err(Error::Unsupported {
                what: format!(
                    "a filter over ({}): a convolution's filter has the input's Channel axis, a \
                     Channelout axis, one kernel axis per spatial role and perhaps batch axes of \
                     the input (groups), and `{}` is none of these",
                    filter_names.join(", "),
                    others.join("`, `")
                ),
            });
        }
        let (lens, filter_lens) = (input.lens(), filter.lens());
        let pairs = [(positions.channel, positions.filter_channel)];
        for &(a, f) in pairs.iter().chain(&positions.shared) {
            if lens[a] != filter_lens[f] {
                return Err(Error::LengthMismatch {
                    axis: names[a].to_string(),
                    left: lens[a],
                    right: filter_lens[f],
                });
            }
        }
        let windows = (positions.spatial.iter())
            .map(|&(role, axis, kernel)| {
                let r = role.index();
                WindowAxis::new(
                    &names[axis],
                    axis,
                    lens[axis],
                    filter_lens[kernel],
                    [self.stride[r], self.padding[r], self.dilation[r]],
                )
            })
            .collect::<Result<_>>()?;
        Ok(ConvPlan { positions, windows })
    }
}

/// The input padded with zeros as `plan` says (itself where nothing is padded).
pub(crate) fn padded_input_of<T: Num, A: AxisSet>(
    input: &Tensor<T, A>,
    plan: &ConvPlan,
) -> Result<(Storage<T>, Layout)> {
    padded_input(input.storage(), input.layout(), &plan.windows, T::zero())
}

/// The input's windows packed for the product (im2col): over the batch axes (those the
/// filter shares first, the others in the input's order), the window positions (spatial roles
/// outermost first), the kernel axes, then the Channel axis — one order whatever the input's, so that channels first or last give the
/// same sums in the same order (channels innermost: a convolution's results, channels last,
/// pack in runs of channels). Kept by the tape for the filter's gradient.
pub(crate) struct Columns<T> {
    storage: Storage<T>,
    layout: Layout,
    /// The input's batch and spatial axes, in the columns' order.
    order: Vec<usize>,
}

/// The names of the columns' axes (for messages): the input's in their order, then the
/// filter's kernel axes.
fn column_names<A: ConvolveWith<F>, F: AxisSet>() -> Vec<Cow<'static, str>> {
    let p = A::positions();
    let axes: Vec<usize> = (0..A::RANK).collect();
    columns_named::<A, F>(&A::names(), &axes, p.channel)
}

/// The names of the result gradient's columns (see [`input_gradient_transposed`]).
fn gradient_column_names<A: ConvolveWith<F>, F: AxisSet>() -> Vec<Cow<'static, str>> {
    let p = A::positions();
    let in_grad = |a: usize| if a > p.channel { a - 1 } else { a };
    let axes: Vec<usize> = (0..A::RANK)
        .map(|a| {
            if a == p.channel {
                A::RANK - 1
            } else {
                in_grad(a)
            }
        })
        .collect();
    columns_named::<A, F>(
        &<ConvAxes<A, F> as crate::list::AxisList>::names(),
        &axes,
        A::RANK - 1,
    )
}

/// The names of the columns of an operand named `names` whose axis `axes[a]` plays the
/// input's axis `a`, its channels at `channel`: in the order [`columns`] packs them.
fn columns_named<A: ConvolveWith<F>, F: AxisSet>(
    names: &[Cow<'static, str>],
    axes: &[usize],
    channel: usize,
) -> Vec<Cow<'static, str>> {
    let (p, filter) = (A::positions(), F::names());
    let spatial: Vec<usize> = p.spatial.iter().map(|s| axes[s.1]).collect();
    let shared: Vec<usize> = p.shared.iter().map(|s| axes[s.0]).collect();
    (shared.iter().copied())
        .chain(
            (0..A::RANK).filter(|&a| a != channel && !spatial.contains(&a) && !shared.contains(&a)),
        )
        .chain(spatial.iter().copied())
        .map(|a| names[a].clone())
        .chain(p.spatial.iter().map(|s| filter[s.2].clone()))
        .chain([names[channel].clone()])
        .collect()
}

/// The padded input's windows as [`Columns`].
fn columns<T: Num>(
    windows: &[WindowAxis],
    channel: usize,
    shared: &[usize],
    rank: usize,
    padded: &Storage<T>,
    layout: &Layout,
) -> Result<Columns<T>> {
    let spatial: Vec<usize> = windows.iter().map(|w| w.axis).collect();
    let order: Vec<usize> = (shared.iter().copied())
        .chain((0..rank).filter(|&a| a != channel && !spatial.contains(&a) && !shared.contains(&a)))
        .chain(spatial.iter().copied())
        .collect();
    let view = window_layout(layout, padded.len(), windows)?;
    let all: Vec<usize> = (order.iter().copied())
        .chain(rank..view.rank())
        .chain([channel])
        .collect();
    let view = view.permuted(&all);
    Ok(Columns {
        storage: packed(padded, &view)?,
        layout: Layout::row_major(view.lens()),
        order,
    })
}

/// The convolution of the padded input (`padded` read through `layout`) with `filter`: the
/// result buffer, its layout in [`ConvAxes`] order, and the input's columns.
pub(crate) fn forward<T: Num, A, F>(
    plan: &ConvPlan,
    padded: &Storage<T>,
    layout: &Layout,
    filter: &Tensor<T, F>,
) -> Result<(Storage<T>, Layout, Columns<T>)>
where
    A: ConvolveWith<F>,
    F: AxisSet,
{
    let p = &plan.positions;
    let rank = A::RANK;
    let shared: Vec<usize> = p.shared.iter().map(|s| s.0).collect();
    let cols = columns(&plan.windows, p.channel, &shared, rank, padded, layout)?;
    let operand = Operand {
        storage: &cols.storage,
        layout: cols.layout,
        names: column_names::<A, F>,
    };
    let roles = columns_with_filter(p, &cols.order, &p.shared, p.filter_channel, p.filter_out);
    let (storage, result) = contract_operands(&operand, &Operand::of(filter), &roles)?;
    // The result is over the columns' kept axes, then Channelout: put in ConvAxes order.
    let in_result = |a: usize| {
        cols.order
            .iter()
            .position(|&o| o == a)
            .expect("a kept axis")
    };
    let order: Vec<usize> = (0..rank)
        .filter(|&a| a != p.channel)
        .map(in_result)
        .chain([rank - 1])
        .collect();
    Ok((storage, result.permuted(&order), cols))
}

/// The gradients of a convolution given the result's gradient `grad`: the input's (summed
/// back from the windows, its padding cut off) and the filter's (from the input's columns),
/// each when `want` asks.
pub(crate) fn backward<T: Num, A, F>(
    plan: &ConvPlan,
    cols: &Columns<T>,
    filter: &Tensor<T, F>,
    grad: &Tensor<T, ConvAxes<A, F>>,
    want: (bool, bool),
) -> Result<DotGrads<T, A, F>>
where
    A: ConvolveWith<F>,
    F: AxisSet,
{
    let p = &plan.positions;
    let (rank, n) = (A::RANK, plan.windows.len());
    // The gradient's axes: the input's but the Channel axis, then Channelout.
    let in_grad = |a: usize| if a > p.channel { a - 1 } else { a };
    let out_axis = rank - 1;
    let shared_in_grad: Vec<(usize, usize)> =
        p.shared.iter().map(|&(a, f)| (in_grad(a), f)).collect();
    // The gradient in the columns' order (packed unless it is already), so that its products
    // run in one order whatever the input's axis order.
    let canonical: Vec<usize> = (cols.order[..rank - 1].iter())
        .map(|&a| in_grad(a))
        .chain([out_axis])
        .collect();
    let packed_grad = packed_in_order(grad.storage(), grad.layout(), &canonical)?;
    let grad_operand = operand_of(grad, &packed_grad);
    let dx = if !want.0 {
        None
    } else if transposable(&plan.windows) {
        let (storage, layout) = input_gradient_transposed::<T, A, F>(plan, grad, filter)?;
        Some(Tensor::from_parts(storage, layout).expect("a fresh result fits its buffer"))
    } else {
        let grad_axes: Vec<usize> = (0..rank - 1).collect();
        let (b, m) = batch_and_kept(&grad_axes, &shared_in_grad);
        let roles = Roles {
            k: vec![(out_axis, p.filter_out)],
            n: (0..F::RANK)
                .filter(|&f| f != p.filter_out && !b.iter().any(|&(_, g)| g == f))
                .collect(),
            b,
            m,
        };
        // The filter with its channels innermost (a small copy, unless it is so already):
        // the product then stores each window's gradient in runs of channels, which the sums
        // back onto the input move whole.
        let filter_order: Vec<usize> = (p.shared.iter().map(|s| s.1))
            .chain([p.filter_out])
            .chain(p.spatial.iter().map(|s| s.2))
            .chain([p.filter_channel])
            .collect();
        let packed_filter = packed_in_order(filter.storage(), filter.layout(), &filter_order)?;
        let filter_operand = operand_of(filter, &packed_filter);
        let (dw, layout) = contract_operands(&grad_operand, &filter_operand, &roles)?;
        // dw's axes: the gradient's but Channelout, then the filter's others in its order;
        // put in the window view's order (the input's axes, then the kernel axes).
        let in_dw = |f: usize| rank - 1 + roles.n.iter().position(|&x| x == f).expect("kept");
        let order: Vec<usize> = (0..rank)
            .map(|a| {
                if a == p.channel {
                    in_dw(p.filter_channel)
                } else {
                    in_grad(a)
                }
            })
            .chain(p.spatial.iter().map(|s| in_dw(s.2)))
            .collect();
        let (summed, summed_layout) = window_sums(&dw, &layout.permuted(&order), &plan.windows)?;
        let mut cut = summed_layout;
        for w in &plan.windows {
            cut = cut.sliced(w.axis, w.padding, w.padding + w.len, 1);
        }
        Some(Tensor::from_parts(summed, cut).expect("a view of the summed gradient"))
    };
    if !want.1 {
        return Ok((dx, None));
    }
    let operand = Operand {
        storage: &cols.storage,
        layout: cols.layout,
        names: column_names::<A, F>,
    };
    // The columns' batch and window positions meet the gradient's: summed, but for the
    // axes the filter shares, which it keeps.
    let (mut k, mut b) = (Vec::new(), Vec::new());
    let mut b_filter = Vec::new();
    for (i, &a) in cols.order.iter().enumerate() {
        match p.shared.iter().find(|s| s.0 == a) {
            Some(&(_, f)) => {
                b.push((i, in_grad(a)));
                b_filter.push(f);
            }
            None => k.push((i, in_grad(a))),
        }
    }
    let roles = Roles {
        k,
        b,
        m: (rank - 1..rank + n).collect(),
        n: vec![out_axis],
    };
    let (df, layout) = contract_operands(&operand, &grad_operand, &roles)?;
    // df's axes: the shared axes, the kernel axes, Channel, then Channelout; put in the
    // filter's order.
    let nb = b_filter.len();
    let order: Vec<usize> = (0..F::RANK)
        .map(|f| {
            if f == p.filter_channel {
                nb + n
            } else if f == p.filter_out {
                nb + n + 1
            } else if let Some(i) = b_filter.iter().position(|&g| g == f) {
                i
            } else {
                nb + (p.spatial.iter())
                    .position(|s| s.2 == f)
                    .expect("a kernel axis")
            }
        })
        .collect();
    Ok((
        dx,
        Some(Tensor::from_parts(df, layout.permuted(&order)).expect("a fresh result fits")),
    ))
}

/// The roles of the product of [`Columns`] (over the axes `order`, then the kernel axes,
/// then the channels) with the filter: the kernel axes and the channels meet the filter's
/// kernel axes and its axis `contracted`; the filter's axis `kept` stays; the axes in
/// `shared` (column axis, filter axis) are batch pairs.
fn columns_with_filter(
    p: &ConvPositions,
    order: &[usize],
    shared: &[(usize, usize)],
    contracted: usize,
    kept: usize,
) -> Roles {
    let (first_kernel, n) = (order.len(), p.spatial.len());
    let (b, m) = batch_and_kept(order, shared);
    Roles {
        k: (p.spatial.iter().enumerate())
            .map(|(i, s)| (first_kernel + i, s.2))
            .chain([(first_kernel + n, contracted)])
            .collect(),
        b,
        m,
        n: vec![kept],
    }
}

/// The roles of a product's left axes, whose first ones are the input's (or the
/// gradient's) axes `axes[i]`: a batch pair with the filter for each axis in `shared`
/// (input axis, filter axis), the others kept.
fn batch_and_kept(axes: &[usize], shared: &[(usize, usize)]) -> (Vec<(usize, usize)>, Vec<usize>) {
    let (mut b, mut m) = (Vec::new(), Vec::new());
    for (i, a) in axes.iter().enumerate() {
        match shared.iter().find(|s| s.0 == *a) {
            Some(&(_, f)) => b.push((i, f)),
            None => m.push(i),
        }
    }
    (b, m)
}

/// Whether a convolution's input gradient is itself a convolution (stride 1 along every
/// axis, and no more padding than a window spans): see [`input_gradient_transposed`].
fn transposable(windows: &[WindowAxis]) -> bool {
    (windows.iter()).all(|w| w.stride == 1 && w.padding <= w.dilation * (w.kernel - 1))
}

/// The input's gradient as the convolution of the result's gradient `grad` with the filter
/// turned around along its kernel axes, its Channelout axis contracted (the transposed
/// convolution): with stride 1, input position `i` gets `grad[i + padding − r·dilation]` for
/// every kernel offset `r`, which is the window at `i` of the gradient padded by
/// `dilation·(kernel − 1) − padding`, read from its last offset. One packing and one product,
/// as the forward pass (the gradient's windows packed in the columns' order, so any input
/// order gives the same bits); no sums over overlapping windows. The result's buffer and its
/// layout over the input's axes.
fn input_gradient_transposed<T: Num, A, F>(
    plan: &ConvPlan,
    grad: &Tensor<T, ConvAxes<A, F>>,
    filter: &Tensor<T, F>,
) -> Result<(Storage<T>, Layout)>
where
    A: ConvolveWith<F>,
    F: AxisSet,
{
    let p = &plan.positions;
    let rank = A::RANK;
    let in_grad = |a: usize| if a > p.channel { a - 1 } else { a };
    let names = A::names();
    let windows = (plan.windows.iter())
        .map(|w| {
            WindowAxis::new(
                &names[w.axis],
                in_grad(w.axis),
                w.out,
                w.kernel,
                [1, w.dilation * (w.kernel - 1) - w.padding, w.dilation],
            )
        })
        .collect::<Result<Vec<_>>>()?;
    debug_assert!((windows.iter().zip(&plan.windows)).all(|(t, w)| t.out == w.len));
    let (padded, layout) = padded_input(grad.storage(), grad.layout(), &windows, T::zero())?;
    let shared: Vec<(usize, usize)> = p.shared.iter().map(|&(a, f)| (in_grad(a), f)).collect();
    let outer: Vec<usize> = shared.iter().map(|s| s.0).collect();
    let cols = columns(&windows, rank - 1, &outer, rank, &padded, &layout)?;
    let mut turned = *filter.layout();
    for &(_, _, kernel) in &p.spatial {
        turned = turned.sliced(kernel, 0, turned.lens()[kernel], -1);
    }
    let filter = Operand {
        storage: filter.storage(),
        layout: turned,
        names: F::names,
    };
    let columns = Operand {
        storage: &cols.storage,
        layout: cols.layout,
        names: gradient_column_names::<A, F>,
    };
    let roles = columns_with_filter(p, &cols.order, &shared, p.filter_out, p.filter_channel);
    let (storage, result) = contract_operands(&columns, &filter, &roles)?;
    // The result is over the columns' kept axes (the gradient's), then Channel: put in the
    // input's order.
    let order: Vec<usize> = (0..rank)
        .map(|a| {
            if a == p.channel {
                rank - 1
            } else {
                let at = in_grad(a);
                (cols.order.iter())
                    .position(|&o| o == at)
                    .expect("a kept axis")
            }
        })
        .collect();
    Ok((storage, result.permuted(&order)))
}

/// `tensor` as a product's operand: its copy from [`packed_in_order`] where there is one.
fn operand_of<'a, T: Num, X: AxisSet>(
    tensor: &'a Tensor<T, X>,
    packed: &'a Option<(Storage<T>, Layout)>,
) -> Operand<'a, T> {
    match packed {
        None => Operand::of(tensor),
        Some((storage, layout)) => Operand {
            storage,
            layout: *layout,
            names: X::names,
        },
    }
}

/// `layout`'s elements packed so that its axes taken in `order` are row-major (the same
/// axes, a new buffer), or `None` where they already are.
fn packed_in_order<T: Num>(
    storage: &Storage<T>,
    layout: &Layout,
    order: &[usize],
) -> Result<Option<(Storage<T>, Layout)>> {
    let in_order = layout.permuted(order);
    if in_order.is_dense() {
        return Ok(None);
    }
    let back: Vec<usize> = (0..order.len())
        .map(|a| order.iter().position(|&o| o == a).expect("every axis"))
        .collect();
    Ok(Some((
        packed(storage, &in_order)?,
        Layout::row_major(in_order.lens()).permuted(&back),
    )))
}
