//! Training building blocks: parameters in one arena, layers, optimizers against their
//! formulas written out, saving and loading, and the errors of misuse.

use axes::autodiff::{Tape, dot, softmax_cross_entropy};
use axes::nn::{Gradient, Init, Linear, ParamsBuilder, Square, minibatches};
use axes::optim::{Adam, Sgd};
use axes::prelude::*;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct In;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

fn model(
    builder: &mut ParamsBuilder,
) -> (Linear<In, Hidden>, Square<Hidden>, Linear<Hidden, Class>) {
    (
        Linear::new(builder, "first", In.len(5), Hidden.len(7), Init::He).unwrap(),
        Square::new(builder, "square", Hidden.len(7), Init::Glorot).unwrap(),
        Linear::new(
            builder,
            "last",
            Hidden.len(7),
            Class.len(3),
            Init::Normal(0.1),
        )
        .unwrap(),
    )
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("axes-test-{}-{name}", std::process::id()))
}

#[test]
fn initialisation_follows_the_rules_and_the_seed() {
    let mut builder = ParamsBuilder::new();
    let big =
        Linear::<In, Hidden>::new(&mut builder, "big", In.len(400), Hidden.len(300), Init::He)
            .unwrap();
    let glorot = Linear::<Hidden, Class>::new(
        &mut builder,
        "g",
        Hidden.len(300),
        Class.len(100),
        Init::Glorot,
    )
    .unwrap();
    let params = builder.build::<f64>(3).unwrap();
    let std = |t: Vec<f64>| (t.iter().map(|v| v * v).sum::<f64>() / t.len() as f64).sqrt();
    let he = std(params.tensor(&big.weight).unwrap().to_vec());
    assert!(
        (he / (2.0f64 / 400.0).sqrt() - 1.0).abs() < 0.02,
        "He std {he}"
    );
    let gl = std(params.tensor(&glorot.weight).unwrap().to_vec());
    assert!(
        (gl / (2.0f64 / 400.0).sqrt() - 1.0).abs() < 0.03,
        "Glorot std {gl}"
    );
    assert!(
        params
            .tensor(&big.bias)
            .unwrap()
            .to_vec()
            .iter()
            .all(|&b| b == 0.0)
    );
    assert_eq!(params.count(), 400 * 300 + 300 + 300 * 100 + 100);
    // Same seed, same values; another seed, others.
    let again = {
        let mut b = ParamsBuilder::new();
        let l = Linear::<In, Hidden>::new(&mut b, "big", In.len(400), Hidden.len(300), Init::He)
            .unwrap();
        Linear::<Hidden, Class>::new(&mut b, "g", Hidden.len(300), Class.len(100), Init::Glorot)
            .unwrap();
        (b.build::<f64>(3).unwrap(), l)
    };
    assert_eq!(
        again.0.tensor(&again.1.weight).unwrap(),
        params.tensor(&big.weight).unwrap()
    );
    let mut b = ParamsBuilder::new();
    let other =
        Linear::<In, Hidden>::new(&mut b, "big", In.len(400), Hidden.len(300), Init::He).unwrap();
    assert_ne!(
        b.build::<f64>(4).unwrap().tensor(&other.weight).unwrap(),
        params.tensor(&big.weight).unwrap()
    );
}

#[test]
fn duplicate_parameter_names_are_an_error() {
    let mut builder = ParamsBuilder::new();
    Linear::<In, Hidden>::new(&mut builder, "layer", In.len(2), Hidden.len(2), Init::He).unwrap();
    let err =
        Linear::<Hidden, Class>::new(&mut builder, "layer", Hidden.len(2), Class.len(2), Init::He)
            .err()
            .unwrap();
    assert_eq!(
        err.to_string(),
        "parameter `layer.weight`: a parameter of this name already exists"
    );
}

