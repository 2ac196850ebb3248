//! Tensors on the OpenCL device (PoCL in CI): every operation of `common::ops` agrees with
//! the CPU engine, and the results stay on the device.
#![cfg(feature = "opencl")]

mod common;
use common::jobs::Sizes;

use axes::Device;

fn device() -> Option<Device> {
    common::opencl_device().map(|cl| Device::Backend(cl))
}

#[test]
fn every_elementwise_op_matches_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::every_elementwise_op(&device);
}

#[test]
fn reductions_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::reductions(&device);
}

#[test]
fn split_reductions_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::split_reductions(&device);
}

#[test]
fn assignments_into_device_tensors_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::assignments(&device);
}

#[test]
fn views_of_device_tensors_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::views(&device);
}

#[test]
fn contractions_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::contractions(&device);
}

#[test]
fn device_errors_name_the_problem() {
    let Some(device) = device() else { return };
    common::ops::errors(&device);
}

#[test]
fn writes_through_views_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::writable_views(&device);
}

#[test]
fn halves_match_f32_within_their_precision() {
    let Some(device) = device() else { return };
    common::ops::halves(&device);
}

#[test]
fn half_sums_combine_in_f32() {
    let Some(device) = device() else { return };
    common::edges::half_sums(&device);
}

#[test]
fn accumulated_gradients_match_one_batch() {
    let Some(device) = device() else { return };
    common::edges::accumulated_gradients(&device);
}

#[test]
fn integer_ops_match_rusts_operators() {
    let Some(device) = device() else { return };
    common::edges::integer_ops(&device);
}

#[test]
fn an_f16_gpt_trains_without_nan() {
    let Some(device) = device() else { return };
    common::edges::f16_gpt_trains(&device);
}

#[test]
fn mixed_precision_steps_follow_f32() {
    let Some(device) = device() else { return };
    common::edges::mixed_precision_steps(&device);
}

#[test]
fn random_jobs_match_the_reference() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    // Fewer than on the CPU backend: PoCL compiles a kernel per expression.
    let ran = common::jobs::random_jobs(cl, 16, Sizes::Small);
    println!("{ran} random jobs matched on {}", Device::Backend(cl));
}

#[test]
fn devices_parse_and_print() {
    let Some(device) = device() else { return };
    assert_eq!(axes_backends::device("opencl").unwrap(), device);
    assert_eq!(device.kind(), axes::DeviceKind::OpenCl(0));
    assert!(device.to_string().starts_with("opencl:0 ("), "{device}");
    assert_eq!(axes_backends::device("cpu").unwrap(), Device::Cpu);
    let err = axes_backends::device("tpu:0").unwrap_err().to_string();
    assert!(err.contains("expected cpu, cuda"), "{err}");
}

#[test]
fn random_multi_jobs_match_the_reference() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    let ran = common::jobs::random_multi_jobs(cl, 12);
    println!(
        "{ran} random jobs of several results matched on {}",
        Device::Backend(cl)
    );
}

#[test]
fn random_multi_into_jobs_match_the_reference() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    let ran = common::jobs::random_multi_into_jobs(cl, 12, Sizes::Small);
    println!(
        "{ran} random jobs written into buffers in one launch matched on {}",
        Device::Backend(cl)
    );
}

#[test]
fn random_byte_copies_match_the_host() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    let copies = common::jobs::random_byte_copies(cl, 24);
    assert_eq!(copies, 48, "OpenCL copies bytes");
}

#[test]
fn random_in_place_jobs_match_the_reference() {
    let Some(cl) = common::opencl_device() else {
        return;
    };
    let ran = common::jobs::random_in_place_jobs(cl, 12, Sizes::Small);
    println!(
        "{ran} random jobs written in place matched on {}",
        Device::Backend(cl)
    );
}

#[test]
fn gradients_match_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::gradients(&device);
}

#[test]
fn training_steps_match_the_cpu() {
    let Some(device) = device() else { return };
    let steps = common::ops::training_steps(&device);
    println!("{steps} training steps matched on {device}");
}

#[test]
fn a_gpt_learns_to_copy() {
    let Some(device) = device() else { return };
    let start = std::time::Instant::now();
    let losses = common::ops::learns_to_copy(&device);
    println!(
        "copy loss on {device}: {} -> {} in {} steps, {:.1?}",
        losses[0],
        losses[losses.len() - 1],
        losses.len(),
        start.elapsed()
    );
}

#[test]
fn a_transformer_matches_the_cpu() {
    let Some(device) = device() else { return };
    common::ops::transformer(&device);
}

#[test]
fn new_ops_gradients_against_finite_differences() {
    let Some(device) = device() else { return };
    let error = common::ops::finite_differences(&device);
    println!("relative error {error:.1e} on {device}");
}

#[test]
fn swapped_buffers_are_read_through_views_built_once() {
    let Some(device) = device() else { return };
    common::ops::swapped_buffers(&device);
}

#[test]
fn fused_attention_matches_the_composition() {
    let Some(device) = device() else { return };
    common::attention::matches_the_composition(&device);
}

#[test]
fn fused_attention_edge_cases() {
    let Some(device) = device() else { return };
    common::attention::edge_cases(&device);
}

#[test]
fn fused_attention_gradients_against_finite_differences() {
    let Some(device) = device() else { return };
    common::attention::finite_differences(&device);
}

#[test]
fn multi_head_attention_composes_wider_heads() {
    let Some(device) = device() else { return };
    common::attention::wider_heads_compose(&device);
}

#[test]
fn grouped_convolutions_match_each_groups_loops() {
    let Some(device) = device() else { return };
    common::spatial::grouped_convolutions(&device, 3);
}

#[test]
fn convolutions_match_nested_loops() {
    let Some(device) = device() else { return };
    common::spatial::convolutions(&device, 4);
}

#[test]
fn poolings_match_nested_loops() {
    let Some(device) = device() else { return };
    common::spatial::poolings(&device, 4);
}

#[test]
fn convolutions_and_poolings_in_one_and_three_dimensions() {
    let Some(device) = device() else { return };
    common::spatial::one_and_three_dimensions(&device);
}

#[test]
fn convolution_and_pooling_gradients_against_finite_differences() {
    let Some(device) = device() else { return };
    common::spatial::finite_differences(&device);
}

#[test]
fn a_gru_learns_what_one_step_cannot_tell() {
    let Some(device) = device() else { return };
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

/// The shared suite's random jobs with the last two axes at and around tile sides (where
/// operands that disagree on their fastest axis take tiled kernels), and reductions at
/// lengths around the multiples of a group's reads.
#[test]
fn jobs_around_tile_and_group_sizes_match_the_reference() {
    // On a device cut as a GPU's (PoCL has no tiles, unrolled or vector reads by default),
    // so that those kernels run here.
    let Some(cl) = common::opencl_gpu_like_device() else {
        return;
    };
    assert!(cl.tuning().tile.is_some() && cl.tuning().vector_reads);
    let ran = common::jobs::random_jobs(cl, 16, Sizes::AroundTiles)
        + common::jobs::random_multi_into_jobs(cl, 12, Sizes::AroundTiles)
        + common::jobs::random_in_place_jobs(cl, 12, Sizes::AroundTiles)
        + common::jobs::reductions_around_group_sizes(cl);
    println!(
        "{ran} jobs around tile and group sizes matched on {}",
        Device::Backend(cl)
    );
}
