//! The expression part of a kernel: one C statement per IR node.

use std::fmt::Write;

use axes_core::error::{Error, Result};
use axes_core::expr::IrNode;

use crate::{CType, Dialect, ReduceOp, Spec};

/// The value type of a node: an element type, or the `int` 0/1 of a comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Elem(CType),
    Truth,
}

fn unsupported(what: String) -> Error {
    Error::Unsupported { what }
}

/// A constant of type `ty`.
fn literal(v: f64, ty: CType, dialect: Dialect) -> String {
    match ty {
        CType::F32 | CType::F64 => {
            let suffix = if ty == CType::F32 { "f" } else { "" };
            let v = if ty == CType::F32 { v as f32 as f64 } else { v };
            if v.is_nan() {
                format!("(0.0{suffix}/0.0{suffix})")
            } else if v.is_infinite() {
                let sign = if v < 0.0 { "-" } else { "" };
                format!("({sign}1.0{suffix}/0.0{suffix})")
            } else if ty == CType::F32 {
                format!("{:e}f", v as f32)
            } else {
                format!("{v:e}")
            }
        }
        _ => format!("(({}){})", ty.c_name(dialect), v as i64),
    }
}

/// `name` for element type `ty`: CUDA spells the float versions with an `f`.
fn math(name: &str, ty: CType, dialect: Dialect) -> String {
    match (dialect, ty) {
        (Dialect::Cuda, CType::F32) => format!("{name}f"),
        _ => name.to_string(),
    }
}

/// `value` converted to `ty` for storing.
pub(crate) fn convert(value: &str, ty: CType, dialect: Dialect) -> String {
    match ty {
        CType::Bool => format!("(unsigned char)(({value}) != 0)"),
        _ => format!("({})({value})", ty.c_name(dialect)),
    }
}

/// The larger (`greater`) or smaller of `a` and `b`; NaN if either is NaN (as on the CPU).
fn extreme(a: &str, b: &str, ty: CType, greater: bool) -> String {
    let cmp = if greater { ">" } else { "<" };
    if ty.is_float() {
        format!(
            "((({a}) != ({a}) || ({b}) != ({b})) ? ({a}) + ({b}) : (({a}) {cmp} ({b}) ? ({a}) : ({b})))"
        )
    } else {
        format!("(({a}) {cmp} ({b}) ? ({a}) : ({b}))")
    }
}

/// `a ⊕ b` for a reduction.
pub(crate) fn combine(op: ReduceOp, a: &str, b: &str, ty: CType, _dialect: Dialect) -> String {
    match op {
        ReduceOp::Sum => format!("({a}) + ({b})"),
        ReduceOp::Prod => format!("({a}) * ({b})"),
        ReduceOp::Max => extreme(a, b, ty, true),
        ReduceOp::Min => extreme(a, b, ty, false),
    }
}

/// The identity of `op` in `ty`.
pub(crate) fn identity(op: ReduceOp, ty: CType, dialect: Dialect) -> Result<String> {
    let (low, high) = match ty {
        CType::F32 | CType::F64 => (f64::NEG_INFINITY, f64::INFINITY),
        CType::I32 => (i32::MIN as f64, i32::MAX as f64),
        CType::I64 => {
            let c = ty.c_name(dialect);
            return Ok(match op {
                ReduceOp::Sum => format!("(({c})0)"),
                ReduceOp::Prod => format!("(({c})1)"),
                ReduceOp::Max => format!("(({c})(-9223372036854775807LL - 1))"),
                ReduceOp::Min => format!("(({c})9223372036854775807LL)"),
            });
        }
        CType::U8 | CType::Bool => (0.0, 255.0),
    };
    Ok(literal(
        match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => low,
            ReduceOp::Min => high,
        },
        ty,
        dialect,
    ))
}

