//! Convolution and pooling on the tape: [`Convolution::run_var`] and [`Pool::run_var`].

use super::{IntoVar, Var};
use crate::error::{Error, Result};
use crate::list::AxisSet;
use crate::num::Float;
use crate::spatial::{ConvAxes, Convolution, ConvolveWith, Pool, SpatialAxes};
use crate::tensor::Tensor;

impl Convolution {
    /// [`Convolution::run`] on the tape: the input's gradient sums the windows' gradients
    /// back onto their positions, the filter's contracts the windows with the result's
    /// gradient.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// use axes::spatial::Convolution;
    /// #[derive(Axis)] #[axis(role = Channel)] struct In;
    /// #[derive(Axis)] #[axis(role = Width)] struct Time;
    /// #[derive(Axis)] #[axis(role = Channelout)] struct Out;
    /// #[derive(Axis)] #[axis(role = Width)] struct Tap;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (In, Time)>::from_vec((In.len(1), Time.len(4)), vec![1., 2., 3., 4.])?);
    /// let w = tape.var(Tensor::<f64, (Out, In, Tap)>::from_vec((Out.len(1), In.len(1), Tap.len(2)), vec![1., -1.])?);
    /// let y = Convolution::new().run_var(&x, &w)?; // differences: x[t] − x[t+1]
    /// assert_eq!(y.value().to_vec(), [-1., -1., -1.]);
    /// let grads = y.sum::<(Time, Out)>()?.backward()?;
    /// assert_eq!(grads.get(&x)?.to_vec(), [1., 0., 0., -1.]);
    /// assert_eq!(grads.get(&w)?.to_vec(), [6., 9.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn run_var<T, A, F, X, W>(&self, input: X, filter: W) -> Result<Var<T, ConvAxes<A, F>>>
    where
        T: Float,
        A: ConvolveWith<F>,
        F: AxisSet,
        X: IntoVar<Elem = T, Axes = A>,
        W: IntoVar<Elem = T, Axes = F>,
    {
        let (x, f) = (input.into_var()?, filter.into_var()?);
        if !x.tape().same_as(f.tape()) {
            return Err(Error::Unsupported {
                what: "combining variables of different tapes".into(),
            });
        }
        let plan = self.plan(x.value(), f.value())?;
        let (padded, layout) = crate::spatial::padded_input_of(x.value(), &plan)?;
        let (storage, out_layout, columns) =
            crate::spatial::conv_forward::<T, A, F>(&plan, &padded, &layout, f.value())?;
        drop(padded);
        let out: Tensor<T, ConvAxes<A, F>> =
            Tensor::from_parts(storage, out_layout).expect("a fresh result fits its buffer");
        let needs = (x.needs_grad(), f.needs_grad());
        let ids = (x.id(), f.id());
        let filter = f.value().clone();
        Ok(x.tape().record(out, needs.0 || needs.1, move |grads, id| {
            let Some(grad) = grads.tensor::<ConvAxes<A, F>>(id) else {
                return Ok(());
            };
            let (dx, df) =
                crate::spatial::conv_backward::<T, A, F>(&plan, &columns, &filter, &grad, needs)?;
            if let Some(dx) = dx {
                grads.accumulate(ids.0, dx)?;
            }
            if let Some(df) = df {
                grads.accumulate(ids.1, df)?;
            }
            Ok(())
        }))
    }
}

impl Pool {
    /// [`Pool::run`] on the tape.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// use axes::spatial::Pool;
    /// #[derive(Axis)] #[axis(role = Width)] struct Time;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (Time,)>::from_vec(Time.len(4), vec![1., 3., 3., 2.])?);
    /// let y = Pool::max(2).stride(1).run_var(&x)?;
    /// assert_eq!(y.value().to_vec(), [3., 3., 3.]);
    /// // each window's gradient goes to its first largest element
    /// assert_eq!(y.sum::<(Time,)>()?.backward()?.get(&x)?.to_vec(), [0., 2., 1., 0.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn run_var<T, A, X>(&self, input: X) -> Result<Var<T, A>>
    where
        T: Float,
        A: SpatialAxes,
        X: IntoVar<Elem = T, Axes = A>,
    {
        let x = input.into_var()?;
        let plan = self.plan(x.value())?;
        let (padded, layout) = self.padded(x.value(), &plan)?;
        let ((storage, out_layout), first) = self.forward(&plan, &padded, &layout, true)?;
        let out: Tensor<T, A> =
            Tensor::from_parts(storage, out_layout).expect("a fresh result fits its buffer");
        let (pool, padded_lens) = (*self, layout.lens().to_vec());
        Ok(x.record_unary(out, move |grad| {
            pool.backward(&plan, &padded_lens, first.as_ref(), &grad)
        }))
    }
}
