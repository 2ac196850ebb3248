//! CUDA through the library: expressions, the shared operation suite and random jobs on
//! tensors that live on the GPU, against the CPU engine and the plain reference. Where there
//! is no CUDA device each test prints `SKIPPED (no CUDA device): <reason>`. The generated
//! kernels' own tests (NVRTC compilation, launches against the reference) are unit tests of
//! the crate's `cuda` module.
#![cfg(feature = "cuda")]

mod common;
use common::jobs::Sizes;

use axes_backends::cuda::Cuda;

/// Device 0, or `None` (printing why) where there is none.
fn device() -> Option<&'static Cuda> {
    match Cuda::shared(0) {
        Ok(cuda) => Some(cuda),
        Err(e) => {
            println!("SKIPPED (no CUDA device): {e}");
            None
        }
    }
}

/// Device 0 as a tensor device, or `None` (printing why) where there is none.
fn gpu() -> Option<axes::Device> {
    device().map(|cuda| axes::Device::Backend(cuda))
}

#[derive(axes::Axis)]
struct Row;
#[derive(axes::Axis)]
struct Col;

/// The library's expressions and reductions on the GPU agree with the CPU engine.
#[test]
fn library_expressions_run_on_the_gpu() {
    use axes::ExprExt;
    use axes::prelude::*;
    let Some(cuda) = device() else { return };
    let x = Tensor::<f32, (Row, Col)>::from_fn((Row.len(300), Col.len(517)), |ix| {
        ((ix.of::<Row>() * 31 + ix.of::<Col>() * 7) % 97) as f32 / 40.0 - 1.2
    })
    .unwrap();
    let y =
        Tensor::<f32, (Col,)>::from_fn(Col.len(517), |ix| ix.of::<Col>() as f32 / 500.0).unwrap();
    let xt: Tensor<f32, (Col, Row)> = x.axes_with_order();
    let e = || ((&xt * 2.0 + &y).tanh() * &x).exp();
    let cpu = e().eval().unwrap().to_vec();
    let gpu = e().eval_on(&axes::Device::Backend(cuda)).unwrap().to_vec();
    for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-5 * (1.0 + c.abs()),
            "element {i}: CPU {c}, GPU {g}"
        );
    }
    let cpu = e().sum::<(Row,)>().unwrap().to_vec();
    let gpu = e()
        .sum_on::<(Row,)>(&axes::Device::Backend(cuda))
        .unwrap()
        .to_vec();
    for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-4 * (1.0 + c.abs()),
            "sum {i}: CPU {c}, GPU {g}"
        );
    }
}

// Every operation of `common::ops` on tensors that live on the GPU (contractions through
// cuBLAS where the operands allow it), against the CPU engine.

#[test]
fn gpu_elementwise_ops_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::every_elementwise_op(&gpu);
}

#[test]
fn gpu_reductions_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::reductions(&gpu);
}

#[test]
fn gpu_split_reductions_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::split_reductions(&gpu);
}

#[test]
fn gpu_assignments_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::assignments(&gpu);
}

#[test]
fn gpu_views_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::views(&gpu);
}

#[test]
fn gpu_contractions_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::contractions(&gpu);
}

#[test]
fn gpu_errors_name_the_problem() {
    let Some(gpu) = gpu() else { return };
    common::ops::errors(&gpu);
    assert_eq!(gpu.kind(), axes::DeviceKind::Cuda(0));
    assert_eq!(axes_backends::device("cuda:0").unwrap(), gpu);
}

#[test]
fn gpu_writes_through_views_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::writable_views(&gpu);
}

#[test]
fn gpu_halves_match_f32_within_their_precision() {
    let Some(gpu) = gpu() else { return };
    common::ops::halves(&gpu);
}

#[test]
fn gpu_half_sums_combine_in_f32() {
    let Some(gpu) = gpu() else { return };
    common::edges::half_sums(&gpu);
}

#[test]
fn gpu_accumulated_gradients_match_one_batch() {
    let Some(gpu) = gpu() else { return };
    common::edges::accumulated_gradients(&gpu);
}

#[test]
fn gpu_integer_ops_match_rusts_operators() {
    let Some(gpu) = gpu() else { return };
    common::edges::integer_ops(&gpu);
}

