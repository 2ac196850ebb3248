use std::any::TypeId;
use std::borrow::Cow;

use super::*;
use crate::engine::leaf::LeafEval;
use crate::engine::plan::{Destination, LeafLayout};
use crate::ir::reduce::SumOp;
use crate::layout::Layout;

struct P;

fn names() -> Vec<Cow<'static, str>> {
    vec!["P".into()]
}

/// A flat run gives the bits the planned executor gives — sums (one lane, the four
/// groups of lanes, several long chunks) and assignments at an offset — at the lengths
/// where it is used, and every length it would not run alone is left to the planned one.
#[test]
fn flat_runs_give_the_planned_bits() {
    let ids = [TypeId::of::<P>()];
    let offset = 3;
    for n in [1, 15, 16, 63, 64, 65, 1000, 8191, 8192, 8193, 70_001] {
        let data: Vec<f32> = (0..n + offset)
            .map(|i| ((i * 7919) % 1000) as f32 / 7.0 - 50.0)
            .collect();
        let layout = Layout::new(&[n], &[1], offset, data.len()).unwrap();
        let leaves = [LeafLayout {
            ids: &ids,
            layout: &layout,
            names,
        }];
        let flat_plan = Plan::flat_evaluators();
        let flat_eval = || LeafEval::new(&data, offset, &flat_plan, 0);
        assert_eq!(Plan::flat_count(&leaves), Some(n));

        let mut plan = Plan::empty();
        let scalar = Destination::Existing(&Layout::SCALAR);
        plan.build(&[], &names, &ids, scalar, &leaves).unwrap();
        let mut planned = [0.5f32];
        let make = || LeafEval::new(&data, offset, &plan, 0);
        run(&plan, &mut planned, Reduce(SumOp), &make, OpWeights::NONE).unwrap();
        let mut flat = [0.5f32];
        let to = FlatTarget::IntoOne;
        assert!(to.runs_alone::<f32>(n, 1, OpWeights::NONE));
        run_flat(&mut flat, to, n, Reduce(SumOp), &mut flat_eval()).unwrap();
        assert_eq!(flat[0].to_bits(), planned[0].to_bits(), "sum of {n}");

        let dest_layout = Layout::new(&[n], &[1], 2, n + 2).unwrap();
        let mut plan = Plan::empty();
        let dest = Destination::Existing(&dest_layout);
        plan.build(&ids, &names, &[], dest, &leaves).unwrap();
        let mut planned = vec![1f32; n + 2];
        let make = || LeafEval::new(&data, offset, &plan, 0);
        run(&plan, &mut planned, Reduce(SumOp), &make, OpWeights::NONE).unwrap();
        let mut flat = vec![1f32; n + 2];
        let to = FlatTarget::Along { offset: 2 };
        assert!(to.runs_alone::<f32>(n, 1, OpWeights::NONE));
        run_flat(&mut flat, to, n, Reduce(SumOp), &mut flat_eval()).unwrap();
        assert_eq!(flat, planned, "{n} added at an offset");
    }
    assert!(!FlatTarget::IntoOne.runs_alone::<f32>(1 << 17, 1, OpWeights::NONE));
}

#[test]
#[should_panic(expected = "a flat destination holds every result")]
fn a_flat_destination_too_short_is_refused() {
    let data = [1f32; 8];
    let plan = Plan::flat_evaluators();
    let mut dest = [0f32; 8];
    let to = FlatTarget::Along { offset: 1 };
    let _ = run_flat(
        &mut dest,
        to,
        8,
        Assign,
        &mut LeafEval::new(&data, 0, &plan, 0),
    );
}
