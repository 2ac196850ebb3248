//! Running a program block by block on one thread: the registers, the vector paths and the
//! walk over the outer axes.

use super::kernels::{binary, cast, compare, fill, gather, scatter, select, unary};
use super::program::Inst;
use super::{BLOCK, Program, StridedSink, StridedSource, Values, with_values};
use crate::element::{DType, Elements};
use smallvec::{SmallVec, smallvec};

/// The blocks of one run, taken from this thread's spare blocks and given back after it:
/// a training step runs the interpreter dozens of times, and allocating its registers each
/// time (many small buffers between the large ones) made the allocator return and re-fault
/// pages on every step.
pub(super) struct Registers {
    blocks: SmallVec<[Values; 16]>,
}

/// Spare blocks kept per thread, at most this many.
const SPARE_BLOCKS: usize = 64;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Values>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Registers {
    /// One block of `BLOCK` elements per type in `types`.
    fn take(types: &[DType]) -> Registers {
        SPARE.with_borrow_mut(|spare| Registers {
            blocks: types
                .iter()
                .map(|&ty| match spare.iter().rposition(|b| b.dtype() == ty) {
                    Some(at) => spare.swap_remove(at),
                    None => Values::new(ty, BLOCK),
                })
                .collect(),
        })
    }
}

impl Drop for Registers {
    fn drop(&mut self) {
        SPARE.with_borrow_mut(|spare| {
            let room = SPARE_BLOCKS.saturating_sub(spare.len());
            spare.extend(self.blocks.drain(..).take(room));
        });
    }
}

/// The vector instructions the interpreter's arithmetic is compiled for: the widest this CPU
/// has, picked once per run (every path gives the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Baseline,
}

impl Isa {
    /// Every path, widest first.
    #[cfg(test)]
    pub(super) const ALL: &'static [Isa] = &[
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2,
        Isa::Baseline,
    ];

    /// Whether this CPU can run the path.
    pub(super) fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            Isa::Baseline => true,
        }
    }

    pub(super) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        for isa in [Isa::Avx512, Isa::Avx2] {
            if isa.available() {
                return isa;
            }
        }
        Isa::Baseline
    }
}

/// One run on this thread: its program, its operands, the positions where the current row
/// of the innermost axis starts in each, and each one's stride between the rows of a block.
struct Run<'r, 's, 'd> {
    program: &'r Program,
    sources: &'r [StridedSource<'s>],
    source_base: SmallVec<[isize; 8]>,
    source_rows: SmallVec<[isize; 8]>,
    sinks: &'r mut [StridedSink<'d>],
    sink_base: SmallVec<[isize; 4]>,
    sink_rows: SmallVec<[isize; 4]>,
}

/// The elements one pass over the program computes: `cols` elements from `col` of the
/// innermost axis in each of `rows` rows from `row` of the next axis (one row where the
/// innermost axis is long), stored row after row in the registers.
#[derive(Clone, Copy)]
struct Block {
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
}

impl Block {
    fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether an operand with strides `inner` (innermost axis) and `between` (between rows)
    /// holds the block's elements in a row of its own, which is read where it lies.
    fn contiguous(&self, inner: isize, between: isize) -> bool {
        inner == 1 && (self.rows == 1 || between == self.cols as isize)
    }

    /// Where element 0 of row `r` of the block lies for an operand at `base`.
    fn first(&self, r: usize, base: isize, inner: isize, between: isize) -> isize {
        base + (self.row + r) as isize * between + self.col as isize * inner
    }
}