#[test]
fn gpu_f16_gpt_trains_without_nan() {
    let Some(gpu) = gpu() else { return };
    common::edges::f16_gpt_trains(&gpu);
}

#[test]
fn gpu_mixed_precision_steps_follow_f32() {
    let Some(gpu) = gpu() else { return };
    common::edges::mixed_precision_steps(&gpu);
}

#[test]
fn gpu_random_jobs_match_the_reference() {
    let Some(cuda) = device() else { return };
    let ran = common::jobs::random_jobs(cuda, 96, Sizes::Small);
    println!(
        "{ran} random jobs matched on {}",
        axes::Device::Backend(cuda)
    );
}

#[test]
fn gpu_random_multi_jobs_match_the_reference() {
    let Some(cuda) = device() else { return };
    let ran = common::jobs::random_multi_jobs(cuda, 96);
    println!(
        "{ran} random jobs of several results matched on {}",
        axes::Device::Backend(cuda)
    );
}

#[test]
fn gpu_random_byte_copies_match_the_host() {
    let Some(cuda) = device() else { return };
    let copies = common::jobs::random_byte_copies(cuda, 48);
    assert_eq!(copies, 96, "CUDA copies bytes");
}

#[test]
fn gpu_random_in_place_jobs_match_the_reference() {
    let Some(cuda) = device() else { return };
    let ran = common::jobs::random_in_place_jobs(cuda, 48, Sizes::Small);
    println!(
        "{ran} random jobs written in place matched on {}",
        axes::Device::Backend(cuda)
    );
}

#[test]
fn gpu_random_multi_into_jobs_match_the_reference() {
    let Some(cuda) = device() else { return };
    let ran = common::jobs::random_multi_into_jobs(cuda, 48, Sizes::Small);
    println!(
        "{ran} random jobs written into buffers in one launch matched on {}",
        axes::Device::Backend(cuda)
    );
}

#[test]
fn gpu_gradients_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::gradients(&gpu);
}

#[test]
fn gpu_training_steps_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let steps = common::ops::training_steps(&gpu);
    println!("{steps} training steps matched on {gpu}");
}

#[test]
fn a_gpt_learns_to_copy_on_the_gpu() {
    let Some(gpu) = gpu() else { return };
    let losses = common::ops::learns_to_copy(&gpu);
    println!(
        "copy loss on {gpu}: {} -> {} in {} steps",
        losses[0],
        losses[losses.len() - 1],
        losses.len()
    );
}

#[test]
fn a_transformer_on_the_gpu_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    common::ops::transformer(&gpu);
}

#[test]
fn new_ops_gradients_on_the_gpu_against_finite_differences() {
    let Some(gpu) = gpu() else { return };
    let error = common::ops::finite_differences(&gpu);
    println!("relative error {error:.1e} on {gpu}");
}

#[test]
fn gpu_swapped_buffers_are_read_through_views_built_once() {
    let Some(gpu) = gpu() else { return };
    common::ops::swapped_buffers(&gpu);
}

#[test]
fn fused_attention_matches_the_composition() {
    let Some(gpu) = gpu() else { return };
    common::attention::matches_the_composition(&gpu);
}

#[test]
fn fused_attention_edge_cases() {
    let Some(gpu) = gpu() else { return };
    common::attention::edge_cases(&gpu);
}

#[test]
fn fused_attention_gradients_against_finite_differences() {
    let Some(gpu) = gpu() else { return };
    common::attention::finite_differences(&gpu);
}

#[test]
fn multi_head_attention_composes_wider_heads() {
    let Some(gpu) = gpu() else { return };
    common::attention::wider_heads_compose(&gpu);
}

#[test]
fn grouped_convolutions_match_each_groups_loops() {
    let Some(gpu) = gpu() else { return };
    common::spatial::grouped_convolutions(&gpu, 6);
}

#[test]
fn convolutions_match_nested_loops() {
    let Some(gpu) = gpu() else { return };
    common::spatial::convolutions(&gpu, 12);
}

#[test]
fn poolings_match_nested_loops() {
    let Some(gpu) = gpu() else { return };
    common::spatial::poolings(&gpu, 12);
}

#[test]
fn convolutions_and_poolings_in_one_and_three_dimensions() {
    let Some(gpu) = gpu() else { return };
    common::spatial::one_and_three_dimensions(&gpu);
}

