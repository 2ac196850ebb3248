//! The expression part of a kernel: one C statement per IR node.

use std::fmt::Write;

use axes_core::error::{Error, Result};
use axes_core::ir::{Domain, Identity, IrNode, KernelSpelling, ReduceOp};

use crate::{CType, Dialect, Spec};

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
pub(crate) fn literal(v: f64, ty: CType, dialect: Dialect) -> String {
    if ty.is_half() {
        // Kernels compute half-precision values in float: so are their constants (a mean's
        // 1/n of 1e6 elements is no f16 value).
        return literal(v, CType::F32, dialect);
    }
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
pub(crate) fn math(name: &str, ty: CType, dialect: Dialect) -> String {
    match (dialect, ty.compute()) {
        (Dialect::Cuda, CType::F32) => format!("{name}f"),
        _ => name.to_string(),
    }
}

/// `value` converted to a value of `ty` (a half type: rounded to it, kept in `float`).
pub(crate) fn convert(value: &str, ty: CType, dialect: Dialect) -> String {
    match ty {
        CType::Bool => format!("(unsigned char)(({value}) != 0)"),
        CType::F16 => format!("axes_round_f16((float)({value}))"),
        CType::BF16 => format!("axes_bf16_to_float(axes_float_to_bf16((float)({value})))"),
        _ => format!("({})({value})", ty.c_name(dialect)),
    }
}

/// The element `index` of the buffer `array` of `ty` elements, as a value to compute with.
pub(crate) fn load(array: &str, index: &str, ty: CType, dialect: Dialect) -> String {
    match (ty, dialect) {
        (CType::F16, Dialect::OpenCl) => format!("vload_half({index}, {array})"),
        (CType::F16, Dialect::Cuda) => format!("axes_f16_to_float({array}[{index}])"),
        (CType::BF16, _) => format!("axes_bf16_to_float({array}[{index}])"),
        _ => format!("{array}[{index}]"),
    }
}

/// The statement writing `value` (computed in `ty`'s [`CType::compute`] type) as element
/// `index` of the buffer `array` of `ty` elements, rounding to nearest even for the halves.
pub(crate) fn store(array: &str, index: &str, value: &str, ty: CType, dialect: Dialect) -> String {
    match (ty, dialect) {
        (CType::F16, Dialect::OpenCl) => {
            format!("vstore_half_rte((float)({value}), {index}, {array});")
        }
        (CType::F16, Dialect::Cuda) => {
            format!("{array}[{index}] = axes_float_to_f16((float)({value}));")
        }
        (CType::BF16, _) => format!("{array}[{index}] = axes_float_to_bf16((float)({value}));"),
        _ => format!("{array}[{index}] = {};", convert(value, ty, dialect)),
    }
}

/// `template` (see [`KernelSpelling`]) with `{x}`, `{a}`, `{b}` replaced by `args`, `{bits}`
/// by the width of `ty` in bits, `{unsigned}` by the unsigned type of that width, `{name}` by the math function `name` for `ty`, and
/// `{number}` by that constant in `ty`.
fn fill(template: &str, args: &[(&str, &str)], ty: CType, dialect: Dialect) -> Result<String> {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or_else(|| {
            unsupported(format!(
                "an unclosed `{{` in the kernel template `{template}`"
            ))
        })? + open;
        let key = &rest[open + 1..close];
        if let Some(&(_, value)) = args.iter().find(|(name, _)| *name == key) {
            out.push_str(value);
        } else if key == "bits" {
            write!(out, "{}", 8 * ty.size()).expect("writing to a String");
        } else if key == "unsigned" {
            out.push_str(ty.unsigned_name(dialect));
        } else if let Ok(v) = key.parse::<f64>() {
            out.push_str(&literal(v, ty, dialect));
        } else if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push_str(&math(key, ty, dialect));
        } else {
            return Err(unsupported(format!(
                "`{{{key}}}` in the kernel template `{template}`"
            )));
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The template of an op with `kernel` spelling over `ty` elements, or why it has none.
fn template(kernel: KernelSpelling, domain: Domain, name: &str, ty: CType) -> Result<&'static str> {
    if !domain.accepts(ty.dtype()) {
        Err(unsupported(format!(
            "`{name}` of {ty:?} elements on a device"
        )))
    } else if ty.is_float() {
        Ok(kernel.float)
    } else {
        Ok(kernel.integer.unwrap_or(kernel.float))
    }
}

/// `a ⊕ b` for a reduction.
pub(crate) fn combine(op: ReduceOp, a: &str, b: &str, ty: CType, dialect: Dialect) -> String {
    let op = op.combine_op();
    let spelling = template(op.kernel(), op.domain(), op.name(), ty)
        .expect("reductions combine with ops every numeric type has");
    fill(spelling, &[("a", a), ("b", b)], ty, dialect)
        .expect("the op table's kernel templates are well formed")
}

/// The identity of `op` in `ty`.
pub(crate) fn identity(op: ReduceOp, ty: CType, dialect: Dialect) -> Result<String> {
    let (low, high) = match ty {
        CType::F32 | CType::F64 | CType::F16 | CType::BF16 => (f64::NEG_INFINITY, f64::INFINITY),
        CType::I32 => (i32::MIN as f64, i32::MAX as f64),
        CType::I64 => {
            let c = ty.c_name(dialect);
            return Ok(match op.identity() {
                Identity::Zero => format!("(({c})0)"),
                Identity::One => format!("(({c})1)"),
                Identity::Lowest => format!("(({c})(-9223372036854775807LL - 1))"),
                Identity::Highest => format!("(({c})9223372036854775807LL)"),
            });
        }
        CType::U8 | CType::Bool => (0.0, 255.0),
    };
    Ok(literal(
        match op.identity() {
            Identity::Zero => 0.0,
            Identity::One => 1.0,
            Identity::Lowest => low,
            Identity::Highest => high,
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
    let root = spec.ir.nodes.len().checked_sub(1);
    let roots = root.ok_or_else(|| unsupported("an empty expression".into()))?;
    let mut values = expressions(spec, &[roots], dialect, loads, body, indent)?;
    Ok(values.pop().expect("one value per root"))
}

/// [`expression`] for several roots at once (nodes they share are computed once): the
/// expression of each root, in order.
pub(crate) fn expressions(
    spec: &Spec<'_>,
    roots: &[usize],
    dialect: Dialect,
    loads: &[String],
    body: &mut String,
    indent: &str,
) -> Result<Vec<String>> {
    let nodes = &spec.ir.nodes;
    if let Some(&bad) = roots.iter().find(|&&r| r >= nodes.len()) {
        return Err(unsupported(format!(
            "node {bad} of an expression of {} nodes as a result",
            nodes.len()
        )));
    }
    let live = spec.ir.live(roots);
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
                let spelling = template(op.kernel(), op.domain(), op.name(), ty)?;
                let x = operand(a, ty);
                (Value::Elem(ty), fill(spelling, &[("x", &x)], ty, dialect)?)
            }
            IrNode::Binary(op, a, b) => {
                let ty = elem_of(types[a]).or(elem_of(types[b])).unwrap_or(spec.out);
                let spelling = template(op.kernel(), op.domain(), op.name(), ty)?;
                let (x, y) = (operand(a, ty), operand(b, ty));
                let value = fill(spelling, &[("a", &x), ("b", &y)], ty, dialect)?;
                (Value::Elem(ty), value)
            }
            IrNode::Compare(op, a, b) => {
                let ty = elem_of(types[a]).or(elem_of(types[b])).unwrap_or(spec.out);
                let (x, y) = (operand(a, ty), operand(b, ty));
                (Value::Truth, format!("({x}) {} ({y})", op.kernel()))
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
                let to = CType::of(to)?;
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
    Ok((roots.iter())
        .map(|&root| match nodes[root] {
            IrNode::Scalar(v) => literal(v, spec.out, dialect),
            _ => format!("v{root}"),
        })
        .collect())
}
