use super::*;

#[test]
fn names_are_unique_within_each_table() {
    let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|op| op.name()).collect();
    names.extend(BinaryOp::ALL.iter().map(|op| op.name()));
    names.extend(CompareOp::ALL.iter().map(|op| op.name()));
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "two ops share a name");
}

#[test]
fn typed_and_run_time_forms_agree() {
    for &x in &[-2.5f64, -0.3, 0.0, 0.7, 3.0] {
        assert_eq!(Some(UnaryFn::apply(unary::Tanh, x)), UnaryOp::Tanh.apply(x));
        assert_eq!(Some(UnaryFn::apply(unary::Relu, x)), UnaryOp::Relu.apply(x));
        assert_eq!(
            Some(BinaryFn::apply(binary::Max, x, 0.5)),
            BinaryOp::Max.apply(x, 0.5)
        );
        assert_eq!(
            BinaryFn::apply(binary::Less, x, 0.5),
            CompareOp::Less.apply(x, 0.5)
        );
    }
    let mut out = [0.0f32; 3];
    assert!(UnaryOp::Square.apply_all(&mut out, &[1.0, -2.0, 3.0]));
    assert_eq!(out, [1.0, 4.0, 9.0]);
    assert!(!UnaryOp::BitNot.apply_all(&mut out, &[1.0, -2.0, 3.0]));
    let mut bits = [0u8; 2];
    assert!(BinaryOp::Shl.apply_all_int(&mut bits, &[3, 128], &[2, 9]));
    assert_eq!(bits, [12, 0]); // 128 << (9 mod 8)
    assert!(!UnaryOp::Exp.apply_all_int(&mut bits, &[1, 2]));
}

#[test]
fn every_integer_spelling_belongs_to_an_op_integers_may_use() {
    for op in UnaryOp::ALL {
        if op.kernel().integer.is_some() {
            assert_eq!(op.domain(), Domain::Num, "{}", op.name());
        }
    }
    for op in BinaryOp::ALL {
        if op.kernel().integer.is_some() {
            assert_eq!(op.domain(), Domain::Num, "{}", op.name());
        }
    }
}

#[test]
fn reductions_start_from_their_identity() {
    assert_eq!(<reduce::SumOp as ReduceFn<i32>>::identity(), 0);
    assert_eq!(
        <reduce::MaxOp as ReduceFn<f32>>::identity(),
        f32::NEG_INFINITY
    );
    assert_eq!(<reduce::MinOp as ReduceFn<u8>>::combine(3, 7), 3);
    assert_eq!(ReduceOp::Prod.combine_op(), BinaryOp::Mul);
}
