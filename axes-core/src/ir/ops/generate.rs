//! The generators of the op tables' rows: each macro takes the rows of one table (from
//! `for_each_unary_op!` and its siblings) and writes what they give — the run-time enums with
//! their methods, the typed zero-sized ops, the cost kinds, and the calls that give each op
//! its methods on expressions, tensors and variables.

macro_rules! define_unary_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$x:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            cost $cost:ident,
            d |$d:ident, $dx:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        /// An element-wise function of one argument (the rows of
        /// `for_each_unary_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $($(#[$doc])* $op,)*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(UnaryOp::$op => $name,)* }
            }

            /// The element types it accepts.
            pub const fn domain(self) -> Domain {
                match self { $(UnaryOp::$op => Domain::$domain,)* }
            }

            /// How device kernels write it.
            pub const fn kernel(self) -> KernelSpelling {
                match self {
                    $(UnaryOp::$op => KernelSpelling {
                        float: $kernel,
                        integer: first_of!($(Some($int),)? None),
                    },)*
                }
            }

            /// Applies the op to one floating-point element (`None` for an op of integers
            /// only).
            #[inline(always)]
            pub fn apply<T: Float>(self, value: T) -> Option<T> {
                match self { $(UnaryOp::$op => in_domain!($domain, Float, { let $x = value; $scalar }),)* }
            }

            /// `out[i] = op(a[i])` over floats: one `match` per block of elements, not per
            /// element; `false` (nothing written) for an op of integers only.
            #[inline(always)]
            pub fn apply_all<T: Float>(self, out: &mut [T], a: &[T]) -> bool {
                match self {
                    $(UnaryOp::$op => in_domain!($domain, Float, {
                        for (o, &$x) in out.iter_mut().zip(a) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// `out[i] = op(a[i])` over integers; `false` (nothing written) for an op of
            /// floats only.
            #[inline(always)]
            pub fn apply_all_int<T: Int>(self, out: &mut [T], a: &[T]) -> bool {
                match self {
                    $(UnaryOp::$op => in_domain!($domain, Int, {
                        for (o, &$x) in out.iter_mut().zip(a) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// Appends to `ir` the adjoint of the argument `x` of this op, whose result is
            /// node `y` and whose adjoint is node `g`; `None` where no gradient flows.
            #[allow(unused_variables)]
            pub fn derivative(self, ir: &mut Ir, x: usize, y: usize, g: usize) -> Option<usize> {
                let mut builder = Derive(ir);
                match self {
                    $(UnaryOp::$op => {
                        let ($d, $dx, $y, $g) = (&mut builder, x, y, g);
                        $derivative
                    })*
                }
            }
        }

        impl OpWeights {
            /// What `op` costs per element: the `cost` column of its row.
            pub const fn of_unary(op: UnaryOp) -> OpWeights {
                match op { $(UnaryOp::$op => OpWeights::$cost,)* }
            }
        }

        /// The unary ops as typed zero-sized values, for the CPU loop engine.
        pub mod unary {
            use super::{OpWeights, UnaryFn, UnaryOp};
            use crate::ir::{Ir, IrNode};
            #[allow(unused_imports)]
            use crate::num::{Float, Int, Num};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: $domain> UnaryFn<T> for $op {
                    type Out = T;
                    const WEIGHT: OpWeights = OpWeights::of_unary(UnaryOp::$op);
                    #[inline(always)]
                    fn apply(self, $x: T) -> T {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize) -> usize {
                        ir.push(IrNode::Unary(UnaryOp::$op, a))
                    }
                }
            )*
        }
    };
}
pub(crate) use define_unary_ops;

macro_rules! define_binary_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$a:ident, $b:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            cost $cost:ident,
            d |$d:ident, $da:ident, $db:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        /// An element-wise function of two arguments (the rows of
        /// `for_each_binary_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $($(#[$doc])* $op,)*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: &'static [BinaryOp] = &[$(BinaryOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(BinaryOp::$op => $name,)* }
            }

            /// The element types it accepts.
            pub const fn domain(self) -> Domain {
                match self { $(BinaryOp::$op => Domain::$domain,)* }
            }

            /// How device kernels write it.
            pub const fn kernel(self) -> KernelSpelling {
                match self {
                    $(BinaryOp::$op => KernelSpelling {
                        float: $kernel,
                        integer: first_of!($(Some($int),)? None),
                    },)*
                }
            }

            /// Applies the op to two floating-point elements (`None` for an op of integers
            /// only).
            #[inline(always)]
            pub fn apply<T: Float>(self, left: T, right: T) -> Option<T> {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Float, {
                        let ($a, $b) = (left, right);
                        $scalar
                    }),)*
                }
            }

            /// `out[i] = op(a[i], b[i])` over floats: one `match` per block of elements;
            /// `false` (nothing written) for an op of integers only.
            #[inline(always)]
            pub fn apply_all<T: Float>(self, out: &mut [T], a: &[T], b: &[T]) -> bool {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Float, {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// `out[i] = op(a[i], b[i])` over integers; `false` (nothing written) for an op
            /// of floats only.
            #[inline(always)]
            pub fn apply_all_int<T: Int>(self, out: &mut [T], a: &[T], b: &[T]) -> bool {
                match self {
                    $(BinaryOp::$op => in_domain!($domain, Int, {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    }) == Some(()),)*
                }
            }

            /// Appends to `ir` the adjoints of the arguments `a` and `b` of this op, whose
            /// result is node `y` and whose adjoint is node `g`.
            #[allow(unused_variables)]
            pub fn derivative(
                self,
                ir: &mut Ir,
                a: usize,
                b: usize,
                y: usize,
                g: usize,
            ) -> [Option<usize>; 2] {
                let mut builder = Derive(ir);
                match self {
                    $(BinaryOp::$op => {
                        let ($d, $da, $db, $y, $g) = (&mut builder, a, b, y, g);
                        $derivative
                    })*
                }
            }
        }

        impl OpWeights {
            /// What `op` costs per element: the `cost` column of its row.
            pub const fn of_binary(op: BinaryOp) -> OpWeights {
                match op { $(BinaryOp::$op => OpWeights::$cost,)* }
            }
        }

        /// The binary ops as typed zero-sized values, for the CPU loop engine.
        pub mod binary {
            use super::{BinaryFn, BinaryOp, OpWeights};
            use crate::ir::{Ir, IrNode};
            #[allow(unused_imports)]
            use crate::num::{Float, Int, Num};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: $domain> BinaryFn<T> for $op {
                    type Out = T;
                    const WEIGHT: OpWeights = OpWeights::of_binary(BinaryOp::$op);
                    #[inline(always)]
                    fn apply(self, $a: T, $b: T) -> T {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize, b: usize) -> usize {
                        ir.push(IrNode::Binary(BinaryOp::$op, a, b))
                    }
                }
            )*
            pub use super::compare::*;
        }
    };
}
pub(crate) use define_binary_ops;

