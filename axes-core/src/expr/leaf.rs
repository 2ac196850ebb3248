//! Tensors as the leaves of expressions, and their chunk evaluator.

use std::ptr;

use super::{Expr, Ir};
use crate::element::Element;
use crate::engine::CHUNK;
use crate::engine::exec::ChunkEval;
use crate::engine::plan::{Access, LeafLayout, Plan};
use crate::list::{AxisList, AxisSet};
use crate::tensor::Tensor;

/// Loads the chunks of one tensor: a pointer into the tensor where the chunk is contiguous,
/// else the chunk gathered into a stack buffer.
pub struct LeafEval<'a, T: Element> {
    data: &'a [T],
    access: Access,
    rank: usize,
    current: *const T,
    scratch: [T; CHUNK],
}

impl<'a, T: Element> LeafEval<'a, T> {
    pub(crate) fn new(data: &'a [T], plan: &Plan, leaf: usize) -> Self {
        LeafEval {
            data,
            access: plan.access[leaf + 1],
            rank: plan.rank,
            current: ptr::null(),
            scratch: [T::zero(); CHUNK],
        }
    }

    /// Reads the element at buffer position `pos` (checked).
    #[inline(always)]
    fn read(&self, pos: isize) -> T {
        self.data[pos as usize]
    }

    /// Gathers a chunk of a padded operand element by element.
    #[cold]
    fn load_padded(&mut self, outer: &[usize], start: usize, n: usize) {
        let a = &self.access;
        let inner = self.rank - 1;
        let stored = |axis: usize, i: usize| i.wrapping_sub(a.pad_before[axis]) < a.stored[axis];
        let outer_stored = outer.iter().enumerate().all(|(axis, &i)| stored(axis, i));
        let mut base = a.offset;
        for (axis, &i) in outer.iter().enumerate() {
            base += (i as isize - a.pad_before[axis] as isize) * a.strides[axis];
        }
        for k in 0..n {
            let i = start + k;
            self.scratch[k] = if outer_stored && stored(inner, i) {
                self.read(base + (i as isize - a.pad_before[inner] as isize) * a.strides[inner])
            } else {
                T::zero()
            };
        }
        self.current = self.scratch.as_ptr();
    }
}

// SAFETY: `load` leaves `current` pointing at `n` readable elements: a subslice of `data`
// (bounds-checked) or the first `n <= CHUNK` elements of `scratch`.
unsafe impl<T: Element> ChunkEval for LeafEval<'_, T> {
    type Out = T;

    #[inline(always)]
    fn load(&mut self, outer: &[usize], start: usize, n: usize) {
        debug_assert!(n <= CHUNK);
        if self.rank == 0 {
            self.scratch[0] = self.read(self.access.offset);
            self.current = self.scratch.as_ptr();
            return;
        }
        if self.access.padded {
            self.load_padded(outer, start, n);
            return;
        }
        let a = &self.access;
        let inner = self.rank - 1;
        let mut base = a.offset;
        for (axis, &i) in outer.iter().enumerate() {
            base += i as isize * a.strides[axis];
        }
        let stride = a.strides[inner];
        let first = base + start as isize * stride;
        match stride {
            1 => self.current = self.data[first as usize..first as usize + n].as_ptr(),
            0 => {
                let value = self.read(first);
                self.scratch[..n].fill(value);
                self.current = self.scratch.as_ptr();
            }
            _ => {
                for k in 0..n {
                    self.scratch[k] = self.read(first + k as isize * stride);
                }
                self.current = self.scratch.as_ptr();
            }
        }
    }

    #[inline(always)]
    unsafe fn at(&self, i: usize) -> T {
        // SAFETY: the caller keeps i below the n of the last load, which left `current`
        // pointing at n readable elements (and `self` has not moved since).
        unsafe { *self.current.add(i) }
    }
}

fn operand<T: Element, A: AxisSet>(t: &Tensor<T, A>) -> LeafLayout {
    LeafLayout {
        ids: A::type_ids(),
        layout: *t.layout(),
        names: <A as AxisList>::names,
    }
}

impl<T: Element, A: AxisSet> Expr for Tensor<T, A> {
    type Elem = T;
    type Axes = A;
    type Eval<'a>
        = LeafEval<'a, T>
    where
        Self: 'a;

    fn operands(&self, out: &mut Vec<LeafLayout>) {
        out.push(operand(self));
    }

    fn evaluator<'a>(&'a self, plan: &Plan, next_leaf: &mut usize) -> LeafEval<'a, T> {
        *next_leaf += 1;
        LeafEval::new(self.storage().as_slice(), plan, *next_leaf - 1)
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        ir.leaf()
    }
}

/// A reference to an expression is an expression (it borrows the leaves).
impl<E: Expr> Expr for &E {
    type Elem = E::Elem;
    type Axes = E::Axes;
    type Eval<'a>
        = E::Eval<'a>
    where
        Self: 'a;

    fn operands(&self, out: &mut Vec<LeafLayout>) {
        (**self).operands(out);
    }

    fn evaluator<'a>(&'a self, plan: &Plan, next_leaf: &mut usize) -> E::Eval<'a> {
        (**self).evaluator(plan, next_leaf)
    }

    fn describe(&self, ir: &mut Ir) -> usize {
        (**self).describe(ir)
    }
}