/// The gradient gathered into the arena's layout equals each parameter's own gradient.
#[test]
fn bound_gradient_is_laid_out_like_the_arena() {
    let mut builder = ParamsBuilder::new();
    let (first, square, last) = model(&mut builder);
    let params = builder.build::<f64>(1).unwrap();
    let x = Tensor::<f64, (Batch, In)>::random_uniform((Batch.len(4), In.len(5)), -1.0, 1.0, 2)
        .unwrap();
    let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(4), vec![0, 2, 1, 2]).unwrap();
    let tape = Tape::new();
    let p = params.bind(&tape);
    let h = first.forward(&p, &tape.constant(x)).unwrap().tanh();
    let h = square.forward(&p, h).unwrap().relu();
    let logits = last.forward(&p, h).unwrap();
    let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &labels)
        .unwrap()
        .mean::<(Batch,)>()
        .unwrap();
    let grads = loss.backward().unwrap();
    // Each parameter's own gradient, then all of them in the arena's layout.
    let each: Vec<Vec<f64>> = vec![
        grads.get(&p.var(&first.weight).unwrap()).unwrap().to_vec(),
        grads.get(&p.var(&first.bias).unwrap()).unwrap().to_vec(),
        grads.get(&p.var(&square.weight).unwrap()).unwrap().to_vec(),
        grads.get(&p.var(&square.bias).unwrap()).unwrap().to_vec(),
        grads.get(&p.var(&last.weight).unwrap()).unwrap().to_vec(),
        grads.get(&p.var(&last.bias).unwrap()).unwrap().to_vec(),
    ];
    let flat = p.gradient(&grads).unwrap().to_vec().unwrap();
    assert_eq!(flat.len(), params.arena().len());
    let layouts = params.arena().layouts();
    for (index, expected) in each.into_iter().enumerate() {
        let layout = &layouts[index];
        let got: Vec<f64> = layout.positions().map(|q| flat[q.unwrap()]).collect();
        assert_eq!(got, expected, "parameter {index}");
    }
    assert!(flat.iter().any(|&g| g != 0.0));
    // Gaps between tensors stay zero.
    let used: usize = layouts
        .iter()
        .map(|l| l.lens().iter().product::<usize>())
        .sum();
    assert!(flat.iter().filter(|&&g| g != 0.0).count() <= used);
}

#[test]
fn sgd_and_adam_match_their_formulas() {
    let mut builder = ParamsBuilder::new();
    let layer =
        Linear::<In, Hidden>::new(&mut builder, "l", In.len(3), Hidden.len(2), Init::He).unwrap();
    let params = builder.build::<f64>(5).unwrap();
    let n = params.arena().len();
    let grads: Vec<Vec<f64>> = (0..3)
        .map(|s| {
            (0..n)
                .map(|i| ((i * 7 + s * 3) % 11) as f64 / 5.0 - 1.0)
                .collect()
        })
        .collect();

    let (mut sgd_params, _) = builder_clone(&params);
    let mut sgd = Sgd::new(0.1, 0.9);
    let (mut p, mut v) = (params.arena().flat().to_vec(), vec![0.0; n]);
    for g in &grads {
        let gradient = Gradient::from_vec(&sgd_params, g.clone()).unwrap();
        sgd.step(&mut sgd_params, &gradient).unwrap();
        for i in 0..n {
            v[i] = 0.9 * v[i] + g[i];
            p[i] -= 0.1 * v[i];
        }
    }
    close(sgd_params.arena().flat(), &p);

    let (mut adam_params, adam_layer) = builder_clone(&params);
    let mut adam = Adam::new(0.01).with_weight_decay(0.1);
    let (mut p, mut m, mut v) = (params.arena().flat().to_vec(), vec![0.0; n], vec![0.0; n]);
    for (t, g) in grads.iter().enumerate() {
        let gradient = Gradient::from_vec(&adam_params, g.clone()).unwrap();
        adam.step(&mut adam_params, &gradient).unwrap();
        let t = t as i32 + 1;
        for i in 0..n {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
            let m_hat = m[i] / (1.0 - 0.9f64.powi(t));
            let v_hat = v[i] / (1.0 - 0.999f64.powi(t));
            p[i] = p[i] - 0.01 * 0.1 * p[i] - 0.01 * m_hat / (v_hat.sqrt() + 1e-8);
        }
    }
    close(adam_params.arena().flat(), &p);
    assert_eq!(adam.steps().unwrap(), 3);
    // Typed views see the update.
    assert_ne!(
        adam_params.tensor(&adam_layer.weight).unwrap(),
        params.tensor(&layer.weight).unwrap()
    );

    let err = Gradient::from_vec(&adam_params, vec![0.0; 3])
        .err()
        .unwrap();
    assert!(err.to_string().contains("3 elements were given"), "{err}");
    // A gradient laid out like other parameters is refused.
    let other = Gradient::from_vec(&params, vec![0.0; n]).unwrap();
    let err = adam.step(&mut adam_params, &other).unwrap_err();
    assert!(err.to_string().contains("other parameters"), "{err}");
}

