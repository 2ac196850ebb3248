//! Joining variables along an axis, and splitting one into pieces.

use super::tape::Var;
use crate::axis::Axis;
use crate::error::{Error, Result};
use crate::list::{AxisSet, HasAxis};
use crate::num::Float;
use crate::tensor::Tensor;

impl<T: Float, A: AxisSet> Var<T, A> {
    /// The variables joined end to end along axis `X` (as
    /// [`Tensor::concat`](crate::Tensor::concat)): each gets its own stretch of the gradient.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::{Tape, Var};
    /// #[derive(Axis)] struct Time;
    /// let tape = Tape::<f64>::new();
    /// let a = tape.var(Tensor::<f64, (Time,)>::from_vec(Time.len(2), vec![1., 2.])?);
    /// let b = tape.var(Tensor::<f64, (Time,)>::from_vec(Time.len(1), vec![3.])?);
    /// let ab = Var::concat::<Time>(&[&a, &b])?;
    /// let grads = (ab.expr() * &ab).sum::<(Time,)>()?.backward()?;
    /// assert_eq!(grads.get(&a)?.to_vec(), [2., 4.]);
    /// assert_eq!(grads.get(&b)?.to_vec(), [6.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn concat<X: Axis>(parts: &[&Var<T, A>]) -> Result<Var<T, A>>
    where
        A: HasAxis<X>,
    {
        let Some(first) = parts.first() else {
            return Err(Error::NothingToJoin {
                axis: X::name().into_owned(),
            });
        };
        if parts.iter().any(|p| !p.tape().same_as(first.tape())) {
            return Err(Error::Unsupported {
                what: "combining variables of different tapes".into(),
            });
        }
        let values: Vec<&Tensor<T, A>> = parts.iter().map(|p| p.value()).collect();
        let value = Tensor::concat::<X>(&values)?;
        let axis = <A as HasAxis<X>>::POS;
        let pieces: Vec<(usize, usize, bool)> = (parts.iter())
            .map(|p| (p.id(), p.value().lens()[axis], p.needs_grad()))
            .collect();
        let needs_grad = parts.iter().any(|p| p.needs_grad());
        Ok(first.tape().record(value, needs_grad, move |grads, at| {
            let Some(dz) = grads.tensor::<A>(at) else {
                return Ok(());
            };
            let mut start = 0;
            for &(id, len, needs_grad) in &pieces {
                if needs_grad {
                    grads.accumulate(id, dz.slice::<X>(start..start + len, 1)?)?;
                }
                start += len;
            }
            Ok(())
        }))
    }

    /// Pieces of `lengths` along axis `X`, in order (as [`Tensor::split`](crate::Tensor::split)),
    /// each a slice with its own gradient.
    pub fn split<X: Axis>(&self, lengths: &[usize]) -> Result<Vec<Var<T, A>>>
    where
        A: HasAxis<X>,
    {
        self.value().split::<X>(lengths)?;
        let mut start = 0;
        (lengths.iter())
            .map(|&len| {
                start += len;
                self.slice::<X>(start - len..start, 1)
            })
            .collect()
    }
}
