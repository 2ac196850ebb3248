//! The run-time description of an expression: a small op list of plain data, for kernel
//! generators, autodiff and interpreters.

use std::fmt;

use crate::element::DType;

pub mod ops;

pub use ops::{
    BinaryFn, BinaryOp, CompareOp, Derive, Domain, Identity, KernelSpelling, OpWeights, ReduceFn,
    ReduceOp, UnaryFn, UnaryOp, binary, reduce, unary,
};

/// One node of an [`Ir`]; children are indices of earlier nodes.
///
/// Nodes compare and hash structurally, constants by their bits (`NaN` equals itself, `0.0`
/// and `-0.0` differ), so an IR can key a cache of the kernels generated from it.
#[derive(Clone, Copy, Debug)]
pub enum IrNode {
    /// Leaf number `k` (in operand order).
    Leaf(usize),
    /// A constant.
    Scalar(f64),
    /// An element-wise op with one argument.
    Unary(UnaryOp, usize),
    /// An element-wise op with two arguments.
    Binary(BinaryOp, usize, usize),
    /// A comparison (1 where it holds, else 0; `bool` where stored).
    Compare(CompareOp, usize, usize),
    /// `select(cond, a, b)`.
    Select(usize, usize, usize),
    /// A conversion to the element type.
    Cast(DType, usize),
    /// A user closure (CPU only).
    Map(usize),
}

/// The variant of a node, its constant's bits or op, and its children: what equality and
/// hashing compare.
type NodeKey = (u8, u64, [usize; 3]);

impl IrNode {
    fn key(&self) -> NodeKey {
        match *self {
            IrNode::Leaf(k) => (0, 0, [k, 0, 0]),
            IrNode::Scalar(v) => (1, v.to_bits(), [0; 3]),
            IrNode::Unary(op, a) => (2, op as u64, [a, 0, 0]),
            IrNode::Binary(op, a, b) => (3, op as u64, [a, b, 0]),
            IrNode::Compare(op, a, b) => (4, op as u64, [a, b, 0]),
            IrNode::Select(c, a, b) => (5, 0, [c, a, b]),
            IrNode::Cast(to, a) => (6, to as u64, [a, 0, 0]),
            IrNode::Map(a) => (7, 0, [a, 0, 0]),
        }
    }

