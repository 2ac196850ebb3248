//! Compiling an [`Ir`] into the interpreter's typed instructions.

use std::collections::HashMap;

use crate::element::DType;
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, CompareOp, Domain, Ir, IrNode, UnaryOp};

#[derive(Clone, Copy, Debug)]
pub(super) enum Inst {
    /// The block of source `k`.
    Leaf(usize),
    Const(f64),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Compare(CompareOp, usize, usize),
    /// `select(cond, a, b)`; a numeric condition is true where it is not 0.
    Select(usize, usize, usize),
    /// The argument converted to this instruction's type
    /// ([`Element::cast`](crate::element::Element::cast)).
    Cast(usize),
}

/// An [`Ir`] compiled for the interpreter: one typed instruction per needed node (a constant
/// once per type it is used in), in order.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(super) insts: Vec<Inst>,
    pub(super) types: Vec<DType>,
    pub(super) roots: Vec<usize>,
}

impl Program {
    /// The program that reads its one source of type `dtype`: with a combining sink, a
    /// strided accumulation.
    pub(crate) fn copy(dtype: DType) -> Program {
        Program {
            insts: vec![Inst::Leaf(0)],
            types: vec![dtype],
            roots: vec![0],
        }
    }

    /// This program with every f16 and bf16 value computed in f32: half-precision leaves are
    /// read, and casts to a half type rounded, then widened; root `k` is left in f32 where
    /// `wide[k]`, else rounded back to its type.
    pub(super) fn in_f32(&self, wide: &[bool]) -> Program {
        let half = |ty: DType| matches!(ty, DType::F16 | DType::BF16);
        let mut out = Program {
            insts: Vec::with_capacity(self.insts.len()),
            types: Vec::with_capacity(self.insts.len()),
            roots: Vec::with_capacity(self.roots.len()),
        };
        let mut at: Vec<usize> = Vec::with_capacity(self.insts.len());
        for (&inst, &ty) in self.insts.iter().zip(&self.types) {
            let inst = match inst {
                Inst::Leaf(_) | Inst::Const(_) => inst,
                Inst::Unary(op, a) => Inst::Unary(op, at[a]),
                Inst::Binary(op, a, b) => Inst::Binary(op, at[a], at[b]),
                Inst::Compare(op, a, b) => Inst::Compare(op, at[a], at[b]),
                Inst::Select(c, a, b) => Inst::Select(at[c], at[a], at[b]),
                Inst::Cast(a) => Inst::Cast(at[a]),
            };
            let slot = match inst {
                Inst::Leaf(_) | Inst::Cast(_) if half(ty) => {
                    let value = out.push(inst, ty);
                    out.push(Inst::Cast(value), DType::F32)
                }
                _ if half(ty) => out.push(inst, DType::F32),
                _ => out.push(inst, ty),
            };
            at.push(slot);
        }
        for (k, &root) in self.roots.iter().enumerate() {
            let ty = self.types[root];
            let slot = match half(ty) && !wide[k] {
                true => out.push(Inst::Cast(at[root]), ty),
                false => at[root],
            };
            out.roots.push(slot);
        }
        out
    }

    fn push(&mut self, inst: Inst, ty: DType) -> usize {
        self.insts.push(inst);
        self.types.push(ty);
        self.insts.len() - 1
    }

    /// Compiles `ir` to compute the nodes `roots`, each of type `out`, from leaves of the
    /// types `leaves` (leaf `k` has type `leaves[k]`).
    pub(crate) fn compile(ir: &Ir, roots: &[usize], leaves: &[DType], out: DType) -> Result<Self> {
        Compiler {
            ir,
            leaves,
            out,
            live: ir.live(roots),
            program: Program {
                insts: Vec::new(),
                types: Vec::new(),
                roots: Vec::new(),
            },
            slots: vec![None; ir.nodes.len()],
            constants: HashMap::new(),
        }
        .compile(roots)
    }
}

/// The state of [`Program::compile`].
struct Compiler<'a> {
    ir: &'a Ir,
    leaves: &'a [DType],
    out: DType,
    live: Vec<bool>,
    program: Program,
    /// The instruction of each node compiled so far (constants are in `constants`).
    slots: Vec<Option<usize>>,
    constants: HashMap<(u64, DType), usize>,
}

