//! What the macro checks before the compiler does: the axes of each node, inferred from
//! what is written ([`infer_axes`], which reports nothing), and the mistakes [`check`]
//! reports on the exact token, all together.

use proc_macro2::Span;
use syn::spanned::Spanned;

use crate::errors::Errors;
use crate::parse::{Axes, BinOp, Node, REDUCTIONS, Statement};

/// The functions of the notation with a fixed number of arguments. Any other `name(x)` is
/// the element-wise method `x.name()`, left to the type checker.
const FIXED_ARITY: [(&str, usize); 5] = [
    ("neg", 1),
    ("max", 2),
    ("min", 2),
    ("pow", 2),
    ("select", 3),
];

/// The axes a node has, as written keys, each once, in the order they first appear.
pub(crate) fn infer_axes(node: &Node) -> Vec<String> {
    match node {
        Node::Operand { axes, .. } => union(Vec::new(), axes.keys()),
        Node::Scalar(_) => Vec::new(),
        Node::Neg(inner) => infer_axes(inner),
        Node::Binary(l, _, r) => union(infer_axes(l), infer_axes(r)),
        Node::Call { args, .. } => args
            .iter()
            .fold(Vec::new(), |all, a| union(all, infer_axes(a))),
        Node::Reduce { axes, arg, .. } => {
            let reduced = axes.keys();
            infer_axes(arg)
                .into_iter()
                .filter(|a| !reduced.contains(a))
                .collect()
        }
    }
}

/// Reports every mistake the macro can see, together. On success, the summed axes: those
/// on the right-hand side but not in the result, in the order they first appear.
pub(crate) fn check(statement: &Statement) -> syn::Result<Vec<String>> {
    let mut errors = Errors::default();
    check_node(&statement.rhs, &mut errors);
    let out = statement.dest_axes.keys();
    for (path, key) in statement.dest_axes.items.iter().zip(&out) {
        if out.iter().filter(|k| *k == key).count() > 1 {
            errors.at(path, format!("axis `{key}` is written twice in the result"));
        }
    }
    let terms = terms(&statement.rhs);
    let term_axes: Vec<Vec<String>> = terms.iter().map(|term| infer_axes(term)).collect();
    let right = term_axes.iter().cloned().fold(Vec::new(), union);
    for (path, key) in statement.dest_axes.items.iter().zip(&out) {
        if !right.contains(key) {
            errors.at(path, format!("axis `{key}` of the result appears nowhere on the right-hand side (use `broadcast` to add an axis)"));
        }
    }
    // Axes on the right but not in the result are summed; each must be in every top-level
    // term, so that `x[B, I] * w[I, O] + c[O]` never adds `c` |I| times.
    let summed: Vec<String> = right.into_iter().filter(|a| !out.contains(a)).collect();
    for (term, has) in terms.iter().zip(&term_axes) {
        for axis in summed.iter().filter(|a| !has.contains(a)) {
            errors.push(syn::Error::new(
                span_of(term),
                format!("axis `{axis}` is summed (it is not in the result) but this term has no `{axis}`: write the sum explicitly, e.g. `sum[{axis}](..) + ..`"),
            ));
        }
    }
    errors.finish()?;
    Ok(summed)
}

/// Reports, in `node` and below: an axis written twice for one operand, a reduction over an
/// axis its argument lacks, and a call with the wrong number of arguments.
fn check_node(node: &Node, errors: &mut Errors) {
    match node {
        Node::Operand { axes, .. } => {
            let mut seen = Vec::new();
            for path in &axes.items {
                let key = Axes::key(path);
                if seen.contains(&key) {
                    errors.at(
                        path,
                        format!("axis `{key}` is written twice for one operand"),
                    );
                } else {
                    seen.push(key);
                }
            }
        }
        Node::Scalar(_) => {}
        Node::Neg(inner) => check_node(inner, errors),
        Node::Binary(l, _, r) => {
            check_node(l, errors);
            check_node(r, errors);
        }
        Node::Call { name, args } => {
            check_arity(name, args.len(), errors);
            for a in args {
                check_node(a, errors);
            }
        }
        Node::Reduce { axes, arg, .. } => {
            let inner = infer_axes(arg);
            for path in &axes.items {
                let key = Axes::key(path);
                if !inner.contains(&key) {
                    errors.at(
                        path,
                        format!(
                            "cannot reduce over `{key}`: the expression inside has no axis `{key}`"
                        ),
                    );
                }
            }
            check_node(arg, errors);
        }
    }
}

/// The functions of the notation take their number of arguments; a reduction's name needs
/// its axes; any other name takes one argument (it is a method, which the compiler checks).
fn check_arity(name: &syn::Ident, given: usize, errors: &mut Errors) {
    let text = name.to_string();
    let reduction = REDUCTIONS.iter().any(|(n, _)| *n == text);
    match FIXED_ARITY.iter().find(|(n, _)| *n == text) {
        Some(&(_, wanted)) if wanted != given => {
            let hint = if reduction {
                format!("; for the reduction, write the axes: `{text}[Axis](..)`")
            } else {
                String::new()
            };
            errors.at(
                name,
                format!("`{text}` takes {wanted} argument(s), not {given}{hint}"),
            );
        }
        Some(_) => {}
        None if reduction => errors.at(
            name,
            format!("`{text}` is a reduction: write the axes it reduces over, `{text}[Axis](..)`"),
        ),
        None if given != 1 => errors.at(
            name,
            format!("no function `{text}` of {given} arguments in tensor!: only `max(a, b)`, `min(a, b)`, `pow(a, b)` and `select(c, a, b)` take several; any other `name(x)` takes one and is the element-wise method `x.name()`"),
        ),
        None => {}
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
        Node::Binary(l, BinOp::Add | BinOp::Sub, r) => {
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
