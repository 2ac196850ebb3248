//! Generated kernels run on an OpenCL device (PoCL in CI) against the plain reference:
//! random expression trees over random ranks, lengths, strides (permuted, reversed,
//! broadcast), in f32 and f64, elementwise and reduced over random axes.
//!
//! Without an OpenCL runtime the tests print `SKIPPED (no OpenCL device): <reason>`; with
//! `AXES_REQUIRE_OPENCL=1` (as CI sets) they fail instead.

use super::{Arg, OpenCl};
use crate::reference::{
    Operand, close, eval, exact, indices, random_dense, random_ir, random_operand, to_f32,
};
use crate::{Index, global_size};
use axes_core::ir::ReduceOp;
use axes_kernels::{
    CType, Dialect, Kernel, MatmulTile, REDUCE_GROUP, REDUCE_VECTOR, ReduceShape, Spec, Tile,
    Tiling, elementwise, elementwise_tiled, matmul, reduction,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Launches `kernel`.
fn launch(
    device: &OpenCl,
    kernel: &Kernel,
    wide: bool,
    args: &[Arg<'_>],
    a: usize,
    b: usize,
) -> axes_core::Result<()> {
    // SAFETY: every launch here builds `args` in the generator's documented order, from
    // buffers of the kernel's element types, with lengths, offsets and strides whose positions
    // the reference reads too (so they lie inside the buffers).
    unsafe { device.launch(kernel, wide, args, a, b) }
}

/// The shared OpenCL device, or `None` after printing why the test is skipped; with
/// `AXES_REQUIRE_OPENCL` set (as in CI) a missing device fails instead.
fn device() -> Option<&'static OpenCl> {
    match OpenCl::shared() {
        Ok(device) => Some(device),
        Err(e) if std::env::var_os("AXES_REQUIRE_OPENCL").is_some() => {
            panic!("AXES_REQUIRE_OPENCL is set but there is no OpenCL device: {e}")
        }
        Err(e) => {
            println!("SKIPPED (no OpenCL device): {e}");
            None
        }
    }
}

/// Uploads `values` as `ty`.
enum Buf {
    F32(super::DeviceBuffer<f32>),
    F64(super::DeviceBuffer<f64>),
}

impl Buf {
    fn new(cl: &OpenCl, ty: CType, values: &[f64]) -> Buf {
        match ty {
            CType::F32 => Buf::F32(
                cl.upload(&values.iter().map(|&v| v as f32).collect::<Vec<_>>())
                    .unwrap(),
            ),
            _ => Buf::F64(cl.upload(values).unwrap()),
        }
    }
    fn arg(&self) -> Arg<'_> {
        match self {
            Buf::F32(b) => b.arg(),
            Buf::F64(b) => b.arg(),
        }
    }
    fn read(&self, cl: &OpenCl) -> Vec<f64> {
        match self {
            Buf::F32(b) => cl.download(b).unwrap().into_iter().map(f64::from).collect(),
            Buf::F64(b) => cl.download(b).unwrap(),
        }
    }
}

/// The arguments of an elementwise kernel over `lens` (tiled or not) writing `out` through
/// `out_strides` from `operands`, uploaded as `inputs`.
fn elementwise_args<'a>(
    lens: &[usize],
    out: &'a Buf,
    out_strides: &[i64],
    operands: &[Operand],
    inputs: &'a [Buf],
) -> Vec<Arg<'a>> {
    let n: usize = lens.iter().product();
    let mut args = vec![Arg::Index(n as i64)];
    args.extend(lens.iter().map(|&l| Arg::Index(l as i64)));
    args.push(out.arg());
    args.push(Arg::Index(0));
    args.extend(out_strides.iter().map(|&s| Arg::Index(s)));
    for (o, b) in operands.iter().zip(inputs) {
        args.push(b.arg());
        args.push(Arg::Index(o.offset));
        args.extend(o.strides.iter().map(|&s| Arg::Index(s)));
    }
    args
}

fn precision(ty: CType) -> (fn(f64) -> f64, f64) {
    match ty {
        CType::F32 => (to_f32, 2e-4),
        _ => (exact, 1e-9),
    }
}

