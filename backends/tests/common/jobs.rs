//! Random jobs of the device protocol, run by any [`Backend`] and checked against the plain
//! reference ([`super::eval`]): random expressions over operands with random strides
//! (permuted, reversed, broadcast, offset), element-wise and reducing over random axes.

use axes::DType;
use axes::ir::{Ir, IrNode, ReduceOp};
use axes::protocol::{
    Backend, DeviceMemory, Job, JobLeaf, JobOutput, JobTarget, OutputJob, WriteTo, run_one,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    Operand, close, eval, exact, indices, random_dense, random_ir, random_operand, to_f32,
};

/// The lengths of random jobs' axes.
#[derive(Clone, Copy, Debug)]
pub enum Sizes {
    /// 1 to 5: every layout of a few elements.
    Small,
    /// At least two axes, two of them (at random places) at and around the tile sides a
    /// device may choose, the others 1 to 3: the edges of the tiled kernels that operands
    /// disagreeing on their fastest axis take.
    AroundTiles,
}

/// Lengths at and around the tile sides (15: just short of half the default tile).
const AROUND_TILES: [usize; 8] = [15, 16, 17, 31, 32, 33, 47, 65];

impl Sizes {
    /// Random lengths of a random rank from `ranks` (at least 2 for [`Sizes::AroundTiles`]).
    fn draw(self, rng: &mut ChaCha8Rng, ranks: std::ops::RangeInclusive<usize>) -> Vec<usize> {
        match self {
            Sizes::Small => {
                let rank = rng.random_range(ranks);
                (0..rank).map(|_| rng.random_range(1..=5)).collect()
            }
            Sizes::AroundTiles => {
                let rank = rng.random_range(2.max(*ranks.start())..=2.max(*ranks.end()));
                let first = rng.random_range(0..rank);
                let second = (first + rng.random_range(1..rank)) % rank;
                (0..rank)
                    .map(|a| {
                        if a == first || a == second {
                            AROUND_TILES[rng.random_range(0..AROUND_TILES.len())]
                        } else {
                            rng.random_range(1..=3)
                        }
                    })
                    .collect()
            }
        }
    }
}

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

/// The element type of case `case` (f32 and f64 in turn), how values round to it, and the
/// relative tolerance of one result.
fn case_type(case: usize) -> (DType, fn(f64) -> f64, f64) {
    if case.is_multiple_of(2) {
        (DType::F32, to_f32, 2e-4)
    } else {
        (DType::F64, exact, 1e-9)
    }
}

/// A region of an existing buffer a job writes into: the buffer's values before, and where
/// the result's elements go.
struct Region {
    before: Vec<f64>,
    offset: i64,
    strides: Vec<i64>,
}

impl Region {
    /// A random region over `kept` lengths (its axes in a random storage order, at a random
    /// offset of a larger buffer of random values).
    fn random(rng: &mut ChaCha8Rng, kept: &[usize]) -> Region {
        let strides = random_dense(rng, kept);
        let count: usize = kept.iter().product();
        let offset = rng.random_range(0..3i64);
        let before = (0..count + offset as usize + rng.random_range(0..3))
            .map(|_| rng.random_range(-2.0..2.0))
            .collect();
        Region {
            before,
            offset,
            strides,
        }
    }
}

/// Runs `ir` over `operands` on `backend`: kept axes `kept`, then reduced ones `reduced`;
/// into a new buffer, or into `region` (whose other elements must keep their values). The
/// result, row-major.
fn run(
    backend: &dyn Backend,
    ir: &Ir,
    dtype: DType,
    operands: &[Operand],
    (kept, reduced): (&[usize], &[usize]),
    reduce: ReduceOp,
    region: Option<&Region>,
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
    let job = OutputJob {
        ir: ir.clone(),
        leaves,
        kept: kept.to_vec(),
        reduced: reduced.to_vec(),
        reduce,
        out: dtype,
    };
    let Some(region) = region else {
        let memory = run_one(backend, job).unwrap();
        return values_of(&backend.download(&memory).unwrap(), dtype);
    };
    let mut memory = backend.upload(&bytes_of(&region.before, dtype)).unwrap();
    let target = JobTarget {
        memory: &mut memory,
        offset: region.offset as usize,
        strides: region.strides.iter().map(|&s| s as isize).collect(),
    };
    let written = backend.run(&job.into(), WriteTo::Into(vec![target]));
    assert!(written.unwrap().is_empty(), "nothing new returned");
    let mut after = values_of(&backend.download(&memory).unwrap(), dtype);
    let positions: Vec<usize> = (indices(kept).iter())
        .map(|index| {
            let at = index.iter().zip(&region.strides);
            (region.offset + at.map(|(&i, &s)| i as i64 * s).sum::<i64>()) as usize
        })
        .collect();
    let got = positions.iter().map(|&p| after[p]).collect();
    let before: Vec<f64> = region.before.iter().map(|&v| round_to(v, dtype)).collect();
    for &p in &positions {
        after[p] = before[p];
    }
    assert_eq!(after, before, "elements outside the region changed");
    got
}

