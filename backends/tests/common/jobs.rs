//! Random jobs of the device protocol, run by any [`Backend`] and checked against the plain
//! reference ([`super::eval`]): random expressions over operands with random strides
//! (permuted, reversed, broadcast, offset), element-wise and reducing over random axes.

use axes::DType;
use axes::ir::{Ir, ReduceOp};
use axes::protocol::{Backend, DeviceMemory, Job, JobLeaf};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Operand, close, eval, exact, indices, random_ir, random_operand, to_f32};

/// The bytes of `values` as `dtype` (f32 or f64).
fn bytes_of(values: &[f64], dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => values
            .iter()
            .flat_map(|&v| (v as f32).to_ne_bytes())
            .collect(),
        _ => values.iter().flat_map(|&v| v.to_ne_bytes()).collect(),
    }
}

/// The values of a buffer of `dtype` (f32 or f64).
fn values_of(bytes: &[u8], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F32 => (bytes.chunks_exact(4))
            .map(|b| f64::from(f32::from_ne_bytes(b.try_into().unwrap())))
            .collect(),
        _ => (bytes.chunks_exact(8))
            .map(|b| f64::from_ne_bytes(b.try_into().unwrap()))
            .collect(),
    }
}

/// Runs `ir` over `operands` on `backend`: kept axes `kept`, then reduced ones `reduced`.
fn run(
    backend: &dyn Backend,
    ir: &Ir,
    dtype: DType,
    operands: &[Operand],
    (kept, reduced): (&[usize], &[usize]),
    reduce: ReduceOp,
) -> Vec<f64> {
    let memories: Vec<DeviceMemory> = (operands.iter())
        .map(|o| backend.upload(&bytes_of(&o.data, dtype)).unwrap())
        .collect();
    let leaves = (operands.iter().zip(&memories))
        .map(|(o, memory)| JobLeaf {
            dtype,
            memory,
            offset: o.offset as usize,
            strides: o.strides.iter().map(|&s| s as isize).collect(),
        })
        .collect();
    let job = Job {
        ir: ir.clone(),
        leaves,
        kept: kept.to_vec(),
        reduced: reduced.to_vec(),
        reduce,
        out: dtype,
    };
    values_of(
        &backend.download(&backend.run(&job).unwrap()).unwrap(),
        dtype,
    )
}

/// `cases` random jobs on `backend`, element-wise and reducing (sum, max, min), in f32 and
/// f64, each result checked element by element; returns how many ran.
pub fn random_jobs(backend: &dyn Backend, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for case in 0..cases {
        let dtype = if case % 2 == 0 {
            DType::F32
        } else {
            DType::F64
        };
        let (round, tolerance): (fn(f64) -> f64, f64) = match dtype {
            DType::F32 => (to_f32, 2e-4),
            _ => (exact, 1e-9),
        };
        let rank = rng.random_range(0..=4);
        let lens: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=5)).collect();
        let split = if case % 4 == 0 {
            rank
        } else {
            rng.random_range(0..=rank)
        };
        let (kept, reduced) = lens.split_at(split);
        let reduce = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][case % 3];
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 4);
        let operands: Vec<Operand> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        let got = run(backend, &ir, dtype, &operands, (kept, reduced), reduce);
        assert_eq!(
            got.len(),
            kept.iter().product::<usize>(),
            "case {case}: result length"
        );
        for (at, kept_index) in indices(kept).iter().enumerate() {
            let mut expected: Option<f64> = None;
            for reduced_index in indices(reduced) {
                let index: Vec<usize> = kept_index.iter().chain(&reduced_index).copied().collect();
                let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
                let v = eval(&ir, &values, round);
                expected = Some(match (expected, reduce) {
                    (None, _) => v,
                    (Some(e), ReduceOp::Sum) => e + v,
                    (Some(e), ReduceOp::Max) => {
                        if e.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            e.max(v)
                        }
                    }
                    (Some(e), _) => {
                        if e.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            e.min(v)
                        }
                    }
                });
            }
            let expected = expected.expect("every reduced length is at least 1");
            // A sum over a few elements adds their rounding errors.
            let slack = if reduced.is_empty() { 1.0 } else { 8.0 };
            assert!(
                close(got[at], expected, tolerance * slack),
                "case {case} ({}, {reduce:?} over {reduced:?}) at {kept_index:?}: {} vs {expected}\nexpression {ir}",
                dtype.name(),
                got[at],
            );
        }
    }
    cases
}