#[test]
fn random_elementwise_kernels_match_the_reference() {
    let Some(cl) = device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut ran = 0;
    for case in 0..48 {
        let ty = if case % 2 == 0 {
            CType::F32
        } else {
            CType::F64
        };
        let (round, tolerance) = precision(ty);
        let rank = rng.random_range(0..=4);
        let lens: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=5)).collect();
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 4);
        let operands: Vec<_> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        let out_strides = random_dense(&mut rng, &lens);
        let types = vec![ty; leaves];
        let spec = Spec {
            ir: &ir,
            leaves: &types,
            out: ty,
            wide: case % 3 == 0,
        };
        let kernel = elementwise(&spec, rank, Dialect::OpenCl).unwrap();
        let n: usize = lens.iter().product();
        let out = Buf::new(cl, ty, &vec![0.0; n]);
        let inputs: Vec<Buf> = operands.iter().map(|o| Buf::new(cl, ty, &o.data)).collect();
        let args = elementwise_args(&lens, &out, &out_strides, &operands, &inputs);
        launch(cl, &kernel, spec.wide, &args, global_size(n, 64, 256), 64).unwrap();
        let got = out.read(cl);
        for index in indices(&lens) {
            let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
            let expected = eval(&ir, &values, round);
            let p: i64 = index
                .iter()
                .zip(&out_strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum();
            let g = got[p as usize];
            assert!(
                close(g, expected, tolerance),
                "case {case} ({ty:?}) at {index:?}: {g} vs {expected}\nexpression {ir}\n{}",
                kernel.source
            );
        }
        ran += 1;
    }
    println!("{ran} random elementwise kernels matched on {}", cl.name());
}

/// Lengths at and around the tile sides a tuning run may choose (8 to 64), and short ones.
const AROUND_TILES: [usize; 12] = [1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65];

#[test]
fn random_tiled_kernels_match_the_reference() {
    let Some(cl) = device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let tiles = [
        Tile::DEFAULT,
        Tile { side: 16, rows: 4 },
        Tile { side: 8, rows: 8 },
        Tile { side: 64, rows: 4 },
    ];
    let mut ran = 0;
    for case in 0..32 {
        let ty = if case % 2 == 0 {
            CType::F32
        } else {
            CType::F64
        };
        let (round, tolerance) = precision(ty);
        let tile = tiles[case % tiles.len()];
        // The two tiled axes last, at lengths around the tile's side; up to two more before.
        let rank = 2 + case % 3;
        let lens: Vec<usize> = (0..rank)
            .map(|a| {
                if a + 2 >= rank {
                    AROUND_TILES[rng.random_range(0..AROUND_TILES.len())]
                } else {
                    rng.random_range(1..=3)
                }
            })
            .collect();
        let leaves = rng.random_range(1..=3);
        let ir = random_ir(&mut rng, leaves, 4);
        let operands: Vec<_> = (0..leaves)
            .map(|_| random_operand(&mut rng, &lens))
            .collect();
        // Any leaves may be staged (the kernel is right for any choice; the planner stages
        // those that run along the second-to-last axis), and the result in any layout.
        let staged: Vec<usize> = (0..leaves).filter(|_| rng.random_bool(0.6)).collect();
        let out_strides = random_dense(&mut rng, &lens);
        let types = vec![ty; leaves];
        let spec = Spec {
            ir: &ir,
            leaves: &types,
            out: ty,
            wide: case % 3 == 0,
        };
        let tiling = Tiling {
            staged: &staged,
            tile,
        };
        let kernel = elementwise_tiled(&spec, &[], None, rank, &tiling, Dialect::OpenCl).unwrap();
        let n: usize = lens.iter().product();
        let out = Buf::new(cl, ty, &vec![0.0; n]);
        let inputs: Vec<Buf> = operands.iter().map(|o| Buf::new(cl, ty, &o.data)).collect();
        let args = elementwise_args(&lens, &out, &out_strides, &operands, &inputs);
        // Fewer groups than tiles now and then, so that groups loop over tiles.
        let groups = tile
            .groups(&lens)
            .min(if case % 4 == 1 { 3 } else { usize::MAX });
        let threads = tile.threads();
        launch(cl, &kernel, spec.wide, &args, groups * threads, threads).unwrap();
        let got = out.read(cl);
        for index in indices(&lens) {
            let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
            let expected = eval(&ir, &values, round);
            let p: i64 = (index.iter().zip(&out_strides))
                .map(|(&i, &s)| i as i64 * s)
                .sum();
            let g = got[p as usize];
            assert!(
                close(g, expected, tolerance),
                "case {case} ({ty:?}, {lens:?}, tiles {tile:?}, staged {staged:?}) at {index:?}: \
                 {g} vs {expected}\nexpression {ir}\n{}",
                kernel.source
            );
        }
        ran += 1;
    }
    println!("{ran} random tiled kernels matched on {}", cl.name());
}