/// `v` as stored in `dtype` (f32 or f64).
fn round_to(v: f64, dtype: DType) -> f64 {
    if dtype == DType::F32 { to_f32(v) } else { v }
}

/// `cases` random jobs on `backend`, element-wise and reducing (sum, max, min), in f32 and
/// f64, a third of them written into a region of an existing buffer, each result checked
/// element by element; then [`split_reduction_into`]. Returns how many random jobs ran.
pub fn random_jobs(backend: &dyn Backend, cases: usize, sizes: Sizes) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for case in 0..cases {
        let (dtype, round, tolerance) = case_type(case);
        let lens = sizes.draw(&mut rng, 0..=4);
        let rank = lens.len();
        // Element-wise every fourth case (three in four around tile sizes, where the tiled
        // kernels are the point), the others reducing a random number of axes.
        let elementwise = match sizes {
            Sizes::Small => case % 4 == 0,
            Sizes::AroundTiles => case % 4 != 3,
        };
        let split = if elementwise {
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
        // A third of the jobs write into a region of an existing buffer.
        let region = (case % 3 == 1).then(|| Region::random(&mut rng, kept));
        let sides = (kept, reduced);
        let got = run(
            backend,
            &ir,
            dtype,
            &operands,
            sides,
            reduce,
            region.as_ref(),
        );
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
                expected = Some(expected.map_or(v, |e| combine(e, v, reduce)));
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
    split_reduction_into(backend);
    cases
}

/// A reduction large enough that backends split it into parts, written into a region of an
/// existing buffer, in f32 and f64: each sum checked against the plain one.
fn split_reduction_into(backend: &dyn Backend) {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let (kept, reduced) = ([3], [20_000]);
    for (dtype, tolerance) in [(DType::F32, 1e-4), (DType::F64, 1e-9)] {
        let operand = random_operand(&mut rng, &[kept[0], reduced[0]]);
        let mut ir = Ir::default();
        let x = ir.leaf();
        ir.push(IrNode::Binary(axes::ir::BinaryOp::Mul, x, x));
        let region = Region::random(&mut rng, &kept);
        let got = run(
            backend,
            &ir,
            dtype,
            std::slice::from_ref(&operand),
            (&kept, &reduced),
            ReduceOp::Sum,
            Some(&region),
        );
        for (i, &got) in got.iter().enumerate() {
            let expected: f64 = (0..reduced[0])
                .map(|j| round_to(operand.at(&[i, j]), dtype).powi(2))
                .sum();
            assert!(
                close(got, expected, tolerance),
                "{} sum {i}: {got} vs {expected}",
                dtype.name()
            );
        }
    }
}

/// Sums and maxima of `x²` over reduced lengths at and around the multiples of a reduction
/// group's reads (256 threads, up to 16 elements or vectors each a round) and the lengths
/// where a backend cuts results into more parts, for 1, 2 and 5 results, in f32 and f64, the
/// operand in rows of aligned vectors or stored with its axes in a random order (some
/// reversed): each checked against the plain reduction. Returns how many ran.
pub fn reductions_around_group_sizes(backend: &dyn Backend) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut ran = 0;
    let reduced_lens = [
        255, 256, 257, 1023, 1025, 2047, 4097, 8191, 8193, 12289, 65537,
    ];
    for (case, &reduced) in reduced_lens.iter().enumerate() {
        let kept = [1, 2, 5][case % 3];
        let reduce = [ReduceOp::Sum, ReduceOp::Max][case % 2];
        for (dtype, tolerance) in [(DType::F32, 1e-4), (DType::F64, 1e-9)] {
            // Every other case rows of whole aligned vectors, as f32 reductions read four
            // elements at a time from (a device may take either path).
            let operand = if case % 2 == 0 {
                aligned_rows(&mut rng, kept, reduced)
            } else {
                random_operand(&mut rng, &[kept, reduced])
            };
            let mut ir = Ir::default();
            let x = ir.leaf();
            ir.push(IrNode::Binary(axes::ir::BinaryOp::Mul, x, x));
            let region = (case % 2 == 1).then(|| Region::random(&mut rng, &[kept]));
            let got = run(
                backend,
                &ir,
                dtype,
                std::slice::from_ref(&operand),
                (&[kept], &[reduced]),
                reduce,
                region.as_ref(),
            );
            for (i, &got) in got.iter().enumerate() {
                let squares = (0..reduced).map(|j| round_to(operand.at(&[i, j]), dtype).powi(2));
                let expected = match reduce {
                    ReduceOp::Sum => squares.sum(),
                    _ => squares.fold(f64::NEG_INFINITY, f64::max),
                };
                assert!(
                    close(got, expected, tolerance),
                    "{} {reduce:?} {i} of {kept} over {reduced}: {got} vs {expected}",
                    dtype.name()
                );
            }
            ran += 1;
        }
    }
    ran
}

