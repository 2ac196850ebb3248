//! The tape, variables and gradients.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::dispatch::filled;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// The backward step of one recorded operation: reads the gradient of its result from
/// [`Grads`] and adds the gradients of its inputs.
pub(crate) type Backward<T> = Box<dyn Fn(&mut Grads<T>) -> Result<()>>;

/// What the tape keeps for one node.
enum Step<T: Float> {
    /// A variable, a constant, or an operation no gradient flows through.
    NoBackward,
    /// An operation's backward step.
    Backward(Backward<T>),
    /// An operation whose backward step ran and was released (with the tensors it held).
    Released,
}

/// Records the operations on [`Var`]s so that [`Var::backward`] can run them in reverse.
///
/// A tape is cheap to clone (a shared handle). Start one per training step. Running
/// [`Var::backward`] releases every backward step recorded up to its result (those the
/// gradient did not reach too), and with them the views of the parameters they held, so an
/// optimizer can update the parameters in place right after (a tape runs backward through
/// an operation once, as in PyTorch). Dropping the tape and its variables releases the
/// rest. A tape stays on the thread that made it.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::autodiff::Tape;
/// #[derive(Axis)] struct I;
///
/// let tape = Tape::<f64>::new();
/// let x = tape.var(Tensor::<f64, (I,)>::from_vec(I.len(3), vec![1., 2., 3.])?);
/// let loss = (&x * &x).sum::<(I,)>()?; // Σ x²
/// let grads = loss.backward()?;
/// assert_eq!(grads.get(&x)?.to_vec(), [2., 4., 6.]); // 2x
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Tape<T: Float> {
    nodes: Rc<RefCell<Vec<Step<T>>>>,
    /// Unique in the process: [`Grads`] knows its tape by it, since an address can be
    /// reused by a tape made after this one is dropped.
    id: u64,
}

/// The id of the next tape made.
static NEXT_TAPE_ID: AtomicU64 = AtomicU64::new(0);

impl<T: Float> Clone for Tape<T> {
    fn clone(&self) -> Self {
        Tape {
            nodes: Rc::clone(&self.nodes),
            id: self.id,
        }
    }
}

impl<T: Float> Default for Tape<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Float> fmt::Debug for Tape<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tape({} nodes)", self.len())
    }
}

impl<T: Float> Tape<T> {
    /// An empty tape.
    pub fn new() -> Self {
        Tape {
            nodes: Rc::new(RefCell::new(Vec::new())),
            id: NEXT_TAPE_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The number of recorded nodes (variables and operations).
    pub fn len(&self) -> usize {
        self.nodes.borrow().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A variable whose gradient is wanted (a parameter, or an input to differentiate by).
    pub fn var<A: AxisSet>(&self, value: Tensor<T, A>) -> Var<T, A> {
        let id = self.push_leaf();
        Var::new(self.clone(), id, true, value)
    }

    /// A variable whose gradient is not wanted (input data, labels' one-hot, constants).
    pub fn constant<A: AxisSet>(&self, value: Tensor<T, A>) -> Var<T, A> {
        let id = self.push_leaf();
        Var::new(self.clone(), id, false, value)
    }

    /// Records a node with no backward step (a variable or a constant) and returns its id.
    pub(crate) fn push_leaf(&self) -> usize {
        let mut nodes = self.nodes.borrow_mut();
        nodes.push(Step::NoBackward);
        nodes.len() - 1
    }

    /// Records the result of an operation on `inputs`: it needs a gradient when one of them
    /// does, and only then is `backward` kept.
    pub(crate) fn record<A: AxisSet>(
        &self,
        value: Tensor<T, A>,
        needs_grad: bool,
        backward: impl Fn(&mut Grads<T>, usize) -> Result<()> + 'static,
    ) -> Var<T, A> {
        let mut nodes = self.nodes.borrow_mut();
        let id = nodes.len();
        nodes.push(if needs_grad {
            Step::Backward(Box::new(move |g: &mut Grads<T>| backward(g, id)))
        } else {
            Step::NoBackward
        });
        drop(nodes);
        Var::new(self.clone(), id, needs_grad, value)
    }

    pub(crate) fn same_as(&self, other: &Tape<T>) -> bool {
        self.id == other.id
    }
}

/// A tensor recorded on a [`Tape`]: its value, and its place in the computation so that
/// gradients can flow back to it. Its gradient has exactly its axes type.
pub struct Var<T: Float, A: AxisSet> {
    tape: Tape<T>,
    id: usize,
    needs_grad: bool,
    value: Tensor<T, A>,
}

impl<T: Float, A: AxisSet> Clone for Var<T, A> {
    fn clone(&self) -> Self {
        Var {
            tape: self.tape.clone(),
            id: self.id,
            needs_grad: self.needs_grad,
            value: self.value.clone(),
        }
    }
}

impl<T: Float, A: AxisSet> fmt::Debug for Var<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Var#{} ({}{})",
            self.id,
            self.value.describe_lengths(),
            if self.needs_grad { ", needs grad" } else { "" }
        )
    }
}