/// An operand over `lens` whose last axis is contiguous and whose offset and other strides
/// are multiples of [`REDUCE_VECTOR`] (rows padded), as vector reads need.
fn aligned_operand(rng: &mut ChaCha8Rng, lens: &[usize]) -> Operand {
    let (last, outer) = lens.split_last().expect("a reduced axis");
    let v = REDUCE_VECTOR as i64;
    let mut size = (last.div_ceil(REDUCE_VECTOR) as i64 + rng.random_range(0..2)) * v;
    let mut strides = vec![1; lens.len()];
    for (stride, &len) in strides.iter_mut().zip(outer).rev() {
        *stride = size;
        size *= len as i64;
    }
    let offset = v * rng.random_range(0..3);
    let data = (0..(offset + size) as usize)
        .map(|_| rng.random_range(-2.0..2.0))
        .collect();
    Operand {
        data,
        offset,
        strides,
    }
}

#[test]
fn random_reduction_kernels_match_the_reference() {
    let Some(cl) = device() else { return };
    cl.check_reduction_group().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod];
    for case in 0..24 {
        let ty = if case % 2 == 0 {
            CType::F32
        } else {
            CType::F64
        };
        let (round, tolerance) = precision(ty);
        let op = ops[case % 4];
        let kept = rng.random_range(0..=2);
        let reduced = if case % 4 == 0 {
            1
        } else {
            rng.random_range(1..=2)
        };
        // Long reduced axes now and then, so groups loop over more than 256 elements.
        let lens: Vec<usize> = (0..kept + reduced)
            .map(|a| {
                if a >= kept && rng.random_bool(0.3) {
                    rng.random_range(100..400)
                } else {
                    rng.random_range(1..=5)
                }
            })
            .collect();
        let leaves = rng.random_range(1..=2);
        let mut ir = random_ir(&mut rng, leaves, 3);
        if op == ReduceOp::Prod {
            // Keep products of many terms finite: multiply values near 1.
            let root = ir.nodes.len() - 1;
            let s = ir.push(axes_core::ir::IrNode::Unary(
                axes_core::ir::UnaryOp::Sin,
                root,
            ));
            let tenth = ir.push(axes_core::ir::IrNode::Scalar(0.01));
            let small = ir.push(axes_core::ir::IrNode::Binary(
                axes_core::ir::BinaryOp::Mul,
                s,
                tenth,
            ));
            let one = ir.push(axes_core::ir::IrNode::Scalar(1.0));
            ir.push(axes_core::ir::IrNode::Binary(
                axes_core::ir::BinaryOp::Add,
                small,
                one,
            ));
        }
        // A quarter of the cases read vectors: f32 over one reduced axis, the operands laid
        // out as the planner asks for them (see `aligned_operand`).
        let vectors = ty == CType::F32 && reduced == 1 && case % 4 == 0;
        let operands: Vec<_> = (0..leaves)
            .map(|_| {
                if vectors {
                    aligned_operand(&mut rng, &lens)
                } else {
                    random_operand(&mut rng, &lens)
                }
            })
            .collect();
        let out_strides = random_dense(&mut rng, &lens[..kept]);
        let types = vec![ty; leaves];
        let spec = Spec {
            ir: &ir,
            leaves: &types,
            out: ty,
            wide: case % 3 == 1,
        };
        let unroll = 1 + case % 4;
        let shape = ReduceShape {
            kept,
            reduced,
            op,
            unroll,
            vectors,
        };
        let kernel = reduction(&spec, &shape, Dialect::OpenCl).unwrap();
        let m: usize = lens[..kept].iter().product();
        let r: usize = lens[kept..].iter().product();
        // Now and then cut each output's elements into parts (partial results, then a second
        // reduction over the parts), as a launcher does when there are few outputs.
        let splits = if rng.random_bool(0.5) {
            rng.random_range(2..=5)
        } else {
            1
        };
        let out = Buf::new(cl, ty, &vec![0.0; m]);
        let partial = Buf::new(cl, ty, &vec![0.0; m * splits]);
        let inputs: Vec<Buf> = operands.iter().map(|o| Buf::new(cl, ty, &o.data)).collect();
        let target = if splits > 1 { &partial } else { &out };
        // Partial results: output j's parts at j * splits + part.
        let target_strides: Vec<i64> = if splits > 1 {
            out_strides.iter().map(|&s| s * splits as i64).collect()
        } else {
            out_strides.clone()
        };
        let mut args = vec![
            Arg::Index(m as i64),
            Arg::Index(r as i64),
            Arg::Index(splits as i64),
        ];
        args.extend(lens.iter().map(|&l| Arg::Index(l as i64)));
        args.push(target.arg());
        args.push(Arg::Index(0));
        args.extend(target_strides.iter().map(|&s| Arg::Index(s)));
        args.push(Arg::Index(1));
        for (o, b) in operands.iter().zip(&inputs) {
            args.push(b.arg());
            args.push(Arg::Index(o.offset));
            args.extend(o.strides.iter().map(|&s| Arg::Index(s)));
        }
        launch(
            cl,
            &kernel,
            spec.wide,
            &args,
            global_size(m * splits, 1, 64) * REDUCE_GROUP,
            REDUCE_GROUP,
        )
        .unwrap();
        if splits > 1 {
            let mut parts = axes_core::ir::Ir::default();
            parts.leaf();
            let spec = Spec {
                ir: &parts,
                leaves: &[ty],
                out: ty,
                wide: false,
            };
            let parts = ReduceShape {
                reduced: 1,
                vectors: false,
                ..shape
            };
            let combine = reduction(&spec, &parts, Dialect::OpenCl).unwrap();
            let mut args = vec![
                Arg::Index(m as i64),
                Arg::Index(splits as i64),
                Arg::Index(1),
            ];
            args.extend(lens[..kept].iter().map(|&l| Arg::Index(l as i64)));
            args.push(Arg::Index(splits as i64));
            args.push(out.arg());
            args.push(Arg::Index(0));
            args.extend(out_strides.iter().map(|&s| Arg::Index(s)));
            args.push(Arg::Index(0));
            args.push(partial.arg());
            args.push(Arg::Index(0));
            args.extend(target_strides.iter().map(|&s| Arg::Index(s)));
            args.push(Arg::Index(1));
            launch(
                cl,
                &combine,
                false,
                &args,
                global_size(m, 1, 64) * REDUCE_GROUP,
                REDUCE_GROUP,
            )
            .unwrap();
        }
        let got = out.read(cl);
        for k in indices(&lens[..kept]) {
            let mut acc = match op {
                ReduceOp::Sum => 0.0,
                ReduceOp::Prod => 1.0,
                ReduceOp::Max => f64::NEG_INFINITY,
                ReduceOp::Min => f64::INFINITY,
            };
            for q in indices(&lens[kept..]) {
                let index: Vec<usize> = k.iter().chain(&q).copied().collect();
                let values: Vec<f64> = operands.iter().map(|o| round(o.at(&index))).collect();
                let v = eval(&ir, &values, round);
                acc = match op {
                    ReduceOp::Sum => acc + v,
                    ReduceOp::Prod => acc * v,
                    ReduceOp::Max => {
                        if acc.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            acc.max(v)
                        }
                    }
                    ReduceOp::Min => {
                        if acc.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            acc.min(v)
                        }
                    }
                };
            }
            let p: i64 = k
                .iter()
                .zip(&out_strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum();
            let g = got[p as usize];
            // Sums of r terms in another order: the tolerance grows with r.
            let tol = tolerance * (1.0 + (r as f64).sqrt());
            assert!(
                close(g, acc, tol),
                "case {case} ({ty:?} {op:?}, lens {lens:?}, kept {kept}, {splits} parts) at {k:?}: {g} vs {acc}\nexpression {ir}"
            );
        }
    }
}

