//! `tensor![T; A, B, ..]`: the tensor type with element `T` and the listed axes.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Token, Type};

use crate::errors::Errors;

/// The most axes a tensor may have (`axes::list::MAX_RANK`).
const MAX_RANK: usize = 8;

/// `T; A, B, ..`
pub(crate) struct TensorType {
    element: Type,
    axes: Punctuated<Type, Token![,]>,
}

impl Parse for TensorType {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let element = input.parse()?;
        input.parse::<Token![;]>().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected `;` after the element type, as in `tensor![f32; Batch, Hidden]`",
            )
        })?;
        let axes = Punctuated::parse_terminated(input)?;
        Ok(TensorType { element, axes })
    }
}

pub(crate) fn expand(input: &TensorType) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let mut seen: Vec<String> = Vec::new();
    for (k, axis) in input.axes.iter().enumerate() {
        let text = axis.to_token_stream().to_string();
        if seen.contains(&text) {
            errors.at(
                axis,
                format!("axis `{text}` appears more than once in this tensor type"),
            );
        }
        if k == MAX_RANK {
            errors.at(
                axis,
                format!(
                    "a tensor has at most {MAX_RANK} axes; this is axis number {}",
                    k + 1
                ),
            );
        }
        seen.push(text);
    }
    errors.finish()?;
    let element = &input.element;
    let axes = input.axes.iter();
    Ok(quote!(::axes::__private::Tensor<#element, (#(#axes,)*)>))
}
