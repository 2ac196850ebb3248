//! The syntax tree of `tensor!( .. )` in index notation, and its parser.
//!
//! ```text
//! z[Batch, Out] = x[Batch, In] * w[In, Out]      // In is on the right only: summed
//! db[Class] += dy[Batch, Class]                  // Batch summed, added into db
//! [Batch, Out] = sum[In](x[Batch, In] * w[In, Out]) + c[Out]   // a new tensor
//! s[] = (x[B] - y[B]) * (x[B] - y[B])            // a scalar
//! ```

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Lit, Path, Token, bracketed, parenthesized};

/// Reductions, written `name[Axes](expr)`, and the method each lowers to.
pub(crate) const REDUCTIONS: [(&str, &str); 6] = [
    ("sum", "sum"),
    ("max", "max_over"),
    ("min", "min_over"),
    ("mean", "mean"),
    ("prod", "prod"),
    ("logsumexp", "logsumexp"),
];

/// A list of axes as written: `[Batch, Hidden]`.
pub(crate) struct Axes {
    pub(crate) span: Span,
    pub(crate) items: Vec<Path>,
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

    /// The key an axis is compared by: its path as written.
    pub(crate) fn key(path: &Path) -> String {
        path.to_token_stream().to_string()
    }

    /// The keys of every axis, in the written order.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.items.iter().map(Self::key).collect()
    }

    /// The axes as a tuple type: `(Batch, Hidden,)`.
    pub(crate) fn tuple(&self) -> TokenStream {
        let items = &self.items;
        quote!((#(#items,)*))
    }
}

/// An arithmetic operator between two nodes.
#[derive(Clone, Copy)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// A node of the right-hand side.
pub(crate) enum Node {
    /// `x[A, B]`: a tensor with its axes written out.
    Operand {
        tensor: TokenStream,
        span: Span,
        axes: Axes,
    },
    /// A literal, a variable without brackets, or `{ rust expression }`: a scalar.
    Scalar(TokenStream),
    /// `-x`.
    Neg(Box<Node>),
    /// `a + b`, `a - b`, `a * b`, `a / b`.
    Binary(Box<Node>, BinOp, Box<Node>),
    /// `name(args, ..)`: a function of the notation, or an element-wise method.
    Call { name: Ident, args: Vec<Node> },
    /// `name[Axes](arg)`: a reduction over `Axes`.
    Reduce {
        name: Ident,
        axes: Axes,
        arg: Box<Node>,
    },
}

/// The statement: a destination, `=` or `+=`, and the right-hand side.
pub(crate) struct Statement {
    /// The tensor written into; `None` for `[A, B] = ..`, which makes a new one.
    pub(crate) dest: Option<TokenStream>,
    pub(crate) dest_axes: Axes,
    /// `+=` rather than `=`.
    pub(crate) accumulate: bool,
    pub(crate) rhs: Node,
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
            BinOp::Add
        } else if input.peek(Token![-]) {
            input.parse::<Token![-]>()?;
            BinOp::Sub
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
            BinOp::Mul
        } else if input.peek(Token![/]) {
            input.parse::<Token![/]>()?;
            BinOp::Div
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
        // The block is passed through as written: the compiler parses it.
        let block: proc_macro2::TokenTree = input.parse()?;
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
        // `max[A](x)` is a reduction, `max(a, b)` the function of two arguments and `max[A]`
        // alone a tensor named `max`: only an axis list followed by `(` makes a reduction.
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
                content.parse_terminated(parse_sum, Token![,])?;
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