/// A copy of `params` (one layer) through a file, with its own layer handles.
fn builder_clone(params: &axes::nn::Params<f64>) -> (axes::nn::Params<f64>, Linear<In, Hidden>) {
    let path = temp_path("clone.safetensors");
    params.save(&path).unwrap();
    let mut builder = ParamsBuilder::new();
    let layer =
        Linear::<In, Hidden>::new(&mut builder, "l", In.len(3), Hidden.len(2), Init::He).unwrap();
    let mut copy = builder.build::<f64>(99).unwrap();
    copy.load(&path).unwrap();
    std::fs::remove_file(path).unwrap();
    // The original's handles are not the copy's.
    let err = copy
        .tensor(&layer.weight)
        .map(drop)
        .and(params.arena().tensor(&layer.weight));
    assert!(
        matches!(err, Err(axes::Error::ForeignSlot { index: 0 })),
        "{err:?}"
    );
    (copy, layer)
}

fn close(got: &[f64], expected: &[f64]) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= 1e-12 * e.abs().max(1.0),
            "element {i}: {g} vs {e}"
        );
    }
}

#[test]
fn save_and_load_round_trip_and_check_axes() {
    let mut builder = ParamsBuilder::new();
    let (first, _, last) = model(&mut builder);
    let params = builder.build::<f32>(11).unwrap();
    let path = temp_path("model.safetensors");
    params.save(&path).unwrap();

    let mut builder = ParamsBuilder::new();
    let (first2, _, last2) = model(&mut builder);
    let mut loaded = builder.build::<f32>(12).unwrap();
    assert_ne!(
        loaded.tensor(&first2.weight).unwrap(),
        params.tensor(&first.weight).unwrap()
    );
    loaded.load(&path).unwrap();
    assert_eq!(
        loaded.tensor(&first2.weight).unwrap(),
        params.tensor(&first.weight).unwrap()
    );
    assert_eq!(
        loaded.tensor(&last2.bias).unwrap(),
        params.tensor(&last.bias).unwrap()
    );
    assert_eq!(loaded.arena().flat(), params.arena().flat());

    // A model whose parameter has the same name and lengths but other axes.
    let mut builder = ParamsBuilder::new();
    Linear::<In, Class>::new(&mut builder, "first", In.len(5), Class.len(7), Init::He).unwrap();
    let mut other = builder.build::<f32>(0).unwrap();
    let err = other.load(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `first.weight`: stored with the axes (In, Hidden), wanted (In, Class)"
    );
    // Other lengths.
    let mut builder = ParamsBuilder::new();
    Linear::<In, Hidden>::new(&mut builder, "first", In.len(5), Hidden.len(8), Init::He).unwrap();
    let err = builder.build::<f32>(0).unwrap().load(&path).unwrap_err();
    assert!(
        err.to_string()
            .contains("saved with lengths [5, 7] for (In, Hidden), the model has [5, 8]"),
        "{err}"
    );
    // A parameter the file lacks.
    let mut builder = ParamsBuilder::new();
    Linear::<In, Hidden>::new(&mut builder, "extra", In.len(5), Hidden.len(7), Init::He).unwrap();
    let err = builder.build::<f32>(0).unwrap().load(&path).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("parameter `extra.weight`: not in"),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();
    // No file.
    let err = loaded.load(&path).unwrap_err();
    assert!(matches!(err, axes::Error::Io { .. }), "{err}");
}

