//! # Semantics
//!
//! What every operation means. These rules are the contract: the type checker enforces what
//! it can see (which axes a tensor has), and evaluation checks the rest (their lengths). The
//! examples run as doc-tests; each `compile_fail` example is a mistake the compiler rejects.
//!
//! ## Axis identity
//!
//! - An axis is a type: a unit struct with `#[derive(Axis)]`. Two axes are the same axis only
//!   when they are the same type. Equal lengths never make two axes match, and position never
//!   pairs them.
//! - A length is a run-time value that each tensor carries, given by name (`Batch.len(32)`),
//!   so lengths can be listed in any order. `#[axis(len = N)]` fixes an axis's length: every
//!   tensor must give it `N`, checked at run time ([`Error::FixedLength`]).
//! - A tensor's axes are a tuple of at most [`MAX_RANK`](crate::list::MAX_RANK) (8) distinct
//!   axes. An axis written twice, `(Batch, Batch)`, is a compile error where the type is
//!   written.
//! - Order in the type carries no meaning; it is a storage preference. Two tensors with the
//!   same axis set, the same lengths and the same value at every named index are equal (`==`),
//!   whatever their orders and strides. `axes_with_order` gives any other order as a view.
//! - Roles are traits an axis may implement, `#[axis(role = Height)]`: [`crate::roles`] has
//!   `Batch`, `Channel`, `Channelout`, `Height`, `Width`, `Depth`, `Time` and `Feature`, and
//!   any trait of your own works too. Generic code finds its axes by bound (`H: Height`) or,
//!   for the built-in roles, by search: [`WithRole`](crate::list::WithRole) names the one axis
//!   of a list with a role, wherever it is; a list with none, or two, is a compile error
//!   naming the role.
//! - Convolution and pooling ([`crate::spatial`]) find their axes so. A window moves along the
//!   input's axes with the spatial roles (Width; Height and Width; Depth, Height and Width);
//!   a convolution contracts the input's Channel axis and the window with a filter over that
//!   axis, one Channelout axis and one kernel axis per spatial role (the filter's roles choose
//!   the dimensions), and the result has the input's axes but Channel, the spatial ones as
//!   long as the windows that fit, then the filter's Channelout axis. An axis that is one
//!   convolution's output and the next one's input channels has both roles. A batch axis the
//!   filter has too groups the convolution (PyTorch's `groups`: each position along it pairs
//!   its own channels with its own filters; depthwise where Channel has length 1). Channels first or
//!   last is not a question: the same input in any order gives the same numbers, bit for bit.
//!
//! ```
//! use axes::prelude::*;
//! use axes::list::WithRole;
//! use axes::roles::{Height, kind};
//!
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] #[axis(len = 3)] struct Rgb;
//! #[derive(Axis)] #[axis(role = Height)] struct Rows;
//!
//! // Lengths are named, so they are given in any order.
//! let x = Tensor::<f32, (Batch, Hidden)>::from_fn((Hidden.len(3), Batch.len(2)), |ix| {
//!     (ix.of::<Batch>() * 3 + ix.of::<Hidden>()) as f32
//! })?;
//! // Another order is another type, a view of the same storage, and an equal tensor.
//! let t: Tensor<f32, (Hidden, Batch)> = x.axes_with_order();
//! assert!(t.shares_storage_with(&x));
//! assert_eq!(x, t);
//! // A fixed length is checked when a tensor is made.
//! let err = Tensor::<u8, (Rgb,)>::zeros(Rgb.len(4)).unwrap_err();
//! assert_eq!(err.to_string(), "axis `Rgb` has the fixed length 3, but length 4 was given");
//! // A role is a bound that generic code can ask for.
//! fn height<H: Height, A: HasAxis<H>>(image: &Tensor<f32, A>) -> usize {
//!     image.len_of::<H>()
//! }
//! let image = Tensor::<f32, (Rows, Batch)>::zeros((Rows.len(5), Batch.len(2)))?;
//! assert_eq!(height::<Rows, _>(&image), 5);
//! // Or the list is searched for the axis with the role.
//! assert_eq!(<(Batch, Rows) as WithRole<kind::Height>>::POS, 1);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! An axis written twice is rejected where the type is written ("axis `Batch` appears more
//! than once in `(Batch, Hidden, Batch)`"):
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! fn takes(_x: &Tensor<f32, (Batch, Hidden, Batch)>) {}
//! ```
//!
//! ### Dual axes and `transpose`
//!
//! [`Dual<A>`](crate::Dual) (the "anti-star" axis) is an axis distinct from `A`. It pairs with
//! `A` first in [`dot`](crate::dot) (below), which is what a square weight needs: a
//! `(Dual<Hidden>, Hidden)` weight applied to a tensor over `Hidden` gives a tensor over
//! `Hidden` again. A `Dual<A>` has a length of its own, like any axis (a fixed length of `A`
//! carries over); where `dot` pairs it with `A`, the two lengths must agree.
//! `Dual<Dual<A>>` is not an axis: writing it is a compile error, since the dual of `Dual<A>`
//! is `A`.
//!
//! [`Tensor::transpose`](crate::Tensor::transpose) maps every axis `A` of a tensor to
//! `Dual<A>` and every `Dual<A>` back to `A`, with the same elements (no copy). With the
//! pairing rule of `dot`, `dot(x, y)` equals `transpose(dot(transpose(y), transpose(x)))`:
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct In;
//! #[derive(Axis)] struct Out;
//!
//! let x = Tensor::<f64, (Batch, In)>::from_vec((Batch.len(2), In.len(2)), vec![1., 2., 3., 4.])?;
//! let w = Tensor::<f64, (In, Out)>::from_fn((In.len(2), Out.len(3)), |ix| {
//!     (ix.of::<In>() + 2 * ix.of::<Out>()) as f64
//! })?;
//! let xt: Tensor<f64, (Dual<Batch>, Dual<In>)> = x.transpose();
//! let wt: Tensor<f64, (Dual<In>, Dual<Out>)> = w.transpose();
//! let y: Tensor<f64, (Batch, Out)> = dot(&x, &w)?;
//! let back: Tensor<f64, (Out, Batch)> = dot(&wt, &xt)?.transpose();
//! assert_eq!(y, back);
//! // A square weight pairs its Dual<In> with x's In and keeps its own In.
//! let eye = Tensor::<f64, (Dual<In>, In)>::eye(In.len(2))?;
//! let same: Tensor<f64, (Batch, In)> = dot(&x, &eye)?;
//! assert_eq!(same, x);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Hidden;
//! // `Dual<Hidden>` is already a dual axis, so `Dual<Dual<Hidden>>` is not an axis
//! fn takes(_w: &Tensor<f32, (Dual<Dual<Hidden>>, Hidden)>) {}
//! ```
//!
//! ## Element-wise results: broadcasting by axis
//!
//! Element-wise operations pair their operands' axes by type. An axis only one operand has is
//! broadcast: the other operand's value is repeated along it. The result has the union of the
//! axes, in this order:
//!
//! 1. the same set, in any order: the left operand's order;
//! 2. one operand's set contains the other's: that operand's order;
//! 3. otherwise: the left operand's axes, then the right operand's axes that the left lacks.
//!
//! So `(H, W) + (H,)` is `(H, W)`; `(H, W) + (N, H, W)` is `(N, H, W)`; `(H, W) + (W, N)` is
//! `(H, W, N)`; `(C, H, W) + (N, W, H)` is `(C, H, W, N)`; and `(H,) + (W,)` is `(H, W)` while
//! `(W,) + (H,)` is `(W, H)`. The order is computed by the compiler
//! ([`Broadcast`](crate::list::Broadcast)), so a result's type is known where it is written.
//!
//! The same rule holds for the operators `+ - * / %`, for comparisons (`x.less(&y)`, giving
//! `bool` tensors), for element-wise methods of two operands (`max`, `min`, `pow`), for
//! [`select`](crate::select) (the condition with the first value, then with the second), for
//! `map_with`, and for expressions of variables in [`crate::autodiff`]. A scalar has no axes,
//! so the result has the tensor's (rule 2). A unary operation keeps its operand's axes.
//!
//! Every axis the operands share must have one length. A mismatch is found when the
//! expression is evaluated and reported as [`Error::LengthMismatch`], naming the axis and
//! both lengths.
//!
//! ```
//! use axes::prelude::*;
//! use axes::list::Broadcast;
//! use std::any::TypeId;
//! #[derive(Axis)] struct N;
//! #[derive(Axis)] struct C;
//! #[derive(Axis)] struct H;
//! #[derive(Axis)] struct W;
//! fn same<X: 'static, Y: 'static>() -> bool { TypeId::of::<X>() == TypeId::of::<Y>() }
//!
//! assert!(same::<Broadcast<(H, W), (W, H)>, (H, W)>());             // rule 1
//! assert!(same::<Broadcast<(H, W), (H,)>, (H, W)>());               // rule 2
//! assert!(same::<Broadcast<(H, W), (N, H, W)>, (N, H, W)>());       // rule 2
//! assert!(same::<Broadcast<(H, W), (W, N)>, (H, W, N)>());          // rule 3
//! assert!(same::<Broadcast<(C, H, W), (N, W, H)>, (C, H, W, N)>()); // rule 3
//! assert!(same::<Broadcast<(H,), (W,)>, (H, W)>());
//! assert!(same::<Broadcast<(W,), (H,)>, (W, H)>());
//!
//! let x = Tensor::<f32, (H, W)>::from_vec((H.len(2), W.len(3)), vec![0., 1., 2., 3., 4., 5.])?;
//! let per_row = Tensor::<f32, (H,)>::from_vec(H.len(2), vec![10., 20.])?;
//! // per_row is repeated along W
//! let y: Tensor<f32, (H, W)> = (&x + &per_row).eval()?;
//! assert_eq!(y.to_vec(), [10., 11., 12., 23., 24., 25.]);
//! let big: Tensor<bool, (H, W)> = x.greater(2.5).eval()?;
//! assert_eq!(big.to_vec(), [false, false, false, true, true, true]);
//! // Building the expression cannot fail; evaluating it checks the lengths.
//! let short = Tensor::<f32, (W,)>::zeros(W.len(4))?;
//! let err = (&x + &short).eval().unwrap_err();
//! assert_eq!(err.to_string(), "axis `W` has length 3 in one operand and 4 in the other");
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ## Contractions: `dot`, `dot_over`, `outer`
//!
//! [`dot(x, y)`](crate::dot) pairs axes in two steps, each axis contracted at most once:
//!
//! 1. the dual pairs: a `Dual<A>` on one side with an `A` on the other;
//! 2. then every axis still unpaired that both operands have.
//!
//! The result has `x`'s remaining axes, then `y`'s: `(A, B, C)·(B, C, D)` is `(A, D)`;
//! `(A, B)·(A,)` is `(B,)`; `(Dual<H>, H)·(H, B)` is `(H, B)` and `(B, H)·(Dual<H>, H)` is
//! `(B, H)`, the square weight from either side. `dot` contracts *every* axis both operands
//! have, as NumPy's `tensordot` over all common axes does, and unlike `x @ w` on batched
//! operands. Paired axes must have equal lengths ([`Error::LengthMismatch`]). A `dot` is
//! computed when called, as one (batched) matrix product, and returns a `Result`; it is not
//! part of a fused expression. Integer products wrap.
//!
//! A `dot` that would contract nothing is a compile error: an outer product from `dot` is
//! almost always a slip. An outer product is written [`outer(&x, &y)`](crate::outer): the
//! operands share no axis (a shared one would appear twice in the result, a compile error),
//! and the result has `x`'s axes, then `y`'s.
//!
//! [`dot_over::<Over, _, _, _>(&x, &y)`](crate::dot_over) contracts only the axes `Over`,
//! which both operands must have (a compile error otherwise). Every other axis both have is a
//! batch axis, kept once. The result has `x`'s axes but `Over`, in `x`'s order, then `y`'s
//! axes that are in neither. This is the form for attention's scores: `(Batch, Head, Query,
//! Dim)` and `(Batch, Head, Key, Dim)` over `(Dim,)` give `(Batch, Head, Query, Key)`.
//!
//! In index notation, a right-hand side that is exactly one product of two operands with
//! summed axes is a contraction too, run as `dot_over`:
//! `tensor!([Batch, Class] = x[Batch, Hidden] * w[Hidden, Class])`.
//!
//! ```
//! use axes::prelude::*;
//! use axes::list::DotAxes;
//! use std::any::TypeId;
//! #[derive(Axis)] struct A;
//! #[derive(Axis)] struct B;
//! #[derive(Axis)] struct C;
//! #[derive(Axis)] struct D;
//! #[derive(Axis)] struct H;
//! fn same<X: 'static, Y: 'static>() -> bool { TypeId::of::<X>() == TypeId::of::<Y>() }
//!
//! assert!(same::<DotAxes<(A, B, C), (B, C, D)>, (A, D)>());
//! assert!(same::<DotAxes<(A, B), (A,)>, (B,)>());
//! assert!(same::<DotAxes<(Dual<H>, H), (H, B)>, (H, B)>());
//! assert!(same::<DotAxes<(B, H), (Dual<H>, H)>, (B, H)>());
//!
//! // dot_over keeps the other shared axes as batch axes
//! let x = Tensor::<f32, (B, C, H)>::ones((B.len(2), C.len(3), H.len(4)))?;
//! let y = Tensor::<f32, (B, D, H)>::ones((B.len(2), D.len(5), H.len(4)))?;
//! let scores: Tensor<f32, (B, C, D)> = dot_over::<(H,), _, _, _>(&x, &y)?;
//! assert!(scores.to_vec().iter().all(|&s| s == 4.0));
//! // dot contracts B as well
//! let summed: Tensor<f32, (C, D)> = dot(&x, &y)?;
//! assert!(summed.to_vec().iter().all(|&s| s == 8.0));
//! // the same contraction in index notation
//! let again = tensor!([B, C, D] = x[B, C, H] * y[B, D, H])?;
//! assert_eq!(again, scores);
//! // an outer product is asked for by name
//! let row = Tensor::<i32, (A,)>::from_vec(A.len(2), vec![1, 2])?;
//! let col = Tensor::<i32, (D,)>::from_vec(D.len(3), vec![1, 10, 100])?;
//! let table: Tensor<i32, (A, D)> = outer(&row, &col)?;
//! assert_eq!(table.to_vec(), [1, 10, 100, 2, 20, 200]);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! `dot` of operands that share no axis ("`dot` of `(Batch, Feature)` and `(Hidden, Class)`
//! would contract no axis"):
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Feature;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Class;
//! let x = Tensor::<f32, (Batch, Feature)>::zeros((Batch.len(2), Feature.len(3))).unwrap();
//! let w = Tensor::<f32, (Hidden, Class)>::zeros((Hidden.len(3), Class.len(4))).unwrap();
//! let y = dot(&x, &w);
//! ```
//!
//! ## Reductions
//!
//! A reduction names the axes it removes, as a tuple: `x.sum::<(Batch,)>()`. The result has
//! the remaining axes in `x`'s order. The reductions are `sum`, `prod`, `max_over`,
//! `min_over`, and, for float elements, `mean`, `var`, `std` and `logsumexp`; `sum_all`
//! reduces every axis to one value. [`argmax`](crate::argmax) and [`argmin`](crate::argmin)
//! remove one axis and give `i64` positions (the first on ties).
//! [`x.softmax::<X>()`](crate::Tensor::softmax) and
//! [`x.log_softmax::<X>()`](crate::Tensor::log_softmax) normalise along one axis and keep
//! every axis.
//!
//! - The axes may be listed in any order. They must be distinct and each must be one of the
//!   tensor's: naming an axis the tensor lacks is a compile error.
//! - An empty list, `x.sum::<()>()`, reduces nothing: the result has `x`'s axes and values.
//! - A reduction runs fused with the expression it reduces: `(&x * &y).sum::<(Hidden,)>()`
//!   reads `x` and `y` once and makes no temporary.
//! - Integer sums wrap on overflow. A maximum or minimum is NaN where any element is NaN.
//!   `mean`, `var`, `std` and `logsumexp` on integers are a compile error: cast first.
//! - Over an empty axis, `sum` gives 0 and `prod` gives 1 (their identities), and `mean` gives
//!   NaN. `max_over`, `min_over`, `argmax` and `argmin` have no value there:
//!   [`Error::EmptyReduction`], naming the axis.
//!
//! There is no public keep-dims reduction. Two forms cover its uses. Generic code bounds its
//! axes `A: Reducible<Over>` ([`crate::doc::generic_code`]); then `x - &x.mean::<Over>()?` has
//! the axes `A` again. And where the axes to *keep* are the ones to write, index notation
//! names them and sums the rest: `tensor!([Time] = x[Batch, Time, Hidden])`.
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Time;
//! #[derive(Axis)] struct Hidden;
//!
//! let x = Tensor::<f32, (Batch, Time, Hidden)>::from_fn(
//!     (Batch.len(2), Time.len(3), Hidden.len(4)),
//!     |ix| ix.of::<Time>() as f32,
//! )?;
//! let s: Tensor<f32, (Batch, Hidden)> = x.sum::<(Time,)>()?;
//! assert!(s.to_vec().iter().all(|&v| v == 3.0));
//! let m: Tensor<f32, (Time,)> = x.mean::<(Hidden, Batch)>()?;
//! assert_eq!(m.to_vec(), [0., 1., 2.]);
//! assert_eq!(x.sum::<()>()?, x);
//! let last: Tensor<i64, (Batch, Hidden)> = argmax::<_, _, Time>(&x)?;
//! assert!(last.to_vec().iter().all(|&t| t == 2));
//! // the axes to keep, written out: Batch and Hidden are summed
//! let per_time = tensor!([Time] = x[Batch, Time, Hidden])?;
//! assert_eq!(per_time.to_vec(), [0., 8., 16.]);
//! // a reduced result combines with its input and gives the input's axes back
//! let centered: Tensor<f32, (Batch, Time, Hidden)> = (&x - &x.mean::<(Time,)>()?).eval()?;
//! assert_eq!(centered.sum_all()?, 0.0);
//!
//! // empty axes
//! let e = Tensor::<f32, (Batch, Time)>::zeros((Batch.len(2), Time.len(0)))?;
//! assert_eq!(e.sum::<(Time,)>()?.to_vec(), [0., 0.]);
//! assert_eq!(e.prod::<(Time,)>()?.to_vec(), [1., 1.]);
//! assert!(e.mean::<(Time,)>()?.to_vec().iter().all(|m| m.is_nan()));
//! assert_eq!(
//!     e.max_over::<(Time,)>().unwrap_err().to_string(),
//!     "cannot take the maximum over the empty axis `Time`: it has length 0"
//! );
//! assert!(argmax::<_, _, Time>(&e).is_err());
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! Reducing over an axis the tensor lacks ("axis `Class` of `(Class,)` is not among the axes
//! `(Batch, Hidden)`"), even when its length would fit:
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Class;
//! let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(4), Hidden.len(4))).unwrap();
//! let s = x.sum::<(Class,)>();
//! ```
//!
//! ## Views
//!
//! A view is a new description (a [`Layout`](crate::Layout): lengths, strides, offset) of the
//! same storage. Making one copies nothing, except where a method says so.
//!
//! - `axes_with_order::<O>()`: the same axes in another order.
//! - `broadcast::<O>(lengths)`: a superset of the axes, in any order; each new axis gets the
//!   length given for it and stride 0, so every position along it reads the same element.
//! - `cast_axes::<B>()`: the axes renamed to `B`, position by position. `B` must have as many
//!   axes (a compile error otherwise); a fixed length of `B` is checked. `rename::<X, Y>()`
//!   renames one axis, which then comes last.
//! - `slice::<X>(range, step)`: every `step`-th position of `range` along `X`; a negative
//!   step runs backwards from the end of the range; a step of 0 or a range past the end is an
//!   error. `index(X.at(i))` takes one position and removes the axis `X` from the type.
//!   `split` and `iter_axis` give such views in turn.
//! - `pad::<X>(before, after)`: zeros before and after along `X`, read through the view;
//!   nothing is stored for them until the tensor is copied or written.
//! - `transpose()`: every `A` to `Dual<A>` and back (above).
//! - `flatten::<L>()`: the axes `L` merged into one axis [`Flat<L>`](crate::Flat), last in
//!   the result, whose positions run through `L` row-major. It is a view when the strides
//!   allow it (`L` contiguous, in storage order); otherwise the elements are copied first.
//!   `unflatten::<L>()` splits `Flat<L>` back without being given the lengths: `flatten`
//!   remembers them. A `Flat<L>` that did not come from `flatten`, or whose length changed
//!   since, is an error.
//! - Writable sub-views: `slice_mut` and `index_mut` give a [`ViewMut`](crate::ViewMut) that
//!   `assign`, `fill` and `add_sum` write into, in the tensor's own buffer.
//! - Many tensors at offsets of one buffer: an [`Arena`](crate::arena::Arena), such as the
//!   parameters of a model ([`nn::Params`](crate::nn::Params)), so that one pass over the
//!   buffer updates every tensor.
//!
//! Storage is shared and reference-counted, and writes never show through other tensors:
//! writing into a buffer that another tensor or view shares copies it first (copy-on-write).
//! That holds for arenas too: views taken out before a write keep their values.
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Time;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Embedding;
//!
//! let x = Tensor::<i32, (Time, Hidden)>::from_fn((Time.len(4), Hidden.len(2)), |ix| {
//!     (ix.of::<Time>() * 10 + ix.of::<Hidden>()) as i32
//! })?;
//! let t: Tensor<i32, (Hidden, Time)> = x.axes_with_order();
//! let b: Tensor<i32, (Batch, Time, Hidden)> = x.broadcast(Batch.len(3))?;
//! assert_eq!(b.layout().strides()[0], 0);
//! let e: Tensor<i32, (Time, Embedding)> = x.cast_axes()?;
//! let backwards = x.slice::<Time>(.., -2)?;
//! assert_eq!(backwards.index(Hidden.at(0))?.to_vec(), [30, 10]);
//! let p = x.pad::<Time>(1, 0)?;
//! assert_eq!(p.index(Hidden.at(1))?.to_vec(), [0, 1, 11, 21, 31]);
//! let f: Tensor<i32, (Flat<(Time, Hidden)>,)> = x.flatten::<(Time, Hidden)>()?;
//! assert_eq!(f.to_vec(), x.to_vec());
//! let back: Tensor<i32, (Time, Hidden)> = f.unflatten::<(Time, Hidden)>()?;
//! assert_eq!(back, x);
//! // none of them copied anything
//! assert!(t.shares_storage_with(&x) && b.shares_storage_with(&x) && e.shares_storage_with(&x));
//! assert!(backwards.shares_storage_with(&x) && p.shares_storage_with(&x));
//! assert!(f.shares_storage_with(&x));
//!
//! // a write copies a shared buffer first: x keeps its values
//! let mut y = x.clone();
//! y.slice_mut::<Time>(0..2, 1)?.fill(-1)?;
//! assert_eq!(y.index(Hidden.at(0))?.to_vec(), [-1, -1, 20, 30]);
//! assert_eq!(x.index(Hidden.at(0))?.to_vec(), [0, 10, 20, 30]);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ## Element types and casts
//!
//! - A tensor holds one of eight element types ([`Element`](crate::Element)): `f32`, `f64`,
//!   `half::f16`, `half::bf16`, `i32`, `i64`, `u8` and `bool`.
//! - Arithmetic needs a numeric type ([`Num`](crate::Num): all but `bool`); `exp`, `ln`,
//!   `mean` and the like need a float type ([`Float`](crate::Float)); bitwise operations and
//!   shifts need an integer type. Another type is a compile error that says which.
//! - Both operands of an operation have one element type. Types never convert implicitly:
//!   mixing `f32` and `f64` is a compile error, and the fix is a cast of one side. A scalar
//!   operand takes the expression's element type, so `&x * 2.0` works for every float type.
//! - `x.cast::<U>()` converts every element as Rust's `as` does: floats to integers truncate
//!   and saturate, and NaN gives 0. It is an expression, so it fuses with what surrounds it.
//!   Assignment converts too (below).
//! - Integer arithmetic wraps. An integer division or remainder by zero is
//!   [`Error::DivisionByZero`] when the expression is evaluated. `%` truncates like Rust's:
//!   the result has the sign of the dividend.
//! - `f16` and `bf16` compute each operation in `f32` and round the result. Sums, products,
//!   means and variances combine in `f32` and round once: in `bf16`, with 8 significant bits,
//!   a long running sum would stall. Matrix products of half types also compute in `f32`.
//! - Mixed precision trains a model in a half type over `f32` master weights:
//!   [`Params::bind_as::<bf16>`](crate::nn::Params::bind_as) records a 16-bit working copy of
//!   the parameters on the tape, which each optimizer step rewrites from the `f32` weights it
//!   updates; [`Gradient::widened`](crate::nn::Gradient::widened) turns the half gradient into
//!   the master's. `f16`, whose smallest normal value is 6·10⁻⁵, also needs a
//!   [`LossScale`](crate::optim::LossScale): the backward pass runs from the loss times a
//!   scale, and a step whose gradient overflowed is skipped on the device, without a read
//!   back. [`Device::allow_tf32`](crate::Device::allow_tf32) lets `f32` products on CUDA use
//!   TF32 (off by default; ignored elsewhere).
//!
//! ```
//! use axes::prelude::*;
//! use half::bf16;
//! #[derive(Axis)] struct Row;
//!
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(4), vec![-1.5, 2.7, 300.0, f32::NAN])?;
//! assert_eq!(x.cast::<i32>().eval()?.to_vec(), [-1, 2, 300, 0]);
//! assert_eq!(x.cast::<u8>().eval()?.to_vec(), [0, 2, 255, 0]);
//! let y = Tensor::<f64, (Row,)>::ones(Row.len(4))?;
//! let z: Tensor<f64, (Row,)> = (x.cast::<f64>() + &y).eval()?;
//! assert_eq!(z.get(Row.at(0))?, -0.5);
//!
//! let small = Tensor::<u8, (Row,)>::from_vec(Row.len(4), vec![250, 7, 0, 1])?;
//! assert_eq!((&small + 10).eval()?.to_vec(), [4, 17, 10, 11]);
//! let zeros = Tensor::<u8, (Row,)>::zeros(Row.len(4))?;
//! assert_eq!((&small / &zeros).eval().unwrap_err(), axes::Error::DivisionByZero);
//!
//! let ones = Tensor::<bf16, (Row,)>::ones(Row.len(65_536))?;
//! assert_eq!(ones.sum_all()?, bf16::from_f32(65_536.0));
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//! let x = Tensor::<f32, (Row,)>::zeros(Row.len(2)).unwrap();
//! let y = Tensor::<f64, (Row,)>::zeros(Row.len(2)).unwrap();
//! // an operand of `f64` elements in an expression of `f32` elements
//! let z = (&x + &y).eval();
//! ```
//!
//! ## Assignment
//!
//! - `eval()` makes a new tensor in the expression's axis order; `eval_in::<O>()` in any
//!   order `O` of the same axes.
//! - [`z.assign(expr)`](crate::Tensor::assign) evaluates into an existing tensor. The
//!   expression's axes must be `z`'s, in any order, and every length must match (else
//!   [`Error::LengthMismatch`]). Elements are converted to `z`'s type.
//! - A destination with a different axis set is a compile error, with fewer axes or more. The
//!   bug this library exists to stop is an axis summed by accident, so an axis is summed only
//!   where the code says so: a named reduction; [`add_sum`](crate::Tensor::add_sum) and
//!   [`assign_sum`](crate::Tensor::assign_sum), which name the axes summed into the
//!   destination; or index notation. Repeating a tensor along more axes is written with
//!   `broadcast`.
//! - Index notation, [`tensor!`](crate::tensor!): `tensor!(z[A, B] = ...)` writes into `z`,
//!   `tensor!(z[A, B] += ...)` adds into it, and `tensor!([A, B] = ...)` makes a new tensor.
//!   The written axes of each operand must be its type's, in any order. Axes on the right but
//!   not on the left are summed, as in einsum. Such an axis must appear in every top-level
//!   term of a `+` or `-`; otherwise write the sum, `sum[Axis](..)`. An axis on the left that
//!   is missing on the right is an error the macro reports at that axis.
//! - A tensor cannot be both the destination and an operand: the borrow checker refuses
//!   `z.assign(&z * 2.0)`. An operand may still share the destination's buffer, as a clone or
//!   a view of it. Then the write copies the buffer first (copy-on-write) and the operands
//!   read the old values: the result is the one a fresh destination would get, never a mix.
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//! #[derive(Axis)] struct Col;
//!
//! let x = Tensor::<f32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1., 2., 3., 4.])?;
//! // any order of the same axes, another element type
//! let mut y = Tensor::<f64, (Col, Row)>::zeros((Row.len(2), Col.len(2)))?;
//! y.assign(&x * 2.0)?;
//! assert_eq!(y.get((Row.at(1), Col.at(0)))?, 6.0);
//! // fewer axes only by naming the sum: Row is summed
//! let mut per_col = Tensor::<f32, (Col,)>::zeros(Col.len(2))?;
//! per_col.assign_sum::<(Row,), _>(&x)?;
//! assert_eq!(per_col.to_vec(), [4., 6.]);
//! // or in index notation: Row is on the right only
//! tensor!(per_col[Col] += x[Row, Col])?;
//! assert_eq!(per_col.to_vec(), [8., 12.]);
//! // x plus its transpose, into a tensor that shares x's buffer
//! let mut z = x.clone();
//! z.assign(&x + x.axes_with_order::<(Col, Row)>().cast_axes::<(Row, Col)>()?)?;
//! assert_eq!(z.to_vec(), [2., 5., 5., 8.]);
//! assert_eq!(x.to_vec(), [1., 2., 3., 4.]);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! Assigning into a different axis set ("axis `Hidden` of `(Batch, Hidden)` is not among the
//! axes `(Batch,)`"): `Hidden` would be summed by accident.
//!
//! ```compile_fail,E0277
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(2), Hidden.len(3))).unwrap();
//! let mut per_batch = Tensor::<f32, (Batch,)>::zeros(Batch.len(2)).unwrap();
//! per_batch.assign(&x).unwrap();
//! ```
//!
//! ## Errors
//!
//! - What the types can check is a compile error: the axes of every operation.
//! - What they cannot (lengths, indices, devices, memory, files) is a value of one error
//!   type, [`axes::Error`](crate::Error), returned in an [`axes::Result`](crate::Result).
//!   Messages name the axis and the lengths involved.
//! - Operators and element-wise methods only build an expression; building never fails and
//!   never panics. Lengths are checked when the expression is evaluated (`eval`, `assign`, a
//!   reduction) or, for `dot`, when it is called. All of these return a `Result`.
//! - Conveniences that return a plain value say when they panic (`Tensor::to_vec`, when a
//!   device fails while copying to the host) and have a `try_` form that returns the error.
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//! #[derive(Axis)] struct Col;
//!
//! let x = Tensor::<f32, (Row, Col)>::zeros((Row.len(2), Col.len(3)))?;
//! let y = Tensor::<f32, (Col,)>::zeros(Col.len(4))?;
//! let sum = &x + &y; // no error yet
//! assert_eq!(
//!     sum.eval().unwrap_err(),
//!     axes::Error::LengthMismatch { axis: "Col".into(), left: 3, right: 4 }
//! );
//! assert_eq!(
//!     x.get((Row.at(2), Col.at(0))).unwrap_err().to_string(),
//!     "index 2 is out of range for axis `Row` of length 2"
//! );
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ## Devices
//!
//! - A [`Device`](crate::Device) is a value chosen at run time, often by name:
//!   [`axes::device`](crate::device) takes `cpu`, `cuda`, `cuda:N`, `opencl` or `opencl:0`. A
//!   device this build or this machine lacks is [`Error::DeviceUnavailable`], naming it and
//!   why.
//! - `Device::Cpu` is host memory. The CPU engine runs it directly: a loop nest compiled for
//!   each expression (the IR interpreter for very deep ones) and the `gemm` crate for
//!   products. Host tensors never go through the device protocol.
//! - Every other device is run by a backend through the device protocol
//!   ([`crate::protocol`]): expressions are lowered to jobs, and CUDA and OpenCL run them as
//!   generated kernels.
//! - `x.to(&device)` copies a tensor to a device (a tensor already there is returned as it
//!   is). Expressions, reductions, assignments and `dot` over tensors on one device run
//!   there, and their results stay there. Reading elements (`to_vec`, `get`) copies them to
//!   the host.
//! - Operands on different devices are [`Error::DeviceMismatch`], naming both: never an
//!   implicit copy. `eval_on`, `sum_on`, `reduce_on` and [`dot_on`](crate::dot_on) run one
//!   call on a device, copying host operands there and the result back.
//! - Closures (`map`, `map_with`) have no kernel: they run in host memory only, and a device
//!   refuses them.
//! - [`backends::cpu`](crate::backends::cpu) is the CPU run through the device protocol: a
//!   test device that runs the jobs devices get, on the IR interpreter. With it every
//!   `cargo test` checks the device path, on any machine.
//!
//! ```
//! use axes::prelude::*;
//! use axes::backends::cpu::CPU_BACKEND;
//! #[derive(Axis)] struct Row;
//!
//! assert_eq!(axes::device("cpu")?, Device::Cpu);
//! let device = Device::Backend(&CPU_BACKEND);
//! let host = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![1., 2., 3.])?;
//! let x = host.to(&device)?;
//! let y = (&x * 2.0).sum::<(Row,)>()?; // a job on `device`
//! assert_eq!(y.device(), device);
//! assert_eq!(y.to_vec(), [12.0]);
//! // a tensor on another device is an error, never a silent copy
//! let err = (&x + &host).eval().unwrap_err();
//! assert!(matches!(err, axes::Error::DeviceMismatch { .. }));
//! let z = (&x.to(&Device::Cpu)? + &host).eval()?;
//! assert_eq!(z.to_vec(), [2., 4., 6.]);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! [`Error::DeviceMismatch`]: crate::Error::DeviceMismatch
//! [`Error::DeviceUnavailable`]: crate::Error::DeviceUnavailable
//! [`Error::DivisionByZero`]: crate::Error::DivisionByZero
//! [`Error::EmptyReduction`]: crate::Error::EmptyReduction
//! [`Error::FixedLength`]: crate::Error::FixedLength
//! [`Error::LengthMismatch`]: crate::Error::LengthMismatch
