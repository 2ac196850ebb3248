//! Running expressions: [`ExprExt`] (the methods every expression has: element-wise
//! operations, `eval`, reductions), assignment into existing tensors
//! ([`Tensor::assign`](crate::Tensor::assign), `add_sum`, `fill`), reductions built on them
//! ([`Tensor::softmax`](crate::Tensor::softmax), [`argmax`], ...) and the same methods on tensors, borrowing them. Where the
//! work runs is [`crate::dispatch`]'s decision.

mod assign;
mod ext;
mod reduce;
mod tensor_methods;
mod view_mut;

pub use assign::sum_in;
pub use ext::ExprExt;
pub(crate) use reduce::finite_or_zero;
pub use reduce::{argmax, argmin};
pub use view_mut::ViewMut;
