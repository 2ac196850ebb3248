//! Layout fuzzing (not run by CI: it is `#[ignore]`d): random lengths, strides, offsets and
//! buffer sizes, then random view chains. Every layout `Layout::new` accepts must stay inside
//! its buffer (checked by enumerating every position), every rejected one must really reach
//! outside it, and every view of an accepted tensor must read only inside its buffer and agree
//! with an element-by-element reference.
//!
//! Run it with many cases:
//! `PROPTEST_CASES=100000 cargo test --release --test fuzz_layouts -- --ignored`

use axes::prelude::*;
use axes::{Layout, Storage};
use proptest::prelude::*;

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;

/// Every buffer position a layout reaches, enumerated naively (stored elements only).
fn reached(lens: &[usize], strides: &[isize], offset: usize) -> Vec<i128> {
    let mut out = Vec::new();
    if lens.contains(&0) {
        return out;
    }
    for i in 0..lens[0] {
        for j in 0..lens[1] {
            out.push(
                offset as i128 + i as i128 * strides[0] as i128 + j as i128 * strides[1] as i128,
            );
        }
    }
    out
}

/// Accepted layouts, reported by `report`.
static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

proptest! {
    #[test]
    #[ignore = "fuzzing: run with --ignored and PROPTEST_CASES"]
    fn layouts_stay_inside_their_buffers(
        lens in [0..12usize, 0..12usize],
        strides in [-40..40isize, -40..40isize],
        offset in 0..600usize,
        buffer in 0..1200usize,
        slice in (0..12usize, 0..12usize, prop_oneof![Just(1isize), Just(2), Just(-1), Just(-3)]),
        pad in (0..3usize, 0..3usize),
    ) {
        let accepted = Layout::new(&lens, &strides, offset, buffer);
        let positions = reached(&lens, &strides, offset);
        let inside = positions.iter().all(|&p| p >= 0 && p < buffer as i128);
        prop_assert_eq!(accepted.is_some(), inside, "lens {:?} strides {:?} offset {} buffer {}", lens, strides, offset, buffer);
        let Some(layout) = accepted else { return Ok(()) };
        ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let data: Vec<i64> = (0..buffer as i64).collect();
        let t = Tensor::<i64, (I, J)>::from_parts(Storage::new(data), layout).unwrap();
        // reading every element agrees with the naive positions
        let values = t.to_vec();
        prop_assert_eq!(values.iter().map(|&v| v as i128).collect::<Vec<_>>(), positions);
        // a chain of views: slice J (if in range), pad I, reorder, then read and reduce
        let (a, b, step) = slice;
        let (start, end) = (a.min(b).min(lens[1]), a.max(b).min(lens[1]));
        let v = t.slice::<J>(start..end, step).unwrap().pad::<I>(pad.0, pad.1).unwrap();
        let r = v.axes_with_order::<(J, I)>();
        let sum: i64 = r.to_vec().iter().sum();
        prop_assert_eq!(v.sum_all().unwrap(), sum);
        prop_assert_eq!((&r * 2).eval().unwrap().to_vec_in::<(I, J)>(), v.to_vec().iter().map(|x| x * 2).collect::<Vec<_>>());
        // out-of-range views are errors, not panics
        prop_assert!(t.slice::<I>(0..lens[0] + 1, 1).is_err());
        prop_assert!(t.index(J.at(lens[1])).is_err());
    }
}

#[test]
#[ignore = "fuzzing: prints how many layouts were accepted in this process"]
fn report() {
    eprintln!(
        "accepted layouts so far: {}",
        ACCEPTED.load(std::sync::atomic::Ordering::Relaxed)
    );
}
