//! Tensors on the CPU backend (`axes::backends::cpu::CPU_BACKEND`: the device protocol run by the IR
//! interpreter and the CPU's matrix product): every operation of `common::ops` agrees with
//! the typed CPU engine, and the results stay on that device. Runs on every `cargo test`.

mod common;
use common::jobs::Sizes;

use axes::Device;
use axes::backends::cpu::CPU_BACKEND;

fn device() -> Device {
    Device::Backend(&CPU_BACKEND)
}

#[test]
fn every_elementwise_op_matches_the_cpu() {
    common::ops::every_elementwise_op(&device());
}

#[test]
fn reductions_match_the_cpu() {
    common::ops::reductions(&device());
}

#[test]
fn split_reductions_match_the_cpu() {
    common::ops::split_reductions(&device());
}

#[test]
fn assignments_into_device_tensors_match_the_cpu() {
    common::ops::assignments(&device());
}

#[test]
fn views_of_device_tensors_match_the_cpu() {
    common::ops::views(&device());
}

#[test]
fn contractions_match_the_cpu() {
    common::ops::contractions(&device());
}

#[test]
fn writes_through_views_match_the_cpu() {
    common::ops::writable_views(&device());
}

#[test]
fn device_errors_name_the_problem() {
    common::ops::errors(&device());
}

#[test]
fn the_device_prints_as_the_cpu_backend() {
    assert_eq!(device().kind(), axes::DeviceKind::Cpu);
    assert_ne!(device(), Device::Cpu);
    assert_eq!(
        device().to_string(),
        "cpu (the CPU through the device protocol)"
    );
}

/// Jobs whose strides or lengths reach outside their buffers are errors, never reads out of
/// bounds: the protocol's types are public, so any caller can build one.
#[test]
fn malformed_jobs_are_errors() {
    use axes::protocol::{Backend, MatmulJob, MatrixSide};
    let backend: &dyn Backend = &CPU_BACKEND;
    let bytes: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let memory = backend.upload(&bytes).unwrap();
    let side = |offset, batch_stride, row_stride, col_stride| MatrixSide {
        memory: &memory,
        offset,
        batch_stride,
        row_stride,
        col_stride,
    };
    let job = |batch, k, lhs, rhs| MatmulJob {
        dtype: axes::DType::F32,
        batch,
        m: 1,
        n: 1,
        k,
        lhs,
        rhs,
    };
    // A contracted length no buffer holds, and strides whose span overflows.
    let huge = job(1, usize::MAX, side(2, 0, 1, 1), side(2, 0, 1, 1));
    let wrapping = job(2, 1, side(0, isize::MIN, -1, 1), side(0, 0, 1, 1));
    let past_end = job(1, 2, side(2, 0, 1, 1), side(0, 0, 1, 1));
    for bad in [huge, wrapping, past_end] {
        let err = backend.matmul(&bad).unwrap_err().to_string();
        assert!(err.contains("leaves its buffer"), "{err}");
    }
    // A buffer that is not a whole number of elements.
    let ragged = backend.upload(&[0u8; 3]).unwrap();
    let mut odd = job(1, 1, side(0, 0, 1, 1), side(0, 0, 1, 1));
    odd.lhs.memory = &ragged;
    let err = backend.matmul(&odd).unwrap_err().to_string();
    assert!(err.contains("3 bytes"), "{err}");
    let fine = job(1, 3, side(0, 0, 3, 1), side(0, 0, 1, 1));
    let out = backend.download(&backend.matmul(&fine).unwrap()).unwrap();
    assert_eq!(out, (1.0f32 + 4.0 + 9.0).to_ne_bytes());
}

#[test]
fn random_jobs_match_the_reference() {
    let ran = common::jobs::random_jobs(&CPU_BACKEND, 96, Sizes::Small);
    println!("{ran} random jobs matched on {}", device());
}

#[test]
fn random_multi_jobs_match_the_reference() {
    let ran = common::jobs::random_multi_jobs(&CPU_BACKEND, 96);
    println!(
        "{ran} random jobs of several results matched on {}",
        device()
    );
}

/// A backend that runs jobs of several new results one result at a time
/// ([`axes::protocol::run_each_output`], as the device backends do), so that path is tested
/// on every machine.
struct ResultByResult;

impl axes::protocol::Backend for ResultByResult {
    fn name(&self) -> String {
        "result by result".into()
    }
    fn kind(&self) -> axes::DeviceKind {
        axes::DeviceKind::Cpu
    }
    fn upload(&self, bytes: &[u8]) -> axes::Result<axes::protocol::DeviceMemory> {
        CPU_BACKEND.upload(bytes)
    }
    fn download(&self, memory: &axes::protocol::DeviceMemory) -> axes::Result<Vec<u8>> {
        CPU_BACKEND.download(memory)
    }
    fn run(
        &self,
        job: &axes::protocol::Job<'_>,
        to: axes::protocol::WriteTo<'_>,
    ) -> axes::Result<Vec<axes::protocol::DeviceMemory>> {
        match to {
            axes::protocol::WriteTo::New if job.single().is_none() => {
                axes::protocol::run_each_output(self, job)
            }
            to => CPU_BACKEND.run(job, to),
        }
    }
    fn matmul(
        &self,
        job: &axes::protocol::MatmulJob<'_>,
    ) -> axes::Result<axes::protocol::DeviceMemory> {
        CPU_BACKEND.matmul(job)
    }
}

#[test]
fn random_multi_into_jobs_match_the_reference() {
    let ran = common::jobs::random_multi_into_jobs(&CPU_BACKEND, 48, Sizes::Small);
    println!(
        "{ran} random jobs written into buffers matched on {}",
        device()
    );
}

