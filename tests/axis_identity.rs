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

/// Two distinct axis types whose type-level ids collide (a 64-bit hash collision between
/// crates, forced here by a hand-written `Axis` impl): the type checker takes them for one
/// axis, the engine (which matches axes by `TypeId`) sees two. Every operation must then
/// return an error, never panic or compute a wrong result.
mod collision {
    use std::borrow::Cow;

    use axes::prelude::*;

    #[derive(Axis)]
    pub(crate) struct Real;

    /// Has `Real`'s id but is another type.
    pub(crate) struct Twin;

    impl axes::Axis for Twin {
        type Id = <Real as axes::Axis>::Id;
        type Transposed = Dual<Twin>;
        type Roles = axes::roles::NoRoles;
        const FIXED_LEN: Option<usize> = None;
        fn name() -> Cow<'static, str> {
            "Twin".into()
        }
    }
    impl axes::PrimalAxis for Twin {}

    pub(crate) fn real() -> Tensor<f32, (Real,)> {
        Tensor::from_vec(Real.len(3), vec![1., 2., 3.]).unwrap()
    }

    pub(crate) fn twin() -> Tensor<f32, (Twin,)> {
        Tensor::from_vec(Twin.len(3), vec![10., 20., 30.]).unwrap()
    }
}

#[test]
fn colliding_ids_are_errors_not_panics() {
    use collision::{Real, Twin, real, twin};
    let (a, b) = (real(), twin());
    let check = |what: &str, result: axes::Result<Vec<f32>>| {
        let err = result.expect_err(what);
        assert!(
            matches!(err, axes::Error::AxisIdCollision { .. }),
            "{what}: {err}"
        );
        assert!(err.to_string().contains("Real"), "{what}: {err}");
    };
    check("a + b", (&a + &b).eval().map(|t| t.to_vec()));
    check("dot", dot(&a, &b).map(|t| t.to_vec()));
    check(
        "dot_over",
        dot_over::<(Real,), _, _, _>(&a, &b).map(|t| t.to_vec()),
    );
    check("sum over the twin", a.sum::<(Twin,)>().map(|t| t.to_vec()));
    check(
        "max over the twin",
        a.max_over::<(Twin,)>().map(|t| t.to_vec()),
    );
    let mut z = a.clone();
    check("assign", z.assign(&b).map(|_| z.to_vec()));
    // A reorder is a view the type checker places by type: it renames `Real` to `Twin` (the
    // axis it believes is the same) and computes nothing; mixing the two then fails as above.
    let renamed = a.axes_with_order::<(Twin,)>();
    assert_eq!(renamed.to_vec(), a.to_vec());
    check("renamed + a", (&renamed + &a).eval().map(|t| t.to_vec()));
}