/// Runs every instruction of the program on `block` and writes (or combines) its results
/// into the sinks, compiled for `isa`.
fn run_block(isa: Isa, run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX-512F (and with it AVX2 and FMA) on this CPU.
        Isa::Avx512 => unsafe { run_block_avx512(run, blocks, block) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX2 and FMA on this CPU.
        Isa::Avx2 => unsafe { run_block_avx2(run, blocks, block) },
        Isa::Baseline => run_block_body(run, blocks, block),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
fn run_block_avx512(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    run_block_body(run, blocks, block);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn run_block_avx2(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    run_block_body(run, blocks, block);
}

/// [`run_block`]'s body: the arithmetic and the writes are inlined, so they take the
/// caller's instructions.
#[inline(always)]
fn run_block_body(run: &mut Run<'_, '_, '_>, blocks: &mut [Values], block: Block) {
    let (program, sources) = (run.program, run.sources);
    let (source_base, source_rows) = (&run.source_base[..], &run.source_rows[..]);
    let n = block.len();
    for (i, inst) in program.insts.iter().enumerate() {
        let (done, rest) = blocks.split_at_mut(i);
        let out = &mut rest[0];
        macro_rules! arg {
            ($j:expr) => {
                operand(
                    program,
                    $j,
                    done,
                    (sources, source_base, source_rows),
                    block,
                )
            };
        }
        match *inst {
            Inst::Leaf(k) => {
                let s = &sources[k];
                let inner = s.strides.last().copied().unwrap_or(0);
                if !block.contiguous(inner, source_rows[k]) {
                    for r in 0..block.rows {
                        let first = block.first(r, source_base[k], inner, source_rows[k]);
                        gather(out, r * block.cols, s.data, first, inner, block.cols);
                    }
                }
            }
            // Filled once per run ([`run_checked`]).
            Inst::Const(_) => {}
            Inst::Unary(op, a) => unary(op, out, arg!(a), n),
            Inst::Binary(op, a, b) => binary(op, out, arg!(a), arg!(b), n),
            Inst::Compare(op, a, b) => compare(op, out, arg!(a), arg!(b), n),
            Inst::Select(c, a, b) => select(out, arg!(c), arg!(a), arg!(b), n),
            Inst::Cast(a) => cast(out, arg!(a), n),
        }
    }
    for (r, sink) in run.sinks.iter_mut().enumerate() {
        let inner = sink.strides.last().copied().unwrap_or(0);
        let (base, between) = (run.sink_base[r], run.sink_rows[r]);
        let root = program.roots[r];
        let values = operand(
            program,
            root,
            blocks,
            (sources, source_base, source_rows),
            block,
        );
        if block.contiguous(inner, between) {
            scatter(sink, block.first(0, base, inner, between), 1, values, n);
        } else {
            for row in 0..block.rows {
                let first = block.first(row, base, inner, between);
                let values = values.slice(row * block.cols, (row + 1) * block.cols);
                scatter(sink, first, inner, values, block.cols);
            }
        }
    }
}

/// The values of instruction `j` in `block`: a leaf that holds the block contiguously is
/// read where it lies (no copy), every other instruction from its register.
#[inline(always)]
fn operand<'b>(
    program: &Program,
    j: usize,
    done: &'b [Values],
    (sources, source_base, source_rows): (&'b [StridedSource<'_>], &[isize], &[isize]),
    block: Block,
) -> Elements<'b> {
    if let Inst::Leaf(k) = program.insts[j] {
        let s = &sources[k];
        let inner = s.strides.last().copied().unwrap_or(0);
        if block.contiguous(inner, source_rows[k]) {
            let first = block.first(0, source_base[k], inner, source_rows[k]) as usize;
            return s.data.slice(first, first + block.len());
        }
    }
    done[j].elements().slice(0, block.len())
}

/// [`run`](super::run) after its checks, on this thread, on the vector path `isa` (which this
/// CPU has).
///
/// Rows of the innermost axis shorter than half a block go several to a block (rows of the
/// next axis), so that short rows do not pay the program's dispatch each; every element is
/// computed and combined in the same order either way.
pub(super) fn run_checked(
    isa: Isa,
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: &mut [StridedSink<'_>],
) {
    let rank = lens.len();
    let inner = lens.last().copied().unwrap_or(1);
    let rows_per_block = match rank {
        2.. if inner <= BLOCK / 2 => (BLOCK / inner).min(lens[rank - 2]),
        _ => 1,
    };
    let tiled = rows_per_block > 1;
    let outer_lens = &lens[..rank.saturating_sub(if tiled { 2 } else { 1 })];
    let row_stride = |strides: &[isize]| if tiled { strides[rank - 2] } else { 0 };
    let mut regs = Registers::take(&program.types);
    // A constant's block is the same in every block: filled once, here.
    for (inst, block) in program.insts.iter().zip(&mut regs.blocks) {
        if let Inst::Const(v) = *inst {
            with_values!(block, o => fill(o, v));
        }
    }
    let mut index: SmallVec<[usize; 6]> = smallvec![0; outer_lens.len()];
    let outer_count: usize = outer_lens.iter().product();
    let mut run = Run {
        program,
        sources,
        source_base: smallvec![0; sources.len()],
        source_rows: sources.iter().map(|s| row_stride(&s.strides)).collect(),
        sink_base: smallvec![0; sinks.len()],
        sink_rows: sinks.iter().map(|s| row_stride(&s.strides)).collect(),
        sinks,
    };
    for _ in 0..outer_count {
        let base = |offset: usize, strides: &[isize]| {
            offset as isize
                + index
                    .iter()
                    .zip(strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()
        };
        for (b, s) in run.source_base.iter_mut().zip(sources) {
            *b = base(s.offset, &s.strides);
        }
        for (b, s) in run.sink_base.iter_mut().zip(run.sinks.iter()) {
            *b = base(s.offset, &s.strides);
        }
        if tiled {
            let row_len = lens[rank - 2];
            let mut row = 0;
            while row < row_len {
                let rows = rows_per_block.min(row_len - row);
                let block = Block {
                    row,
                    rows,
                    col: 0,
                    cols: inner,
                };
                run_block(isa, &mut run, &mut regs.blocks, block);
                row += rows;
            }
        } else {
            let mut col = 0;
            while col < inner {
                let cols = BLOCK.min(inner - col);
                let block = Block {
                    row: 0,
                    rows: 1,
                    col,
                    cols,
                };
                run_block(isa, &mut run, &mut regs.blocks, block);
                col += cols;
            }
        }
        for axis in (0..index.len()).rev() {
            index[axis] += 1;
            if index[axis] < outer_lens[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}
