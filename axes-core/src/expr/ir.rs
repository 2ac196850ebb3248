//! The run-time description of an expression: a small op list of plain data, for kernel
//! generators, autodiff and interpreters.

use std::fmt;

/// One node of an [`Ir`]; children are indices of earlier nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum IrNode {
    /// Leaf number `k` (in operand order).
    Leaf(usize),
    /// A constant.
    Scalar(f64),
    /// An element-wise op with one argument.
    Unary(&'static str, usize),
    /// An element-wise op with two arguments.
    Binary(&'static str, usize, usize),
    /// `select(cond, a, b)`.
    Select(usize, usize, usize),
    /// A conversion to the named element type.
    Cast(&'static str, usize),
    /// A user closure (CPU only).
    Map(usize),
}

/// An expression as an op list; the last node is the root.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ir {
    /// The nodes, children before parents.
    pub nodes: Vec<IrNode>,
    leaves: usize,
}

impl Ir {
    /// Adds a node and returns its index.
    pub fn push(&mut self, node: IrNode) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Adds the next leaf.
    pub fn leaf(&mut self) -> usize {
        self.leaves += 1;
        self.push(IrNode::Leaf(self.leaves - 1))
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, node: usize) -> fmt::Result {
        match &self.nodes[node] {
            IrNode::Leaf(k) => write!(f, "leaf{k}"),
            IrNode::Scalar(v) => write!(f, "{v}"),
            IrNode::Unary(op, a) => {
                write!(f, "{op}(")?;
                self.write(f, *a)?;
                f.write_str(")")
            }
            IrNode::Binary(op, a, b) => {
                write!(f, "{op}(")?;
                self.write(f, *a)?;
                f.write_str(", ")?;
                self.write(f, *b)?;
                f.write_str(")")
            }
            IrNode::Select(c, a, b) => {
                f.write_str("select(")?;
                self.write(f, *c)?;
                f.write_str(", ")?;
                self.write(f, *a)?;
                f.write_str(", ")?;
                self.write(f, *b)?;
                f.write_str(")")
            }
            IrNode::Cast(to, a) => {
                write!(f, "cast_{to}(")?;
                self.write(f, *a)?;
                f.write_str(")")
            }
            IrNode::Map(a) => {
                f.write_str("map(")?;
                self.write(f, *a)?;
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Ir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes.is_empty() {
            return Ok(());
        }
        self.write(f, self.nodes.len() - 1)
    }
}
