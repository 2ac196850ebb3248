//! The CPU backend's ops on buffers they share: results written over a buffer their leaves
//! read, two results into one buffer, a reduction into a region of a buffer, bad bytes, and
//! two threads locking the same buffers.

use std::sync::Arc;

use super::CPU_BACKEND;
use super::buffers::{buffer_of, memory_of_buffer};
use crate::element::DType;
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp};
use crate::protocol::{
    Backend, DeviceMemory, Job, JobLeaf, JobOutput, JobTarget, WriteTo, as_bytes,
};

fn upload(values: &[f32]) -> DeviceMemory {
    CPU_BACKEND.upload(as_bytes(values)).unwrap()
}

fn values(memory: &DeviceMemory) -> Vec<f32> {
    let bytes = CPU_BACKEND.download(memory).unwrap();
    (bytes.chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Another handle on `memory`'s buffer (a job cannot name one handle as a leaf and a target).
fn alias(memory: &DeviceMemory) -> DeviceMemory {
    memory_of_buffer(Arc::clone(buffer_of(memory).unwrap()), memory.bytes())
}

fn leaf(memory: &DeviceMemory, offset: usize, strides: Vec<isize>) -> JobLeaf<'_> {
    JobLeaf {
        dtype: DType::F32,
        memory,
        offset,
        strides,
    }
}

fn output(root: usize, kept: Vec<usize>) -> JobOutput<'static> {
    JobOutput {
        root,
        kept,
        reduce: ReduceOp::Sum,
        start: None,
    }
}

#[test]
fn two_results_over_two_halves_of_one_buffer_read_the_old_values() {
    let buffer = upload(&[1., 2., 3., 4., 10., 20., 30., 40.]);
    let mut ir = Ir::default();
    let (a, b) = (ir.leaf(), ir.leaf());
    let sum = ir.push(IrNode::Binary(BinaryOp::Add, a, b));
    let product = ir.push(IrNode::Binary(BinaryOp::Mul, a, b));
    let job = Job {
        ir,
        leaves: vec![leaf(&buffer, 0, vec![1]), leaf(&buffer, 4, vec![1])],
        lens: vec![4],
        out: DType::F32,
        outputs: vec![output(sum, vec![0]), output(product, vec![0])],
    };
    CPU_BACKEND.run(&job, WriteTo::Over(&[0, 1])).unwrap();
    assert_eq!(values(&buffer), [11., 22., 33., 44., 10., 40., 90., 160.]);
}

/// `buffer`'s elements from `from` (at `strides` over `lens`) copied into its region at
/// `to` (a row-major stride 1 over the first axis), summed over the others: its values after.
fn copied_into_itself(
    values_before: &[f32],
    (from, strides): (usize, Vec<isize>),
    lens: Vec<usize>,
    to: usize,
) -> Vec<f32> {
    let mut target = upload(values_before);
    let read = alias(&target);
    let mut ir = Ir::default();
    let x = ir.leaf();
    let job = Job {
        ir,
        leaves: vec![leaf(&read, from, strides)],
        lens,
        out: DType::F32,
        outputs: vec![output(x, vec![0])],
    };
    let into = JobTarget {
        memory: &mut target,
        offset: to,
        strides: vec![1],
    };
    CPU_BACKEND.run(&job, WriteTo::Into(vec![into])).unwrap();
    values(&target)
}

#[test]
fn a_sum_into_a_region_of_the_buffer_it_reads_starts_from_zero() {
    // Elements 2..6 read as a 2 × 2 matrix, its rows summed into elements 0..2.
    let after = copied_into_itself(&[7., 7., 1., 2., 3., 4.], (2, vec![2, 1]), vec![2, 2], 0);
    assert_eq!(after, [3., 7., 1., 2., 3., 4.]);
}

#[test]
fn an_element_wise_result_into_the_buffer_it_reads_reads_the_old_values() {
    // Elements 0..3 reversed into elements 1..4: each reads a value the job overwrites.
    let after = copied_into_itself(&[1., 2., 3., 4.], (2, vec![-1]), vec![3], 1);
    assert_eq!(after, [1., 3., 2., 1.]);
}

#[test]
fn bytes_that_are_no_bools_are_an_error() {
    let buffer = CPU_BACKEND.upload(&[0, 2, 1]).unwrap();
    let mut ir = Ir::default();
    let x = ir.leaf();
    let job = Job {
        ir,
        leaves: vec![JobLeaf {
            dtype: DType::Bool,
            memory: &buffer,
            offset: 0,
            strides: vec![1],
        }],
        lens: vec![3],
        out: DType::Bool,
        outputs: vec![output(x, vec![0])],
    };
    let err = CPU_BACKEND.run(&job, WriteTo::New).unwrap_err();
    assert!(err.to_string().contains("neither 0 nor 1"), "{err}");
}

#[test]
fn two_threads_writing_each_others_operands_finish() {
    // Each job writes one buffer and reads the other: locked in one order, neither waits
    // for the other forever (locked in the order named, this test fails: checked).
    let (x, y) = (upload(&[1.; 64]), upload(&[2.; 64]));
    fn steps(written: &DeviceMemory, read: &DeviceMemory) {
        let mut ir = Ir::default();
        let (a, b) = (ir.leaf(), ir.leaf());
        // b − (a − a): the other buffer's first element, through both leaves.
        let zero = ir.push(IrNode::Binary(BinaryOp::Sub, a, a));
        let copied = ir.push(IrNode::Binary(BinaryOp::Sub, b, zero));
        let job = Job {
            ir,
            leaves: vec![leaf(written, 0, vec![1]), leaf(read, 0, vec![0])],
            lens: vec![64],
            out: DType::F32,
            outputs: vec![output(copied, vec![0])],
        };
        for _ in 0..500 {
            CPU_BACKEND.run(&job, WriteTo::Over(&[0])).unwrap();
        }
    }
    let (done, finished) = std::sync::mpsc::channel();
    for (written, read) in [(alias(&x), alias(&y)), (alias(&y), alias(&x))] {
        let done = done.clone();
        std::thread::spawn(move || {
            steps(&written, &read);
            done.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        // A deadlock fails the test instead of hanging it.
        let waited = finished.recv_timeout(std::time::Duration::from_secs(60));
        assert!(waited.is_ok(), "two threads' jobs waited on each other");
    }
    for buffer in [&x, &y] {
        assert!(values(buffer).iter().all(|&v| v == 1. || v == 2.));
    }
}
