//! Tensors as the leaves of expressions (their chunks are loaded by the engine's
//! [`LeafEval`]).

use super::{Expr, Ir};
use crate::element::Element;
use crate::engine::leaf::LeafEval;
use crate::engine::plan::{LeafLayout, Leaves, Plan};
use crate::list::{AxisList, AxisSet};
use crate::protocol::{Buffers, LeafBuffer};
use crate::tensor::{FlatPartsList, Tensor};

fn operand<T: Element, A: AxisSet>(t: &Tensor<T, A>) -> LeafLayout<'_> {
    LeafLayout {
        ids: A::IDS,
        layout: t.layout(),
        names: <A as AxisList>::names,
    }
}

impl<T: Element, A: AxisSet> Expr for Tensor<T, A> {
    type Elem = T;
    type Axes = A;
    type Target = Self;
    fn target(&self) -> &Self {
        self
    }
    type Eval<'a>
        = LeafEval<'a, T>
    where
        Self: 'a;

    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        out.push(operand(self));
    }

    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        out.push(LeafBuffer {
            dtype: T::DTYPE,
            data: self.storage().leaf_data(),
        });
    }

    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        out.push(Tensor::flat_parts(self));
    }

    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> LeafEval<'a, T> {
        *next_leaf += 1;
        LeafEval::new(
            self.storage().as_slice(),
            self.layout().offset(),
            plan,
            *next_leaf - 1,
        )
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        ir.leaf()
    }
}

/// A reference to an expression is an expression (it borrows the leaves).
impl<E: Expr> Expr for &E {
    type Elem = E::Elem;
    type Axes = E::Axes;
    type Target = E::Target;
    const DEPTH: usize = E::DEPTH;
    const FUSED_ONLY: bool = E::FUSED_ONLY;
    const WEIGHTS: crate::ir::OpWeights = E::WEIGHTS;
    fn target(&self) -> &E::Target {
        (**self).target()
    }
    type Eval<'a>
        = E::Eval<'a>
    where
        Self: 'a;

    fn operands<'a>(&'a self, out: &mut Leaves<'a>) {
        (**self).operands(out);
    }

    fn buffers<'a>(&'a self, out: &mut Buffers<'a>) {
        (**self).buffers(out);
    }

    fn flat_parts<'a>(&'a self, out: &mut FlatPartsList<'a>) {
        (**self).flat_parts(out);
    }

    #[inline(always)]
    fn evaluator<'a>(&'a self, plan: &'a Plan, next_leaf: &mut usize) -> E::Eval<'a> {
        (**self).evaluator(plan, next_leaf)
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        (**self).describe(ir)
    }
}
