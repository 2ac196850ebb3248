//! Compile-time cost probe: 50 distinct typed operations on tensors of rank 3 to 6
//! (reorders, named gets, exports, and elementwise result types), checked by `cargo check`.
//! The closing note of the foundation issue reports `cargo check --test compile_cost` times.

use axes::list::{Broadcast, Difference, Union};
use axes::prelude::*;

#[derive(Axis)]
struct A0;
#[derive(Axis)]
struct A1;
#[derive(Axis)]
struct A2;
#[derive(Axis)]
struct A3;
#[derive(Axis)]
struct A4;
#[derive(Axis)]
struct A5;
#[derive(Axis)]
struct A6;
#[derive(Axis)]
struct A7;
#[derive(Axis)]
struct A8;
#[derive(Axis)]
struct A9;
#[derive(Axis)]
struct A10;
#[derive(Axis)]
struct A11;

fn rank<L: AxisSet>() -> usize {
    L::RANK
}

#[test]
fn fifty_typed_operations() -> axes::Result<()> {
    let mut total = 0usize;
    let t0 = Tensor::<f32, (A9, A8, A2, A5)>::ones((A9.len(3), A8.len(2), A2.len(3), A5.len(3)))?;
    let p0 = t0.axes_with_order::<(A8, A5, A2, A9)>();
    total += p0.get((A2.at(0), A9.at(0), A8.at(0), A5.at(0)))? as usize;
    total += t0.to_vec_in::<(A9, A5, A2, A8)>().len();
    total += rank::<Broadcast<(A9, A8, A2, A5), (A6, A10, A2, A3, A9, A11)>>();
    total += rank::<Union<(A9, A8, A2, A5), (A8, A6, A0)>>();
    let t1 = Tensor::<f32, (A2, A9, A0)>::ones((A2.len(2), A9.len(1), A0.len(1)))?;
    let p1 = t1.axes_with_order::<(A2, A0, A9)>();
    total += p1.get((A2.at(0), A9.at(0), A0.at(0)))? as usize;
    total += t1.to_vec_in::<(A2, A0, A9)>().len();
    total += rank::<Broadcast<(A2, A9, A0), (A5, A1, A0, A2)>>();
    total += rank::<Union<(A2, A9, A0), (A7, A3, A4)>>();
    let t2 = Tensor::<f32, (A10, A4, A6, A8, A9, A11)>::ones((
        A10.len(2),
        A4.len(3),
        A6.len(3),
        A8.len(2),
        A9.len(3),
        A11.len(1),
    ))?;
    let p2 = t2.axes_with_order::<(A4, A9, A8, A11, A10, A6)>();
    total += p2.get((A4.at(0), A8.at(0), A9.at(0), A10.at(0), A6.at(0), A11.at(0)))? as usize;
    total += t2.to_vec_in::<(A8, A10, A4, A6, A9, A11)>().len();
    total += rank::<Broadcast<(A10, A4, A6, A8, A9, A11), (A7, A10, A11)>>();
    total += rank::<Union<(A10, A4, A6, A8, A9, A11), (A1, A5, A11)>>();
    let t3 = Tensor::<f32, (A2, A0, A4, A6, A8, A7)>::ones((
        A2.len(1),
        A0.len(1),
        A4.len(3),
        A6.len(3),
        A8.len(1),
        A7.len(2),
    ))?;
    let p3 = t3.axes_with_order::<(A2, A0, A6, A4, A8, A7)>();
    total += p3.get((A4.at(0), A6.at(0), A7.at(0), A2.at(0), A0.at(0), A8.at(0)))? as usize;
    total += t3.to_vec_in::<(A4, A0, A6, A8, A7, A2)>().len();
    total += rank::<Broadcast<(A2, A0, A4, A6, A8, A7), (A9, A4, A2, A0, A5)>>();
    total += rank::<Union<(A2, A0, A4, A6, A8, A7), (A5, A11, A2)>>();
    let t4 = Tensor::<f32, (A6, A7, A8, A11, A1, A4)>::ones((
        A6.len(3),
        A7.len(2),
        A8.len(2),
        A11.len(3),
        A1.len(3),
        A4.len(3),
    ))?;
    let p4 = t4.axes_with_order::<(A6, A1, A4, A11, A8, A7)>();
    total += p4.get((A11.at(0), A4.at(0), A7.at(0), A6.at(0), A8.at(0), A1.at(0)))? as usize;
    total += t4.to_vec_in::<(A8, A1, A4, A7, A11, A6)>().len();
    total += rank::<Difference<(A6, A7, A8, A11, A1, A4), (A5, A10, A11, A4, A7, A0)>>();
    let t5 = Tensor::<f32, (A4, A10, A7, A11, A5)>::ones((
        A4.len(1),
        A10.len(2),
        A7.len(1),
        A11.len(2),
        A5.len(2),
    ))?;
    let p5 = t5.axes_with_order::<(A4, A11, A10, A7, A5)>();
    total += p5.get((A10.at(0), A11.at(0), A7.at(0), A5.at(0), A4.at(0)))? as usize;
    total += t5.to_vec_in::<(A4, A11, A5, A10, A7)>().len();
    total += rank::<Broadcast<(A4, A10, A7, A11, A5), (A5, A2, A6, A1)>>();
    total += rank::<Union<(A4, A10, A7, A11, A5), (A1, A9, A5)>>();
    let t6 = Tensor::<f32, (A10, A3, A7, A2, A1)>::ones((
        A10.len(2),
        A3.len(3),
        A7.len(3),
        A2.len(1),
        A1.len(3),
    ))?;
    let p6 = t6.axes_with_order::<(A3, A1, A10, A7, A2)>();
    total += p6.get((A7.at(0), A1.at(0), A2.at(0), A3.at(0), A10.at(0)))? as usize;
    total += t6.to_vec_in::<(A3, A10, A2, A1, A7)>().len();
    total += rank::<Difference<(A10, A3, A7, A2, A1), (A9, A2, A6, A4, A8)>>();
    total += rank::<Union<(A10, A3, A7, A2, A1), (A7, A5, A6)>>();
    let t7 = Tensor::<f32, (A6, A9, A11, A0, A10)>::ones((
        A6.len(1),
        A9.len(1),
        A11.len(1),
        A0.len(1),
        A10.len(3),
    ))?;
    let p7 = t7.axes_with_order::<(A9, A6, A11, A0, A10)>();
    total += p7.get((A10.at(0), A9.at(0), A11.at(0), A0.at(0), A6.at(0)))? as usize;
    total += t7.to_vec_in::<(A9, A0, A6, A11, A10)>().len();
    total += rank::<Broadcast<(A6, A9, A11, A0, A10), (A1, A3, A0, A9, A10)>>();
    total += rank::<Union<(A6, A9, A11, A0, A10), (A6, A9, A0)>>();
    let t8 = Tensor::<f32, (A7, A1, A2)>::ones((A7.len(3), A1.len(2), A2.len(1)))?;
    let p8 = t8.axes_with_order::<(A1, A7, A2)>();
    total += p8.get((A7.at(0), A1.at(0), A2.at(0)))? as usize;
    total += t8.to_vec_in::<(A1, A2, A7)>().len();
    total += rank::<Broadcast<(A7, A1, A2), (A2, A4, A8, A7, A0)>>();
    total += rank::<Union<(A7, A1, A2), (A5, A3, A10)>>();
    let t9 = Tensor::<f32, (A8, A1, A2)>::ones((A8.len(1), A1.len(2), A2.len(1)))?;
    let p9 = t9.axes_with_order::<(A2, A1, A8)>();
    total += p9.get((A8.at(0), A1.at(0), A2.at(0)))? as usize;
    total += t9.to_vec_in::<(A2, A1, A8)>().len();
    total += rank::<Broadcast<(A8, A1, A2), (A4, A9, A8, A10)>>();
    total += rank::<Union<(A8, A1, A2), (A6, A0, A7)>>();
    let t10 = Tensor::<f32, (A0, A11, A2, A10, A1)>::ones((
        A0.len(1),
        A11.len(1),
        A2.len(2),
        A10.len(1),
        A1.len(3),
    ))?;
    let p10 = t10.axes_with_order::<(A2, A1, A11, A10, A0)>();
    total += p10.get((A10.at(0), A1.at(0), A11.at(0), A0.at(0), A2.at(0)))? as usize;
    total += t10.to_vec_in::<(A0, A1, A11, A2, A10)>().len();
    total += rank::<Broadcast<(A0, A11, A2, A10, A1), (A5, A6, A1, A2)>>();
    assert!(total > 0);
    Ok(())
}
