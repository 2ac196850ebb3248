//! Embedding tables.

use super::params::{Bound, Init, Params, ParamsBuilder};
use crate::arena::Slot;
use crate::autodiff::Var;
use crate::axis::{Axis, Len};
use crate::error::Result;
use crate::list::{AxisSet, Difference, DifferenceWith, HasAxis, SameAxes, UnionWith};
use crate::num::Float;
use crate::tensor::{Gathered, IndexElement, Tensor};

/// A trainable lookup table `(V, D)`: each integer id along `V` picks its row, a vector along
/// `D`. Ids of any axes give a result with those axes and `D`; an id outside `0..len(V)` is
/// an error naming it, and float ids are a compile error. Parameter `{name}.weight`, PyTorch's
/// name for `nn.Embedding`.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Embedding, Init, ParamsBuilder};
/// #[derive(Axis)] struct Vocab;
/// #[derive(Axis)] struct Hidden;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Token;
/// let mut builder = ParamsBuilder::new();
/// let embed = Embedding::new(&mut builder, "tokens", Vocab.len(5), Hidden.len(4), Init::Normal(0.02))?;
/// let params = builder.build::<f32>(0)?;
/// let ids = Tensor::<i64, (Batch, Token)>::from_vec((Batch.len(2), Token.len(3)), vec![0, 4, 4, 1, 2, 3])?;
/// let tape = Tape::new();
/// let x = embed.forward(&params.bind(&tape), &ids)?; // (Hidden, Batch, Token)
/// assert_eq!(x.value().len_of::<Token>(), 3);
/// assert_eq!(embed.infer(&params, &ids)?.to_vec(), x.value().to_vec());
/// assert!(embed.infer(&params, &(&ids + 1).eval()?).is_err()); // id 5 is out of range
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Embedding<V: Axis, D: Axis> {
    /// The table.
    pub table: Slot<(V, D)>,
}

impl<V: Axis, D: Axis> Clone for Embedding<V, D> {
    fn clone(&self) -> Self {
        Embedding { table: self.table }
    }
}

impl<V: Axis, D: Axis> Embedding<V, D>
where
    (V, D): SameAxes<(V, D)> + HasAxis<V> + DifferenceWith<(V,)>,
{
    /// Reserves the table `{name}.weight`, initialised by `init` (GPT-2 uses
    /// `Init::Normal(0.02)`, PyTorch `Init::Normal(1.0)`).
    pub fn new(
        params: &mut ParamsBuilder,
        name: &str,
        vocab: Len<V>,
        dim: Len<D>,
        init: Init,
    ) -> Result<Self> {
        let (fan_in, fan_out) = (vocab.get(), dim.get());
        Ok(Embedding {
            table: params.add(
                &format!("{name}.weight"),
                (vocab, dim),
                init,
                fan_in,
                fan_out,
            )?,
        })
    }

    /// The rows of `ids`, on the tape (the gradient flows to the table).
    #[allow(clippy::type_complexity)]
    pub fn forward<T, I, Ix>(
        &self,
        params: &Bound<'_, T>,
        ids: &Tensor<Ix, I>,
    ) -> Result<Var<T, Gathered<(V, D), V, I>>>
    where
        T: Float,
        I: AxisSet,
        Ix: IndexElement,
        Difference<(V, D), (V,)>: UnionWith<I>,
    {
        params.var(&self.table)?.gather::<V, I, Ix>(ids)
    }

    /// The rows of `ids`, without a tape (inference).
    #[allow(clippy::type_complexity)]
    pub fn infer<T, I, Ix>(
        &self,
        params: &Params<T>,
        ids: &Tensor<Ix, I>,
    ) -> Result<Tensor<T, Gathered<(V, D), V, I>>>
    where
        T: Float,
        I: AxisSet,
        Ix: IndexElement,
        Difference<(V, D), (V,)>: UnionWith<I>,
    {
        params.tensor(&self.table)?.gather::<V, I, Ix>(ids)
    }
}