impl Compiler<'_> {
    fn compile(mut self, roots: &[usize]) -> Result<Program> {
        for (i, node) in self.ir.nodes.iter().enumerate() {
            if !self.live[i] {
                continue;
            }
            let compiled = match *node {
                IrNode::Scalar(_) => None,
                IrNode::Leaf(k) => {
                    let ty = *self.leaves.get(k).ok_or_else(|| {
                        unsupported(format!(
                            "leaf {k} of an expression with {} leaves",
                            self.leaves.len()
                        ))
                    })?;
                    Some((Inst::Leaf(k), ty))
                }
                IrNode::Unary(op, a) => {
                    let ty = self.type_of(&[a]);
                    check_domain(op.name(), op.domain(), ty)?;
                    Some((Inst::Unary(op, self.operand(a, ty)?), ty))
                }
                IrNode::Binary(op, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    check_domain(op.name(), op.domain(), ty)?;
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Binary(op, a, b), ty))
                }
                IrNode::Compare(op, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Compare(op, a, b), DType::Bool))
                }
                IrNode::Select(c, a, b) => {
                    let ty = self.type_of(&[a, b]);
                    let c = match self.slots[c] {
                        Some(slot) => slot,
                        None => self.operand(c, DType::Bool)?,
                    };
                    let (a, b) = (self.operand(a, ty)?, self.operand(b, ty)?);
                    Some((Inst::Select(c, a, b), ty))
                }
                IrNode::Cast(to, a) => {
                    let from = self.type_of(&[a]);
                    Some((Inst::Cast(self.operand(a, from)?), to))
                }
                IrNode::Map(_) => {
                    return Err(unsupported(
                        "a Rust closure in a run-time expression".into(),
                    ));
                }
            };
            if let Some((inst, ty)) = compiled {
                self.slots[i] = Some(self.push(inst, ty));
            }
        }
        for &root in roots {
            if let Some(slot) = self.slots[root] {
                let ty = self.program.types[slot];
                if ty != self.out {
                    return Err(unsupported(format!(
                        "a result of type {} evaluated into elements of type {}",
                        ty.name(),
                        self.out.name()
                    )));
                }
            }
            let slot = self.operand(root, self.out)?;
            self.program.roots.push(slot);
        }
        Ok(self.program)
    }

    fn push(&mut self, inst: Inst, ty: DType) -> usize {
        self.program.insts.push(inst);
        self.program.types.push(ty);
        self.program.insts.len() - 1
    }

    /// The type of the first of `nodes` that is not a constant (constants take the type of
    /// their use), else the result's.
    fn type_of(&self, nodes: &[usize]) -> DType {
        nodes
            .iter()
            .find_map(|&node| self.slots[node].map(|slot| self.program.types[slot]))
            .unwrap_or(self.out)
    }

    /// The instruction computing `node` as type `ty`: a constant is made for that type; any
    /// other node must have it.
    fn operand(&mut self, node: usize, ty: DType) -> Result<usize> {
        if let IrNode::Scalar(v) = self.ir.nodes[node] {
            let key = (v.to_bits(), ty);
            if let Some(&slot) = self.constants.get(&key) {
                return Ok(slot);
            }
            let slot = self.push(Inst::Const(v), ty);
            self.constants.insert(key, slot);
            return Ok(slot);
        }
        let slot = self.slots[node].expect("nodes refer to earlier nodes");
        let found = self.program.types[slot];
        if found != ty {
            return Err(unsupported(format!(
                "operands of types {} and {} in one operation",
                found.name(),
                ty.name()
            )));
        }
        Ok(slot)
    }
}

pub(super) fn unsupported(what: String) -> Error {
    Error::Unsupported { what }
}

/// An error unless an op of `domain` applies to `ty`.
fn check_domain(name: &str, domain: Domain, ty: DType) -> Result<()> {
    if domain.accepts(ty) {
        Ok(())
    } else {
        Err(unsupported(format!("`{name}` on {}", ty.name())))
    }
}