/// The arguments of a rank-1 elementwise kernel of one input: `count` work items over
/// `len` elements, written contiguously into `out`, read from `input` from `offset` by
/// `stride`.
fn one_input_args<'a>(
    count: Index,
    len: Index,
    out: Arg<'a>,
    input: Arg<'a>,
    offset: Index,
    stride: Index,
) -> [Arg<'a>; 8] {
    [
        Arg::Index(count),
        Arg::Index(len),
        out,
        Arg::Index(0),
        Arg::Index(1),
        input,
        Arg::Index(offset),
        Arg::Index(stride),
    ]
}

/// Kernels are built once per source: a second launch reuses the program.
#[test]
fn kernels_are_cached_per_source() {
    let Some(cl) = device() else { return };
    // 3.25 · x[reversed]: a constant the random expressions never use, so this test is the
    // first to build it.
    let mut ir = axes_core::ir::Ir::default();
    let x = ir.leaf();
    let k = ir.push(axes_core::ir::IrNode::Scalar(3.25));
    ir.push(axes_core::ir::IrNode::Binary(
        axes_core::ir::BinaryOp::Mul,
        k,
        x,
    ));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F32],
        out: CType::F32,
        wide: false,
    };
    let kernel = elementwise(&spec, 1, Dialect::OpenCl).unwrap();
    let input = cl.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let out = cl.upload(&[0.0f32; 3]).unwrap();
    let run = || {
        let args = one_input_args(3, 3, out.arg(), input.arg(), 2, -1);
        launch(cl, &kernel, false, &args, 64, 64).unwrap();
    };
    assert!(!cl.is_cached(&kernel));
    run();
    assert!(cl.is_cached(&kernel));
    run();
    // A reversed copy (stride -1), scaled.
    assert_eq!(cl.download(&out).unwrap(), [9.75, 6.5, 3.25]);
    // An index beyond 32 bits for a kernel generated with 32-bit indices is an error.
    let args = one_input_args(3_000_000_000, 3, out.arg(), input.arg(), 2, -1);
    let err = launch(cl, &kernel, false, &args, 64, 64)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("argument 0") && err.contains("beyond 32-bit indices"),
        "{err}"
    );
}

