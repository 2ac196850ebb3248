//! Expressions nested deeper than `axes::dispatch::MAX_FUSED_DEPTH` run on the CPU's IR
//! interpreter instead of a loop nest compiled for them (which would take the compiler time
//! that grows with the square of the depth). Every way to run one gives what the same
//! computation gives through the compiled loop nest: a deep expression here is an operand
//! multiplied by one 70 times (exact), then the operation under test.

use axes::prelude::*;
use axes::{Error, ExprExt};

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;

/// `$e` multiplied by one (`1.0`, or `$one`) 70 times: the same value, 70 levels deep.
macro_rules! deep {
    ($e:expr) => {
        deep!($e; 1.0)
    };
    ($e:expr; $one:tt) => {
        deep!(@ $one [0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
                      0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0] $e)
    };
    (@ $one:tt [$head:tt $($rest:tt)*] $e:expr) => { deep!(@ $one [$($rest)*] ($e * $one)) };
    (@ $one:tt [] $e:expr) => { $e };
}

type Operands = (Tensor<f64, (I, J)>, Tensor<f64, (J,)>);

/// An (I, J) tensor read through a transposed, strided view, and a (J,) tensor.
fn operands() -> axes::Result<Operands> {
    let stored = Tensor::<f64, (J, I)>::from_fn((J.len(7), I.len(10)), |ix| {
        (ix.of::<I>() as f64 * 0.37 - ix.of::<J>() as f64 * 1.3).sin() * 10.0
    })?;
    let x = stored.axes_with_order::<(I, J)>().slice::<I>(1.., 2)?;
    let y = Tensor::<f64, (J,)>::from_fn(J.len(7), |ix| ix.of::<J>() as f64 - 2.5)?;
    Ok((x, y))
}

fn assert_close(got: &[f64], expected: &[f64]) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!(
            (g - e).abs() <= 1e-12 * e.abs().max(1.0),
            "{got:?} != {expected:?}"
        );
    }
}

#[test]
fn element_wise_results_are_the_compiled_ones_bit_for_bit() -> axes::Result<()> {
    let (x, y) = operands()?;
    let deep = (deep!(&x) - &y).tanh().eval()?;
    let shallow = (&x - &y).tanh().eval()?;
    assert_eq!(deep.to_vec(), shallow.to_vec());
    let other: Tensor<f64, (J, I)> = (deep!(&x) * &y).eval_in()?;
    let expected: Tensor<f64, (J, I)> = (&x * &y).eval_in()?;
    assert_eq!(other.to_vec(), expected.to_vec());
    let flags = (deep!(&x)).greater(&y).eval()?;
    assert_eq!(flags.to_vec(), (&x).greater(&y).eval()?.to_vec());
    let selected = select((deep!(&x)).greater(&y), &x, 0.0).eval()?;
    assert_eq!(
        selected.to_vec(),
        select((&x).greater(&y), &x, 0.0).eval()?.to_vec()
    );
    Ok(())
}

#[test]
fn reductions_match_the_compiled_ones() -> axes::Result<()> {
    let (x, y) = operands()?;
    let over_i = (deep!(&x) * &y).sum::<(I,)>()?;
    assert_close(&over_i.to_vec(), &(&x * &y).sum::<(I,)>()?.to_vec());
    let over_j = (deep!(&x) + &y).max_over::<(J,)>()?;
    assert_eq!(over_j.to_vec(), (&x + &y).max_over::<(J,)>()?.to_vec());
    let total = (deep!(&x) - &y).square().sum_all()?;
    assert_close(&[total], &[(&x - &y).square().sum_all()?]);
    let mean = (deep!(&x)).mean::<(I, J)>()?;
    assert_close(&mean.to_vec(), &x.mean::<(I, J)>()?.to_vec());
    Ok(())
}

#[test]
fn assignments_write_into_views_as_the_compiled_ones() -> axes::Result<()> {
    let (x, y) = operands()?;
    // into a transposed target, and summed into a target
    let mut target =
        Tensor::<f64, (J, I)>::zeros((J.len(7), I.len(5)))?.axes_with_order::<(I, J)>();
    target.assign(deep!(&x) / &y)?;
    assert_eq!(target.to_vec(), (&x / &y).eval()?.to_vec());
    let mut sums = Tensor::<f64, (J,)>::ones(J.len(7))?;
    sums.add_sum::<(I,), _>(deep!(&x))?;
    let mut expected = Tensor::<f64, (J,)>::ones(J.len(7))?;
    expected.add_sum::<(I,), _>(&x)?;
    assert_close(&sums.to_vec(), &expected.to_vec());
    Ok(())
}

#[test]
fn errors_are_the_compiled_ones() -> axes::Result<()> {
    let (x, _) = operands()?;
    let short = Tensor::<f64, (J,)>::zeros(J.len(3))?;
    let err = (deep!(&x) + &short).eval().unwrap_err();
    assert!(
        matches!(err, Error::LengthMismatch { .. }),
        "{err}: a length mismatch"
    );
    let n = Tensor::<i32, (I,)>::from_vec(I.len(3), vec![4, 5, 6])?;
    let zeros = Tensor::<i32, (I,)>::from_vec(I.len(3), vec![1, 0, 1])?;
    let err = (deep!(&n; 1) / &zeros).eval().unwrap_err();
    assert!(matches!(err, Error::DivisionByZero), "{err}");
    Ok(())
}

#[test]
fn padded_views_are_read_with_their_padding() -> axes::Result<()> {
    let (x, y) = operands()?;
    let padded = x.pad::<J>(2, 1)?;
    let wide = Tensor::<f64, (J,)>::from_fn(J.len(10), |ix| ix.of::<J>() as f64 * 0.5)?;
    let deep = (deep!(&padded) * &wide).sum::<(I,)>()?;
    assert_close(&deep.to_vec(), &(&padded * &wide).sum::<(I,)>()?.to_vec());
    let padded_y = y.pad::<J>(1, 2)?;
    let mut into = Tensor::<f64, (J,)>::zeros(J.len(10))?;
    into.assign(deep!(&padded_y) + &wide)?;
    assert_eq!(into.to_vec(), (&padded_y + &wide).eval()?.to_vec());
    Ok(())
}