/// `rows` rows of `len` random values, each row padded to a multiple of 4 elements and the
/// first starting at element 4: the layout whose f32 reductions read aligned vectors.
fn aligned_rows(rng: &mut ChaCha8Rng, rows: usize, len: usize) -> Operand {
    let row = len.div_ceil(4) * 4;
    Operand {
        data: (0..4 + rows * row)
            .map(|_| rng.random_range(-2.0..2.0))
            .collect(),
        offset: 4,
        strides: vec![row as i64, 1],
    }
}

/// Combines `v` into `acc` with `reduce` (NaN wins, as on every backend).
fn combine(acc: f64, v: f64, reduce: ReduceOp) -> f64 {
    match reduce {
        ReduceOp::Sum => acc + v,
        _ if acc.is_nan() || v.is_nan() => f64::NAN,
        ReduceOp::Max => acc.max(v),
        _ => acc.min(v),
    }
}

/// `cases` random jobs of several results on `backend`: each result a random node of one
/// expression, kept over a random subset of the axes in a random order, combined over the
/// rest (sum, max, min), half of them onto starting values read through random strides;
/// every element checked against the plain reference. Returns how many ran.
pub fn random_multi_jobs(backend: &dyn Backend, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for case in 0..cases {
        let (dtype, round, tolerance) = case_type(case);
        let rank = rng.random_range(0..=3);
        let lens: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=4)).collect();
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 4);
        let operands: Vec<Operand> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        struct Want {
            root: usize,
            kept: Vec<usize>,
            reduce: ReduceOp,
            start: Option<Operand>,
        }
        // Any node but a comparison (whose values are bools) can be a result.
        let numeric: Vec<usize> = (0..ir.nodes.len())
            .filter(|&i| !matches!(ir.nodes[i], IrNode::Compare(..)))
            .collect();
        let wants: Vec<Want> = (0..rng.random_range(1..=3))
            .map(|_| {
                let mut kept: Vec<usize> = (0..rank).filter(|_| rng.random_bool(0.6)).collect();
                for i in (1..kept.len()).rev() {
                    kept.swap(i, rng.random_range(0..=i));
                }
                let kept_lens: Vec<usize> = kept.iter().map(|&a| lens[a]).collect();
                Want {
                    root: numeric[rng.random_range(0..numeric.len())],
                    reduce: [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][rng.random_range(0..3)],
                    start: rng
                        .random_bool(0.5)
                        .then(|| random_operand(&mut rng, &kept_lens)),
                    kept,
                }
            })
            .collect();
        let upload = |o: &Operand| backend.upload(&bytes_of(&o.data, dtype)).unwrap();
        let memories: Vec<DeviceMemory> = operands.iter().map(upload).collect();
        let starts: Vec<Option<DeviceMemory>> =
            wants.iter().map(|w| w.start.as_ref().map(upload)).collect();
        let leaf = |o: &Operand, memory, strides: Vec<isize>| JobLeaf {
            dtype,
            memory,
            offset: o.offset as usize,
            strides,
        };
        let job = Job {
            ir: ir.clone(),
            leaves: (operands.iter().zip(&memories))
                .map(|(o, m)| leaf(o, m, o.strides.iter().map(|&s| s as isize).collect()))
                .collect(),
            lens: lens.clone(),
            out: dtype,
            outputs: (wants.iter().zip(&starts))
                .map(|(w, memory)| JobOutput {
                    root: w.root,
                    kept: w.kept.clone(),
                    reduce: w.reduce,
                    start: w.start.as_ref().map(|o| {
                        let mut strides = vec![0isize; rank];
                        for (&a, &s) in w.kept.iter().zip(&o.strides) {
                            strides[a] = s as isize;
                        }
                        leaf(o, memory.as_ref().unwrap(), strides)
                    }),
                })
                .collect(),
        };
        let results = backend.run(&job, WriteTo::New).unwrap();
        assert_eq!(results.len(), wants.len(), "case {case}: one result each");
        for (k, (want, memory)) in wants.iter().zip(&results).enumerate() {
            let got = values_of(&backend.download(memory).unwrap(), dtype);
            let kept_lens: Vec<usize> = want.kept.iter().map(|&a| lens[a]).collect();
            assert_eq!(
                got.len(),
                kept_lens.iter().product::<usize>(),
                "case {case}"
            );
            let sub = ir.pruned(want.root);
            for (at, kept_index) in indices(&kept_lens).iter().enumerate() {
                let mut expected = want.start.as_ref().map(|o| round(o.at(kept_index)));
                for index in indices(&lens) {
                    if want
                        .kept
                        .iter()
                        .zip(kept_index)
                        .any(|(&a, &i)| index[a] != i)
                    {
                        continue;
                    }
                    let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
                    let v = eval(&sub, &values, round);
                    expected = Some(expected.map_or(v, |e| combine(e, v, want.reduce)));
                }
                let expected = expected.expect("every length is at least 1");
                assert!(
                    close(got[at], expected, tolerance * 8.0),
                    "case {case}, result {k} ({}, {:?} keeping {:?} of {lens:?}, start {}) at \
                     {kept_index:?}: {} vs {expected}\nexpression {sub}",
                    dtype.name(),
                    want.reduce,
                    want.kept,
                    want.start.is_some(),
                    got[at],
                );
            }
        }
    }
    rootless_jobs_are_errors(backend);
    cases
}

