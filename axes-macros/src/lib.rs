//! Procedural macros of `axes`: `#[derive(Axis)]` and the `tensor!` macro.
//!
//! Generated code names only `::axes::__private`. Use these through the `axes` crate.

mod axis_derive;
mod errors;
mod tensor_type;

use proc_macro::TokenStream;

/// Makes a unit struct an axis.
///
/// - `#[axis(len = N)]` fixes the axis length: every tensor must give it length `N`.
/// - `#[axis(role = Height)]` gives the axis a role (a trait in `axes::roles`, or any trait
///   path of your own); repeat `role = ..` for several roles.
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

/// The tensor type with element type `T` and the listed axes:
/// `tensor![f32; Batch, Hidden]` is `Tensor<f32, (Batch, Hidden)>`.
///
/// An axis written twice is an error at the second occurrence.
///
/// ```
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct Hidden;
/// fn rows(x: &tensor![f32; Batch, Hidden]) -> usize { x.len_of::<Batch>() }
/// let scalar: tensor![f64;] = Tensor::full((), 1.0)?;
/// assert_eq!(scalar.to_vec(), [1.0]);
/// # Ok::<(), axes::Error>(())
/// ```
#[proc_macro]
pub fn tensor(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as tensor_type::TensorType);
    tensor_type::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
