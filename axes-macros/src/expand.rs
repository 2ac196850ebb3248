//! Expansion of a statement: check it, lower its right-hand side, and write the result the
//! way the statement says (`z[..] =`, `z[..] +=`, `[..] =`), through a contraction on the
//! GEMM path when the right-hand side is exactly a product of two operands.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Path;

use crate::check::check;
use crate::lower::lower;
use crate::parse::{Axes, BinOp, Node, Statement};

pub(crate) fn expand(statement: &Statement) -> syn::Result<TokenStream> {
    let summed = check(statement)?;
    let summed_paths: Vec<&Path> = {
        let mut paths: Vec<&Path> = Vec::new();
        let mut seen = Vec::new();
        collect_paths(&statement.rhs, &summed, &mut paths, &mut seen);
        paths
    };
    let over = quote!((#(#summed_paths,)*));
    let result_axes = statement.dest_axes.tuple();
    // A product of two operands summed over axes they share is a contraction: it goes to
    // the GEMM path (`dot_over`), the other shared axes being batch axes. Only when the
    // whole right-hand side is exactly `operand * operand`: anything more, even
    // `2.0 * x[B, H] * w[H, C]`, runs as one fused loop.
    if let Node::Binary(l, BinOp::Mul, r) = &statement.rhs
        && let (Node::Operand { .. }, Node::Operand { .. }) = (l.as_ref(), r.as_ref())
        && !summed.is_empty()
    {
        let (l, r) = (lower(l), lower(r));
        let product = quote!(::axes::__private::dot_over::<#over, _, _, _>(#l, #r)?);
        let body = match (&statement.dest, statement.accumulate) {
            (Some(dest), false) => {
                quote!(::axes::__private::dest::<#result_axes, _, _>(&mut #dest).assign(&#product))
            }
            (Some(dest), true) => {
                quote!(::axes::__private::dest::<#result_axes, _, _>(&mut #dest).add_sum::<(), _>(&#product))
            }
            (None, _) => quote!(::axes::__private::ExprExt::eval_in::<#result_axes>(&#product)),
        };
        return Ok(in_closure(body));
    }
    let rhs = lower(&statement.rhs);
    let body = match (&statement.dest, statement.accumulate, summed.is_empty()) {
        (Some(dest), false, true) => {
            quote!(::axes::__private::dest::<#result_axes, _, _>(&mut #dest).assign(#rhs))
        }
        (Some(dest), false, false) => {
            quote!(::axes::__private::dest::<#result_axes, _, _>(&mut #dest).assign_sum::<#over, _>(#rhs))
        }
        (Some(dest), true, _) => {
            quote!(::axes::__private::dest::<#result_axes, _, _>(&mut #dest).add_sum::<#over, _>(#rhs))
        }
        (None, _, _) => quote!(::axes::__private::sum_in::<#result_axes, #over, _>(#rhs)),
    };
    Ok(in_closure(body))
}

/// `body` as the value of the macro. The immediately-invoked closure exists so that a `?`
/// in `body` returns from the closure, staying inside the macro's expansion, rather than
/// from the function that calls `tensor!`; the caller gets the `Result` and decides.
/// `ExprExt` is in scope for the element-wise methods a call `name(x)` lowers to.
fn in_closure(body: TokenStream) -> TokenStream {
    quote!((|| -> ::axes::__private::Result<_> {
        #[allow(unused_imports)]
        use ::axes::__private::ExprExt as _;
        #body
    })())
}

/// The written paths of the axes `keys`, first occurrence of each, in order.
fn collect_paths<'a>(
    node: &'a Node,
    keys: &[String],
    out: &mut Vec<&'a Path>,
    seen: &mut Vec<String>,
) {
    match node {
        Node::Operand { axes, .. } => {
            for path in &axes.items {
                let key = Axes::key(path);
                if keys.contains(&key) && !seen.contains(&key) {
                    seen.push(key);
                    out.push(path);
                }
            }
        }
        Node::Scalar(_) => {}
        Node::Neg(inner) => collect_paths(inner, keys, out, seen),
        Node::Binary(l, _, r) => {
            collect_paths(l, keys, out, seen);
            collect_paths(r, keys, out, seen);
        }
        Node::Call { args, .. } => args.iter().for_each(|a| collect_paths(a, keys, out, seen)),
        Node::Reduce { arg, .. } => collect_paths(arg, keys, out, seen),
    }
}
