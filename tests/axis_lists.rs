//! Every type-level axis-list operation, and the three elementwise ordering rules of the
//! semantics page (`axes::doc::semantics`) with its examples.

use std::any::{TypeId, type_name};

use axes::list::{
    AxisList, Broadcast, Concat, Difference, HasAxis, Intersection, SameAxes, SubsetOf, Union,
    positions_in,
};
use axes::prelude::*;

#[derive(Axis)]
struct N;
#[derive(Axis)]
struct C;
#[derive(Axis)]
struct H;
#[derive(Axis)]
struct W;
#[derive(Axis)]
struct B;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct M;
#[derive(Axis)]
struct Q;

/// Same type, checked at run time on types fixed at compile time.
#[track_caller]
fn assert_same<X: 'static, Y: 'static>() {
    assert_eq!(
        TypeId::of::<X>(),
        TypeId::of::<Y>(),
        "{} != {}",
        type_name::<X>(),
        type_name::<Y>()
    );
}

#[test]
fn ordering_rule_1_same_set_keeps_the_left_order() {
    assert_same::<Broadcast<(H, W), (W, H)>, (H, W)>();
    assert_same::<Broadcast<(W, H), (H, W)>, (W, H)>();
    assert_same::<Broadcast<(N, C, H, W), (W, H, C, N)>, (N, C, H, W)>();
    assert_same::<Broadcast<(), ()>, ()>();
}

#[test]
fn ordering_rule_2_the_containing_operand_gives_the_order() {
    assert_same::<Broadcast<(H, W), (H,)>, (H, W)>();
    assert_same::<Broadcast<(H, W), (N, H, W)>, (N, H, W)>();
    assert_same::<Broadcast<(N, H, W), (W, H)>, (N, H, W)>();
    assert_same::<Broadcast<(N, C, H, W), (C, H, W, N)>, (N, C, H, W)>();
    assert_same::<Broadcast<(), (H, W)>, (H, W)>();
    assert_same::<Broadcast<(W, H), ()>, (W, H)>();
}

#[test]
fn ordering_rule_3_left_axes_then_the_rest_of_the_right() {
    assert_same::<Broadcast<(C, H, W), (N, W, H)>, (C, H, W, N)>();
    assert_same::<Broadcast<(H, W), (W, N)>, (H, W, N)>();
    assert_same::<Broadcast<(H,), (W,)>, (H, W)>();
    assert_same::<Broadcast<(W,), (H,)>, (W, H)>();
    assert_same::<Broadcast<(B, M, K), (K, N)>, (B, M, K, N)>();
}

#[test]
fn broadcast_works_with_dual_axes() {
    assert_same::<Broadcast<(Dual<H>, H), (H,)>, (Dual<H>, H)>();
    assert_same::<Broadcast<(H,), (Dual<H>,)>, (H, Dual<H>)>();
}

#[test]
fn concat() {
    assert_same::<Concat<(N, C), (H, W)>, (N, C, H, W)>();
    assert_same::<Concat<(), (H,)>, (H,)>();
    assert_same::<Concat<(H,), ()>, (H,)>();
    assert_same::<Concat<(N, C, H, W), (B, K, M, Q)>, (N, C, H, W, B, K, M, Q)>();
}

#[test]
fn difference() {
    assert_same::<Difference<(N, C, H, W), (C, W)>, (N, H)>();
    assert_same::<Difference<(N, C), (N, C)>, ()>();
    assert_same::<Difference<(N, C), ()>, (N, C)>();
    assert_same::<Difference<(H, Dual<H>), (H,)>, (Dual<H>,)>();
}

#[test]
fn union_keeps_left_then_new_right_axes() {
    assert_same::<Union<(N, C), (C, H)>, (N, C, H)>();
    assert_same::<Union<(C, H), (N, C)>, (C, H, N)>();
    assert_same::<Union<(), (H, W)>, (H, W)>();
}

#[test]
fn intersection_in_left_order() {
    assert_same::<Intersection<(N, C, H, W), (W, N)>, (N, W)>();
    assert_same::<Intersection<(W, N), (N, C, H, W)>, (W, N)>();
    assert_same::<Intersection<(N, C), (H, W)>, ()>();
}

#[test]
fn position_of_an_axis() {
    assert_eq!(<(N, C, H, W) as HasAxis<N>>::POS, 0);
    assert_eq!(<(N, C, H, W) as HasAxis<H>>::POS, 2);
    assert_eq!(<(N, C, H, W, B, K, M, Q) as HasAxis<Q>>::POS, 7);
    assert_eq!(<(H, Dual<H>) as HasAxis<Dual<H>>>::POS, 1);
    assert_eq!(positions_in::<(W, N), (N, C, H, W)>()[..2], [3, 0]);
}

fn is_subset<L: SubsetOf<R>, R: AxisList>() {}
fn is_same_set<L: SameAxes<R>, R: AxisList>() -> [usize; 8] {
    <L as SameAxes<R>>::FROM
}

#[test]
fn subset_and_set_equality() {
    is_subset::<(H,), (N, H)>();
    is_subset::<(), (N,)>();
    is_subset::<(W, H), (H, W)>();
    assert_eq!(is_same_set::<(N, C, H), (H, N, C)>()[..3], [2, 0, 1]);
    assert_eq!(is_same_set::<(), ()>()[0], 0);
}

#[test]
fn no_duplicates_and_rank() {
    fn set<L: AxisSet>() -> usize {
        L::RANK
    }
    assert_eq!(set::<()>(), 0);
    assert_eq!(set::<(N, C, H, W, B, K, M, Q)>(), 8);
    assert_eq!(set::<(H, Dual<H>)>(), 2);
}

#[test]
fn names_for_messages() {
    assert_eq!(<(N, Dual<H>) as AxisList>::names(), ["N", "Dual<H>"]);
}
