//! Window views, and their adjoint: an input axis read as (output position, kernel offset)
//! with strides `stride·s` and `dilation·s` (no copy), and the sum of a gradient over such a
//! view back onto the input's positions — the pieces convolution and pooling are made of, on
//! every device, from the jobs every backend runs.

use crate::dispatch::{Input, Output, copied_into, filled, packed, run_output};
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::list::MAX_RANK;
use crate::num::Num;
use crate::storage::Storage;

/// One axis a window moves along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowAxis {
    /// Its position among the input's axes.
    pub(crate) axis: usize,
    /// The input's length along it, before padding.
    pub(crate) len: usize,
    /// The window's length (kernel offsets).
    pub(crate) kernel: usize,
    pub(crate) stride: usize,
    /// Positions added before and after the input (zeros for a convolution).
    pub(crate) padding: usize,
    pub(crate) dilation: usize,
    /// The number of window positions: `(len + 2·padding − dilation·(kernel − 1) − 1) / stride + 1`.
    pub(crate) out: usize,
}

impl WindowAxis {
    /// The window along an axis named `name` of length `len`; an error naming the axis and
    /// the lengths where the window is empty, longer than the padded axis, or a stride or
    /// dilation is 0.
    pub(crate) fn new(
        name: &str,
        axis: usize,
        len: usize,
        kernel: usize,
        [stride, padding, dilation]: [usize; 3],
    ) -> Result<WindowAxis> {
        let span = dilation
            .checked_mul(kernel.saturating_sub(1))
            .and_then(|s| s.checked_add(1));
        let padded = padding.checked_mul(2).and_then(|p| p.checked_add(len));
        let fits = matches!((span, padded), (Some(s), Some(p)) if s <= p);
        if kernel == 0 || stride == 0 || dilation == 0 || !fits {
            return Err(Error::WindowDoesNotFit {
                axis: name.to_string(),
                len,
                kernel,
                stride,
                padding,
                dilation,
            });
        }
        let (span, padded) = (span.unwrap_or(0), padded.unwrap_or(0));
        Ok(WindowAxis {
            axis,
            len,
            kernel,
            stride,
            padding,
            dilation,
            out: (padded - span) / stride + 1,
        })
    }

    fn padded_len(&self) -> usize {
        self.len + 2 * self.padding
    }
}

/// The input (`storage` read through `layout`) with each window axis padded by `fill`,
/// written out row-major; the input itself (no copy) where nothing is padded and its layout
/// has no padding of its own.
pub(crate) fn padded_input<T: Num>(
    storage: &Storage<T>,
    layout: &Layout,
    windows: &[WindowAxis],
    fill: T,
) -> Result<(Storage<T>, Layout)> {
    if windows.iter().all(|w| w.padding == 0) {
        if layout.is_padded() {
            let lens = layout.lens();
            return Ok((packed(storage, layout)?, Layout::row_major(lens)));
        }
        return Ok((storage.clone(), *layout));
    }
    let mut lens = layout.lens().to_vec();
    for w in windows {
        lens[w.axis] = w.padded_len();
    }
    let whole = Layout::row_major(&lens);
    let count = whole.element_count().ok_or_else(|| Error::SizeOverflow {
        lengths: format!("{lens:?}"),
    })?;
    let mut region = whole;
    for w in windows {
        region = region.sliced(w.axis, w.padding, w.padding + w.len, 1);
    }
    let source = if layout.is_padded() {
        (packed(storage, layout)?, Layout::row_major(layout.lens()))
    } else {
        (storage.clone(), *layout)
    };
    let buffer = filled(source.0.device(), count, fill)?;
    let (buffer, _) = copied_into(&source.0, &source.1, buffer, region)?;
    Ok((buffer, whole))
}

/// The window view of an unpadded `layout` over a buffer of `buffer_len` elements: each
/// window axis becomes the window positions (stride `stride·s`), and a kernel axis (stride
/// `dilation·s`) is appended per window, in the order of `windows`.
pub(crate) fn window_layout(
    layout: &Layout,
    buffer_len: usize,
    windows: &[WindowAxis],
) -> Result<Layout> {
    let rank = layout.rank() + windows.len();
    if rank > MAX_RANK {
        return Err(Error::Unsupported {
            what: format!(
                "a window view of {rank} axes (the input's {} and one per window axis): at most \
                 {MAX_RANK}",
                layout.rank()
            ),
        });
    }
    let mut lens = layout.lens().to_vec();
    let mut strides = layout.strides().to_vec();
    for w in windows {
        let s = strides[w.axis];
        lens[w.axis] = w.out;
        strides[w.axis] = s * w.stride as isize;
        lens.push(w.kernel);
        strides.push(s * w.dilation as isize);
    }
    Ok(Layout::new(&lens, &strides, layout.offset(), buffer_len)
        .expect("a window view reaches only the input's elements"))
}

