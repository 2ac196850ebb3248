//! `tensor!( .. )` in index notation: parse, check the axes the macro can see (reporting
//! mistakes on the exact token), then lower to the typed expression tree the operators
//! build.
//!
//! ```text
//! z[Batch, Out] = x[Batch, In] * w[In, Out]      // In is on the right only: summed
//! db[Class] += dy[Batch, Class]                  // Batch summed, added into db
//! [Batch, Out] = sum[In](x[Batch, In] * w[In, Out]) + c[Out]   // a new tensor
//! s[] = (x[B] - y[B]) * (x[B] - y[B])            // a scalar
//! ```

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Ident, Lit, Path, Token, bracketed, parenthesized};

use crate::errors::Errors;

/// Element-wise functions of one argument the notation knows.
const UNARY: [&str; 16] = [
    "exp", "ln", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "abs", "square", "sin", "cos",
    "recip", "signum", "floor", "ceil", "neg",
];
/// Element-wise functions of two arguments.
const BINARY: [&str; 3] = ["max", "min", "pow"];
/// Reductions, written `name[Axes](expr)`, and the method each lowers to.
const REDUCTIONS: [(&str, &str); 6] = [
    ("sum", "sum"),
    ("max", "max_over"),
    ("min", "min_over"),
    ("mean", "mean"),
    ("prod", "prod"),
    ("logsumexp", "logsumexp"),
];

/// A list of axes as written: `[Batch, Hidden]`.
struct Axes {
    span: Span,
    items: Vec<Path>,
}

impl Axes {
    fn parse_bracketed(input: ParseStream<'_>) -> syn::Result<Self> {
        let content;
        let bracket = bracketed!(content in input);
        let items: Punctuated<Path, Token![,]> = Punctuated::parse_terminated(&content)?;
        Ok(Axes {
            span: bracket.span.join(),
            items: items.into_iter().collect(),
        })
    }

    fn key(path: &Path) -> String {
        path.to_token_stream().to_string()
    }

    fn keys(&self) -> Vec<String> {
        self.items.iter().map(Self::key).collect()
    }

    fn tuple(&self) -> TokenStream {
        let items = &self.items;
        quote!((#(#items,)*))
    }
}

/// A node of the right-hand side.
enum Node {
    /// `x[A, B]`: a tensor with its axes written out.
    Operand {
        tensor: TokenStream,
        span: Span,
        axes: Axes,
    },
    /// A literal, a variable without brackets, or `{ rust expression }`: a scalar.
    Scalar(TokenStream),
    Neg(Box<Node>),
    Binary(Box<Node>, char, Box<Node>),
    Call {
        name: Ident,
        args: Vec<Node>,
    },
    Reduce {
        name: Ident,
        axes: Axes,
        arg: Box<Node>,
    },
}

/// The statement: a destination, `=` or `+=`, and the right-hand side.
pub(crate) struct Statement {
    dest: Option<TokenStream>,
    dest_axes: Axes,
    accumulate: bool,
    rhs: Node,
}

impl Parse for Statement {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let dest = if input.peek(syn::token::Bracket) {
            None
        } else {
            Some(parse_place(input)?)
        };
        let dest_axes = Axes::parse_bracketed(input)?;
        let accumulate = if input.peek(Token![+=]) {
            input.parse::<Token![+=]>()?;
            true
        } else {
            input.parse::<Token![=]>().map_err(|e| {
                syn::Error::new(e.span(), "expected `=` or `+=` after the result's axes")
            })?;
            false
        };
        if accumulate && dest.is_none() {
            return Err(input.error("`+=` needs a destination tensor: `name[Axes] += ..`"));
        }
        let rhs = parse_sum(input)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the expression"));
        }
        Ok(Statement {
            dest,
            dest_axes,
            accumulate,
            rhs,
        })
    }
}

/// `name` or `name.field.field`: a place holding a tensor.
fn parse_place(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let mut place = TokenStream::new();
    let first: Ident = if input.peek(Token![self]) {
        let s: Token![self] = input.parse()?;
        Ident::new("self", s.span)
    } else {
        input.parse()?
    };
    first.to_tokens(&mut place);
    while input.peek(Token![.]) {
        let dot: Token![.] = input.parse()?;
        let field: Ident = input.parse()?;
        dot.to_tokens(&mut place);
        field.to_tokens(&mut place);
    }
    Ok(place)
}

fn parse_sum(input: ParseStream<'_>) -> syn::Result<Node> {
    let mut node = parse_product(input)?;
    loop {
        let op = if input.peek(Token![+]) && !input.peek(Token![+=]) {
            input.parse::<Token![+]>()?;
            '+'
        } else if input.peek(Token![-]) {
            input.parse::<Token![-]>()?;
            '-'
        } else {
            return Ok(node);
        };
        node = Node::Binary(Box::new(node), op, Box::new(parse_product(input)?));
    }
}