#[test]
fn random_byte_copies_match_the_host() {
    let copies = common::jobs::random_byte_copies(&CPU_BACKEND, 48);
    assert_eq!(copies, 96, "the CPU backend copies bytes");
}

#[test]
fn random_in_place_jobs_match_the_reference() {
    let ran = common::jobs::random_in_place_jobs(&CPU_BACKEND, 48, Sizes::Small);
    println!("{ran} random jobs written in place matched on {}", device());
}

#[test]
fn random_multi_jobs_match_the_reference_result_by_result() {
    common::jobs::random_multi_jobs(&ResultByResult, 96);
}

#[test]
fn gradients_match_the_cpu() {
    common::ops::gradients(&device());
}

#[test]
fn gradients_match_the_cpu_result_by_result() {
    static BACKEND: ResultByResult = ResultByResult;
    common::ops::gradients(&Device::Backend(&BACKEND));
}

#[test]
fn training_steps_match_the_cpu() {
    let steps = common::ops::training_steps(&device());
    println!("{steps} training steps matched on {}", device());
}

#[test]
fn training_steps_match_the_cpu_result_by_result() {
    static BACKEND: ResultByResult = ResultByResult;
    common::ops::training_steps(&Device::Backend(&BACKEND));
}

/// The copy task on the CPU itself (the loop engine; `Device::Cpu`), in a debug build.
#[test]
fn a_gpt_learns_to_copy_on_the_cpu() {
    let start = std::time::Instant::now();
    let losses = common::ops::learns_to_copy(&Device::Cpu);
    println!(
        "copy loss {} -> {} in {} steps, {:.1?}",
        losses[0],
        losses[losses.len() - 1],
        losses.len(),
        start.elapsed()
    );
}

#[test]
fn a_transformer_matches_the_cpu() {
    common::ops::transformer(&device());
}

#[test]
fn new_ops_gradients_against_finite_differences() {
    let error = common::ops::finite_differences(&device());
    println!("relative error {error:.1e}");
}

#[test]
fn swapped_buffers_are_read_through_views_built_once() {
    common::ops::swapped_buffers(&device());
}

#[test]
fn half_sums_combine_in_f32() {
    common::edges::half_sums(&device());
    common::edges::half_sums(&Device::Cpu);
}

#[test]
fn accumulated_gradients_match_one_batch() {
    common::edges::accumulated_gradients(&device());
    common::edges::accumulated_gradients(&Device::Cpu);
}

#[test]
fn an_f16_gpt_trains_without_nan() {
    common::edges::f16_gpt_trains(&device());
    common::edges::f16_gpt_trains(&Device::Cpu);
}

#[test]
fn mixed_precision_steps_follow_f32() {
    common::edges::mixed_precision_steps(&device());
    common::edges::mixed_precision_steps(&Device::Cpu);
}

#[test]
fn integer_ops_match_rusts_operators() {
    common::edges::integer_ops(&device());
    common::edges::integer_ops(&Device::Cpu);
}

#[test]
fn fused_attention_matches_the_composition() {
    common::attention::matches_the_composition(&device());
}

#[test]
fn fused_attention_edge_cases() {
    common::attention::edge_cases(&device());
}

#[test]
fn fused_attention_gradients_against_finite_differences() {
    common::attention::finite_differences(&device());
}

#[test]
fn multi_head_attention_composes_wider_heads() {
    common::attention::wider_heads_compose(&device());
}

#[test]
fn convolutions_match_nested_loops_on_the_host() {
    common::spatial::convolutions(&Device::Cpu, 12);
}

#[test]
fn grouped_convolutions_match_each_groups_loops() {
    common::spatial::grouped_convolutions(&Device::Cpu, 6);
    common::spatial::grouped_convolutions(&device(), 6);
}

#[test]
fn convolutions_match_nested_loops() {
    common::spatial::convolutions(&device(), 12);
}

#[test]
fn poolings_match_nested_loops_on_the_host() {
    common::spatial::poolings(&Device::Cpu, 12);
}

#[test]
fn poolings_match_nested_loops() {
    common::spatial::poolings(&device(), 12);
}

#[test]
fn convolutions_and_poolings_in_one_and_three_dimensions() {
    common::spatial::one_and_three_dimensions(&Device::Cpu);
    common::spatial::one_and_three_dimensions(&device());
}

#[test]
fn convolution_and_pooling_gradients_against_finite_differences() {
    common::spatial::finite_differences(&Device::Cpu);
    common::spatial::finite_differences(&device());
}

#[test]
fn a_gru_learns_what_one_step_cannot_tell() {
    for device in [Device::Cpu, device()] {
        let (recurrent, feed_forward) = common::recurrent::learns_delayed_recall(&device, 60);
        println!("{device}: GRU {recurrent:.3}, one step {feed_forward:.3}");
        assert!(
            recurrent >= 0.97,
            "the GRU recalls {recurrent:.3} on {device}"
        );
        assert!(
            feed_forward <= 0.65,
            "one step tells {feed_forward:.3} on {device}"
        );
    }
}

/// The shared suite's random jobs with the last two axes at and around tile sides (where
/// operands that disagree on their fastest axis take tiled kernels), and reductions at
/// lengths around the multiples of a group's reads.
#[test]
fn jobs_around_tile_and_group_sizes_match_the_reference() {
    let ran = common::jobs::random_jobs(&CPU_BACKEND, 24, Sizes::AroundTiles)
        + common::jobs::random_multi_into_jobs(&CPU_BACKEND, 12, Sizes::AroundTiles)
        + common::jobs::random_in_place_jobs(&CPU_BACKEND, 12, Sizes::AroundTiles)
        + common::jobs::reductions_around_group_sizes(&CPU_BACKEND);
    println!(
        "{ran} jobs around tile and group sizes matched on {}",
        device()
    );
}
