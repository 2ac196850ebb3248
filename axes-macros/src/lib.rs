//! Procedural macros of `axes`: `#[derive(Axis)]` and the `tensor!` macro.
//!
//! Generated code names only `::axes::__private`. Use these through the `axes` crate.

mod axis_derive;
mod check;
mod errors;
mod expand;
mod lower;
mod parse;
mod tensor_type;

use proc_macro::TokenStream;

/// Makes a unit struct an axis.
///
/// - `#[axis(len = N)]` fixes the axis length: every tensor must give it length `N`.
/// - `#[axis(role = Height)]` gives the axis a role (a trait in `axes::roles`, or any trait
///   path of your own); repeat `role = ..` for several roles. A built-in role (`Batch`,
///   `Channel`, `Channelout`, `Height`, `Width`, `Depth`, `Time`, `Feature`) also sets the
///   axis's role bit, by which `axes::list::WithRole` finds the axis of a list with a role.
///
/// ```
/// use axes::prelude::*;
/// #[derive(Axis)]
/// #[axis(len = 3, role = Channel)]
/// struct Rgb;
/// assert_eq!(Rgb::FIXED_LEN, Some(3));
/// ```
#[proc_macro_derive(Axis, attributes(axis))]
pub fn derive_axis(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    axis_derive::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Two forms, told apart by the `;` of the first.
///
/// **A type**: `tensor![f32; Batch, Hidden]` is `Tensor<f32, (Batch, Hidden)>`; an axis
/// written twice is an error at the second occurrence.
///
/// **An expression in index notation**, whose indices are the axis types themselves. It
/// evaluates in one pass and returns an `axes::Result`:
/// - `tensor!(z[A, B] = ...)` writes into the existing tensor `z`;
/// - `tensor!(z[A, B] += ...)` adds into it;
/// - `tensor!([A, B] = ...)` makes a new tensor with axes `(A, B)`;
/// - `tensor!(s[] = ...)` writes a scalar.
///
/// Axes on the right but not on the left are summed (the einsum and Cortex rule); such an
/// axis must appear in every top-level term of a `+`/`-`, else write the sum explicitly with
/// `sum[Axis](..)` (also `max`, `min`, `mean`, `prod`, `logsumexp`). Functions: `max(a, b)`,
/// `min(a, b)`, `pow(a, b)`, `select(c, a, b)` and `neg(x)` (which is `-x`); any other call
/// `name(x)` of one argument is the element-wise method `x.name()`: `exp`, `ln`, `sqrt`,
/// `rsqrt`, `tanh`, `sigmoid`, `gelu`, `gelu_derivative`, `silu`, `softplus`, `relu`, `abs`,
/// `square`, `sin`, `cos`, `recip`, `signum`, `floor`, `ceil`, and any method expressions gain
/// later (an unknown name is a type error at the name). Scalars: literals, variables, `{ any Rust expression }`. The
/// macro reports on the exact token an axis written twice for one operand, a result axis
/// missing on the right, a summed axis missing from a term, and a function given the wrong
/// number of arguments (a reduction written without its axes, `sum(x)`, among them); an
/// operand whose written axes differ from its type's is a type error at the operand.
///
/// A right-hand side that is exactly `operand * operand` with summed axes is a contraction
/// and runs on the matrix-multiply (GEMM) path, the shared axes that are kept being batch
/// axes. Anything more, even `2.0 * x[B, H] * w[H, C]` or `sum[H](x[B, H] * w[H, C]) + c[C]`,
/// runs as one fused loop; to keep the GEMM path, write the product as a statement of its
/// own and use its result in the next.
///
/// ```
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Hidden;
/// #[derive(Axis)] struct Class;
/// fn rows(x: &tensor![f32; Batch, Hidden]) -> usize { x.len_of::<Batch>() }
///
/// let x = Tensor::<f32, (Batch, Hidden)>::ones((Batch.len(2), Hidden.len(3)))?;
/// let w = Tensor::<f32, (Hidden, Class)>::ones((Hidden.len(3), Class.len(4)))?;
/// let c = Tensor::<f32, (Class,)>::ones(Class.len(4))?;
/// // Hidden is on the right only, and in every term: summed
/// let z = tensor!([Batch, Class] = x[Batch, Hidden] * w[Hidden, Class])?;
/// assert!(z.to_vec().iter().all(|&v| v == 3.0));
/// let mut y = Tensor::<f32, (Class, Batch)>::zeros((Batch.len(2), Class.len(4)))?;
/// tensor!(y[Batch, Class] = sum[Hidden](x[Batch, Hidden] * w[Hidden, Class]) + 2.0 * c[Class])?;
/// assert!(y.to_vec().iter().all(|&v| v == 5.0));
/// let mut db = Tensor::<f32, (Class,)>::zeros(Class.len(4))?;
/// tensor!(db[Class] += y[Batch, Class])?;
/// assert_eq!(db.to_vec(), [10.0; 4]);
/// let scalar: tensor![f64;] = Tensor::full((), 1.0)?;
/// assert_eq!(scalar.to_vec(), [1.0]);
/// # Ok::<(), axes::Error>(())
/// ```
#[proc_macro]
pub fn tensor(input: TokenStream) -> TokenStream {
    let tokens = proc_macro2::TokenStream::from(input);
    let is_type = tokens
        .clone()
        .into_iter()
        .any(|t| matches!(&t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ';'));
    let expanded = if is_type {
        syn::parse2::<tensor_type::TensorType>(tokens).and_then(|input| tensor_type::expand(&input))
    } else {
        syn::parse2::<parse::Statement>(tokens).and_then(|input| expand::expand(&input))
    };
    expanded
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
