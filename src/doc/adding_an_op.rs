//! # Adding an element-wise op
//!
//! Every element-wise op is one row of a table in `axes-core/src/ir/ops.rs`. The row holds
//! everything the library needs to know about the op, and every part of the library that runs
//! ops reads the row. No op is ever looked up by its name. So an op is added by writing a row;
//! the compiler then points at the two other places that must name it, and the tests say
//! whether it is right on every device.
//!
//! ## The row
//!
//! There are three tables, each a macro that passes its rows to a macro given as an argument:
//! `for_each_unary_op!`, `for_each_binary_op!` and `for_each_compare_op!`. A row of the unary
//! table reads:
//!
//! ```text
//! /// doc comment: becomes the doc of the variant and of every generated method
//! Variant (method) "name": Domain, |x| scalar,
//!     kernel "float template" int "integer template",
//!     cost KIND,
//!     d |d, x, y, g| derivative;
//! ```
//!
//! - `Variant`: the op's variant of [`UnaryOp`](crate::ir::UnaryOp) (of
//!   [`BinaryOp`](crate::ir::BinaryOp), [`CompareOp`](crate::ir::CompareOp) in the other
//!   tables), and the name of its typed zero-sized op in [`crate::ir::unary`].
//! - `(method)`: the method name, optional. A row without one gets no method: `Neg` is the
//!   `-` operator, and the arithmetic rows of the binary table are `+ - * / %`.
//! - `"name"`: the op's name in IR text and in messages. A unit test in the same file checks
//!   that no two rows of the three tables share one.
//! - `Domain`: the element types the op accepts ([`Domain`](crate::ir::Domain)): `Num` (every
//!   numeric type), `Float` or `Int`. It bounds the methods (`x.exp()` on integers is a
//!   compile error) and the row's scalar function, and device kernels refuse other types.
//! - `|x| scalar`: the op on one element, a Rust expression in `x` of type `T: Num`, `Float`
//!   or `Int` as the domain says. It is built from the methods of those traits
//!   (`axes-core/src/num.rs`).
//! - `kernel "..."`: the op in C, for both kernel dialects (CUDA C and OpenCL C). `{x}` is the
//!   argument (`{a}` and `{b}` in the binary table); `{exp}`, or any other name, is that C
//!   math function for the element type (CUDA's `expf` for `f32`), so it must exist in both
//!   dialects; `{0.5}`, or any number, is that constant in the element type; `{bits}` and
//!   `{unsigned}` are the type's width and its unsigned type. `int "..."` is an optional
//!   second template for integers, for a `Num` row whose integer form differs (a unit test
//!   checks that only `Num` rows have one).
//! - `cost KIND`: what the op costs per element, one of the kinds of
//!   [`OpWeights`](crate::ir::OpWeights): `SIMPLE` (the cheap ops), `DIVISION` (divisions and
//!   square roots) or `TRANSCENDENTAL` (a polynomial of dozens of instructions: `exp`,
//!   `tanh`, `pow`). The CPU's cost model decides from it when a loop is worth splitting
//!   across threads.
//! - `d |d, x, y, g| derivative`: the adjoint of the argument, `g · dy/dx`, as IR built with
//!   [`Derive`](crate::ir::Derive) (`d.c(2.0)`, `d.mul(a, b)`, `d.unary(UnaryOp::Cos, x)`,
//!   `d.select(..)`, ...); `y` is the op's own result, so `exp` can reuse it. `None` where no
//!   gradient flows (`floor`, `signum`, the bitwise ops). A binary row's rule is
//!   `d |d, a, b, y, g|` and returns the adjoints of both arguments, `[Option, Option]`.
//!
//! A comparison row is shorter, `Variant (method) "name": |a, b| scalar, kernel "==";`: its
//! result is `bool` and no gradient flows through it.
//!
//! The macros that turn the rows into code are in `axes-core/src/ir/ops/generate.rs`; a new
//! row needs no change there.
//!
//! The `gelu` row (its derivative is a row of its own, `GeluDerivative`, so that GELU's
//! backward pass is one op and a product):
//!
//! ```text
//! /// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`
//! Gelu (gelu) "gelu": Float, |x| x.gelu(),
//!     kernel "{0.5} * ({x}) * ({1} + {tanh}({0.7978845608028654} * (({x}) + {0.044715} * ({x}) * ({x}) * ({x}))))",
//!     cost TRANSCENDENTAL,
//!     d |d, x, y, g| {
//!         let dx = d.unary(UnaryOp::GeluDerivative, x);
//!         Some(d.mul(g, dx))
//!     };
//! ```
//!
//! ## What comes from the row
//!
//! - The run-time op: `UnaryOp::Gelu` with its `name`, `domain`, `kernel` spelling, `apply`
//!   and `derivative`, its cost kind `OpWeights::of_unary(UnaryOp::Gelu)`, and a place in
//!   `UnaryOp::ALL`.
//! - The typed op `ir::unary::Gelu`, which the CPU loop engine inlines into the loop nest it
//!   compiles for each expression, with its cost kind (`UnaryFn::WEIGHT`) for the decision to
//!   split the loop across threads (`axes-core/src/engine/cost.rs`).
//! - The methods: on every expression ([`ExprExt`](crate::ExprExt),
//!   `axes-core/src/eval/ext.rs`), borrowing methods on [`Tensor`](crate::Tensor) for unary
//!   rows (`axes-core/src/eval/tensor_methods.rs`), and on variables for rows outside the
//!   `Int` domain (`axes-core/src/autodiff/fused.rs`: unary rows on `VarExpr` and `Var`,
//!   binary rows on `VarExpr`).
//! - The IR interpreter (`axes-core/src/engine/interp/kernels.rs`) runs the op for every
//!   element type through `apply_all` and `apply_all_int`, one `match` per block of elements.
//!   It serves the CPU backend, autodiff on the host and expressions too deep to compile.
//! - Both kernel dialects: `kernels/src/emit.rs` fills the row's template, so the op runs on
//!   CUDA and OpenCL with no kernel code written by hand. The NVRTC test
//!   (`backends/src/cuda/tests.rs`) compiles every row of `UnaryOp::ALL` and `BinaryOp::ALL`
//!   for every element type its domain accepts.
//! - Autodiff: the fused backward of an element-wise expression of variables
//!   (`axes-core/src/autodiff/fused.rs`) asks each node's op for its `derivative`.
//! - Index notation: in `tensor!`, any call `name(x)` of one argument is the method
//!   `x.name()` (`axes-macros/src/lower.rs`), so `gelu(x[Batch, Hidden])` works with no change
//!   to the macro.
//!
//! ```
//! use axes::autodiff::Tape;
//! use axes::ir::{Domain, OpWeights, UnaryOp};
//! use axes::prelude::*;
//! #[derive(Axis)] struct Row;
//!
//! // the row, read at run time
//! assert_eq!(UnaryOp::Gelu.name(), "gelu");
//! assert_eq!(UnaryOp::Gelu.domain(), Domain::Float);
//! assert!(UnaryOp::Gelu.kernel().float.contains("{tanh}"));
//! assert_eq!(OpWeights::of_unary(UnaryOp::Gelu), OpWeights::TRANSCENDENTAL);
//!
//! let x = Tensor::<f32, (Row,)>::from_vec(Row.len(3), vec![-1., 0., 2.])?;
//! let on_tensor = x.gelu().eval()?;
//! let on_expression = (&x * 1.0).gelu().eval()?;
//! let in_index_notation = tensor!([Row] = gelu(x[Row]))?;
//! assert_eq!(on_tensor, on_expression);
//! assert_eq!(on_tensor, in_index_notation);
//! // on a variable: the backward comes from the row's derivative (GELU'(0) = 0.5)
//! let tape = Tape::<f32>::new();
//! let v = tape.var(x.clone());
//! let grad = v.gelu().sum::<(Row,)>()?.backward()?.get(&v)?;
//! assert!((grad.get(Row.at(1))? - 0.5).abs() < 1e-6);
//! // on a device: a job (the CPU backend runs it on the interpreter)
//! let device = Device::Backend(&axes::backends::cpu::CPU_BACKEND);
//! let on_device = x.to(&device)?.gelu().eval()?.to(&Device::Cpu)?;
//! let mut pairs = on_device.to_vec().into_iter().zip(on_tensor.to_vec());
//! assert!(pairs.all(|(a, b)| (a - b).abs() < 1e-6));
//! # Ok::<(), axes::Error>(())
//! ```
//!
//! ## Files that must follow
//!
//! The compiler enforces one place besides the row: the `f64` reference that device results
//! are checked against, the exhaustive `match` in `eval` of
//! `backends/tests/common/reference.rs`. It breaks the tests' build, not the library's.
//!
//! The random expressions of the shared backend suite (`random_ir` in the same file) draw
//! their ops from the table's `ALL` lists, so a new row is run on every backend against that
//! reference at once. If the op is not finite on every finite input, give it an arm there
//! that keeps its argument in its domain, as `ln` has: the suite fails until it has one.
//!
//! Nothing fails without the following, but the op goes untested or undocumented:
//!
//! - a `check!` row in `every_elementwise_op` of `backends/tests/common/ops.rs`, which runs the
//!   op on the CPU backend (every `cargo test`), OpenCL and CUDA against the host result;
//! - a `check!` in `tests/expressions.rs` against an `f64` closure;
//! - the finite-difference list in `tests/gradients.rs`, for a row with a derivative;
//! - the list of function names in the docs of `tensor!` (`axes-macros/src/lib.rs`);
//! - for a binary op wanted in index notation as `name(a, b)`: `FIXED_ARITY` in
//!   `axes-macros/src/check.rs` and its message (without it, any call of two arguments is an
//!   error there).
//!
//! ## A new scalar primitive
//!
//! A row's scalar function uses the methods of [`Num`](crate::Num), [`Float`](crate::Float)
//! and `Int` (`axes-core/src/num.rs`). Where the op needs one they lack, add it to the trait
//! and implement it for each type: the integer types through their macro, `f32`, `f64`, and
//! `f16` and `bf16` through their macro (which computes in `f32` and rounds). If `f32`
//! should have a vectorised form, write it in `axes-core/src/math.rs` (branch-free, so loops
//! over it vectorise, with its error in ulp tested) and call it from the `f32` impl, as
//! `exp`, `ln`, `tanh`, `sigmoid` and `gelu` do.
//!
//! ## Ops with a parameter
//!
//! `powi(n)`, `powf(p)` and `clamp(low, high)` are not rows: a row has no place for a
//! parameter. Each is a type in `axes-core/src/expr/ops.rs` that implements `UnaryFn` (its
//! scalar function and cost kind) and describes itself as IR of table ops with constants
//! (`x^n` as `Pow` of a constant, `clamp` as `Max` then `Min`). The interpreter, both kernel
//! dialects and autodiff therefore handle it through those rows. The method is written by hand
//! on [`ExprExt`](crate::ExprExt) (`axes-core/src/eval/ext.rs`); of the three, variables have
//! only `powf` (`axes-core/src/autodiff/fused.rs`). A new op with a parameter needs the same
//! three places.
//!
//! ## Composite ops
//!
//! Ops made of other ops are written as code, not rows. For tensors and expressions, `softmax`,
//! `log_softmax`, `argmax`, `argmin`, `logsumexp`, `mean`, `var` and `std` are in
//! `axes-core/src/eval/reduce.rs`, built on the reductions. For variables they are written
//! again, with their backward: `sum`, `mean`, `max_over`, `logsumexp`, `softmax`,
//! `log_softmax` and `softmax_cross_entropy` in `axes-core/src/autodiff/ops.rs`, the fused
//! layer and RMS normalisations in `axes-core/src/autodiff/norm.rs`. The layers that use them
//! are in `axes-core/src/nn/`.
//!
//! ## Reductions
//!
//! Reductions are a table of their own in the same file, `define_reduce_ops!`: a row is
//! `Variant (TypedOp) "name": Identity, CombiningOp;`, for example
//! `Sum (SumOp) "sum": Zero, Add;`. Kernels combine partial results through the combining
//! op's row. A new reduction also needs its arm in the interpreter's exhaustive `match`
//! (`axes-core/src/engine/interp/kernels.rs`, the compiler points at it), its methods on
//! [`ExprExt`](crate::ExprExt) and [`Tensor`](crate::Tensor) (`axes-core/src/eval/ext.rs`,
//! `axes-core/src/eval/tensor_methods.rs`), and, for index notation, its name in
//! `REDUCTIONS` (`axes-macros/src/parse.rs`).