macro_rules! define_compare_ops {
    ([] $(
        $(#[$doc:meta])*
        $op:ident ($method:ident) $name:literal: |$a:ident, $b:ident| $scalar:expr, kernel $kernel:literal;
    )*) => {
        /// A comparison of two elements, giving `bool` (the rows of
        /// `for_each_compare_op!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CompareOp {
            $($(#[$doc])* $op,)*
        }

        impl CompareOp {
            /// Every comparison, in table order.
            pub const ALL: &'static [CompareOp] = &[$(CompareOp::$op),*];

            /// The name (in IR text and messages).
            pub const fn name(self) -> &'static str {
                match self { $(CompareOp::$op => $name,)* }
            }

            /// The C operator device kernels write.
            pub const fn kernel(self) -> &'static str {
                match self { $(CompareOp::$op => $kernel,)* }
            }

            /// Compares two elements.
            #[inline(always)]
            pub fn apply<T: Element>(self, left: T, right: T) -> bool {
                match self { $(CompareOp::$op => { let ($a, $b) = (left, right); $scalar })* }
            }

            /// `out[i] = op(a[i], b[i])`: one `match` per block of elements.
            pub fn apply_all<T: Element>(self, out: &mut [bool], a: &[T], b: &[T]) {
                match self {
                    $(CompareOp::$op => {
                        for ((o, &$a), &$b) in out.iter_mut().zip(a).zip(b) {
                            *o = $scalar;
                        }
                    })*
                }
            }
        }

        /// The comparisons as typed zero-sized values (re-exported by [`binary`]).
        mod compare {
            use super::{BinaryFn, CompareOp};
            use crate::element::Element;
            use crate::ir::{Ir, IrNode};
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $op;
                impl<T: Element> BinaryFn<T> for $op {
                    type Out = bool;
                    #[inline(always)]
                    fn apply(self, $a: T, $b: T) -> bool {
                        $scalar
                    }
                    fn describe(self, ir: &mut Ir, a: usize, b: usize) -> usize {
                        ir.push(IrNode::Compare(CompareOp::$op, a, b))
                    }
                }
            )*
        }
    };
}
pub(crate) use define_compare_ops;

