//! Tensors on the CPU backend (`axes::engine::cpu::CPU`: the device protocol run by the IR
//! interpreter and the CPU's matrix product): every operation of `common::ops` agrees with
//! the typed CPU engine, and the results stay on that device. Runs on every `cargo test`.

mod common;

use axes::Device;
use axes::engine::cpu::CPU;

fn device() -> Device {
    Device::Accelerator(&CPU)
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
