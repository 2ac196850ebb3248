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
//! | `x @ w` | `dot(&x, &w)?` — contracts the axes both have, whatever their positions |
//! | `np.pad(x, ((0, 0), (1, 2)))` | `x.pad::<Hidden>(1, 2)?` (a view: nothing stored for the zeros) |
//! | `x.reshape(32, -1)` | `x.flatten::<(Channel, Height, Width)>()?` into `Flat<(Channel, Height, Width)>` |
//! | `x.astype(np.float64)` | `x.cast::<f64>().eval()?` |
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
//! assert_eq!(y, y.to_layout::<(Out, Batch)>());
//! # Ok::<(), axes::Error>(())
//! ```
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