/// Parameter names are free: even one spelled like the file's own metadata key round-trips.
#[test]
fn any_parameter_name_round_trips() {
    let mut builder = ParamsBuilder::new();
    let slot = builder
        .add::<(In,)>("format", In.len(3), Init::Normal(1.0), 3, 3)
        .unwrap();
    let params = builder.build::<f64>(1).unwrap();
    let path = temp_path("names.safetensors");
    params.save(&path).unwrap();
    let mut builder = ParamsBuilder::new();
    let again = builder
        .add::<(In,)>("format", In.len(3), Init::Zeros, 3, 3)
        .unwrap();
    let mut loaded = builder.build::<f64>(2).unwrap();
    loaded.load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        loaded.tensor(&again).unwrap(),
        params.tensor(&slot).unwrap()
    );
    // A negative standard deviation names the parameter.
    let mut builder = ParamsBuilder::new();
    builder
        .add::<(In,)>("noisy", In.len(3), Init::Normal(-1.0), 3, 3)
        .unwrap();
    let err = builder.build::<f64>(0).err().unwrap().to_string();
    assert!(err.starts_with("parameter `noisy`"), "{err}");
    assert!(minibatches::<Batch>(4, 0, 0).is_err());
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let tape = Tape::<f64>::new();
    let other = Tape::<f64>::new();
    let x = tape.var(Tensor::<f64, (Batch, In)>::ones((Batch.len(2), In.len(3))).unwrap());
    let w = other.var(Tensor::<f64, (In, Hidden)>::ones((In.len(3), Hidden.len(2))).unwrap());
    assert!(
        dot(&x, &w)
            .unwrap_err()
            .to_string()
            .contains("different tapes")
    );
    let v = other.var(Tensor::<f64, (In,)>::ones(In.len(3)).unwrap());
    assert!(
        (&x + &v)
            .eval()
            .unwrap_err()
            .to_string()
            .contains("different tapes")
    );
    // Lengths that disagree, named.
    let short = tape.var(Tensor::<f64, (In,)>::ones(In.len(4)).unwrap());
    assert_eq!(
        (&x * &short).eval().unwrap_err().to_string(),
        "axis `In` has length 3 in one operand and 4 in the other"
    );
    // A label past the class axis.
    let logits =
        tape.var(Tensor::<f64, (Batch, Class)>::zeros((Batch.len(2), Class.len(3))).unwrap());
    let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![1, 3]).unwrap();
    assert_eq!(
        softmax_cross_entropy::<Class, _, _, _, _>(&logits, &labels)
            .unwrap_err()
            .to_string(),
        "label 3 is out of range for the class axis `Class` of length 3"
    );
    // The gradient of a constant.
    let c = tape.constant(Tensor::<f64, (In,)>::ones(In.len(3)).unwrap());
    let grads = x.sum::<(Batch, In)>().unwrap().backward().unwrap();
    assert!(matches!(grads.get(&c), Err(axes::Error::NoGradient { .. })));
    // A variable recorded after the result (after `backward`, or between the result and
    // `backward`), or on another tape.
    let late = tape.var(Tensor::<f64, (In,)>::ones(In.len(3)).unwrap());
    assert!(matches!(
        grads.get(&late),
        Err(axes::Error::NoGradient { .. })
    ));
    let result = x.sum::<(Batch, In)>().unwrap();
    let between = tape.var(Tensor::<f64, (In,)>::ones(In.len(3)).unwrap());
    let grads = result.backward().unwrap();
    assert!(
        grads
            .get(&between)
            .unwrap_err()
            .to_string()
            .contains("recorded after the result")
    );
    assert!(
        grads
            .get(&v)
            .unwrap_err()
            .to_string()
            .contains("another tape")
    );
    // The loss over padded logits reads the padding as the zeros it stands for.
    let padded = Tensor::<f64, (Batch, Class)>::from_vec(
        (Batch.len(2), Class.len(2)),
        vec![1.0, 2.0, 3.0, 4.0],
    )
    .unwrap()
    .pad::<Class>(0, 1)
    .unwrap();
    let dense = padded.contiguous().unwrap();
    let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(2), vec![2, 0]).unwrap();
    let a = softmax_cross_entropy::<Class, _, _, _, _>(&tape.var(padded), &labels).unwrap();
    let b = softmax_cross_entropy::<Class, _, _, _, _>(&tape.var(dense), &labels).unwrap();
    assert_eq!(a.value().to_vec(), b.value().to_vec());
}