fn parse_product(input: ParseStream<'_>) -> syn::Result<Node> {
    let mut node = parse_unary(input)?;
    loop {
        let op = if input.peek(Token![*]) {
            input.parse::<Token![*]>()?;
            '*'
        } else if input.peek(Token![/]) {
            input.parse::<Token![/]>()?;
            '/'
        } else {
            return Ok(node);
        };
        node = Node::Binary(Box::new(node), op, Box::new(parse_unary(input)?));
    }
}

fn parse_unary(input: ParseStream<'_>) -> syn::Result<Node> {
    if input.peek(Token![-]) {
        input.parse::<Token![-]>()?;
        return Ok(Node::Neg(Box::new(parse_unary(input)?)));
    }
    parse_primary(input)
}

fn parse_primary(input: ParseStream<'_>) -> syn::Result<Node> {
    if input.peek(syn::token::Paren) {
        let content;
        parenthesized!(content in input);
        return parse_sum(&content);
    }
    if input.peek(syn::token::Brace) {
        let block: syn::Block = input.parse()?;
        return Ok(Node::Scalar(block.to_token_stream()));
    }
    if input.peek(Lit) {
        let lit: Lit = input.parse()?;
        return Ok(Node::Scalar(lit.to_token_stream()));
    }
    let place_span = input.span();
    let place = parse_place(input)?;
    let name = syn::parse2::<Ident>(place.clone()).ok();
    if let Some(name) = &name {
        let text = name.to_string();
        let reduction = REDUCTIONS.iter().any(|(n, _)| *n == text);
        if reduction && input.peek(syn::token::Bracket) {
            let fork = input.fork();
            if Axes::parse_bracketed(&fork).is_ok() && fork.peek(syn::token::Paren) {
                let axes = Axes::parse_bracketed(input)?;
                let content;
                parenthesized!(content in input);
                let arg = parse_sum(&content)?;
                return Ok(Node::Reduce {
                    name: name.clone(),
                    axes,
                    arg: Box::new(arg),
                });
            }
        }
        if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            let args: Punctuated<Node, Token![,]> =
                content.parse_terminated(parse_sum_node, Token![,])?;
            return Ok(Node::Call {
                name: name.clone(),
                args: args.into_iter().collect(),
            });
        }
    }
    if input.peek(syn::token::Bracket) {
        let axes = Axes::parse_bracketed(input)?;
        return Ok(Node::Operand {
            tensor: place,
            span: place_span,
            axes,
        });
    }
    Ok(Node::Scalar(place))
}

fn parse_sum_node(input: ParseStream<'_>) -> syn::Result<Node> {
    parse_sum(input)
}

/// The axes a node has (as written keys), checking operands and reductions on the way.
fn axes_of(node: &Node, errors: &mut Errors) -> Vec<String> {
    match node {
        Node::Operand { axes, .. } => {
            let mut seen = Vec::new();
            for (path, key) in axes.items.iter().zip(axes.keys()) {
                if seen.contains(&key) {
                    errors.at(
                        path,
                        format!("axis `{key}` is written twice for one operand"),
                    );
                } else {
                    seen.push(key);
                }
            }
            seen
        }
        Node::Scalar(_) => Vec::new(),
        Node::Neg(inner) => axes_of(inner, errors),
        Node::Binary(l, _, r) => union(axes_of(l, errors), axes_of(r, errors)),
        Node::Call { args, .. } => args
            .iter()
            .fold(Vec::new(), |all, a| union(all, axes_of(a, errors))),
        Node::Reduce { axes, arg, .. } => {
            let inner = axes_of(arg, errors);
            for (path, key) in axes.items.iter().zip(axes.keys()) {
                if !inner.contains(&key) {
                    errors.at(
                        path,
                        format!(
                            "cannot reduce over `{key}`: the expression inside has no axis `{key}`"
                        ),
                    );
                }
            }
            let reduced = axes.keys();
            inner.into_iter().filter(|a| !reduced.contains(a)).collect()
        }
    }
}

fn union(mut a: Vec<String>, b: Vec<String>) -> Vec<String> {
    for x in b {
        if !a.contains(&x) {
            a.push(x);
        }
    }
    a
}

/// The top-level terms of a sum (split at `+` and `-` outside parentheses).
fn terms(node: &Node) -> Vec<&Node> {
    match node {
        Node::Binary(l, '+' | '-', r) => {
            let mut all = terms(l);
            all.extend(terms(r));
            all
        }
        other => vec![other],
    }
}

/// The span of a node, for messages.
fn span_of(node: &Node) -> Span {
    match node {
        Node::Operand { span, axes, .. } => span.join(axes.span).unwrap_or(*span),
        Node::Scalar(tokens) => tokens.span(),
        Node::Neg(inner) => span_of(inner),
        Node::Binary(l, _, r) => span_of(l).join(span_of(r)).unwrap_or_else(|| span_of(l)),
        Node::Call { name, .. } | Node::Reduce { name, .. } => name.span(),
    }
}

