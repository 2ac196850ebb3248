//! # axes for NumPy users
//!
//! NumPy identifies an axis by its position; `axes` by its type. Most of what changes follows
//! from that: shapes are named, order is only a storage preference, and mixing up two axes is a
//! compile error rather than a silently wrong array.
//!
//! | NumPy | axes |
//! |---|---|
//! | `x = np.zeros((32, 64))` | `Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(32), Hidden.len(64)))?` |
//! | `x.shape[1]` | `x.len_of::<Hidden>()` |
//! | `x[3, 7]` | `x.get((Batch.at(3), Hidden.at(7)))?` (any order) |
//! | `x.T`, `np.transpose(x, (1, 0))` | `x.axes_with_order::<(Hidden, Batch)>()` (a view; rarely needed) |
//! | `x + b` with `b.shape == (64,)` | `&x + &b` — broadcast by axis name, never by trailing position |
//! | `x[:, ::-1]`, `x[:, 2:8:2]` | `x.slice::<Hidden>(.., -1)?`, `x.slice::<Hidden>(2..8, 2)?` |
//! | `x[3]` | `x.index(Batch.at(3))?` (the result type lacks `Batch`) |
//! | `x.sum(axis=0)` | `x.sum::<(Batch,)>()?` |
//! | `x.max(axis=1, keepdims=True)` | generic code uses keep-dims reductions internally; see `softmax` |
//! | `np.einsum("bi,io->bo", x, w)` | `tensor!([Batch, Out] = x[Batch, In] * w[In, Out])?` or `dot(&x, &w)?` |
//! | `x @ w` (matrices) | `dot(&x, &w)?` — contracts *every* axis both have, whatever their positions |
//! | `q @ k.transpose(-1, -2)` (batched) | `dot_over::<(Dim,), _, _, _>(&q, &k)?` — contracts `Dim` only; `Batch`, `Head` stay batch axes |
//! | `np.outer(x, y)`, `x[:, None] * y[None, :]` | `outer(&x, &y)?`, or `(&x * &y).eval()?` (broadcast by name) |
//! | `np.pad(x, ((0, 0), (1, 2)))` | `x.pad::<Hidden>(1, 2)?` (a view: nothing stored for the zeros) |
//! | `x.reshape(32, -1)` | `x.flatten::<(Channel, Height, Width)>()?` into `Flat<(Channel, Height, Width)>` |
//! | `x.astype(np.float64)` | `x.cast::<f64>().eval()?` |
//! | `np.fmod(x, y)` (not `x % y`, which floors) | `&x % &y` — truncated like Rust's `%`: the sign is `x`'s |
//! | `(img >> 4) & 0xF`, `x \| y`, `x ^ y`, `~x` | `img.shift_right(4).bit_and(0xF)`, `x.bit_or(&y)`, `x.bit_xor(&y)`, `x.bit_not()` (integers) |
//! | `np.vectorize(f)(x, y)` | `x.map_with(&y, \|a, b\| f(a, b))` (CPU only; broadcast by name) |
//!
//! ```
//! use axes::prelude::*;
//!
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Out;
//!
//! let x = Tensor::<f32, (Batch, Hidden)>::random_uniform((Batch.len(4), Hidden.len(3)), -1.0, 1.0, 0)?;
//! let w = Tensor::<f32, (Hidden, Out)>::random_uniform((Hidden.len(3), Out.len(2)), -1.0, 1.0, 1)?;
//! let b = Tensor::<f32, (Out,)>::zeros(Out.len(2))?;
//!
//! // x @ w + b
//! let y = (dot(&x, &w)? + &b).eval()?;
//! // the same in index notation: Hidden is on the right only, so it is summed
//! let z = tensor!([Batch, Out] = sum[Hidden](x[Batch, Hidden] * w[Hidden, Out]) + b[Out])?;
//! assert!(y.to_vec().iter().zip(z.to_vec()).all(|(a, b)| (a - b).abs() < 1e-6));
//!
//! // y.sum(axis=0): the axis is named, so it cannot be the wrong one
//! let per_output = y.sum::<(Batch,)>()?;
//! assert_eq!(per_output.lens(), &[2]);
//!
//! // Storage order is a preference: a transposed copy compares equal.
//! assert_eq!(y, y.to_layout::<(Out, Batch)>()?);
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! `x @ w` on batched operands multiplies matrices per batch entry; `dot` instead contracts
//! every axis the operands share, so attention scores name the one axis to contract:
//!
//! ```
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Head;
//! #[derive(Axis)] struct Query;
//! #[derive(Axis)] struct Key;
//! #[derive(Axis)] struct Dim;
//!
//! let q = Tensor::<f32, (Batch, Head, Query, Dim)>::ones((Batch.len(2), Head.len(4), Query.len(8), Dim.len(16)))?;
//! let k = Tensor::<f32, (Batch, Head, Key, Dim)>::ones((Batch.len(2), Head.len(4), Key.len(8), Dim.len(16)))?;
//! // q @ k.transpose(-1, -2): Batch and Head stay, Dim is summed
//! let scores: Tensor<f32, (Batch, Head, Query, Key)> = dot_over::<(Dim,), _, _, _>(&q, &k)?;
//! assert!(scores.to_vec().iter().all(|&s| s == 16.0));
//! // dot(&q, &k) would sum Batch, Head and Dim: its result has the axes (Query, Key)
//! let summed: Tensor<f32, (Query, Key)> = dot(&q, &k)?;
//! assert!(summed.to_vec().iter().all(|&s| s == 2.0 * 4.0 * 16.0));
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! Two compile errors a NumPy user meets first:
//! - "an operand of `f64` elements in an expression of `f32` elements": NumPy promotes,
//!   `axes` never converts implicitly; cast one side (`y.cast::<f32>()`).
//! - "mismatched types: expected `Tensor<f32, (Out, Batch)>`, found `Tensor<f32, (Batch,
//!   Out)>`" (E0308): the same axes in another order are another type. Reorder the result
//!   with `.axes_with_order::<(Out, Batch)>()` (a view, no copy), or declare the type the
//!   operation gives. (rustc cannot attach advice to a type mismatch, so this one says no
//!   more.)
//!
//! What NumPy would accept and `axes` rejects at compile time:
//!
//! ```compile_fail
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Class;
//! let x = Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(4), Hidden.len(4))).unwrap();
//! // the two axes have the same length, but Class is not one of them
//! let s = x.sum::<(Class,)>();
//! ```
//!
//! ```compile_fail
//! use axes::prelude::*;
//! #[derive(Axis)] struct Batch;
//! #[derive(Axis)] struct Hidden;
//! #[derive(Axis)] struct Class;
//! let x = Tensor::<f32, (Batch,)>::zeros(Batch.len(4)).unwrap();
//! let w = Tensor::<f32, (Hidden, Class)>::zeros((Hidden.len(4), Class.len(2))).unwrap();
//! // no shared axis: `dot` would contract nothing (an outer product is `outer(&x, &w)`)
//! let y = dot(&x, &w);
//! ```