/// A program built from source is kept on disk; another device object (as in another
/// process) builds it from that binary, and runs it; an entry with a flipped byte is built
/// from source again and replaced.
#[test]
fn program_binaries_are_kept_on_disk() {
    if device().is_none() {
        return;
    }
    // 1.75 · x + x: an expression no other test builds.
    let mut ir = axes_core::ir::Ir::default();
    let x = ir.leaf();
    let k = ir.push(axes_core::ir::IrNode::Scalar(1.75));
    let scaled = ir.push(axes_core::ir::IrNode::Binary(
        axes_core::ir::BinaryOp::Mul,
        k,
        x,
    ));
    ir.push(axes_core::ir::IrNode::Binary(
        axes_core::ir::BinaryOp::Add,
        scaled,
        x,
    ));
    let spec = Spec {
        ir: &ir,
        leaves: &[CType::F32],
        out: CType::F32,
        wide: false,
    };
    let kernel = elementwise(&spec, 1, Dialect::OpenCl).unwrap();
    let run = |cl: &OpenCl| {
        let input = cl.upload(&[1.0f32, 2.0, 4.0]).unwrap();
        let out = cl.upload(&[0.0f32; 3]).unwrap();
        let args = one_input_args(3, 3, out.arg(), input.arg(), 0, 1);
        launch(cl, &kernel, false, &args, 64, 64).unwrap();
        assert_eq!(cl.download(&out).unwrap(), [2.75, 5.5, 11.0]);
    };
    let dir = std::env::temp_dir().join(format!("axes-opencl-binaries-{}", std::process::id()));
    let fresh = |cache| OpenCl::first_with(cache, |_| ()).unwrap();
    crate::disk_cache::check_kept_on_disk(&dir, fresh, run, OpenCl::built_from_source);
}