/// The adjoint of a window view: `grad` (over the window view's axes: the input's, each
/// window axis at its window positions, then the kernel axes in the order of `windows`)
/// summed back onto the padded input's positions: element `i` of a window axis gets every
/// `grad[p, r]` with `p·stride + r·dilation = i`. Stored in the order of `layout`'s strides
/// (the result's layout says how).
///
/// One axis at a time, last window first; along one axis, positions `i ≡ m (mod stride)` are
/// one job each (a sum over the kernel offsets that reach them, read through a strided view
/// of the gradient padded along the axis), so a stride-1 axis is one job.
pub(crate) fn window_sums<T: Num>(
    grad: &Storage<T>,
    layout: &Layout,
    windows: &[WindowAxis],
) -> Result<(Storage<T>, Layout)> {
    let mut current = (grad.clone(), *layout);
    for w in windows.iter().rev() {
        current = axis_sums(&current.0, &current.1, w)?;
    }
    Ok(current)
}

/// One phase of [`axis_sums`]: the positions `first + a·stride` of the input axis, each the
/// sum over `count` kernel offsets `r0 + j·(stride/g)`, read at window position
/// `a − shift − j·(dilation/g)` (`g` the gcd of stride and dilation).
struct Phase {
    first: usize,
    positions: usize,
    r0: usize,
    shift: usize,
    count: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The phases of window axis `w`: one per residue of the input position modulo the stride.
fn phases(w: &WindowAxis) -> Vec<Phase> {
    let (s, d) = (w.stride, w.dilation);
    let s_step = s / gcd(s, d);
    (0..s.min(w.padded_len()))
        .map(|m| {
            let positions = (w.padded_len() - m).div_ceil(s);
            // The first offset r with r·d ≡ m (mod s), if any reaches this phase.
            match (0..s_step).find(|&r| (r * d) % s == m) {
                Some(r0) if r0 < w.kernel => Phase {
                    first: m,
                    positions,
                    r0,
                    shift: (r0 * d - m) / s,
                    count: (w.kernel - 1 - r0) / s_step + 1,
                },
                _ => Phase {
                    first: m,
                    positions,
                    r0: 0,
                    shift: 0,
                    count: 0,
                },
            }
        })
        .collect()
}

/// The last kernel axis of `layout` (window `w`) summed back onto the input axis `w.axis`.
fn axis_sums<T: Num>(
    grad: &Storage<T>,
    layout: &Layout,
    w: &WindowAxis,
) -> Result<(Storage<T>, Layout)> {
    let rank = layout.rank() - 1;
    let (s, d) = (w.stride, w.dilation);
    let g = gcd(s, d);
    let (s_step, d_step) = (s / g, d / g);
    let phases = phases(w);
    // Window positions each phase reads outside 0..out: the gradient padded with zeros there.
    let (mut before, mut after) = (0usize, 0usize);
    for p in phases.iter().filter(|p| p.count > 0) {
        before = before.max(p.shift + (p.count - 1) * d_step);
        after = after.max((p.positions - 1).saturating_sub(p.shift + (w.out - 1)));
    }
    let mut lens = layout.lens().to_vec();
    lens[w.axis] = w.out + before + after;
    // Stored in the gradient's own order (its axes by decreasing stride), so that the copy
    // moves whole rows; each position's sum is written out leaf by leaf, so the order of the
    // storage does not change the sums.
    let mut order: Vec<usize> = (0..=rank).collect();
    order.sort_by_key(|&a| std::cmp::Reverse(layout.strides()[a].unsigned_abs()));
    let stored: Vec<usize> = order.iter().map(|&a| lens[a]).collect();
    let back: Vec<usize> = (0..=rank)
        .map(|a| order.iter().position(|&o| o == a).expect("every axis"))
        .collect();
    let padded_layout = Layout::row_major(&stored).permuted(&back);
    let padded = filled(
        grad.device(),
        padded_layout.element_count().unwrap_or(0),
        T::zero(),
    )?;
    let region = padded_layout.sliced(w.axis, before, before + w.out, 1);
    let (padded, _) = copied_into(grad, layout, padded, region)?;
    let (gs, ks) = (
        padded_layout.strides()[w.axis],
        padded_layout.strides()[rank],
    );

    let mut out_lens = layout.lens()[..rank].to_vec();
    out_lens[w.axis] = w.padded_len();
    // The sums are stored in the gradient's order too (without the kernel axis), so that the
    // next axis's copy and the caller read whole rows.
    let out_order: Vec<usize> = order.iter().copied().filter(|&a| a != rank).collect();
    let out_stored: Vec<usize> = out_order.iter().map(|&a| out_lens[a]).collect();
    let out_back: Vec<usize> = (0..rank)
        .map(|a| out_order.iter().position(|&o| o == a).expect("every axis"))
        .collect();
    let out_layout = Layout::row_major(&out_stored).permuted(&out_back);
    let out_count = out_layout.element_count().unwrap_or(0);
    // A stride-1 axis is one phase that writes every position: a fresh result.
    let fresh = phases.len() == 1 && phases[0].count > 0;
    let mut out = if fresh {
        None
    } else {
        Some(filled(grad.device(), out_count, T::zero())?)
    };
    for p in phases.iter().filter(|p| p.count > 0) {
        // Iteration axes: the result's, the input axis at this phase's positions; a leaf per
        // kernel offset, added in order (so every position sums in one order on every device).
        let mut it_lens = out_lens.clone();
        it_lens[w.axis] = p.positions;
        let strides = &padded_layout.strides()[..rank];
        let step = s_step as isize * ks - d_step as isize * gs;
        let first = (before - p.shift) as isize * gs + p.r0 as isize * ks;
        let reads = (0..p.count)
            .map(|j| {
                Layout::new(
                    &it_lens,
                    strides,
                    (first + j as isize * step) as usize,
                    padded.len(),
                )
                .expect("a phase reads inside the padded gradient")
            })
            .collect::<Vec<_>>();
        let axes: Vec<usize> = (0..rank).collect();
        let inputs = (reads.iter())
            .map(|read| Input::new(&padded, read, &axes, rank))
            .collect::<Result<Vec<_>>>()?;
        let ir = fold_leaves(p.count, BinaryOp::Add);
        let root = ir.nodes.len() - 1;
        let output = match out.take() {
            // Fresh: stored in the gradient's order (`out_order`), seen in the axes' order.
            None => {
                let (storage, _) = run_output(
                    &ir,
                    &it_lens,
                    &inputs,
                    Output::new(root, out_order, ReduceOp::Sum),
                )?;
                return Ok((storage, out_layout));
            }
            Some(buffer) => {
                let place = out_layout.sliced(
                    w.axis,
                    p.first,
                    p.first + (p.positions - 1) * s + 1,
                    s as isize,
                );
                Output::new(root, axes.clone(), ReduceOp::Sum).written_into(buffer, place)
            }
        };
        out = Some(run_output(&ir, &it_lens, &inputs, output)?.0);
    }
    Ok((out.expect("a buffer of zeros at least"), out_layout))
}

/// The IR combining leaves `0..count` by `op` in order, `((l0 ∘ l1) ∘ l2) ∘ …`; the root is
/// the last node.
pub(crate) fn fold_leaves(count: usize, op: BinaryOp) -> Ir {
    let mut ir = Ir::default();
    let mut acc = ir.leaf();
    for _ in 1..count {
        let next = ir.leaf();
        acc = ir.push(IrNode::Binary(op, acc, next));
    }
    ir
}

/// The window view `view` (the input's axes, then `kernels` kernel axes) as one read per
/// kernel offset (outer kernel axis first), each over the input's axes: how a pooling combines
/// a window's elements in one order on every device.
pub(crate) fn offset_reads(view: &Layout, kernels: usize, buffer_len: usize) -> Vec<Layout> {
    let rank = view.rank() - kernels;
    let (lens, strides) = (&view.lens()[..rank], &view.strides()[..rank]);
    let (kernel_lens, kernel_strides) = (&view.lens()[rank..], &view.strides()[rank..]);
    let count: usize = kernel_lens.iter().product();
    (0..count)
        .map(|mut k| {
            let mut offset = view.offset() as isize;
            for (&len, &stride) in kernel_lens.iter().zip(kernel_strides).rev() {
                offset += (k % len) as isize * stride;
                k /= len;
            }
            Layout::new(lens, strides, offset as usize, buffer_len)
                .expect("each offset of a window view reads inside it")
        })
        .collect()
}
