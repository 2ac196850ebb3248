//! When work pays for the thread pool: the cost model every CPU path that splits work across
//! threads asks (compiled loop nests and their reductions, the IR interpreter, matrix
//! products; the training step's jobs run on the last two).
//!
//! Work is estimated as one core's time: its elements times what each costs (the bytes the
//! loop streams and the element-wise ops it computes, by kind), or a product's multiply-adds
//! at `gemm`'s rate. Splitting it costs a hand-off to the pool and runs it a path's measured
//! speed-up faster; the split pays when `work / speedup + hand-off < work`. The constants
//! are measurements of a 2-core host (recorded in `benches/NOTES.md`): a hand-off of
//! 15–19 µs with the pool awake (`fused` bench, "pool hand-off"), each path's
//! one- and two-thread times by size (`fused`: element-wise assignments and the squared
//! distance's sum by size; the interpreter on a deep expression; the products of `contract`).

use crate::ir::OpWeights;

/// One core's time per byte an element-wise loop streams (operands read, the result
/// written), in picoseconds: `a*x + b*y` over 2^12–2^17 elements ran at 12–14 ps a byte from
/// the caches (from memory it is about twice that, at sizes where every split pays).
const PS_PER_BYTE: f64 = 13.0;

/// Picoseconds per element of a cheap op (an add, a compare: a fraction of a vector
/// instruction per element).
const PS_SIMPLE: f64 = 10.0;

/// Picoseconds per element of a division or square root.
const PS_DIVISION: f64 = 40.0;

/// Picoseconds per element of a transcendental function (`exp`, `tanh`, ...: the two of
/// `tanh(x)·y + exp(x)` took 0.5 ns an element beyond its memory traffic).
const PS_TRANSCENDENTAL: f64 = 250.0;

/// Picoseconds per element and instruction of the IR interpreter (a 140-instruction program
/// over 2^12–2^18 elements: 100–125 ps).
const PS_PER_INSTRUCTION: f64 = 100.0;

/// Multiply-adds per nanosecond of a matrix product on one core (`gemm`'s 104.8 GFLOP/s on
/// 1024³).
const MACS_PER_NS: f64 = 52.0;

/// How a path's work behaves when split across the pool (two threads on the measured host).
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// What handing the parts to the pool and waiting for them costs, in nanoseconds.
    pub handoff_ns: f64,
    /// How much faster the whole runs split than on one thread, the hand-off aside.
    pub speedup: f64,
}

impl Split {
    /// Whether `work_ns` of one core's work runs sooner split.
    pub fn pays(&self, work_ns: f64) -> bool {
        work_ns / self.speedup + self.handoff_ns < work_ns
    }
}

/// Loop nests compiled for an expression, and their reductions: twice as fast on two threads
/// (from 2^20 elements both `a*x + b*y` and `tanh(x) y + exp(-x)` ran in 0.54–0.64 of one
/// thread's time) after a hand-off of ≈ 25 µs (19 µs measured with the pool awake, 40–55 µs
/// asleep; `Σ(x − y)²` over 2^18 elements, 24 µs, was 1.17× slower split, `a*x + b*y` over
/// 2^18, 36 µs, 1.14×).
pub const COMPILED: Split = Split {
    handoff_ns: 25_000.0,
    speedup: 2.0,
};

/// The IR interpreter: 1.5× on two threads (its parts are as many as the threads, each
/// with its own blocks of intermediate values), after ≈ 35 µs (a program of 140
/// instructions over 4,096 elements, 71 µs, took 86 µs split).
pub const INTERPRETED: Split = Split {
    handoff_ns: 35_000.0,
    speedup: 1.5,
};

/// Matrix products split by rows or on `gemm`'s own threads (each part packs its operands):
/// at 2^21 multiply-adds (the MLP training step's products, ≈ 40 µs) a split cost more than
/// it saved, at 2^22 it paid.
pub const PRODUCTS: Split = Split {
    handoff_ns: 20_000.0,
    speedup: 1.8,
};

/// One core's time for `count` elements of an element-wise loop that streams
/// `bytes_per_element` bytes per element and computes `ops`.
pub fn element_wise_ns(count: usize, bytes_per_element: usize, ops: OpWeights) -> f64 {
    let per_element = bytes_per_element as f64 * PS_PER_BYTE
        + ops.simple as f64 * PS_SIMPLE
        + ops.division as f64 * PS_DIVISION
        + ops.transcendental as f64 * PS_TRANSCENDENTAL;
    count as f64 * per_element / 1e3
}

/// One core's time for the interpreter to run `instructions` over `count` elements.
pub fn interpreted_ns(count: usize, instructions: usize) -> f64 {
    count as f64 * instructions as f64 * PS_PER_INSTRUCTION / 1e3
}

/// One core's time for a matrix product of `macs` multiply-adds.
pub fn products_ns(macs: usize) -> f64 {
    macs as f64 / MACS_PER_NS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model puts each path's break-even where it was measured.
    #[test]
    fn splits_start_where_they_were_measured_to_pay() {
        let l2 = OpWeights {
            simple: 3,
            ..OpWeights::NONE
        };
        // (x - y)² summed: 8 bytes an element.
        assert!(!COMPILED.pays(element_wise_ns(1 << 18, 8, l2)));
        assert!(COMPILED.pays(element_wise_ns(1 << 19, 8, l2)));
        // a*x + b*y: 12 bytes an element.
        assert!(!COMPILED.pays(element_wise_ns(1 << 18, 12, l2)));
        assert!(COMPILED.pays(element_wise_ns(1 << 19, 12, l2)));
        assert!(!INTERPRETED.pays(interpreted_ns(4096, 140)));
        assert!(INTERPRETED.pays(interpreted_ns(16384, 140)));
        assert!(!PRODUCTS.pays(products_ns(1 << 21)));
        assert!(PRODUCTS.pays(products_ns(1 << 22)));
    }

    #[test]
    fn transcendental_functions_split_sooner() {
        // `a*x + b*y` over 2^16 f32 (three streams, three cheap ops) stays on one thread; with
        // two transcendental functions per element, 2^17 pays.
        let light = OpWeights {
            simple: 3,
            ..OpWeights::NONE
        };
        assert!(!COMPILED.pays(element_wise_ns(1 << 16, 12, light)));
        let heavy = OpWeights {
            transcendental: 2,
            ..light
        };
        assert!(COMPILED.pays(element_wise_ns(1 << 17, 12, heavy)));
    }

    #[test]
    fn more_work_never_stops_a_split() {
        for split in [COMPILED, INTERPRETED, PRODUCTS] {
            let mut paid = false;
            for shift in 0..40 {
                let pays = split.pays((1u64 << shift) as f64);
                assert!(pays || !paid, "{split:?} stopped paying at 2^{shift} ns");
                paid |= pays;
            }
            assert!(paid);
        }
    }
}
