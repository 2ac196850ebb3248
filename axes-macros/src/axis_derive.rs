//! `#[derive(Axis)]`: parse the struct and its `#[axis(..)]` attributes, check them, and emit
//! the `Axis` impl with the axis's type-level id.

use std::sync::atomic::{AtomicU64, Ordering};

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, LitInt, Path};

use crate::errors::Errors;

/// Roles that `axes::roles` defines, in the order of its `RoleBits`; a bare role name among
/// these needs no import.
const BUILT_IN_ROLES: [&str; 8] = [
    "Batch",
    "Channel",
    "Channelout",
    "Height",
    "Width",
    "Depth",
    "Time",
    "Feature",
];

/// What `#[axis(..)]` says.
#[derive(Default)]
struct AxisAttrs {
    len: Option<LitInt>,
    roles: Vec<Path>,
}

fn parse_attrs(input: &DeriveInput, errors: &mut Errors) -> AxisAttrs {
    let mut attrs = AxisAttrs::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("axis")) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("len") {
                let lit: LitInt = meta.value()?.parse()?;
                if let Err(e) = lit.base10_parse::<usize>() {
                    errors.push(syn::Error::new(
                        lit.span(),
                        format!("`len` must be a length (usize): {e}"),
                    ));
                } else if attrs.len.is_some() {
                    errors.at(&meta.path, "`len` is given more than once");
                }
                attrs.len = Some(lit);
                Ok(())
            } else if meta.path.is_ident("role") {
                attrs.roles.push(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("unknown axis attribute: expected `len = N` or `role = Trait`"))
            }
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    attrs
}

pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let is_unit_struct = matches!(&input.data, Data::Struct(s) if matches!(s.fields, Fields::Unit));
    if !is_unit_struct {
        errors.at(
            &input.ident,
            "`Axis` can only be derived for a unit struct, such as `struct Batch;`",
        );
    }
    if !input.generics.params.is_empty() {
        errors.at(&input.generics, "an axis cannot have generic parameters");
    }
    let attrs = parse_attrs(input, &mut errors);
    errors.finish()?;

    let ident = &input.ident;
    let name = ident.to_string();
    let id = id_type(&type_id_hash(ident, next_derive()));
    let fixed_len = match &attrs.len {
        Some(len) => quote!(::axes::__private::Some(#len)),
        None => quote!(::axes::__private::None),
    };
    let roles = attrs.roles.iter().map(|role| {
        let path = match role.get_ident() {
            Some(bare) if BUILT_IN_ROLES.contains(&bare.to_string().as_str()) => {
                quote!(::axes::__private::roles::#bare)
            }
            _ => quote!(#role),
        };
        quote!(impl #path for #ident {})
    });
    // A built-in role (named bare, or by a path ending in its name) also sets its bit.
    let has_role = |role: &str| {
        (attrs.roles.iter()).any(|path| path.segments.last().is_some_and(|s| s.ident == role))
    };
    let bits = BUILT_IN_ROLES.map(|role| match has_role(role) {
        true => quote!(::axes::__private::RoleBit1),
        false => quote!(::axes::__private::RoleBit0),
    });
    Ok(quote! {
        const _: () = {
            impl ::axes::__private::Axis for #ident {
                type Id = #id;
                type Transposed = ::axes::__private::Dual<#ident>;
                type Roles = ::axes::__private::roles::RoleBits<#(#bits),*>;
                const FIXED_LEN: ::core::option::Option<usize> = #fixed_len;
                fn name() -> ::axes::__private::Cow<'static, str> {
                    ::axes::__private::Cow::Borrowed(#name)
                }
            }
            impl ::axes::__private::PrimalAxis for #ident {}
            #(#roles)*
        };
    })
}

/// How many axes this compilation derived before this one. Every expansion of one
/// `macro_rules!` body has the same spans, so two axes it declares (in two modules, say)
/// share file, line, column and name: the count tells them apart.
fn next_derive() -> u64 {
    static DERIVED: AtomicU64 = AtomicU64::new(0);
    DERIVED.fetch_add(1, Ordering::Relaxed)
}

/// FNV-1a of the crate, file, line, column and name of the axis and the derive's place among
/// this compilation's derives (`ordinal`), NUL-separated.
fn type_id_hash(ident: &syn::Ident, ordinal: u64) -> u64 {
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let (file, line, column) = location(ident.span());
    let parts = [
        krate,
        file,
        line.to_string(),
        column.to_string(),
        ident.to_string(),
        ordinal.to_string(),
    ];
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts
        .iter()
        .map(String::as_bytes)
        .flat_map(|bytes| bytes.iter().chain([&0u8]))
    {
        hash = (hash ^ u64::from(*part)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Where the axis is declared. Outside a real macro expansion (unit tests) there is no
/// source file, and the line and column of `proc_macro2`'s fallback spans are used.
fn location(span: Span) -> (String, usize, usize) {
    if proc_macro::is_available() {
        let span = span.unwrap();
        (span.file(), span.line(), span.column())
    } else {
        let start = span.start();
        (String::new(), start.line, start.column)
    }
}

/// The id as a type: sixteen hex digits, most significant first.
fn id_type(hash: &u64) -> TokenStream {
    (0..16)
        .rev()
        .fold(quote!(::axes::__private::IdEnd), |rest, k| {
            let digit = format_ident!("X{:X}", (hash >> (4 * (15 - k))) & 0xF);
            quote!(::axes::__private::IdCons<::axes::__private::#digit, #rest>)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ_by_name_and_by_derive() {
        let a: syn::Ident = syn::parse_str("Batch").unwrap();
        let b: syn::Ident = syn::parse_str("Hidden").unwrap();
        assert_ne!(type_id_hash(&a, 0), type_id_hash(&b, 0));
        assert_eq!(type_id_hash(&a, 0), type_id_hash(&a, 0));
        // one name at one place (a `macro_rules!` body expanded twice): two derives, two ids
        assert_ne!(type_id_hash(&a, 0), type_id_hash(&a, 1));
        assert_ne!(next_derive(), next_derive());
    }

    #[test]
    fn id_type_has_sixteen_digits_most_significant_first() {
        let id = id_type(&0x0123_4567_89ab_cdef).to_string();
        let digits: Vec<&str> = id
            .split("__private :: X")
            .skip(1)
            .map(|s| &s[..1])
            .collect();
        assert_eq!(digits.concat(), "0123456789ABCDEF");
    }

    #[test]
    fn rejects_non_unit_structs_and_unknown_attributes() {
        let input: DeriveInput = syn::parse_quote!(
            struct Batch(usize);
        );
        assert!(
            expand(&input)
                .unwrap_err()
                .to_string()
                .contains("unit struct")
        );
        let input: DeriveInput = syn::parse_quote!(
            #[axis(size = 3)]
            struct Batch;
        );
        assert!(
            expand(&input)
                .unwrap_err()
                .to_string()
                .contains("unknown axis attribute")
        );
        let input: DeriveInput = syn::parse_quote!(
            #[axis(len = 3, role = Height)]
            struct Rgb;
        );
        let out = expand(&input).unwrap().to_string();
        assert!(out.contains("roles :: Height for Rgb"), "{out}");
    }
}
