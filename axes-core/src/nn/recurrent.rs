//! [`Gru`]: a gated recurrent layer along the axis with the role `Time`.

use super::params::{Bound, Init, ParamsBuilder};
use crate::arena::Slot;
use crate::autodiff::{self, Var};
use crate::axis::roles::Time;
use crate::axis::{Axis, Dual, Len, PrimalAxis};
use crate::error::{Error, Result};
use crate::list::{AxisSet, SameAxes, SameCount};
use crate::num::Float;
use crate::tensor::Tensor;

/// The gates of a [`Gru`], in PyTorch's order: reset, update, new.
#[derive(axes_macros::Axis)]
#[axis(len = 3)]
pub struct GruGate;

/// A gated recurrent unit (PyTorch's `nn.GRU`, one layer, one direction) from the features
/// `In` to the state `H`, run along the input's axis with the role `Time` from a zero state:
///
/// ```text
/// r = σ(W_ir x + b_ir + W_hr h + b_hr)
/// z = σ(W_iz x + b_iz + W_hz h + b_hz)
/// n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
/// h ← (1 − z) ⊙ n + z ⊙ h
/// ```
///
/// Parameters `{name}.weight_ih_l0` over (GruGate, H, In), `{name}.weight_hh_l0` over
/// (GruGate, H, `Dual<H>`), `{name}.bias_ih_l0` and `{name}.bias_hh_l0` over (GruGate, H): PyTorch's
/// names and layouts (its `3·hidden` rows are the gates in order), each uniform on `±1/√H`
/// as PyTorch starts them. The forward pass is recorded step by step on the tape, so the
/// backward pass runs back through time.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Gru, ParamsBuilder};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Time)] struct Step;
/// #[derive(Axis)] struct Feature;
/// #[derive(Axis)] struct State;
/// let mut builder = ParamsBuilder::new();
/// let gru = Gru::new(&mut builder, "gru", Feature.len(3), State.len(4))?;
/// let params = builder.build::<f32>(0)?;
/// let tape = Tape::new();
/// let x = Tensor::<f32, (Batch, Step, Feature)>::ones((Batch.len(2), Step.len(5), Feature.len(3)))?;
/// let (states, last) = gru.forward(&params.bind(&tape), &tape.constant(x))?;
/// assert_eq!(states.value().len_of::<Step>(), 5);
/// assert_eq!(last.value().to_vec(), states.value().index(Step.at(4))?.to_vec());
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Gru<In: Axis, H: PrimalAxis> {
    /// The input's weights.
    pub weight_ih: Slot<(GruGate, H, In)>,
    /// The state's weights.
    pub weight_hh: Slot<(GruGate, H, Dual<H>)>,
    /// The input's biases.
    pub bias_ih: Slot<(GruGate, H)>,
    /// The state's biases.
    pub bias_hh: Slot<(GruGate, H)>,
}

impl<In: Axis, H: PrimalAxis> Clone for Gru<In, H> {
    fn clone(&self) -> Self {
        Gru {
            weight_ih: self.weight_ih,
            weight_hh: self.weight_hh,
            bias_ih: self.bias_ih,
            bias_hh: self.bias_hh,
        }
    }
}

