//! Training under `mpiexec`: this file's `worker_*` tests run on every rank (started by the
//! tests beside them, which launch them through `mpiexec` and check their exit).

use axes::autodiff::{Tape, softmax_cross_entropy};
use axes::nn::{Init, Linear, Params, ParamsBuilder};
use axes::optim::Adam;
use axes::prelude::*;
use axes_dist::Communicator;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::launch;

mod support;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct In;
#[derive(Axis)]
struct Hidden;
#[derive(Axis)]
struct Class;

const STEPS: usize = 20;
const GLOBAL_BATCH: usize = 8;

#[test]
fn two_and_four_ranks_train_as_one_process() {
    for ranks in [2, 4] {
        let out = launch("worker_trains", ranks);
        assert_eq!(out.matches("identical on every rank").count(), 1, "{out}");
        println!(
            "{ranks} ranks: {}",
            out.lines().find(|l| l.contains("identical")).unwrap()
        );
    }
}

#[test]
fn different_models_are_an_error_on_every_rank() {
    let out = launch("worker_with_different_models", 2);
    assert_eq!(
        out.matches("error named the difference").count(),
        2,
        "{out}"
    );
}

/// The model: `In → Hidden → Class`, with `hidden` units.
fn model(hidden: usize, seed: u64) -> (Params<f64>, Linear<In, Hidden>, Linear<Hidden, Class>) {
    let mut builder = ParamsBuilder::new();
    let a = Linear::new(&mut builder, "a", In.len(5), Hidden.len(hidden), Init::He).unwrap();
    let b = Linear::new(
        &mut builder,
        "b",
        Hidden.len(hidden),
        Class.len(3),
        Init::Glorot,
    )
    .unwrap();
    (builder.build(seed).unwrap(), a, b)
}

/// Inputs and labels.
type Examples = (Tensor<f64, (Batch, In)>, Tensor<i64, (Batch,)>);

/// Step `step`'s global batch.
fn batch(step: usize) -> Examples {
    let mut rng = ChaCha8Rng::seed_from_u64(step as u64);
    let x = Tensor::from_fn((Batch.len(GLOBAL_BATCH), In.len(5)), |_| {
        rng.random_range(-1.0..1.0)
    });
    let y = Tensor::from_fn(Batch.len(GLOBAL_BATCH), |_| rng.random_range(0..3));
    (x.unwrap(), y.unwrap())
}

/// `STEPS` steps of Adam on each rank's shard of the global batches, the gradient averaged.
fn train(comm: &Communicator, seed: u64) -> Params<f64> {
    let (mut params, a, b) = model(6, seed);
    comm.check_same_params(&params).unwrap();
    comm.broadcast_params(&mut params).unwrap();
    let mut adam = Adam::new(0.05);
    for step in 0..STEPS {
        let (x, y) = batch(step);
        let (x, y) = (
            comm.shard::<Batch, _, _>(&x).unwrap(),
            comm.shard::<Batch, _, _>(&y).unwrap(),
        );
        let tape = Tape::new();
        let p = params.bind(&tape);
        let h = a.forward(&p, tape.constant(x)).unwrap().tanh();
        let logits = b.forward(&p, h).unwrap();
        let loss = softmax_cross_entropy::<Class, _, _, _, _>(logits, &y)
            .unwrap()
            .mean::<(Batch,)>()
            .unwrap();
        let grad = p.gradient(&loss.backward().unwrap()).unwrap();
        let grad = comm.average_gradient(&params, grad).unwrap();
        adam.step(&mut params, &grad).unwrap();
    }
    params
}

#[test]
#[ignore = "runs on every rank under mpiexec, started by two_and_four_ranks_train_as_one_process"]
fn worker_trains() {
    let comm = Communicator::from_launcher().unwrap();
    assert!(comm.size() > 1, "started without mpiexec");
    // each rank initialises differently: rank 0's values are broadcast
    let params = train(&comm, comm.rank() as u64);
    let flat = params.arena().flat().to_vec();
    let values = Tensor::<f64, (Batch,)>::from_vec(Batch.len(flat.len()), flat.clone()).unwrap();
    let rank0 = comm.broadcast(&values, 0).unwrap().to_vec();
    assert!(
        rank0
            .iter()
            .zip(&flat)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "rank {} differs from rank 0",
        comm.rank()
    );
    collectives(&comm);
    let single = train(&Communicator::single(), 0);
    let mut worst = 0f64;
    for (k, layout) in params.arena().layouts().iter().enumerate() {
        let count: usize = layout.lens().iter().product();
        let at =
            |p: &Params<f64>| p.arena().flat()[layout.offset()..layout.offset() + count].to_vec();
        let (here, there) = (at(&params), at(&single));
        let diff: f64 = here.iter().zip(&there).map(|(a, b)| (a - b).powi(2)).sum();
        let norm: f64 = there.iter().map(|b| b * b).sum();
        let relative = diff.sqrt() / norm.sqrt();
        assert!(
            relative <= 1e-5,
            "parameter {k}: relative difference {relative:e}"
        );
        worst = worst.max(relative);
    }
    if comm.is_root() {
        println!(
            "{} ranks, {STEPS} steps: parameters identical on every rank; largest relative \
             difference from one process {worst:.1e}",
            comm.size()
        );
    }
}

#[test]
#[ignore = "runs on every rank under mpiexec, started by different_models_are_an_error_on_every_rank"]
fn worker_with_different_models() {
    let comm = Communicator::from_launcher().unwrap();
    let (params, ..) = model(6 + comm.rank(), 0);
    let error = comm.check_same_params(&params).unwrap_err().to_string();
    let expected = if comm.rank() == 1 {
        "rank 0 has `a.weight (In 5, Hidden 6) f64`, this rank `a.weight (In 5, Hidden 7) f64`"
    } else {
        "see rank 1's message"
    };
    assert!(
        error.contains("rank 1") && error.contains(expected),
        "{error}"
    );
    println!("rank {}: error named the difference: {error}", comm.rank());
}

/// All-reduce, all-gather (of different lengths, from a permuted view) and uneven shards.
fn collectives(comm: &Communicator) {
    let (rank, size) = (comm.rank(), comm.size());
    let ones = Tensor::<f64, (In,)>::full(In.len(3), rank as f64 + 1.0).unwrap();
    let total = (size * (size + 1) / 2) as f64;
    assert_eq!(comm.all_reduce_sum(&ones).unwrap().to_vec(), [total; 3]);
    assert_eq!(
        comm.all_reduce_mean(&ones).unwrap().to_vec(),
        [total / size as f64; 3]
    );
    let value = |r: usize, b: usize, i: usize| (r * 100 + b * 10 + i) as f64;
    let mine = Tensor::<f64, (In, Batch)>::from_fn((In.len(2), Batch.len(rank + 1)), |ix| {
        value(rank, ix.of::<Batch>(), ix.of::<In>())
    })
    .unwrap()
    .axes_with_order::<(Batch, In)>();
    let all = comm.all_gather::<Batch, _, _>(&mine).unwrap();
    let expected: Vec<f64> = (0..size)
        .flat_map(|r| (0..=r).flat_map(move |b| (0..2).map(move |i| value(r, b, i))))
        .collect();
    assert_eq!(all.to_vec(), expected);
    let odd = Tensor::<f64, (Batch,)>::zeros(Batch.len(size + 1)).unwrap();
    let error = comm.shard::<Batch, _, _>(&odd).unwrap_err().to_string();
    assert!(
        error.contains("`Batch`") && error.contains(&format!("{size} ranks")),
        "{error}"
    );
}
