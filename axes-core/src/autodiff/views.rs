//! Views of variables — another axis order, a renamed axis, a slice, padding — each with its
//! backward (the gradient reordered or renamed back, padded back, or sliced back).

use std::cmp::Ordering;
use std::ops::RangeBounds;

use super::tape::Var;
use crate::axis::Axis;
use crate::error::{Error, Result};
use crate::list::{AxisSet, ConcatWith, Difference, DifferenceWith, HasAxis, SameAxes};
use crate::num::Float;
use crate::tensor::{Renamed, Tensor, resolve_range};

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The variable with its axes in the order `O` (the same axes): no copy; the gradient is
    /// reordered back.
    pub fn axes_with_order<O: AxisSet + SameAxes<A>>(&self) -> Var<T, O>
    where
        A: SameAxes<O>,
    {
        let value = self.value().axes_with_order::<O>();
        let id = self.id();
        self.tape()
            .record(value, self.needs_grad(), move |grads, at| {
                let Some(dz) = grads.tensor::<O>(at) else {
                    return Ok(());
                };
                grads.accumulate(id, dz.axes_with_order::<A>())
            })
    }

    /// The variable with the axis `X` called `Y` (as [`Tensor::rename`](crate::Tensor::rename)):
    /// no copy; the gradient is renamed back.
    pub fn rename<X: Axis, Y: Axis>(&self) -> Result<Var<T, Renamed<A, X, Y>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: ConcatWith<(Y,)>,
    {
        let value = self.value().rename::<X, Y>()?;
        let (id, axis) = (self.id(), <A as HasAxis<X>>::POS);
        // Where each of `A`'s axes went: `X` last, the others closing up.
        let back: Vec<usize> = (0..A::RANK)
            .map(|a| match a.cmp(&axis) {
                Ordering::Less => a,
                Ordering::Equal => A::RANK - 1,
                Ordering::Greater => a - 1,
            })
            .collect();
        Ok(self
            .tape()
            .record(value, self.needs_grad(), move |grads, at| {
                let Some(dz) = grads.tensor::<Renamed<A, X, Y>>(at) else {
                    return Ok(());
                };
                let layout = dz.layout().permuted(&back);
                let dx = Tensor::<T, A>::from_parts(dz.storage().clone(), layout)
                    .expect("a reordered view fits its buffer");
                grads.accumulate(id, dx)
            }))
    }

    /// The positions `range` of axis `X` (as [`Tensor::slice`](crate::Tensor::slice)), forwards
    /// (`step` 1) or backwards (`step` -1); the gradient is zero outside the slice. Other steps
    /// are an error here.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// #[derive(Axis)] struct Time;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (Time,)>::from_vec(Time.len(4), vec![1., 2., 3., 4.])?);
    /// let tail = x.slice::<Time>(1..3, -1)?;
    /// assert_eq!(tail.value().to_vec(), [3., 2.]);
    /// let dx: Tensor<f64, (Time,)> = (tail.expr() * 10.0).sum::<(Time,)>()?.backward()?.get(&x)?;
    /// assert_eq!(dx.to_vec(), [0., 10., 10., 0.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn slice<X: Axis>(&self, range: impl RangeBounds<usize>, step: isize) -> Result<Var<T, A>>
    where
        A: HasAxis<X>,
    {
        if step.abs() != 1 {
            return Err(Error::Unsupported {
                what: format!(
                    "a slice of a variable along `{}` with step {step}: only steps 1 and -1 have a gradient",
                    X::name()
                ),
            });
        }
        let len = self.value().lens()[<A as HasAxis<X>>::POS];
        let (start, end) = resolve_range::<X>(&range, len)?;
        let value = self.value().slice::<X>(start..end, step)?;
        let id = self.id();
        Ok(self
            .tape()
            .record(value, self.needs_grad(), move |grads, at| {
                let Some(dz) = grads.tensor::<A>(at) else {
                    return Ok(());
                };
                let forwards = if step < 0 { dz.slice::<X>(.., -1)? } else { dz };
                grads.accumulate(id, forwards.pad::<X>(start, len - end)?.try_contiguous()?)
            }))
    }

    /// `before` zeros before and `after` zeros after axis `X` (as
    /// [`Tensor::pad`](crate::Tensor::pad), written out); the gradient is the padded
    /// gradient's middle.
    pub fn pad<X: Axis>(&self, before: usize, after: usize) -> Result<Var<T, A>>
    where
        A: HasAxis<X>,
    {
        let len = self.value().lens()[<A as HasAxis<X>>::POS];
        let value = self.value().pad::<X>(before, after)?.try_contiguous()?;
        let id = self.id();
        Ok(self
            .tape()
            .record(value, self.needs_grad(), move |grads, at| {
                let Some(dz) = grads.tensor::<A>(at) else {
                    return Ok(());
                };
                grads.accumulate(id, dz.slice::<X>(before..before + len, 1)?)
            }))
    }
}