impl<In: Axis, H: PrimalAxis> Gru<In, H>
where
    (GruGate, H, In): AxisSet + SameAxes<(GruGate, H, In)>,
    (GruGate, H, Dual<H>): AxisSet + SameAxes<(GruGate, H, Dual<H>)>,
    (GruGate, H): AxisSet + SameAxes<(GruGate, H)>,
    // The weights cast onto the layer's own axes (bounds any concrete axes meet).
    (GruGate, H, In): SameCount<(GruGate, State, Input)>,
    (GruGate, H, Dual<H>): SameCount<(GruGate, State, Dual<State>)>,
    (GruGate, H): SameCount<(GruGate, State)>,
    (GruGate, State, Input): SameCount<(GruGate, H, In)>,
    (GruGate, State, Dual<State>): SameCount<(GruGate, H, Dual<H>)>,
    (GruGate, State): SameCount<(GruGate, H)>,
{
    /// Reserves the layer's parameters (see [`Gru`]).
    pub fn new(
        params: &mut ParamsBuilder,
        name: &str,
        input: Len<In>,
        state: Len<H>,
    ) -> Result<Self> {
        let (n_in, n) = (input.get(), state.get());
        let init = Init::Uniform(1.0 / (n.max(1) as f64).sqrt());
        let gates = Len::<GruGate>::new(3);
        Ok(Gru {
            weight_ih: params.add(
                &format!("{name}.weight_ih_l0"),
                (gates, state, input),
                init,
                n_in,
                n,
            )?,
            weight_hh: params.add(
                &format!("{name}.weight_hh_l0"),
                (gates, state, Len::<Dual<H>>::new(n)),
                init,
                n,
                n,
            )?,
            bias_ih: params.add(&format!("{name}.bias_ih_l0"), (gates, state), init, n_in, n)?,
            bias_hh: params.add(&format!("{name}.bias_hh_l0"), (gates, state), init, n, n)?,
        })
    }

    /// The states after each step of `x` along `Tm`, and the last one.
    #[allow(clippy::type_complexity)]
    pub fn forward<T, B, Tm>(
        &self,
        params: &Bound<'_, T>,
        x: &Var<T, (B, Tm, In)>,
    ) -> Result<(Var<T, (B, Tm, H)>, Var<T, (B, H)>)>
    where
        T: Float,
        B: Axis,
        Tm: Time,
        (B, Tm, In): AxisSet + SameCount<(Rows, Step, Input)>,
        (B, Tm, H): AxisSet + SameCount<(Rows, Step, State)>,
        (B, H): AxisSet + SameCount<(Rows, State)>,
        (Rows, Step, Input): SameCount<(B, Tm, In)>,
        (Rows, Step, State): SameCount<(B, Tm, H)>,
        (Rows, State): SameCount<(B, H)>,
    {
        let (states, last) = self.run(params, &x.cast_axes()?, None)?;
        Ok((states.cast_axes()?, last.cast_axes()?))
    }

    /// [`Gru::forward`] over sequences of `lengths` steps (one per batch element, each at most
    /// the length of `Tm`; the steps after are padding): the states past a sequence's end are
    /// zeros and its last state is the one at its end, as PyTorch's packed sequences give.
    /// A length per batch element that does not fit is an error naming the axes.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// use axes::nn::{Gru, ParamsBuilder};
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] #[axis(role = Time)] struct Step;
    /// #[derive(Axis)] struct Feature;
    /// #[derive(Axis)] struct State;
    /// let mut builder = ParamsBuilder::new();
    /// let gru = Gru::new(&mut builder, "gru", Feature.len(2), State.len(3))?;
    /// let params = builder.build::<f64>(0)?;
    /// let tape = Tape::new();
    /// let x = Tensor::<f64, (Batch, Step, Feature)>::random_uniform((Batch.len(2), Step.len(4), Feature.len(2)), -1.0, 1.0, 1)?;
    /// let (states, last) = gru.forward_padded(&params.bind(&tape), &tape.constant(x.clone()), &[4, 2])?;
    /// // The second sequence ends after two steps: its last state is its second, then zeros.
    /// let second = states.value().index(Batch.at(1))?;
    /// assert_eq!(last.value().index(Batch.at(1))?.to_vec(), second.index(Step.at(1))?.to_vec());
    /// assert!(second.index(Step.at(3))?.to_vec().iter().all(|&v| v == 0.0));
    /// // The same as running it alone on its two steps.
    /// let alone = tape.constant(x.slice::<Batch>(1..2, 1)?.slice::<Step>(0..2, 1)?);
    /// let (_, alone_last) = gru.forward(&params.bind(&tape), &alone)?;
    /// assert_eq!(alone_last.value().to_vec(), last.value().index(Batch.at(1))?.to_vec());
    /// # Ok::<(), axes::Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn forward_padded<T, B, Tm>(
        &self,
        params: &Bound<'_, T>,
        x: &Var<T, (B, Tm, In)>,
        lengths: &[usize],
    ) -> Result<(Var<T, (B, Tm, H)>, Var<T, (B, H)>)>
    where
        T: Float,
        B: Axis,
        Tm: Time,
        (B, Tm, In): AxisSet + SameCount<(Rows, Step, Input)>,
        (B, Tm, H): AxisSet + SameCount<(Rows, Step, State)>,
        (B, H): AxisSet + SameCount<(Rows, State)>,
        (Rows, Step, Input): SameCount<(B, Tm, In)>,
        (Rows, Step, State): SameCount<(B, Tm, H)>,
        (Rows, State): SameCount<(B, H)>,
    {
        let (rows, steps) = (x.value().lens()[0], x.value().lens()[1]);
        if lengths.len() != rows || lengths.iter().any(|&len| len > steps) {
            return Err(Error::Unsupported {
                what: format!(
                    "sequence lengths {lengths:?} for {rows} sequences along `{}` of {steps} \
                     steps (one length per element of `{}`, each at most {steps})",
                    Tm::name(),
                    B::name()
                ),
            });
        }
        let (states, last) = self.run(params, &x.cast_axes()?, Some(lengths))?;
        Ok((states.cast_axes()?, last.cast_axes()?))
    }

    /// The steps over the layer's own axes; with `lengths`, each sequence's state held (and
    /// its output zero) past its end.
    #[allow(clippy::type_complexity)]
    fn run<T: Float>(
        &self,
        params: &Bound<'_, T>,
        x: &Var<T, (Rows, Step, Input)>,
        lengths: Option<&[usize]>,
    ) -> Result<(Var<T, (Rows, Step, State)>, Var<T, (Rows, State)>)> {
        let w_ih: Var<T, (GruGate, State, Input)> = params.var(&self.weight_ih)?.cast_axes()?;
        let w_hh: Var<T, (GruGate, State, Dual<State>)> =
            params.var(&self.weight_hh)?.cast_axes()?;
        let b_ih: Var<T, (GruGate, State)> = params.var(&self.bias_ih)?.cast_axes()?;
        let b_hh: Var<T, (GruGate, State)> = params.var(&self.bias_hh)?.cast_axes()?;
        let (rows, steps) = (x.value().len_of::<Rows>(), x.value().len_of::<Step>());
        let state = b_hh.value().len_of::<State>();
        let device = x.value().device();
        // The input's part of every gate at every step, in one product.
        let gi: Var<T, (Rows, Step, GruGate, State)> = autodiff::dot(x, &w_ih)?;
        let gi = (gi.expr() + &b_ih).eval()?;
        let zeros = Tensor::<T, (Rows, State)>::zeros((Rows.len(rows), State.len(state)))?;
        let mut h = x.tape().constant(zeros.to(&device)?);
        let mut states = Vec::with_capacity(steps);
        for t in 0..steps {
            let gi_t: Var<T, (Rows, GruGate, State)> = gi.index(Step.at(t))?;
            let gh: Var<T, (Rows, GruGate, State)> =
                (autodiff::dot(&h, &w_hh)?.expr() + &b_hh).eval()?;
            let gate = |v: &Var<T, (Rows, GruGate, State)>, k: usize| v.index(GruGate.at(k));
            let r = (gate(&gi_t, 0)?.expr() + &gate(&gh, 0)?).sigmoid().eval()?;
            let z = (gate(&gi_t, 1)?.expr() + &gate(&gh, 1)?).sigmoid().eval()?;
            let n = (gate(&gi_t, 2)?.expr() + r.expr() * &gate(&gh, 2)?)
                .tanh()
                .eval()?;
            // (1 − z)·n + z·h, written without a scalar.
            let next = (n.expr() + z.expr() * (h.expr() - &n)).eval()?;
            let output = match lengths {
                None => {
                    h = next;
                    h.clone()
                }
                Some(lengths) => {
                    // 1 where the sequence is still running, 0 past its end.
                    let running: Vec<T> = (lengths.iter())
                        .map(|&len| if t < len { T::one() } else { T::zero() })
                        .collect();
                    let running = Tensor::<T, (Rows,)>::from_vec(Rows.len(rows), running)?;
                    let running = x.tape().constant(running.to(&device)?);
                    h = (h.expr() + running.expr() * (next.expr() - &h)).eval()?;
                    (next.expr() * &running).eval()?
                }
            };
            states.push(output.broadcast::<(Rows, State, Step)>(Step.len(1))?);
        }
        let refs: Vec<&Var<T, (Rows, State, Step)>> = states.iter().collect();
        let all = Var::concat::<Step>(&refs)?.axes_with_order::<(Rows, Step, State)>();
        Ok((all, h))
    }
}

/// The batch, step, input and state axes of the layer's own computation, onto which a
/// caller's are cast (named in [`Gru::forward`]'s bounds, which any concrete axes meet).
pub mod own {
    /// The batch.
    #[derive(axes_macros::Axis)]
    pub struct Rows;
    /// The steps.
    #[derive(axes_macros::Axis)]
    pub struct Step;
    /// The input's features.
    #[derive(axes_macros::Axis)]
    pub struct Input;
    /// The state.
    #[derive(axes_macros::Axis)]
    pub struct State;
}

use own::{Input, Rows, State, Step};
