//! # Writing generic code over axes
//!
//! A function that works for tensors of any axes takes the axes as a type parameter `A` and
//! says, by one bound on `A`, what it does with them. Each operation has one such bound, in
//! the prelude:
//!
//! | the function does | bound on its axes `A` |
//! |---|---|
//! | `x.sum::<Over>()`, `mean`, `max_over`, `var`, ...; combines the result, or a tensor over `Over`, with `x` | `A: Reducible<Over>` |
//! | `x.len_of::<X>()`, `x.softmax::<X>()`, `argmax`, `x.slice::<X>(..)` | `A: HasAxis<X>` |
//! | `&x + &y`, `&x * &y`, comparisons with `y` over other axes `R` | `A: ElementwiseWith<R>` (result axes `Broadcast<A, R>`) |
//! | the same when every axis of `R` is in `A` (a per-feature gain): the result keeps `A` | `A: Includes<R>` |
//! | `dot(&x, &w)` with `w` over `R` | `A: DotWith<R>` (result axes `DotAxes<A, R>`) |
//! | `dot_over::<Over, _, _, _>(&x, &y)` | `A: DotOverWith<R, Over>` |
//! | `x.axes_with_order::<O>()`, `z.assign(expr)` | `A: SameAxes<O>` |
//! | `&x + &y` with `y` over `A` too, `&x * 2.0`, `x.exp()` | `A: AxisSet` (every tensor's axes) |
//!
//! Each bound is checked again, with concrete axes, where the function is called: calling it
//! on tensors that lack the axis is a compile error there. Forgetting the bound gives an
//! error on the operation whose note lists these bounds.
//!
//! ## A generic layer norm
//!
//! Layer norm over one named axis `F`, for tensors with any other axes. It reduces over `F`
//! and combines the input with the mean and variance (`Reducible<(F,)>`), then with the gain
//! and bias over `F` (`Includes<(F,)>`); every result has the input's axes.
//!
//! ```
//! use axes::prelude::*;
//!
//! /// `(x - mean) / sqrt(var + eps) * gain + bias`, the statistics taken over axis `F`.
//! fn layer_norm<F: Axis, A: Reducible<(F,)> + Includes<(F,)>>(
//!     x: &Tensor<f32, A>,
//!     gain: &Tensor<f32, (F,)>,
//!     bias: &Tensor<f32, (F,)>,
//!     eps: f32,
//! ) -> axes::Result<Tensor<f32, A>> {
//!     let mean = x.mean::<(F,)>()?;
//!     let centered = (x - &mean).eval()?;
//!     let var = (&centered).square().mean::<(F,)>()?;
//!     (&centered / (var + eps).sqrt() * gain + bias).eval()
//! }
//!
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Token;
//! #[derive(Axis)] struct Hidden;
//!
//! let gain = Tensor::<f32, (Hidden,)>::ones(Hidden.len(4))?;
//! let bias = Tensor::<f32, (Hidden,)>::zeros(Hidden.len(4))?;
//!
//! // The same function on (Batch, Hidden) and on (Token, Hidden, Batch):
//! let x = Tensor::<f32, (Batch, Hidden)>::from_vec(
//!     (Batch.len(1), Hidden.len(4)),
//!     vec![1., 2., 3., 4.],
//! )?;
//! let y = layer_norm(&x, &gain, &bias, 0.0)?;
//! let sd = 1.25f32.sqrt();
//! let expected = [-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd];
//! assert!(y.to_vec().iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-6));
//!
//! let z = Tensor::<f32, (Token, Hidden, Batch)>::random_normal(
//!     (Token.len(3), Hidden.len(4), Batch.len(2)),
//!     0.0,
//!     1.0,
//!     7,
//! )?;
//! let normed = layer_norm(&z, &gain, &bias, 1e-5)?;
//! // every (Token, Batch) row now has mean 0 over Hidden
//! let means = normed.mean::<(Hidden,)>()?;
//! assert!(means.to_vec().iter().all(|m| m.abs() < 1e-5));
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! Called on tensors without the axis, it does not compile — at the call, naming the axes:
//!
//! ```compile_fail
//! # use axes::prelude::*;
//! # fn layer_norm<F: Axis, A: Reducible<(F,)> + Includes<(F,)>>(x: &Tensor<f32, A>, gain: &Tensor<f32, (F,)>) {}
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Class;
//! let x = Tensor::<f32, (Batch, Class)>::zeros((Batch.len(2), Class.len(3))).unwrap();
//! let gain = Tensor::<f32, (Hidden,)>::ones(Hidden.len(3)).unwrap();
//! layer_norm(&x, &gain); // (Hidden,) is not among (Batch, Class)
//! ```
//!
//! ## What cannot be generic
//!
//! Two generic axes `F` and `G` may be the same type, so a tuple of both is a set of axes
//! only when the caller says so: bound `(F, G): AxisSet` (checked at each call with
//! concrete axes). A single generic axis `F` needs nothing: `(F,)` is always a set.
//!
//! Result types that depend on the axes are written with the aliases of [`crate::list`]:
//! `Broadcast<A, R>`, `DotAxes<A, R>`, `Difference<A, Over>` (what a reduction leaves), and
//! [`crate::contract::DotOverAxes`]. With concrete axes they are ordinary tuples again:
//! `Difference<(Batch, Hidden), (Hidden,)>` is `(Batch,)`.