/// A small model learns a separable problem: the loss falls and accuracy reaches 100%.
#[test]
fn a_small_model_learns() {
    let mut builder = ParamsBuilder::new();
    let hidden =
        Linear::<In, Hidden>::new(&mut builder, "h", In.len(2), Hidden.len(16), Init::He).unwrap();
    let out = Linear::<Hidden, Class>::new(
        &mut builder,
        "o",
        Hidden.len(16),
        Class.len(2),
        Init::Glorot,
    )
    .unwrap();
    let mut params = builder.build::<f32>(0).unwrap();
    // XOR of the signs.
    let points =
        Tensor::<f32, (Batch, In)>::random_uniform((Batch.len(64), In.len(2)), -1.0, 1.0, 9)
            .unwrap();
    let xs = points.to_vec();
    let labels: Vec<i64> = xs
        .chunks(2)
        .map(|p| ((p[0] > 0.0) != (p[1] > 0.0)) as i64)
        .collect();
    let labels = Tensor::<i64, (Batch,)>::from_vec(Batch.len(64), labels).unwrap();
    let mut adam = Adam::new(0.05);
    let mut first = None;
    let mut last = 0.0;
    let mut buffers = Vec::new();
    for _ in 0..300 {
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = hidden
            .forward(&p, &tape.constant(points.clone()))
            .unwrap()
            .relu();
        let logits = out.forward(&p, h).unwrap().eval().unwrap();
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(&logits, &labels)
            .unwrap()
            .mean::<(Batch,)>()
            .unwrap();
        last = loss.value().to_vec()[0];
        first.get_or_insert(last);
        // No `drop` of the tape, the loss or the logits: backward released the views of the
        // parameters its steps held, and `gradient` consumed the binding.
        let grad = p.gradient(&loss.backward().unwrap()).unwrap();
        buffers.push(params.arena().flat().as_ptr());
        adam.step(&mut params, &grad).unwrap();
    }
    assert!(last < 0.1 * first.unwrap(), "loss {first:?} -> {last}");
    // Each step writes into the buffer the step before replaced: once training runs, no
    // step allocates or copies the arena.
    assert!(
        buffers.windows(3).all(|w| w[0] == w[2] && w[0] != w[1]),
        "the arena moved between more than two buffers"
    );
    let batches = minibatches::<Batch>(64, 64, 0).unwrap();
    assert_eq!(batches.len(), 1);
}

#[test]
fn layers_give_the_same_values_without_a_tape() {
    let mut builder = ParamsBuilder::new();
    let linear =
        Linear::<In, Hidden>::new(&mut builder, "l", In.len(3), Hidden.len(4), Init::He).unwrap();
    let square = Square::<Hidden>::new(&mut builder, "s", Hidden.len(4), Init::Glorot).unwrap();
    let params = builder.build::<f64>(11).unwrap();
    let x = Tensor::<f64, (In, Batch)>::random_uniform((In.len(3), Batch.len(5)), -1.0, 1.0, 12)
        .unwrap();
    let tape = Tape::new();
    let p = params.bind(&tape);
    let taped = square
        .forward(&p, linear.forward(&p, tape.constant(x.clone())).unwrap())
        .unwrap()
        .eval()
        .unwrap();
    let inferred = square
        .infer(&params, &linear.infer(&params, &x).unwrap())
        .unwrap();
    assert_eq!(taped.value(), &inferred);
}
