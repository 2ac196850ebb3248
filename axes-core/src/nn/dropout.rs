//! Dropout.

use std::cell::RefCell;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::autodiff::{IntoVar, VarExpr};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::AxisSet;
use crate::num::Float;
use crate::storage::{HostVec, Storage};
use crate::tensor::Tensor;

/// Whether a layer runs as in training or as in evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Training: dropout drops.
    Train,
    /// Evaluation: dropout passes its input through.
    Eval,
}

/// Dropout: in training each element is zeroed with probability `p` and the others scaled by
/// `1 / (1 - p)` (so the expected value is unchanged), the gradient masked the same way; in
/// evaluation, and in [`Dropout::infer`], the input passes through. The masks come from a
/// seeded generator, a new one per call: a run is reproducible from its seed.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// use axes::nn::{Dropout, Mode};
/// #[derive(Axis)] struct Hidden;
/// let dropout = Dropout::new(0.5, 7)?;
/// let tape = Tape::<f32>::new();
/// let x = tape.var(Tensor::<f32, (Hidden,)>::ones(Hidden.len(1000))?);
/// let y = dropout.forward(&x, Mode::Train)?.eval()?.value().to_vec();
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// let kept = y.iter().filter(|&&v| v == 2.0).count();
/// assert!((400..600).contains(&kept));
/// let same = dropout.forward(&x, Mode::Eval)?.eval()?;
/// assert_eq!(same.value().to_vec(), x.value().to_vec());
/// assert!(Dropout::new(1.0, 7).is_err());
/// # Ok::<(), axes::Error>(())
/// ```
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    rng: RefCell<ChaCha8Rng>,
}

impl Dropout {
    /// Dropout with probability `p` (in `[0, 1)`), its masks drawn from `seed`.
    pub fn new(p: f64, seed: u64) -> Result<Self> {
        if !(0.0..1.0).contains(&p) {
            return Err(Error::DropoutProbability { p: p.to_string() });
        }
        Ok(Dropout {
            p,
            rng: RefCell::new(ChaCha8Rng::seed_from_u64(seed)),
        })
    }

    /// The probability of dropping an element.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// `x` with elements dropped in [`Mode::Train`], as it is in [`Mode::Eval`]; on the tape
    /// (an expression, so it fuses with what follows).
    pub fn forward<T, A, V>(&self, x: V, mode: Mode) -> Result<VarExpr<T, A>>
    where
        T: Float,
        A: AxisSet,
        V: IntoVar<Elem = T, Axes = A>,
    {
        let x = x.into_var()?;
        if mode == Mode::Eval || self.p == 0.0 {
            return Ok(x.expr());
        }
        let lens = x.value().lens();
        let scale = T::from_f64(1.0 / (1.0 - self.p));
        let mut rng = self.rng.borrow_mut();
        let keep: HostVec<T> = (0..lens.iter().product())
            .map(|_| {
                if rng.random::<f64>() < self.p {
                    T::zero()
                } else {
                    scale
                }
            })
            .collect();
        let keep =
            Tensor::<T, A>::from_parts(Storage::from_host_vec(keep), Layout::row_major(lens))
                .expect("a fresh buffer fits its row-major layout")
                .to(&x.value().device())?;
        Ok(x.expr() * &x.tape().constant(keep))
    }

    /// `x` as it is (evaluation), without a tape.
    pub fn infer<T: Float, A: AxisSet>(&self, x: &Tensor<T, A>) -> Tensor<T, A> {
        x.clone()
    }
}
