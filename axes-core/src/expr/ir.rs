//! The run-time description of an expression: a small op list of plain data, for kernel
//! generators, autodiff and interpreters.

use std::fmt;

/// One node of an [`Ir`]; children are indices of earlier nodes.
///
/// Nodes compare and hash structurally, constants by their bits (`NaN` equals itself, `0.0`
/// and `-0.0` differ), so an IR can key a cache of the kernels generated from it.
#[derive(Clone, Debug)]
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

impl IrNode {
    /// The node with its constant, if any, replaced by its bits: what equality and hashing
    /// compare.
    fn key(&self) -> (u8, u64, &'static str, [usize; 3]) {
        match *self {
            IrNode::Leaf(k) => (0, 0, "", [k, 0, 0]),
            IrNode::Scalar(v) => (1, v.to_bits(), "", [0; 3]),
            IrNode::Unary(name, a) => (2, 0, name, [a, 0, 0]),
            IrNode::Binary(name, a, b) => (3, 0, name, [a, b, 0]),
            IrNode::Select(c, a, b) => (4, 0, "", [c, a, b]),
            IrNode::Cast(name, a) => (5, 0, name, [a, 0, 0]),
            IrNode::Map(a) => (6, 0, "", [a, 0, 0]),
        }
    }
}

impl PartialEq for IrNode {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for IrNode {}

impl std::hash::Hash for IrNode {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// An expression as an op list; the last node is the root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn nodes_compare_and_hash_constants_by_their_bits() {
        let ir = |v: f64| {
            let mut ir = Ir::default();
            let x = ir.leaf();
            let c = ir.push(IrNode::Scalar(v));
            ir.push(IrNode::Binary("mul", x, c));
            ir
        };
        assert_eq!(ir(f64::NAN), ir(f64::NAN));
        assert_ne!(ir(0.0), ir(-0.0));
        assert_ne!(ir(1.0), ir(2.0));
        let set: HashSet<Ir> = [ir(1.0), ir(1.0), ir(f64::NAN), ir(f64::NAN), ir(-0.0)].into();
        assert_eq!(set.len(), 3);
        assert_ne!(IrNode::Unary("exp", 0), IrNode::Unary("ln", 0));
        assert_ne!(IrNode::Leaf(1), IrNode::Map(1));
    }
}