/// The typed expression for a node.
fn lower(node: &Node) -> TokenStream {
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
                '+' => quote!((#l + #r)),
                '-' => quote!((#l - #r)),
                '*' => quote!((#l * #r)),
                _ => quote!((#l / #r)),
            }
        }
        Node::Call { name, args } => {
            let args: Vec<TokenStream> = args.iter().map(lower).collect();
            let text = name.to_string();
            if text == "select" && args.len() == 3 {
                let (c, a, b) = (&args[0], &args[1], &args[2]);
                quote_spanned!(name.span()=> ::axes::__private::select(#c, #a, #b))
            } else if text == "neg" && args.len() == 1 {
                let a = &args[0];
                quote!((-(#a)))
            } else if args.len() == 1 {
                let a = &args[0];
                quote_spanned!(name.span()=> ::axes::__private::ExprExt::#name(&#a))
            } else {
                let (a, b) = (&args[0], &args[1]);
                quote_spanned!(name.span()=> ::axes::__private::ExprExt::#name(&#a, #b))
            }
        }
        Node::Reduce { name, axes, arg } => {
            let arg = lower(arg);
            let method = REDUCTIONS
                .iter()
                .find(|(n, _)| name == n)
                .map(|(_, m)| *m)
                .unwrap_or("sum");
            let method = Ident::new(method, name.span());
            let over = axes.tuple();
            quote_spanned!(name.span()=> ::axes::__private::ExprExt::#method::<#over>(&#arg)?)
        }
    }
}

/// Checks function names and arities.
fn check_calls(node: &Node, errors: &mut Errors) {
    match node {
        Node::Call { name, args } => {
            let text = name.to_string();
            let arity = if UNARY.contains(&text.as_str()) {
                Some(1)
            } else if BINARY.contains(&text.as_str()) {
                Some(2)
            } else if text == "select" {
                Some(3)
            } else {
                None
            };
            match arity {
                None => errors.at(name, format!("unknown function `{text}` in tensor!: expected one of {}, {}, select, or a reduction such as `sum[Axis](..)`", UNARY.join(", "), BINARY.join(", "))),
                Some(n) if n != args.len() => errors.at(name, format!("`{text}` takes {n} argument(s), not {}", args.len())),
                Some(_) => {}
            }
            for a in args {
                check_calls(a, errors);
            }
        }
        Node::Neg(inner) => check_calls(inner, errors),
        Node::Binary(l, _, r) => {
            check_calls(l, errors);
            check_calls(r, errors);
        }
        Node::Reduce { arg, .. } => check_calls(arg, errors),
        Node::Operand { .. } | Node::Scalar(_) => {}
    }
}

pub(crate) fn expand(statement: &Statement) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    check_calls(&statement.rhs, &mut errors);
    let out = statement.dest_axes.keys();
    for (path, key) in statement.dest_axes.items.iter().zip(&out) {
        if out.iter().filter(|k| *k == key).count() > 1 {
            errors.at(path, format!("axis `{key}` is written twice in the result"));
        }
    }
    let right = axes_of(&statement.rhs, &mut errors);
    for (path, key) in statement.dest_axes.items.iter().zip(&out) {
        if !right.contains(key) {
            errors.at(path, format!("axis `{key}` of the result appears nowhere on the right-hand side (use `broadcast` to add an axis)"));
        }
    }
    // Axes on the right but not in the result are summed; each must be in every top-level
    // term, so that `x[B, I] * w[I, O] + c[O]` never adds `c` |I| times.
    let summed: Vec<String> = right.iter().filter(|a| !out.contains(a)).cloned().collect();
    for term in terms(&statement.rhs) {
        let mut scratch = Errors::default();
        let has = axes_of(term, &mut scratch);
        let _ = scratch.finish();
        for axis in summed.iter().filter(|a| !has.contains(a)) {
            errors.push(syn::Error::new(
                span_of(term),
                format!("axis `{axis}` is summed (it is not in the result) but this term has no `{axis}`: write the sum explicitly, e.g. `sum[{axis}](..) + ..`"),
            ));
        }
    }
    errors.finish()?;

    let summed_paths: Vec<&Path> = {
        let mut paths: Vec<&Path> = Vec::new();
        let mut seen = Vec::new();
        collect_paths(&statement.rhs, &summed, &mut paths, &mut seen);
        paths
    };
    let over = quote!((#(#summed_paths,)*));
    let result_axes = statement.dest_axes.tuple();
    // A product of two operands summed over axes they share is a contraction: it goes to
    // the GEMM path (`dot_over`), the other shared axes being batch axes.
    if let Node::Binary(l, '*', r) = &statement.rhs
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
        return Ok(quote!((|| -> ::axes::Result<_> { #body })()));
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
    Ok(quote!((|| -> ::axes::Result<_> { #body })()))
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
            for (path, key) in axes.items.iter().zip(axes.keys()) {
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