impl<T: Float, A: AxisSet> Var<T, A> {
    pub(crate) fn new(tape: Tape<T>, id: usize, needs_grad: bool, value: Tensor<T, A>) -> Self {
        Var {
            tape,
            id,
            needs_grad,
            value,
        }
    }

    /// The value (computed when the variable was made).
    pub fn value(&self) -> &Tensor<T, A> {
        &self.value
    }

    /// Whether a gradient flows to this variable.
    pub fn needs_grad(&self) -> bool {
        self.needs_grad
    }

    /// The tape this variable is recorded on.
    pub fn tape(&self) -> &Tape<T> {
        &self.tape
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// Records `value`, computed from this variable alone, whose gradient `back` maps to this
    /// variable's (called only when a gradient reached the result).
    pub(crate) fn record_unary<O: AxisSet>(
        &self,
        value: Tensor<T, O>,
        back: impl Fn(Tensor<T, O>) -> Result<Tensor<T, A>> + 'static,
    ) -> Var<T, O> {
        let id = self.id;
        self.tape.record(value, self.needs_grad, move |grads, at| {
            match grads.tensor::<O>(at) {
                Some(dz) => grads.accumulate(id, back(dz)?),
                None => Ok(()),
            }
        })
    }
}

impl<T: Float> Var<T, ()> {
    /// Runs the tape backwards from this scalar (seeded with 1) and returns the gradients of
    /// every variable recorded before it. Every backward step recorded up to it is then
    /// released (those the gradient did not reach too), with the tensors they held, views of
    /// parameters among them: a later `backward` through one of those operations is an
    /// error (record them again).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// #[derive(Axis)] struct I;
    /// let tape = Tape::<f64>::new();
    /// let x = tape.var(Tensor::<f64, (I,)>::from_vec(I.len(2), vec![1., 2.])?);
    /// let loss = (&x * &x).sum::<(I,)>()?;
    /// assert_eq!(loss.backward()?.get(&x)?.to_vec(), [2., 4.]);
    /// let again = loss.backward().unwrap_err().to_string();
    /// assert!(again.contains("released by an earlier `backward`"), "{again}");
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn backward(&self) -> Result<Grads<T>> {
        self.backward_from(filled(self.value.device(), 1, T::one())?)
    }

    /// [`Var::backward`] seeded with `seed` (one element, on this scalar's device) in place of
    /// 1: a loss scale's backward pass.
    pub(crate) fn backward_from(&self, seed: Storage<T>) -> Result<Grads<T>> {
        let mut nodes = self.tape.nodes.borrow_mut();
        let mut grads = Grads {
            bufs: Vec::new(),
            tape: self.tape.id,
            root: self.id,
        };
        grads.bufs.resize_with(nodes.len(), || None);
        if !self.needs_grad {
            return Ok(grads);
        }
        grads.bufs[self.id] = Some(GradBuf {
            storage: seed,
            layout: Layout::row_major(&[]),
        });
        for id in (0..=self.id).rev() {
            if grads.bufs[id].is_none() {
                continue;
            }
            match std::mem::replace(&mut nodes[id], Step::Released) {
                Step::Backward(step) => step(&mut grads)?,
                Step::NoBackward => nodes[id] = Step::NoBackward,
                Step::Released => {
                    return Err(Error::NoGradient {
                        reason: "this operation's backward step was released by an earlier \
                                 `backward` on its tape (a tape runs backward once; record the \
                                 computation again)"
                            .into(),
                    });
                }
            }
        }
        // The steps no gradient reached go too: none of them may keep a parameter alive.
        for step in &mut nodes[..=self.id] {
            if let Step::Backward(_) = step {
                *step = Step::Released;
            }
        }
        Ok(grads)
    }
}

/// A gradient while it is being accumulated: a tensor with its axes type erased.
#[derive(Clone)]
pub(crate) struct GradBuf<T> {
    pub(crate) storage: Storage<T>,
    pub(crate) layout: Layout,
}

/// The gradients from one [`Var::backward`], looked up by variable.
pub struct Grads<T: Float> {
    bufs: Vec<Option<GradBuf<T>>>,
    /// The id of the tape `backward` ran on.
    tape: u64,
    /// The result `backward` ran from.
    root: usize,
}

impl<T: Float> fmt::Debug for Grads<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reached = self.bufs.iter().filter(|b| b.is_some()).count();
        write!(f, "Grads({reached} of {} nodes reached)", self.bufs.len())
    }
}

