//! Views of variables — another axis order, a renamed axis, a slice, an index, a broadcast,
//! padding, flatten and unflatten — each with its backward (the gradient reordered or renamed
//! back, written over zeros, summed over the new axes, sliced back, split or merged back).

use std::any::TypeId;
use std::cmp::Ordering;
use std::ops::RangeBounds;

use super::tape::Var;
use crate::axis::{At, Axis};
use crate::dispatch::{Input, Output, copied_into, filled, run_output, unpadded};
use crate::error::Result;
use crate::ir::{Ir, ReduceOp};
use crate::layout::Layout;
use crate::list::{AxisList, Flat, SubsetOf, find_positions};
use crate::list::{AxisSet, ConcatWith, Difference, DifferenceWith, HasAxis, SameAxes, SameCount};
use crate::named::NamedLengths;
use crate::num::Float;
use crate::tensor::{Flattened, Renamed, Tensor, Unflattened, resolve_range};

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The variable with its axes in the order `O` (the same axes): no copy; the gradient is
    /// reordered back.
    pub fn axes_with_order<O: AxisSet + SameAxes<A>>(&self) -> Var<T, O>
    where
        A: SameAxes<O>,
    {
        let value = self.value().axes_with_order::<O>();
        self.record_unary(value, |dz| Ok(dz.axes_with_order::<A>()))
    }

    /// The variable with the axis `X` called `Y` (as [`Tensor::rename`](crate::Tensor::rename)):
    /// no copy; the gradient is renamed back.
    pub fn rename<X: Axis, Y: Axis>(&self) -> Result<Var<T, Renamed<A, X, Y>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
        Difference<A, (X,)>: ConcatWith<(Y,)>,
    {
        let value = self.value().rename::<X, Y>()?;
        let axis = <A as HasAxis<X>>::POS;
        // Where each of `A`'s axes went: `X` last, the others closing up.
        let back: Vec<usize> = (0..A::RANK)
            .map(|a| match a.cmp(&axis) {
                Ordering::Less => a,
                Ordering::Equal => A::RANK - 1,
                Ordering::Greater => a - 1,
            })
            .collect();
        Ok(self.record_unary(value, move |dz| {
            let layout = dz.layout().permuted(&back);
            Ok(Tensor::from_parts(dz.storage().clone(), layout)
                .expect("a reordered view fits its buffer"))
        }))
    }

    /// The same elements with the axes renamed to `B`, position by position (as
    /// [`Tensor::cast_axes`](crate::Tensor::cast_axes)): no copy; the gradient is cast back.
    pub fn cast_axes<B>(&self) -> Result<Var<T, B>>
    where
        A: SameCount<B>,
        B: AxisSet + SameCount<A>,
    {
        let value = self.value().cast_axes::<B>()?;
        Ok(self.record_unary(value, |dz| dz.cast_axes::<A>()))
    }

    /// The positions `range` of axis `X`, every `step`-th (as
    /// [`Tensor::slice`](crate::Tensor::slice)); the gradient is zero outside the slice.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// #[derive(Axis)] struct Time;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (Time,)>::from_vec(Time.len(5), vec![1., 2., 3., 4., 5.])?);
    /// let odd = x.slice::<Time>(.., -2)?;
    /// assert_eq!(odd.value().to_vec(), [5., 3., 1.]);
    /// let dx: Tensor<f64, (Time,)> = (odd.expr() * 10.0).sum::<(Time,)>()?.backward()?.get(&x)?;
    /// assert_eq!(dx.to_vec(), [10., 0., 10., 0., 10.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn slice<X: Axis>(&self, range: impl RangeBounds<usize>, step: isize) -> Result<Var<T, A>>
    where
        A: HasAxis<X>,
    {
        let axis = <A as HasAxis<X>>::POS;
        let (start, end) = resolve_range::<X>(&range, self.value().lens()[axis])?;
        let value = self.value().slice::<X>(start..end, step)?;
        self.spread_back(value, move |l| l.sliced(axis, start, end, step))
    }

    /// The variable at one position of axis `X`, without that axis (as
    /// [`Tensor::index`](crate::Tensor::index)); the gradient is zero at the other positions.
    pub fn index<X: Axis>(&self, at: At<X>) -> Result<Var<T, Difference<A, (X,)>>>
    where
        A: HasAxis<X> + DifferenceWith<(X,)>,
    {
        let (axis, index) = (<A as HasAxis<X>>::POS, at.get());
        let value = self.value().index::<X>(at)?;
        self.spread_back(value, move |l| {
            l.indexed(axis, index)
                .expect("a row-major layout has no padding")
        })
    }

    /// Records `value`, a view of this variable that reaches each element at most once: its
    /// gradient is the upstream gradient written over `region` (the view's layout, applied to
    /// a row-major layout of this variable's lengths) of a buffer of zeros.
    fn spread_back<O: AxisSet>(
        &self,
        value: Tensor<T, O>,
        region: impl Fn(Layout) -> Layout + 'static,
    ) -> Result<Var<T, O>> {
        let lens = self.value().lens().to_vec();
        Ok(self.record_unary(value, move |dz| {
            let dz = unpadded(&dz)?;
            let count = lens.iter().product();
            let zeros = filled(dz.device(), count, T::zero())?;
            let place = region(Layout::row_major(&lens));
            let (dx, _) = copied_into(dz.storage(), dz.layout(), zeros, place)?;
            Ok(Tensor::from_parts(dx, Layout::row_major(&lens))
                .expect("a buffer of the variable's element count"))
        }))
    }

    /// This variable seen with the axes `O`, a superset of `A` (as
    /// [`Tensor::broadcast`](crate::Tensor::broadcast)); the gradient is summed over the new
    /// axes.
    pub fn broadcast<O>(
        &self,
        new_lengths: impl NamedLengths<Axes: SameAxes<Difference<O, A>>>,
    ) -> Result<Var<T, O>>
    where
        O: AxisSet + DifferenceWith<A>,
        A: SubsetOf<O>,
    {
        let value = self.value().broadcast::<O>(new_lengths)?;
        Ok(self.record_unary(value, move |dz| {
            let dz = unpadded(&dz)?;
            let mut ir = Ir::default();
            let leaf = ir.leaf();
            let all: Vec<usize> = (0..O::RANK).collect();
            let kept = find_positions::<A, O>()[..A::RANK].to_vec();
            let input = Input::new(dz.storage(), dz.layout(), &all, O::RANK)?;
            let output = Output::new(leaf, kept, ReduceOp::Sum);
            let (storage, layout) = run_output(&ir, dz.lens(), &[input], output)?;
            Ok(Tensor::from_parts(storage, layout).expect("a job's result fits its layout"))
        }))
    }

    /// The axes `L` merged into one axis `Flat<L>` (as
    /// [`Tensor::flatten`](crate::Tensor::flatten)); the gradient is split back.
    pub fn flatten<L>(&self) -> Result<Var<T, Flattened<A, L>>>
    where
        L: AxisSet + SubsetOf<A>,
        A: DifferenceWith<L>,
        Difference<A, L>: ConcatWith<(Flat<L>,)>,
        Flat<L>: Axis,
    {
        let value = self.value().flatten::<L>()?;
        let parts: Vec<usize> = (find_positions::<L, A>()[..L::RANK].iter())
            .map(|&a| self.value().lens()[a])
            .collect();
        Ok(self.record_unary(value, move |dz| {
            // Written out row-major, the flat axis (last) splits into L's axes.
            let dz = dz.contiguous()?;
            let split = dz.layout().split(dz.lens().len() - 1, &parts);
            let order: Vec<TypeId> = (<Difference<A, L>>::IDS.iter())
                .chain(L::IDS)
                .copied()
                .collect();
            Ok(reordered::<T, A>(&dz, split, &order))
        }))
    }

    /// The axis `Flat<L>` split back into the axes `L` (as
    /// [`Tensor::unflatten`](crate::Tensor::unflatten)); the gradient is merged back.
    pub fn unflatten<L>(&self) -> Result<Var<T, Unflattened<A, L>>>
    where
        L: AxisSet,
        Flat<L>: Axis,
        A: HasAxis<Flat<L>> + DifferenceWith<(Flat<L>,)>,
        Difference<A, (Flat<L>,)>: ConcatWith<L>,
    {
        let value = self.value().unflatten::<L>()?;
        Ok(self.record_unary(value, move |dz| {
            // Written out row-major, L's axes (last) merge into one.
            let dz = dz.contiguous()?;
            let rank = dz.lens().len();
            let merged = (dz
                .layout()
                .merged(&(rank - L::RANK..rank).collect::<Vec<_>>()))
            .expect("a row-major layout merges its trailing axes");
            let order: Vec<TypeId> = (<Difference<A, (Flat<L>,)>>::IDS.iter())
                .chain([&TypeId::of::<Flat<L>>()])
                .copied()
                .collect();
            Ok(reordered::<T, A>(&dz, merged, &order))
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
        let value = self.value().pad::<X>(before, after)?.contiguous()?;
        Ok(self.record_unary(value, move |dz| dz.slice::<X>(before..before + len, 1)))
    }
}

/// `from`'s buffer seen through `layout`, whose axes are `order` (ids), reordered into `A`'s.
fn reordered<T: Float, A: AxisSet>(
    from: &Tensor<T, impl AxisSet>,
    layout: Layout,
    order: &[TypeId],
) -> Tensor<T, A> {
    let positions: Vec<usize> = (A::IDS.iter())
        .map(|id| (order.iter()).position(|o| o == id).expect("the same axes"))
        .collect();
    Tensor::from_parts(from.storage().clone(), layout.permuted(&positions))
        .expect("a view of the same buffer")
}