#[test]
fn convolution_and_pooling_gradients_against_finite_differences() {
    let Some(gpu) = gpu() else { return };
    common::spatial::finite_differences(&gpu);
}

#[test]
fn a_gru_learns_what_one_step_cannot_tell() {
    let Some(gpu) = gpu() else { return };
    let (recurrent, feed_forward) = common::recurrent::learns_delayed_recall(&gpu, 60);
    assert!(recurrent >= 0.97, "the GRU recalls {recurrent:.3} on {gpu}");
    assert!(
        feed_forward <= 0.65,
        "one step tells {feed_forward:.3} on {gpu}"
    );
}

#[derive(axes::Axis)]
struct Inner;

/// With TF32 allowed, cuBLAS's f32 products round their operands to 10 bits of significand:
/// each result within 2⁻¹⁰ Σₖ |aᵢₖ bₖⱼ| of the exact one (and not equal to f32's
/// everywhere: the tensor cores ran); allowed no more, they are f32's again, within
/// 2⁻²⁰ of it. On a device object of its own: the setting is the device's, and the other
/// tests' products on the shared one run meanwhile.
#[test]
fn gpu_tf32_products_stay_within_their_bound() {
    use axes::prelude::*;
    if device().is_none() {
        return;
    }
    let own: &'static Cuda = Box::leak(Box::new(Cuda::new(0).expect("device 0 opened once")));
    let gpu = axes::Device::Backend(own);
    let value = |seed: usize| ((seed * 2_654_435_761) % 10_007) as f32 / 5_003.5 - 1.0;
    let a = Tensor::<f32, (Row, Inner)>::from_fn((Row.len(64), Inner.len(256)), |ix| {
        value(ix.of::<Row>() * 256 + ix.of::<Inner>())
    })
    .unwrap();
    let b = Tensor::<f32, (Inner, Col)>::from_fn((Inner.len(256), Col.len(48)), |ix| {
        value(70_001 + ix.of::<Inner>() * 48 + ix.of::<Col>())
    })
    .unwrap();
    let (av, bv) = (a.to_vec(), b.to_vec());
    let exact = |i: usize, j: usize| {
        let terms = (0..256).map(|k| f64::from(av[i * 256 + k]) * f64::from(bv[k * 48 + j]));
        let magnitude: f64 = terms.clone().map(f64::abs).sum();
        (terms.sum::<f64>(), magnitude)
    };
    let product = || {
        let (a, b) = (a.to(&gpu).unwrap(), b.to(&gpu).unwrap());
        let c: Tensor<f32, (Row, Col)> = dot(&a, &b).unwrap();
        c.to(&axes::Device::Cpu).unwrap().to_vec()
    };
    assert!(gpu.allow_tf32(true), "CUDA takes TF32");
    let tf32 = product();
    assert!(gpu.allow_tf32(false));
    let full = product();
    let mut differs = false;
    for i in 0..64 {
        for j in 0..48 {
            let (want, magnitude) = exact(i, j);
            let (t, f) = (f64::from(tf32[i * 48 + j]), f64::from(full[i * 48 + j]));
            assert!(
                (t - want).abs() <= magnitude * 2f64.powi(-10),
                "TF32 [{i}, {j}]: {t} vs {want}"
            );
            assert!(
                (f - want).abs() <= magnitude * 2f64.powi(-20),
                "f32 [{i}, {j}]: {f} vs {want}"
            );
            differs |= t != f;
        }
    }
    assert!(differs, "TF32 gave f32's results everywhere");
}

/// The shared suite's random jobs with the last two axes at and around tile sides (where
/// operands that disagree on their fastest axis take tiled kernels), and reductions at
/// lengths around the multiples of a group's reads.
#[test]
fn gpu_jobs_around_tile_and_group_sizes_match_the_reference() {
    let Some(cuda) = device() else { return };
    let ran = common::jobs::random_jobs(cuda, 48, Sizes::AroundTiles)
        + common::jobs::random_multi_into_jobs(cuda, 24, Sizes::AroundTiles)
        + common::jobs::random_in_place_jobs(cuda, 24, Sizes::AroundTiles)
        + common::jobs::reductions_around_group_sizes(cuda);
    println!(
        "{ran} jobs around tile and group sizes matched on {}",
        axes::Device::Backend(cuda)
    );
}
