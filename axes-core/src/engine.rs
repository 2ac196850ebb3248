//! The CPU engine: plans a loop nest for an expression and runs it, and the rest of the
//! CPU's machinery: the chunk loader of tensor leaves ([`leaf`]), x86-64 SIMD helpers
//! (prefetch, AVX2 transpose, streaming stores), a chunked interpreter for run-time IR (used
//! by autodiff, the parameters' gradient, expressions too deep to compile and the CPU
//! backend), matrix products on the `gemm`
//! crate, and [`cpu`]: the CPU as a backend of the device protocol (a test device, public
//! as `axes::backends::cpu`).
//!
//! The flow of one evaluation: the expression's leaves describe their layouts
//! ([`plan::LeafLayout`]); the planner builds one iteration space (the result's axes, then any
//! reduced axes), gives every operand a stride per axis (0 where it broadcasts; the
//! destination has 0 on reduced axes), and canonicalises it: length-1 axes dropped, axes
//! ordered by stride (smallest innermost), axes contiguous in every operand merged
//! ([`plan::Plan`]). The executor ([`exec`]) then walks the outer axes and evaluates the
//! innermost one in chunks of [`CHUNK`] elements with a monomorphised, vectorisable loop,
//! split across threads where the [`cost`] model says the split pays. The common small case
//! — every leaf dense, in one axis order, too little work to split — skips the planner:
//! [`exec::run_flat`] runs one loop over the elements ([`plan::Plan::flat_count`]).

pub mod attention;
pub(crate) mod canonical;
pub mod cost;
pub mod cpu;
pub mod exec;
pub(crate) mod interp;
pub mod leaf;
pub(crate) mod matmul;
pub(crate) mod norm;
pub mod plan;
#[cfg(target_arch = "x86_64")]
mod simd;
pub mod threads;

/// Elements evaluated per step of the innermost loop: leaves that are not contiguous are
/// gathered into a buffer of this many elements (tiled loops too, within each tile row).
pub const CHUNK: usize = 512;
