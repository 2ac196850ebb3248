//! A 100-operation expression compiles with the default recursion limit (no
//! `#![recursion_limit]` here) and computes what a plain loop computes (on the CPU's
//! interpreter: it is deeper than `axes::dispatch::MAX_FUSED_DEPTH`). The compile cost of
//! longer expressions is measured by hand: `python3 benches/compile_cost.py 50 100 200`.

use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;

#[test]
fn a_hundred_operations_in_one_expression() -> axes::Result<()> {
    let x = Tensor::<f32, (Batch, Hidden)>::from_fn((Batch.len(2), Hidden.len(3)), |ix| {
        ix.of::<Batch>() as f32 - 0.7 * ix.of::<Hidden>() as f32
    })?;
    let y = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(3), vec![0.3, -1.1, 2.0])?;
    // the operations `benches/compile_cost.py` cycles through: + y, * 0.5, tanh, - x, abs
    let z = ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((&x + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs() + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs() + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        + &y)
        * 0.5)
        .tanh()
        - &x)
        .abs()
        .eval()?;
    let (xs, ys) = (x.to_vec(), y.to_vec());
    let expected: Vec<f32> = (0..6)
        .map(|i| {
            let (xi, yi) = (xs[i], ys[i % 3]);
            let mut v = xi;
            for step in 0..100 {
                v = match step % 5 {
                    0 => v + yi,
                    1 => v * 0.5,
                    2 => v.tanh(),
                    3 => v - xi,
                    _ => v.abs(),
                };
            }
            v
        })
        .collect();
    let got = z.to_vec();
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            (g - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{got:?} != {expected:?}"
        );
    }
    Ok(())
}
