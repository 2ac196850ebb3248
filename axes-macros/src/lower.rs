//! Lowering: a checked node becomes the typed expression the operators build, naming only
//! `::axes::__private`. The compiler then checks what the macro cannot see: that an
//! operand's written axes are its type's, and that a method exists.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Ident;

use crate::parse::{BinOp, Node, REDUCTIONS};

/// The typed expression for a node that [`crate::check::check`] accepted.
pub(crate) fn lower(node: &Node) -> TokenStream {
    match node {
        Node::Operand { tensor, span, axes } => {
            let written = axes.tuple();
            quote_spanned!(*span=> ::axes::__private::operand::<#written, _, _>(&#tensor))
        }
        Node::Scalar(tokens) => tokens.clone(),
        Node::Neg(inner) => {
            let inner = lower(inner);
            quote!((-(#inner)))
        }
        Node::Binary(l, op, r) => {
            let (l, r) = (lower(l), lower(r));
            match op {
                BinOp::Add => quote!((#l + #r)),
                BinOp::Sub => quote!((#l - #r)),
                BinOp::Mul => quote!((#l * #r)),
                BinOp::Div => quote!((#l / #r)),
            }
        }
        Node::Call { name, args } => {
            let args: Vec<TokenStream> = args.iter().map(lower).collect();
            match (name.to_string().as_str(), args.as_slice()) {
                ("neg", [a]) => quote!((-(#a))),
                ("select", [c, a, b]) => {
                    quote_spanned!(name.span()=> ::axes::__private::select(#c, #a, #b))
                }
                // Any other function of one argument is the element-wise method of that
                // name, so a method new to the library needs no change here. The call has
                // the name's span: an unknown name is a type error pointing at it.
                (_, [a]) => quote_spanned!(name.span()=> (#a).#name()),
                (_, [a, b]) => {
                    quote_spanned!(name.span()=> ::axes::__private::ExprExt::#name(&#a, #b))
                }
                _ => unreachable!("`check` reports a call with any other number of arguments"),
            }
        }
        Node::Reduce { name, axes, arg } => {
            let arg = lower(arg);
            let method = REDUCTIONS
                .iter()
                .find(|(n, _)| name == n)
                .map(|(_, m)| *m)
                .expect("the parser makes a `Reduce` only of a name in `REDUCTIONS`");
            let method = Ident::new(method, name.span());
            let over = axes.tuple();
            quote_spanned!(name.span()=> ::axes::__private::ExprExt::#method::<#over>(&#arg)?)
        }
    }
}
