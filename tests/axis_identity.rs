//! Two axis types are two axes wherever they are declared: here one `macro_rules!` body
//! declares `Feature` twice, so both derives see the same file, line, column and name.

use axes::prelude::*;

macro_rules! feature_axis {
    ($module:ident) => {
        /// A module with an axis of its own.
        pub mod $module {
            use axes::prelude::*;
            /// The module's feature axis.
            #[derive(Axis)]
            pub struct Feature;
        }
    };
}

feature_axis!(left);
feature_axis!(right);

#[test]
fn axes_from_one_macro_body_are_distinct() -> axes::Result<()> {
    use left::Feature as L;
    use right::Feature as R;
    let a = Tensor::<f32, (L,)>::from_vec(L.len(2), vec![1., 2.])?;
    let b = Tensor::<f32, (R,)>::from_vec(R.len(3), vec![10., 20., 30.])?;
    // Broadcast by identity: two axes, not one axis of two lengths.
    let sum: Tensor<f32, (L, R)> = (&a + &b).eval()?;
    assert_eq!(sum.to_vec(), [11., 21., 31., 12., 22., 32.]);
    // A tensor with both axes, reduced over one of them.
    let over_right = sum.sum::<(R,)>()?;
    assert_eq!(over_right.to_vec(), [63., 66.]);
    let over_left: Tensor<f32, (R,)> = sum.sum::<(L,)>()?;
    assert_eq!(over_left.to_vec(), [23., 43., 63.]);
    // `dot` pairs the axes by identity: (L, R) · (R,) contracts R only.
    let w = Tensor::<f32, (R,)>::from_vec(R.len(3), vec![1., 0., -1.])?;
    let product: Tensor<f32, (L,)> = dot(&sum, &w)?;
    assert_eq!(product.to_vec(), [-20., -20.]);
    Ok(())
}
