//! Fused expressions allocate no element buffers: `sum((x-y)^2)` and `a*x + b*y` into an
//! existing destination run without any allocation the size of their data (a counting
//! global allocator records every allocation; only small planning metadata is allowed, and
//! on one thread not even that).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axes::prelude::*;

/// Allocations at least this large count as element buffers: the tensors below hold
/// 1M f32 (4 MiB), so any buffer of their elements, even split over threads, is larger.
const ELEMENT_BUFFER: usize = 64 * 1024;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LARGE: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
static HERE_BYTES: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Counting the allocations of this thread alone (others, such as the test harness's,
    /// may allocate meanwhile).
    static HERE: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if HERE.with(Cell::get) {
            HERE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        if COUNTING.load(Ordering::Relaxed) {
            BYTES.fetch_add(layout.size(), Ordering::Relaxed);
            if layout.size() >= ELEMENT_BUFFER {
                LARGE.fetch_add(1, Ordering::Relaxed);
            }
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Axis)]
struct N;

/// The bytes `f` allocates on this thread.
fn count_here(f: impl FnOnce()) -> usize {
    HERE_BYTES.store(0, Ordering::SeqCst);
    HERE.with(|here| here.set(true));
    f();
    HERE.with(|here| here.set(false));
    HERE_BYTES.load(Ordering::SeqCst)
}

/// Runs `f` with counting on; returns (element-sized allocations, bytes allocated).
fn count(f: impl FnOnce()) -> (usize, usize) {
    LARGE.store(0, Ordering::SeqCst);
    BYTES.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    f();
    COUNTING.store(false, Ordering::SeqCst);
    (LARGE.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst))
}

#[test]
fn fused_expressions_allocate_no_element_buffers() {
    let n = 1 << 20;
    let x = Tensor::<f32, (N,)>::random_uniform(N.len(n), -1.0, 1.0, 1).unwrap();
    let y = Tensor::<f32, (N,)>::random_uniform(N.len(n), -1.0, 1.0, 2).unwrap();
    let mut out = Tensor::<f32, (N,)>::zeros(N.len(n)).unwrap();
    for threads in [1, 2] {
        axes::set_threads(threads).unwrap();
        // A small full reduction runs into a local: not even its one-element result is
        // allocated (on one thread; more threads allocate as their pool starts).
        if threads == 1 {
            let (small_x, small_y) = (
                x.slice::<N>(..1024, 1).unwrap(),
                y.slice::<N>(..1024, 1).unwrap(),
            );
            l2_small(&small_x, &small_y);
            let bytes = count_here(|| l2_small(&small_x, &small_y));
            assert_eq!(bytes, 0, "a sum of 1024 elements allocated {bytes} bytes");
        }
        // warm the thread pool outside the counted region
        let _ = (&x - &y).square().sum_all().unwrap();
        let mut l2 = 0.0;
        let (large, bytes) = count(|| l2 = (&x - &y).square().sum_all().unwrap());
        assert_eq!(
            large, 0,
            "sum((x-y)^2) on {threads} threads allocated an element buffer ({bytes} bytes in all)"
        );
        assert!(l2 > 0.0);
        let (large, bytes) = count(|| out.assign(&x * 1.5 + &y * -0.5).unwrap());
        assert_eq!(
            large, 0,
            "a*x + b*y on {threads} threads allocated an element buffer ({bytes} bytes in all)"
        );
        println!(
            "{threads} thread(s): a*x+b*y into an existing destination allocated {bytes} bytes of metadata"
        );
        // On one thread nothing at all: the leaves, the plan and the evaluators of a small
        // expression live on the stack (more threads box their rayon jobs).
        if threads == 1 {
            assert_eq!(bytes, 0, "a*x + b*y on one thread allocated {bytes} bytes");
        }
    }
    assert_eq!(
        out.get(N.at(7)).unwrap(),
        1.5 * x.get(N.at(7)).unwrap() - 0.5 * y.get(N.at(7)).unwrap()
    );
    // the counter does see element buffers: evaluating into a new tensor allocates one
    let (large, _) = count(|| drop((&x + &y).eval().unwrap()));
    assert_eq!(large, 1);
}

fn l2_small(x: &Tensor<f32, (N,)>, y: &Tensor<f32, (N,)>) {
    assert!((x - y).square().sum_all().unwrap() > 0.0);
}