/// Both generated tiled matrix products against a plain triple loop, over random batch
/// counts, sizes around (and not multiples of) the tiles and the contracted slices, operand
/// layouts (row- or column-major) and fewer groups than tiles.
#[test]
fn tiled_matmul_matches_the_reference() {
    let Some(cl) = device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for case in 0..16 {
        let ty = if case % 2 == 0 {
            CType::F32
        } else {
            CType::F64
        };
        let tile = if case % 4 < 2 {
            MatmulTile::SMALL
        } else {
            MatmulTile::LARGE
        };
        let tolerance = if ty == CType::F32 { 1e-5 } else { 1e-12 };
        let (batches, m, n, k) = (
            rng.random_range(1..=3),
            rng.random_range(1..2 * tile.side + 9),
            rng.random_range(1..2 * tile.side + 9),
            rng.random_range(1..50),
        );
        // (batch, row, column) strides of a dense batches×rows×cols operand, row- or column-major.
        let layout = |rows: usize, cols: usize, rng: &mut ChaCha8Rng| -> [i64; 3] {
            let size = (rows * cols) as i64;
            if rng.random_bool(0.5) {
                [size, cols as i64, 1]
            } else {
                [size, 1, rows as i64]
            }
        };
        let (ls, rs, os) = (
            layout(m, k, &mut rng),
            layout(k, n, &mut rng),
            layout(m, n, &mut rng),
        );
        let lhs: Vec<f64> = (0..batches * m * k)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let rhs: Vec<f64> = (0..batches * k * n)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let kernel = matmul(ty, case % 3 == 0, tile, Dialect::OpenCl).unwrap();
        let (lb, rb) = (Buf::new(cl, ty, &lhs), Buf::new(cl, ty, &rhs));
        let out = Buf::new(cl, ty, &vec![0.0; batches * m * n]);
        let mut args: Vec<Arg<'_>> = [batches, m, n, k]
            .iter()
            .map(|&v| Arg::Index(v as i64))
            .collect();
        for (buf, s) in [(&out, os), (&lb, ls), (&rb, rs)] {
            args.push(buf.arg());
            args.push(Arg::Index(0));
            args.extend(s.iter().map(|&v| Arg::Index(v)));
        }
        let group = tile.threads();
        launch(
            cl,
            &kernel,
            case % 3 == 0,
            &args,
            global_size(tile.groups(batches, m, n), 1, 5) * group,
            group,
        )
        .unwrap();
        let got = out.read(cl);
        let round = if ty == CType::F32 { to_f32 } else { exact };
        for b in 0..batches {
            for i in 0..m {
                for j in 0..n {
                    let at = |s: [i64; 3], r: usize, c: usize| {
                        (b as i64 * s[0] + r as i64 * s[1] + c as i64 * s[2]) as usize
                    };
                    let expected: f64 = (0..k)
                        .map(|p| round(lhs[at(ls, i, p)]) * round(rhs[at(rs, p, j)]))
                        .sum();
                    let g = got[at(os, i, j)];
                    assert!(
                        close(g, expected, tolerance * (k as f64)),
                        "case {case} [{b},{i},{j}] of {batches}×{m}×{n}×{k}: {g} vs {expected}"
                    );
                }
            }
        }
    }
}

/// Pool size classes: at least 256 bytes, at most a quarter more than asked, whole multiples
/// of 64 bytes (so every element type fits evenly).
#[test]
fn size_classes_are_a_quarter_of_a_power_of_two_apart() {
    use super::pool::size_class;
    assert_eq!(
        [0, 1, 256, 257, 1000, 1025].map(size_class),
        [256, 256, 256, 320, 1024, 1280]
    );
    for bytes in [300, 5_000, 123_457, (1 << 20) + 1, 1 << 30, 3 << 29] {
        let class = size_class(bytes);
        assert!(
            class >= bytes && class <= bytes + bytes / 4,
            "{bytes} → {class}"
        );
        assert_eq!(class % 64, 0, "{bytes} → {class}");
    }
}

/// Every pass of fused attention builds on the device in every float type, with 32- and
/// 64-bit indices (the shared suite runs the 32-bit ones; 64-bit offsets need buffers of
/// 2^30 elements, too large to run here).
#[test]
fn attention_kernels_build_in_every_type_and_index_width() {
    use axes_kernels::{AttentionPass, AttentionSpec, attention};
    let Some(cl) = device() else { return };
    for (ty, wide) in [
        (CType::F32, true),
        (CType::F64, true),
        (CType::F16, false),
        (CType::BF16, true),
    ] {
        let spec = AttentionSpec {
            ty,
            width: 5,
            value_width: 3,
            scale: 0.5,
            masked: true,
            wide,
        };
        for pass in AttentionPass::ALL {
            let kernel = attention(&spec, pass, Dialect::OpenCl).unwrap();
            cl.program(&kernel).unwrap();
        }
    }
}
