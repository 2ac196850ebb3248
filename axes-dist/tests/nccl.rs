//! NCCL (cargo feature `nccl`): where NCCL and a GPU per rank exist, collectives of tensors
//! and gradients on CUDA devices give the sums, means and broadcasts of the ranks' values;
//! elsewhere starting NCCL is an error on every rank that names the rank and what is missing
//! (never a hang or a panic), and the test prints `SKIPPED` with it. With
//! `AXES_REQUIRE_NCCL=1` (as CI sets, with the NCCL wheel on the library path) a libnccl that
//! cannot be loaded fails the test instead.
#![cfg(feature = "nccl")]

use axes::nn::{Gradient, Init, Linear, Params, ParamsBuilder};
use axes::prelude::*;
use axes_dist::Communicator;

mod support;

#[derive(Axis)]
struct Batch;
#[derive(Axis)]
struct Feature;
#[derive(Axis)]
struct Hidden;

/// Starts NCCL on CUDA device `ordinal` and, when it starts, checks the collectives there;
/// the line this rank reports.
fn start_and_check(comm: Communicator, ordinal: usize) -> String {
    let rank = comm.rank();
    match comm.with_nccl(ordinal) {
        Ok(comm) => {
            collectives_on_device(&comm, ordinal);
            format!("rank {rank}: ran the NCCL collectives on cuda:{ordinal}")
        }
        Err(why) => {
            let message = why.to_string();
            assert!(
                message.contains("NCCL could not start on rank "),
                "{message}"
            );
            if std::env::var_os("AXES_REQUIRE_NCCL").is_some_and(|v| v == "1") {
                let loaded = axes_backends::nccl::nccl_available();
                assert!(loaded.is_ok(), "AXES_REQUIRE_NCCL=1, but {loaded:?}");
            }
            format!("rank {rank}: SKIPPED the NCCL collectives: {message}")
        }
    }
}

/// Rank `r` holds `(r + 1) · v` for fixed values `v`: the sum, mean and rank 0's broadcast
/// are known multiples of `v`, for a tensor, a permuted view of it, the parameters and their
/// gradient, all on the device.
fn collectives_on_device(comm: &Communicator, ordinal: usize) {
    let device = axes_backends::cuda::Cuda::device(ordinal).unwrap();
    let (rank, size) = (comm.rank() as f32, comm.size() as f32);
    let total = size * (size + 1.0) / 2.0;
    let v = Tensor::<f32, (Batch, Feature)>::from_fn((Batch.len(3), Feature.len(5)), |ix| {
        (ix.of::<Batch>() * 5 + ix.of::<Feature>()) as f32 - 4.0
    })
    .unwrap();
    let close = |got: &[f32], factor: f32| {
        let want: Vec<f32> = v.to_vec().iter().map(|x| x * factor).collect();
        let ok = got
            .iter()
            .zip(&want)
            .all(|(g, w)| (g - w).abs() <= 1e-6 * w.abs());
        assert!(ok, "{got:?} against {want:?}");
    };
    let mine = (&v * (rank + 1.0)).eval().unwrap().to(&device).unwrap();
    for t in [
        mine.clone(),
        mine.axes_with_order::<(Feature, Batch)>().axes_with_order(),
    ] {
        let sum = comm.all_reduce_sum(&t).unwrap();
        assert_eq!(sum.device(), device);
        close(&sum.to_vec(), total);
        close(&comm.all_reduce_mean(&t).unwrap().to_vec(), total / size);
        close(&comm.broadcast(&t, 0).unwrap().to_vec(), 1.0);
    }
    let mut params = model(comm.rank() as u64).to(&device).unwrap();
    comm.broadcast_params(&mut params).unwrap();
    assert_eq!(params.device(), device);
    assert_eq!(params.arena().flat(), model(0).arena().flat());
    let count = params.arena().len();
    let grad = Gradient::from_vec(&params, vec![rank + 1.0; count]).unwrap();
    let mean = comm.average_gradient(&params, grad).unwrap();
    assert_eq!(mean.device(), device);
    let want = if comm.size() > 1 { total / size } else { 1.0 };
    let got = mean.to_vec().unwrap();
    assert!(got.iter().all(|g| (g - want).abs() <= 1e-6), "{got:?}");
}

/// A layer's parameters, started from `seed`.
fn model(seed: u64) -> Params<f32> {
    let mut builder = ParamsBuilder::new();
    Linear::new(&mut builder, "l", Feature.len(5), Hidden.len(4), Init::He).unwrap();
    builder.build(seed).unwrap()
}

#[test]
fn one_process_runs_nccl_or_says_why_not() {
    println!("{}", start_and_check(Communicator::single(), 0));
}

#[test]
fn two_ranks_run_nccl_or_both_say_why_not() {
    let out = support::launch("worker_starting_nccl", 2);
    for rank in 0..2 {
        // The rank's own line (ranks' outputs interleave, and messages name other ranks).
        let mark = format!("rank {rank}: ");
        let line = out.lines().find_map(|l| {
            (l.match_indices(&mark).map(|(at, _)| &l[at..])).find(|rest| {
                ["SKIPPED", "ran "]
                    .iter()
                    .any(|w| rest[mark.len()..].starts_with(w))
            })
        });
        println!(
            "{}",
            line.unwrap_or_else(|| panic!("no line from rank {rank}:\n{out}"))
        );
    }
}

#[test]
#[ignore = "runs on every rank under mpiexec, started by two_ranks_run_nccl_or_both_say_why_not"]
fn worker_starting_nccl() {
    let comm = Communicator::from_launcher().unwrap();
    assert!(comm.size() > 1, "started without mpiexec");
    let ordinal = comm.rank();
    println!("{}", start_and_check(comm, ordinal));
}