/// A job of no expression, and one whose result names a node past its expression, are
/// errors (new results, written into a buffer, or in place), never panics.
fn rootless_jobs_are_errors(backend: &dyn Backend) {
    let memory = backend.upload(&bytes_of(&[1.0, 2.0], DType::F32)).unwrap();
    let mut target = backend.upload(&bytes_of(&[0.0, 0.0], DType::F32)).unwrap();
    let mut one_leaf = Ir::default();
    one_leaf.leaf();
    for (ir, root) in [(Ir::default(), 0), (one_leaf, 5)] {
        let job = Job {
            ir,
            leaves: vec![JobLeaf {
                dtype: DType::F32,
                memory: &memory,
                offset: 0,
                strides: vec![1],
            }],
            lens: vec![2],
            out: DType::F32,
            outputs: vec![JobOutput {
                root,
                kept: vec![0],
                reduce: ReduceOp::Sum,
                start: None,
            }],
        };
        assert!(backend.run(&job, WriteTo::New).is_err(), "root {root}: new");
        let into = JobTarget {
            memory: &mut target,
            offset: 0,
            strides: vec![1],
        };
        let written = backend.run(&job, WriteTo::Into(vec![into]));
        assert!(written.is_err(), "root {root}: into a buffer");
    }
}

/// `cases` random jobs of several element-wise results written into regions of existing
/// buffers in one call ([`Backend::run_multi_into`], how an optimizer writes parameters and
/// moments): each result a random node of one expression over every axis in a random order,
/// its region at a random offset and storage order; every element checked against the plain
/// reference, and every element outside the regions unchanged. Returns how many ran.
pub fn random_multi_into_jobs(backend: &dyn Backend, cases: usize, sizes: Sizes) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for case in 0..cases {
        let (dtype, round, tolerance) = case_type(case);
        let lens = sizes.draw(&mut rng, 0..=3);
        let rank = lens.len();
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 5);
        let operands: Vec<Operand> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        let numeric: Vec<usize> = (0..ir.nodes.len())
            .filter(|&i| !matches!(ir.nodes[i], IrNode::Compare(..)))
            .collect();
        let wants: Vec<(usize, Vec<usize>, Region)> = (0..rng.random_range(1..=3))
            .map(|_| {
                let mut kept: Vec<usize> = (0..rank).collect();
                for i in (1..kept.len()).rev() {
                    kept.swap(i, rng.random_range(0..=i));
                }
                let kept_lens: Vec<usize> = kept.iter().map(|&a| lens[a]).collect();
                let region = Region::random(&mut rng, &kept_lens);
                (numeric[rng.random_range(0..numeric.len())], kept, region)
            })
            .collect();
        let upload = |values: &[f64]| backend.upload(&bytes_of(values, dtype)).unwrap();
        let memories: Vec<DeviceMemory> = operands.iter().map(|o| upload(&o.data)).collect();
        let mut buffers: Vec<DeviceMemory> = wants.iter().map(|w| upload(&w.2.before)).collect();
        let job = Job {
            ir: ir.clone(),
            leaves: (operands.iter().zip(&memories))
                .map(|(o, memory)| JobLeaf {
                    dtype,
                    memory,
                    offset: o.offset as usize,
                    strides: o.strides.iter().map(|&s| s as isize).collect(),
                })
                .collect(),
            lens: lens.clone(),
            out: dtype,
            outputs: (wants.iter())
                .map(|(root, kept, _)| JobOutput {
                    root: *root,
                    kept: kept.clone(),
                    reduce: ReduceOp::Sum,
                    start: None,
                })
                .collect(),
        };
        let targets = (buffers.iter_mut().zip(&wants))
            .map(|(memory, (_, _, region))| JobTarget {
                memory,
                offset: region.offset as usize,
                strides: region.strides.iter().map(|&s| s as isize).collect(),
            })
            .collect();
        backend.run(&job, WriteTo::Into(targets)).unwrap();
        for (k, ((root, kept, region), memory)) in wants.iter().zip(&buffers).enumerate() {
            let mut after = values_of(&backend.download(memory).unwrap(), dtype);
            let sub = ir.pruned(*root);
            let kept_lens: Vec<usize> = kept.iter().map(|&a| lens[a]).collect();
            for kept_index in indices(&kept_lens) {
                let mut index = vec![0; rank];
                for (&a, &i) in kept.iter().zip(&kept_index) {
                    index[a] = i;
                }
                let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
                let expected = eval(&sub, &values, round);
                let at = kept_index.iter().zip(&region.strides);
                let position =
                    (region.offset + at.map(|(&i, &s)| i as i64 * s).sum::<i64>()) as usize;
                assert!(
                    close(after[position], expected, tolerance),
                    "case {case}, result {k} ({}, axes {kept:?} of {lens:?}) at {kept_index:?}: \
                     {} vs {expected}\nexpression {sub}",
                    dtype.name(),
                    after[position],
                );
                after[position] = round_to(region.before[position], dtype);
            }
            let before: Vec<f64> = region.before.iter().map(|&v| round_to(v, dtype)).collect();
            assert_eq!(
                after, before,
                "case {case}, result {k}: elements outside the region"
            );
        }
    }
    cases
}

