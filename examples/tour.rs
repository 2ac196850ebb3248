//! A tour of `axes` as it stands: axes as types, typed tensors, named indexing, axis-order
//! freedom, the elementwise ordering rules, and errors that name the axis.
//!
//! Run with `cargo run --release --example tour`.

use axes::list::{Broadcast, Difference, Union};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
#[axis(len = 3, role = Channel)]
struct Rgb;
#[derive(Axis)]
#[axis(role = Height)]
struct H;
#[derive(Axis)]
#[axis(role = Width)]
struct W;
#[derive(Axis)]
struct N;
#[derive(Axis)]
struct C;

/// The axis names of a list type, e.g. `(C, H, W, N)`.
fn axes_of<L: AxisList>() -> String {
    format!("({})", L::names().join(", "))
}

fn main() -> axes::Result<()> {
    println!("== a typed tensor, built from a function of the named index");
    let x: tensor![f32; Batch, Hidden] = Tensor::from_fn((Batch.len(2), Hidden.len(4)), |ix| {
        (10 * ix.of::<Batch>() + ix.of::<Hidden>()) as f32
    })?;
    println!("{x}\n");

    println!("== the same values viewed Hidden-major: a new layout, no copy");
    let t = x.axes_with_order::<(Hidden, Batch)>();
    println!("{t}");
    println!(
        "strides {:?}, shares storage: {}",
        t.layout().strides(),
        t.shares_storage_with(&x)
    );
    println!(
        "equal to the original (order carries no meaning): {}\n",
        t == x
    );

    println!("== named indexing in any order");
    println!(
        "x[Hidden=3, Batch=1] = {}\n",
        x.get((Hidden.at(3), Batch.at(1)))?
    );

    println!("== export in any axis order");
    println!("(Hidden, Batch): {:?}\n", x.to_vec_in::<(Hidden, Batch)>());

    println!("== seeded random fill, and a fixed-length axis");
    let image =
        Tensor::<u8, (H, W, Rgb)>::random_uniform((H.len(2), W.len(2), Rgb.len(3)), 0, 255, 42)?;
    println!("{image}\n");

    println!("== the elementwise result order (axes::doc::semantics), computed by the compiler");
    println!(
        "(H, W) + (N, H, W)          -> {}",
        axes_of::<Broadcast<(H, W), (N, H, W)>>()
    );
    println!(
        "(C, H, W) + (N, W, H)       -> {}",
        axes_of::<Broadcast<(C, H, W), (N, W, H)>>()
    );
    println!(
        "(N, C, H, W) + (C, H, W, N) -> {}",
        axes_of::<Broadcast<(N, C, H, W), (C, H, W, N)>>()
    );
    println!(
        "(H,) + (W,)                 -> {}",
        axes_of::<Broadcast<(H,), (W,)>>()
    );
    println!(
        "(W,) + (H,)                 -> {}",
        axes_of::<Broadcast<(W,), (H,)>>()
    );
    println!(
        "union of (N, C) and (C, H)  -> {}",
        axes_of::<Union<(N, C), (C, H)>>()
    );
    println!(
        "(N, C, H) without (C,)      -> {}",
        axes_of::<Difference<(N, C, H), (C,)>>()
    );
    println!(
        "a square weight has axes {}\n",
        axes_of::<(Dual<Hidden>, Hidden)>()
    );

    println!("== fused expressions: one pass, no temporary");
    let bias = Tensor::<f32, (Hidden,)>::from_vec(Hidden.len(4), vec![0.5, -0.5, 0.25, 0.0])?;
    let y = (&x * 0.1 + &bias).tanh().eval()?; // bias broadcasts over Batch by name
    println!("tanh(0.1 x + bias) =\n{y}");
    println!("sum((x - y)^2) = {}", (&x - &y).square().sum_all()?);
    println!("softmax over Hidden =\n{}\n", x.softmax::<Hidden>()?);

    println!("== reductions name the axes they remove");
    let per_row: tensor![f32; Batch] = x.sum::<(Hidden,)>()?;
    println!("sum over Hidden: {per_row}");
    println!("max over Batch: {}\n", x.max_over::<(Batch,)>()?);

    println!("== contractions pair axes by name (dual axes first)");
    #[derive(Axis)]
    struct Class;
    let w = Tensor::<f32, (Class, Hidden)>::from_fn((Hidden.len(4), Class.len(3)), |ix| {
        (ix.of::<Class>() + ix.of::<Hidden>()) as f32
    })?;
    let logits: tensor![f32; Batch, Class] = dot(&x, &w)?; // contracts Hidden, whatever the order
    println!("dot(x, w) =\n{logits}");
    let square = Tensor::<f32, (Dual<Hidden>, Hidden)>::eye(Hidden.len(4))?;
    println!(
        "dot(x, identity over (Dual<Hidden>, Hidden)) == x: {}\n",
        dot(&x, &square)? == x
    );

    println!("== index notation: axes on the right only are summed");
    let z = tensor!([Batch, Class] = x[Batch, Hidden] * w[Class, Hidden])?;
    println!("z[Batch, Class] = x[Batch, Hidden] * w[Class, Hidden] ->\n{z}");
    let mut db = Tensor::<f32, (Class,)>::zeros(Class.len(3))?;
    tensor!(db[Class] += z[Batch, Class])?;
    println!("db[Class] += z[Batch, Class] -> {db}\n");

    println!("== run-time errors name the axis and the lengths");
    let errors = [
        x.get((Batch.at(2), Hidden.at(0))).map(|_| ()),
        Tensor::<f32, (Batch, Hidden)>::from_vec((Batch.len(2), Hidden.len(3)), vec![0.0; 5])
            .map(|_| ()),
        Tensor::<u8, (H, Rgb)>::zeros((H.len(2), Rgb.len(4))).map(|_| ()),
        Tensor::<f32, (Batch, Hidden)>::zeros((Batch.len(usize::MAX), Hidden.len(2))).map(|_| ()),
    ];
    for error in errors.into_iter().filter_map(Result::err) {
        println!("error: {error}");
    }
    Ok(())
}