/// Turns the rows of `for_each_unary_op!` into one call of the
/// macro `target` per row, `target! { [attributes] Variant [method] Domain }`, for the
/// layers that give each op a method.
macro_rules! unary_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$x:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            cost $cost:ident,
            d |$d:ident, $dx:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$($method)?] $domain } )*
    };
}
pub(crate) use unary_method_rows;

/// `unary_method_rows!` for the rows of
/// `for_each_binary_op!`.
macro_rules! binary_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident $(($method:ident))? $name:literal: $domain:ident, |$a:ident, $b:ident| $scalar:expr,
            kernel $kernel:literal $(int $int:literal)?,
            cost $cost:ident,
            d |$d:ident, $da:ident, $db:ident, $y:ident, $g:ident| $derivative:expr;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$($method)?] $domain } )*
    };
}
pub(crate) use binary_method_rows;

/// `unary_method_rows!` for the rows of
/// `for_each_compare_op!`.
macro_rules! compare_method_rows {
    ([$target:ident] $(
        $(#[$doc:meta])*
        $op:ident ($method:ident) $name:literal: |$a:ident, $b:ident| $scalar:expr, kernel $kernel:literal;
    )*) => {
        $( $target! { [$(#[$doc])*] $op [$method] Element } )*
    };
}
pub(crate) use compare_method_rows;

/// `Some($body)` for a row of domain `$domain` over elements of kind `$kind` (`Float` or
/// `Int`) where the row accepts them, else `None`: a row's scalar function compiles only for
/// the types of its domain.
macro_rules! in_domain {
    (Num, $kind:ident, $body:block) => {
        Some($body)
    };
    (Float, Float, $body:block) => {
        Some($body)
    };
    (Int, Int, $body:block) => {
        Some($body)
    };
    ($domain:ident, $kind:ident, $body:block) => {
        None
    };
}
pub(crate) use in_domain;

/// The first of its arguments (for optional table columns).
macro_rules! first_of {
    ($first:expr $(, $rest:expr)* $(,)?) => {
        $first
    };
}
pub(crate) use first_of;

macro_rules! define_reduce_ops {
    ($(
        $(#[$doc:meta])*
        $op:ident ($typed:ident) $name:literal: $identity:ident, $combine:ident;
    )*) => {
        /// An associative reduction with an identity.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ReduceOp {
            $($(#[$doc])* $op,)*
        }

        impl ReduceOp {
            /// Every reduction, in table order.
            pub const ALL: &'static [ReduceOp] = &[$(ReduceOp::$op),*];

            /// The name (in messages).
            pub const fn name(self) -> &'static str {
                match self { $(ReduceOp::$op => $name,)* }
            }

            /// The binary op that combines two partial results.
            pub const fn combine_op(self) -> BinaryOp {
                match self { $(ReduceOp::$op => BinaryOp::$combine,)* }
            }

            /// The value a reduction over nothing gives.
            pub const fn identity(self) -> Identity {
                match self { $(ReduceOp::$op => Identity::$identity,)* }
            }
        }

        /// The reductions as typed zero-sized values, for the CPU loop engine.
        pub mod reduce {
            use super::{binary, BinaryFn, ReduceFn, ReduceOp};
            use crate::num::Num;
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, Default)]
                pub struct $typed;
                impl<T: Num> ReduceFn<T> for $typed {
                    const OP: ReduceOp = ReduceOp::$op;
                    #[inline(always)]
                    fn identity() -> T {
                        super::identity_of::<T>(Identity::$identity)
                    }
                    #[inline(always)]
                    fn combine(a: T, b: T) -> T {
                        binary::$combine.apply(a, b)
                    }
                }
            )*
            use super::Identity;
        }
    };
}
pub(crate) use define_reduce_ops;