impl<T: Float> Grads<T> {
    /// The gradient of the result with respect to `var`: a tensor with `var`'s axes (zeros
    /// where the result does not depend on it). An error if `var` needs no gradient or was
    /// recorded after the result.
    pub fn get<A: AxisSet>(&self, var: &Var<T, A>) -> Result<Tensor<T, A>> {
        if !var.needs_grad {
            return Err(Error::NoGradient {
                reason: format!(
                    "the variable ({}) was made with `Tape::constant`",
                    var.value.describe_lengths()
                ),
            });
        }
        self.check(&var.tape, var.id)?;
        Ok(match self.tensor::<A>(var.id) {
            Some(t) => t,
            None => Tensor::from_parts(
                filled(var.value.device(), var.value.element_count(), T::zero())?,
                Layout::row_major(var.value.lens()),
            )
            .expect("a fresh buffer fits its row-major layout"),
        })
    }

    /// Checks that node `id` of `tape` is one these gradients cover.
    pub(crate) fn check(&self, tape: &Tape<T>, id: usize) -> Result<()> {
        if tape.id != self.tape {
            return Err(Error::NoGradient {
                reason: "the variable is recorded on another tape than the result".into(),
            });
        }
        if id > self.root {
            return Err(Error::NoGradient {
                reason: "the variable was recorded after the result `backward` ran from".into(),
            });
        }
        Ok(())
    }

    /// [`Grads::get`] viewed in the axis order `O` (the same axes).
    pub fn get_in<O: AxisSet, A: AxisSet + SameAxes<O>>(
        &self,
        var: &Var<T, A>,
    ) -> Result<Tensor<T, O>> {
        Ok(self.get(var)?.axes_with_order::<O>())
    }

    /// The gradient of node `id` viewed as a tensor with axes `A`, if one reached it.
    pub(crate) fn tensor<A: AxisSet>(&self, id: usize) -> Option<Tensor<T, A>> {
        let buf = self.bufs[id].as_ref()?;
        Some(Tensor::from_parts(buf.storage.clone(), buf.layout).expect("gradients fit"))
    }

    /// The raw gradient of node `id`, if one reached it.
    pub(crate) fn buf(&self, id: usize) -> Option<GradBuf<T>> {
        self.bufs[id].clone()
    }

    /// Adds `grad` to the gradient of node `id` (keeps `grad` itself, a view or not, when it
    /// is the first).
    pub(crate) fn accumulate<A: AxisSet>(&mut self, id: usize, grad: Tensor<T, A>) -> Result<()> {
        let sum = match self.tensor::<A>(id) {
            None => grad,
            Some(old) => (&old + &grad).eval()?,
        };
        self.bufs[id] = Some(GradBuf {
            storage: sum.storage().clone(),
            layout: *sum.layout(),
        });
        Ok(())
    }

    /// Takes the gradient of node `id` out, for a job to add to: a buffer with no padding
    /// and no repeated positions (a view that has either is written out first), or `None`
    /// when no gradient reached the node yet.
    pub(crate) fn take_for_accumulate(
        &mut self,
        id: usize,
    ) -> Result<Option<(Storage<T>, Layout)>> {
        Ok(match self.bufs[id].take() {
            None => None,
            Some(buf) if buf.layout.is_injective() && !buf.layout.is_padded() => {
                Some((buf.storage, buf.layout))
            }
            Some(buf) => Some(crate::dispatch::written_out(&buf.storage, &buf.layout)?),
        })
    }

    /// Whether node `id` has a gradient yet.
    pub(crate) fn has(&self, id: usize) -> bool {
        self.bufs[id].is_some()
    }

    /// Puts back a buffer from [`Grads::take_for_accumulate`].
    pub(crate) fn put(&mut self, id: usize, buf: GradBuf<T>) {
        self.bufs[id] = Some(buf);
    }
}