    /// The nodes this one reads.
    pub fn children(&self) -> impl Iterator<Item = usize> {
        let (list, n): ([usize; 3], usize) = match *self {
            IrNode::Leaf(_) | IrNode::Scalar(_) => ([0; 3], 0),
            IrNode::Unary(_, a) | IrNode::Cast(_, a) | IrNode::Map(a) => ([a, 0, 0], 1),
            IrNode::Binary(_, a, b) | IrNode::Compare(_, a, b) => ([a, b, 0], 2),
            IrNode::Select(c, a, b) => ([c, a, b], 3),
        };
        list.into_iter().take(n)
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

    /// Which nodes the nodes `roots` need (themselves included; a root past the nodes needs
    /// none).
    pub fn live(&self, roots: &[usize]) -> Vec<bool> {
        let mut live = vec![false; self.nodes.len()];
        for &r in roots {
            if let Some(l) = live.get_mut(r) {
                *l = true;
            }
        }
        for i in (0..self.nodes.len()).rev() {
            if live[i] {
                for child in self.nodes[i].children() {
                    live[child] = true;
                }
            }
        }
        live
    }

    /// The expression of node `root` alone: the nodes it needs, in order, `root` last (leaf
    /// numbers unchanged; no nodes where `root` is past them).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::ir::{Ir, IrNode, UnaryOp};
    /// let mut ir = Ir::default();
    /// let (x, y) = (ir.leaf(), ir.leaf());
    /// let ex = ir.push(IrNode::Unary(UnaryOp::Exp, x));
    /// ir.push(IrNode::Unary(UnaryOp::Neg, y));
    /// assert_eq!(ir.pruned(ex).to_string(), "exp(leaf0)");
    /// assert_eq!(ir.pruned(ex).nodes.len(), 2);
    /// ```
    pub fn pruned(&self, root: usize) -> Ir {
        if root >= self.nodes.len() {
            return Ir {
                nodes: Vec::new(),
                leaves: self.leaves,
            };
        }
        let live = self.live(&[root]);
        let mut renumber = vec![usize::MAX; root + 1];
        let mut nodes = Vec::new();
        for (i, node) in self.nodes[..=root].iter().enumerate() {
            if !live[i] {
                continue;
            }
            let n = |c: usize| renumber[c];
            let node = match *node {
                IrNode::Leaf(k) => IrNode::Leaf(k),
                IrNode::Scalar(v) => IrNode::Scalar(v),
                IrNode::Unary(op, a) => IrNode::Unary(op, n(a)),
                IrNode::Binary(op, a, b) => IrNode::Binary(op, n(a), n(b)),
                IrNode::Compare(op, a, b) => IrNode::Compare(op, n(a), n(b)),
                IrNode::Select(c, a, b) => IrNode::Select(n(c), n(a), n(b)),
                IrNode::Cast(to, a) => IrNode::Cast(to, n(a)),
                IrNode::Map(a) => IrNode::Map(n(a)),
            };
            renumber[i] = nodes.len();
            nodes.push(node);
        }
        Ir {
            nodes,
            leaves: self.leaves,
        }
    }

    /// Appends `other`'s nodes, its leaf `k` renamed `leaf_map[k]`; returns its root's new
    /// index.
    pub fn splice(&mut self, other: &Ir, leaf_map: &[usize]) -> usize {
        let base = self.nodes.len();
        for node in &other.nodes {
            self.nodes.push(match *node {
                IrNode::Leaf(k) => IrNode::Leaf(leaf_map[k]),
                IrNode::Scalar(v) => IrNode::Scalar(v),
                IrNode::Unary(op, a) => IrNode::Unary(op, a + base),
                IrNode::Binary(op, a, b) => IrNode::Binary(op, a + base, b + base),
                IrNode::Compare(op, a, b) => IrNode::Compare(op, a + base, b + base),
                IrNode::Select(c, a, b) => IrNode::Select(c + base, a + base, b + base),
                IrNode::Cast(to, a) => IrNode::Cast(to, a + base),
                IrNode::Map(a) => IrNode::Map(a + base),
            });
        }
        self.leaves = self
            .leaves
            .max(leaf_map.iter().map(|&k| k + 1).max().unwrap_or(0));
        self.nodes.len() - 1
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, node: usize) -> fmt::Result {
        match &self.nodes[node] {
            IrNode::Leaf(k) => write!(f, "leaf{k}"),
            IrNode::Scalar(v) => write!(f, "{v}"),
            IrNode::Unary(op, a) => {
                write!(f, "{}(", op.name())?;
                self.write(f, *a)?;
                f.write_str(")")
            }
            IrNode::Binary(op, a, b) => self.write_call(f, op.name(), &[*a, *b]),
            IrNode::Compare(op, a, b) => self.write_call(f, op.name(), &[*a, *b]),
            IrNode::Select(c, a, b) => self.write_call(f, "select", &[*c, *a, *b]),
            IrNode::Cast(to, a) => {
                write!(f, "cast_{}(", to.name())?;
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

    fn write_call(&self, f: &mut fmt::Formatter<'_>, name: &str, args: &[usize]) -> fmt::Result {
        write!(f, "{name}(")?;
        for (i, &arg) in args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            self.write(f, arg)?;
        }
        f.write_str(")")
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
            ir.push(IrNode::Binary(BinaryOp::Mul, x, c));
            ir
        };
        assert_eq!(ir(f64::NAN), ir(f64::NAN));
        assert_ne!(ir(0.0), ir(-0.0));
        assert_ne!(ir(1.0), ir(2.0));
        let set: HashSet<Ir> = [ir(1.0), ir(1.0), ir(f64::NAN), ir(f64::NAN), ir(-0.0)].into();
        assert_eq!(set.len(), 3);
        assert_ne!(
            IrNode::Unary(UnaryOp::Exp, 0),
            IrNode::Unary(UnaryOp::Ln, 0)
        );
        assert_ne!(
            IrNode::Binary(BinaryOp::Max, 0, 1),
            IrNode::Compare(CompareOp::Less, 0, 1)
        );
        assert_ne!(IrNode::Leaf(1), IrNode::Map(1));
    }
}