/// Runs `cases` random jobs on `backend` whose results are written over leaves in place
/// ([`Backend::run_in_place`]): random shapes, 0–2 read-only operands of random strides
/// (broadcast and padded), and 1–2 written leaves, each a random dense region of a buffer of
/// its own that the expression also reads; each result must equal the reference computed
/// from the values before the job, and every element outside the regions keep its value.
/// Returns the number of cases run.
pub fn random_in_place_jobs(backend: &dyn Backend, cases: usize, sizes: Sizes) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(46);
    for case in 0..cases {
        let (dtype, round, tolerance) = case_type(case);
        let lens = sizes.draw(&mut rng, 0..=3);
        let rank = lens.len();
        let operands: Vec<Operand> = (0..rng.random_range(0..=2))
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        let regions: Vec<Region> = (0..rng.random_range(1..=2))
            .map(|_| Region::random(&mut rng, &lens))
            .collect();
        let ir = random_ir(&mut rng, operands.len() + regions.len(), 5);
        let numeric: Vec<usize> = (0..ir.nodes.len())
            .filter(|&i| !matches!(ir.nodes[i], IrNode::Compare(..)))
            .collect();
        let roots: Vec<usize> = (0..regions.len())
            .map(|_| numeric[rng.random_range(0..numeric.len())])
            .collect();
        let upload = |values: &[f64]| backend.upload(&bytes_of(values, dtype)).unwrap();
        let memories: Vec<DeviceMemory> = (operands.iter().map(|o| upload(&o.data)))
            .chain(regions.iter().map(|r| upload(&r.before)))
            .collect();
        let layouts = (operands.iter().map(|o| (o.offset, &o.strides)))
            .chain(regions.iter().map(|r| (r.offset, &r.strides)));
        let job = Job {
            ir: ir.clone(),
            leaves: (layouts.zip(&memories))
                .map(|((offset, strides), memory)| JobLeaf {
                    dtype,
                    memory,
                    offset: offset as usize,
                    strides: strides.iter().map(|&s| s as isize).collect(),
                })
                .collect(),
            lens: lens.clone(),
            out: dtype,
            outputs: (roots.iter())
                .map(|&root| JobOutput {
                    root,
                    kept: (0..rank).collect(),
                    reduce: ReduceOp::Sum,
                    start: None,
                })
                .collect(),
        };
        let over: Vec<usize> = (0..regions.len()).map(|k| operands.len() + k).collect();
        backend.run(&job, WriteTo::Over(&over)).unwrap();
        for (k, (root, region)) in roots.iter().zip(&regions).enumerate() {
            let memory = &memories[operands.len() + k];
            let mut after = values_of(&backend.download(memory).unwrap(), dtype);
            let sub = ir.pruned(*root);
            for index in indices(&lens) {
                let at = |offset: i64, strides: &[i64]| {
                    let steps = index.iter().zip(strides).map(|(&i, &s)| i as i64 * s);
                    (offset + steps.sum::<i64>()) as usize
                };
                let values: Vec<f64> = (operands.iter().map(|o| o.at(&index)))
                    .chain(regions.iter().map(|r| r.before[at(r.offset, &r.strides)]))
                    .map(round)
                    .collect();
                let expected = eval(&sub, &values, round);
                let position = at(region.offset, &region.strides);
                assert!(
                    close(after[position], expected, tolerance),
                    "case {case}, result {k} ({} over {lens:?}) at {index:?}: {} vs \
                     {expected}\nexpression {sub}",
                    dtype.name(),
                    after[position],
                );
                after[position] = round_to(region.before[position], dtype);
            }
            let before: Vec<f64> = region.before.iter().map(|&v| round_to(v, dtype)).collect();
            assert_eq!(
                after, before,
                "case {case}, result {k}: elements outside the region"
            );
        }
        // A job with another leaf reading the positions a result overwrites is refused.
        let mut overlapping = job.clone();
        overlapping.outputs.truncate(1);
        overlapping.leaves.push(job.leaves[over[0]].clone());
        let refused = backend.run(&overlapping, WriteTo::Over(&over[..1]));
        assert!(
            refused.is_err(),
            "case {case}: an overlapping leaf was accepted"
        );
        // So is one that reads past its buffer.
        let small = upload(&[1.0]);
        let mut outside = job.clone();
        outside.leaves.push(JobLeaf {
            dtype,
            memory: &small,
            offset: 1,
            strides: vec![0; rank],
        });
        let refused = backend.run(&outside, WriteTo::Over(&over));
        assert!(
            refused.is_err(),
            "case {case}: a leaf out of reach was accepted"
        );
    }
    cases
}