/// Writes one statement per needed node of `spec.ir` into `body` (leaf `k` read by
/// `loads[k]`) and returns the expression of the root.
pub(crate) fn expression(
    spec: &Spec<'_>,
    dialect: Dialect,
    loads: &[String],
    body: &mut String,
    indent: &str,
) -> Result<String> {
    let nodes = &spec.ir.nodes;
    if nodes.is_empty() {
        return Err(unsupported("an empty expression".into()));
    }
    // Nodes the root needs.
    let mut live = vec![false; nodes.len()];
    live[nodes.len() - 1] = true;
    for i in (0..nodes.len()).rev() {
        if !live[i] {
            continue;
        }
        match nodes[i] {
            IrNode::Unary(_, a) | IrNode::Cast(_, a) | IrNode::Map(a) => live[a] = true,
            IrNode::Binary(_, a, b) => {
                live[a] = true;
                live[b] = true;
            }
            IrNode::Select(c, a, b) => {
                live[c] = true;
                live[a] = true;
                live[b] = true;
            }
            IrNode::Leaf(_) | IrNode::Scalar(_) => {}
        }
    }
    let mut types: Vec<Option<Value>> = vec![None; nodes.len()];
    // The operand `i` as type `ty` (constants take the type of their use).
    let operand = |i: usize, ty: CType| match nodes[i] {
        IrNode::Scalar(v) => literal(v, ty, dialect),
        _ => format!("v{i}"),
    };
    let elem_of = |t: Option<Value>| match t {
        Some(Value::Elem(c)) => Some(c),
        _ => None,
    };
    for (i, node) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let (ty, expr): (Value, String) = match *node {
            IrNode::Scalar(_) => continue,
            IrNode::Leaf(k) => {
                let ty = *spec.leaves.get(k).ok_or_else(|| {
                    unsupported(format!(
                        "leaf {k} of an expression with {} leaves",
                        spec.leaves.len()
                    ))
                })?;
                (Value::Elem(ty), loads[k].clone())
            }
            IrNode::Unary(op, a) => {
                let ty = elem_of(types[a]).unwrap_or(spec.out);
                let x = operand(a, ty);
                let float_only = |e: String| {
                    if ty.is_float() {
                        Ok(e)
                    } else {
                        Err(unsupported(format!("`{op}` of {ty:?} elements")))
                    }
                };
                let zero = literal(0.0, ty, dialect);
                let one = literal(1.0, ty, dialect);
                let e = match op {
                    "neg" => format!("-({x})"),
                    "abs" if ty.is_float() => format!("{}({x})", math("fabs", ty, dialect)),
                    "abs" => format!("(({x}) < 0 ? -({x}) : ({x}))"),
                    "square" => format!("({x}) * ({x})"),
                    "signum" if ty.is_float() => {
                        format!(
                            "(({x}) != ({x}) ? ({x}) : ({x}) > {zero} ? {one} : ({x}) < {zero} ? -{one} : {zero})"
                        )
                    }
                    "signum" => format!("((({x}) > 0) - (({x}) < 0))"),
                    "relu" => extreme(&x, &zero, ty, true),
                    "exp" => float_only(format!("{}({x})", math("exp", ty, dialect)))?,
                    "ln" => float_only(format!("{}({x})", math("log", ty, dialect)))?,
                    "sqrt" => float_only(format!("{}({x})", math("sqrt", ty, dialect)))?,
                    "rsqrt" => float_only(format!("{}({x})", math("rsqrt", ty, dialect)))?,
                    "tanh" => float_only(format!("{}({x})", math("tanh", ty, dialect)))?,
                    "sigmoid" => float_only(format!(
                        "{one} / ({one} + {}(-({x})))",
                        math("exp", ty, dialect)
                    ))?,
                    "sin" => float_only(format!("{}({x})", math("sin", ty, dialect)))?,
                    "cos" => float_only(format!("{}({x})", math("cos", ty, dialect)))?,
                    "recip" => float_only(format!("{one} / ({x})"))?,
                    "floor" => float_only(format!("{}({x})", math("floor", ty, dialect)))?,
                    "ceil" => float_only(format!("{}({x})", math("ceil", ty, dialect)))?,
                    other => return Err(unsupported(format!("the op `{other}` on a device"))),
                };
                (Value::Elem(ty), e)
            }
            IrNode::Binary(op, a, b) => {
                let known = elem_of(types[a]).or(elem_of(types[b]));
                let ty = known.unwrap_or(spec.out);
                let (x, y) = (operand(a, ty), operand(b, ty));
                let comparison = |c: &str| (Value::Truth, format!("({x}) {c} ({y})"));
                match op {
                    "add" => (Value::Elem(ty), format!("({x}) + ({y})")),
                    "sub" => (Value::Elem(ty), format!("({x}) - ({y})")),
                    "mul" => (Value::Elem(ty), format!("({x}) * ({y})")),
                    "div" if ty.is_float() => (Value::Elem(ty), format!("({x}) / ({y})")),
                    "div" => (
                        Value::Elem(ty),
                        format!(
                            "(({y}) == 0 ? {} : ({x}) / ({y}))",
                            literal(0.0, ty, dialect)
                        ),
                    ),
                    "max" => (Value::Elem(ty), extreme(&x, &y, ty, true)),
                    "min" => (Value::Elem(ty), extreme(&x, &y, ty, false)),
                    "pow" | "powi" if ty.is_float() => (
                        Value::Elem(ty),
                        format!("{}({x}, {y})", math("pow", ty, dialect)),
                    ),
                    "gt" => comparison(">"),
                    "ge" => comparison(">="),
                    "lt" => comparison("<"),
                    "le" => comparison("<="),
                    "eq" => comparison("=="),
                    "ne" => comparison("!="),
                    other => {
                        return Err(unsupported(format!(
                            "the op `{other}` on {ty:?} elements on a device"
                        )));
                    }
                }
            }
            IrNode::Select(c, a, b) => {
                let ty = elem_of(types[a]).or(elem_of(types[b])).unwrap_or(spec.out);
                let cond = operand(c, CType::I32);
                (
                    Value::Elem(ty),
                    format!("({cond}) != 0 ? {} : {}", operand(a, ty), operand(b, ty)),
                )
            }
            IrNode::Cast(to, a) => {
                let to = CType::from_name(to)?;
                let from = elem_of(types[a]).unwrap_or(spec.out);
                (Value::Elem(to), convert(&operand(a, from), to, dialect))
            }
            IrNode::Map(_) => {
                return Err(unsupported("a Rust closure (`map`) on a device".into()));
            }
        };
        let c_type = match ty {
            Value::Elem(c) => c.c_name(dialect),
            Value::Truth => "int",
        };
        writeln!(body, "{indent}{c_type} v{i} = ({c_type})({expr});").expect("writing to a String");
        types[i] = Some(ty);
    }
    let root = nodes.len() - 1;
    Ok(match nodes[root] {
        IrNode::Scalar(v) => literal(v, spec.out, dialect),
        _ => format!("v{root}"),
    })
}