/// `cases` random byte copies on `backend` (random buffer lengths and spans, into an existing
/// buffer and into a new one) against the same bytes moved on the host; spans past a
/// buffer's end are errors naming the lengths. Returns the copies made.
pub fn random_byte_copies(backend: &dyn Backend, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    let mut copies = 0;
    for _ in 0..cases {
        let (from_len, to_len) = (rng.random_range(0..=300), rng.random_range(0..=300));
        let from_bytes: Vec<u8> = (0..from_len).map(|_| rng.random()).collect();
        let mut to_bytes: Vec<u8> = (0..to_len).map(|_| rng.random()).collect();
        let bytes = rng.random_range(0..=from_len.min(to_len));
        let from_at = rng.random_range(0..=from_len - bytes);
        let to_at = rng.random_range(0..=to_len - bytes);
        let from = backend.upload(&from_bytes).unwrap();
        let mut to = backend.upload(&to_bytes).unwrap();
        if !backend
            .copy_bytes(&from, from_at, &mut to, to_at, bytes)
            .unwrap()
        {
            return copies;
        }
        to_bytes[to_at..to_at + bytes].copy_from_slice(&from_bytes[from_at..from_at + bytes]);
        assert_eq!(backend.download(&to).unwrap(), to_bytes, "{bytes} bytes");
        let copy = backend
            .copied_bytes(&from, from_at, bytes)
            .unwrap()
            .unwrap();
        assert_eq!(
            backend.download(&copy).unwrap(),
            &from_bytes[from_at..from_at + bytes]
        );
        let past = backend.copy_bytes(&from, from_at, &mut to, to_len - bytes + 1, bytes);
        let error = past.unwrap_err().to_string();
        assert!(
            error.contains(&format!("buffer of {to_len} bytes")),
            "{error}"
        );
        copies += 2;
    }
    copies
}
