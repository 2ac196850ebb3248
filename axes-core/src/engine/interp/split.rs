//! A run split along its outermost axis across threads, sums in a fixed order.

use std::sync::atomic::{AtomicBool, Ordering};

use super::blocks::{Isa, run_checked};
use super::{Program, Sinks, StridedSink, StridedSource, Strides, Values, reach};
use crate::element::ElementsMut;
use crate::engine::{cost, threads};
use crate::error::Result;
use crate::num::take_division_by_zero;

/// How a sink meets a split of the outermost axis.
enum SinkSplit {
    /// Each part of the axis writes a region of the buffer of its own.
    Regions,
    /// The sink combines over the axis: each part combines into a partial result of its own,
    /// and the partials are combined into the sink in order.
    Partials,
}

/// Parts at most when a run is split into partial results (a fixed count, not the number of
/// threads, so the partial results, and the sums, are the same on every thread count).
const MAX_PARTS: usize = 8;

/// Elements per part at least when a run is split into partial results (each part costs a
/// partial buffer and its combination).
const PART_MIN_ELEMENTS: usize = 1 << 16;

/// Runs `program` (after [`run`](super::run)'s checks, over a canonical space), split along the
/// outermost axis. A sink that combines over that axis is always cut into the same parts,
/// from the lengths alone (each part combined into a partial result of its own, the partials
/// into the sink in order), so its sums are the same whatever the thread count and whatever
/// the cost model decides; where every sink keeps that axis in a region of its own, the run
/// is split only when the work pays for other threads (every element is computed as in one
/// run). Parts run on other threads only where the work pays for them. Returns whether an
/// integer was divided by zero; an error when the host has no room for the partial results.
pub(super) fn run_split(
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    sinks: Sinks<'_>,
) -> Result<bool> {
    let count = lens.iter().fold(1usize, |n, &l| n.saturating_mul(l));
    let pays = cost::INTERPRETED.pays(cost::interpreted_ns(count, program.insts.len()));
    let threads = if pays { threads::threads() } else { 1 };
    // One part whatever the sinks: one thread, and too few elements for partial results.
    if threads < 2 && count < 2 * PART_MIN_ELEMENTS {
        return Ok(run_whole(program, lens, sources, sinks));
    }
    let splits: Option<Vec<SinkSplit>> = (!lens.is_empty())
        .then(|| {
            (sinks.iter())
                .map(|sink| {
                    let (low, high) = reach(&lens[1..], &sink.strides[1..]);
                    let stride = sink.strides[0];
                    if stride > 0 && high - low < stride {
                        Some(SinkSplit::Regions)
                    } else if stride == 0 && sink.combine.is_some() {
                        Some(SinkSplit::Partials)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .flatten();
    let parts = match &splits {
        None => 1,
        Some(splits) if splits.iter().all(|s| matches!(s, SinkSplit::Regions)) => {
            threads.min(lens[0])
        }
        Some(splits) => {
            // From the lengths alone: these parts decide the order of the sums.
            let parts = (count / PART_MIN_ELEMENTS).clamp(1, MAX_PARTS).min(lens[0]);
            // Combining the partials must cost little beside the run itself.
            let partial: usize = (sinks.iter().zip(splits))
                .filter(|(_, split)| matches!(split, SinkSplit::Partials))
                .map(|(sink, _)| partial_len(&lens[1..], &sink.strides[1..]))
                .sum();
            if partial.saturating_mul(parts) <= count / 4 {
                parts
            } else {
                1
            }
        }
    };
    let Some(splits) = splits.filter(|_| parts >= 2) else {
        return Ok(run_whole(program, lens, sources, sinks));
    };
    // Part `p` runs positions `bounds[p]..bounds[p + 1]` of the outermost axis.
    let bounds: Vec<usize> = (0..=parts).map(|p| lens[0] * p / parts).collect();
    // One partial result per part for each sink combined from partials.
    let mut partials: Vec<Vec<Values>> = (0..parts)
        .map(|_| {
            (sinks.iter().zip(&splits))
                .filter(|(_, split)| matches!(split, SinkSplit::Partials))
                .map(|(sink, _)| {
                    let len = partial_len(&lens[1..], &sink.strides[1..]);
                    Values::filled(sink.data.dtype(), len, sink.combine)
                })
                .collect::<Result<_>>()
        })
        .collect::<Result<_>>()?;
    let mut part_partials: Vec<_> = partials.iter_mut().map(|p| p.iter_mut()).collect();
    let mut part_sinks: Vec<Vec<StridedSink<'_>>> = (0..parts).map(|_| Vec::new()).collect();
    // The sinks combined from partials, each with the strides of its partials.
    let mut combined: Vec<(StridedSink<'_>, Strides)> = Vec::new();
    for (sink, split) in sinks.into_iter().zip(&splits) {
        if let SinkSplit::Partials = split {
            let strides = partial_strides(&lens[1..], &sink.strides[1..]);
            let part_strides: Strides = [0].into_iter().chain(strides.iter().copied()).collect();
            for (sinks, blocks) in part_sinks.iter_mut().zip(&mut part_partials) {
                let block = blocks.next().expect("a partial result per part");
                sinks.push(StridedSink {
                    data: block.elements_mut(),
                    offset: 0,
                    strides: part_strides.clone(),
                    combine: sink.combine,
                });
            }
            combined.push((sink, strides));
            continue;
        }
        let (low, _) = reach(&lens[1..], &sink.strides[1..]);
        let stride = sink.strides[0];
        // Where each part's region starts in the buffer (the first part's at 0).
        let region = |p: usize| -> usize {
            if p == 0 {
                0
            } else {
                (sink.offset as isize + bounds[p] as isize * stride + low) as usize
            }
        };
        let mut rest = sink.data;
        for (p, sinks) in part_sinks.iter_mut().enumerate() {
            let data = if p + 1 < parts {
                let (head, tail) = rest.split_at(region(p + 1) - region(p));
                rest = tail;
                head
            } else {
                std::mem::replace(&mut rest, ElementsMut::Bool(&mut []))
            };
            let first = sink.offset as isize + bounds[p] as isize * stride;
            sinks.push(StridedSink {
                data,
                offset: (first - region(p) as isize) as usize,
                strides: sink.strides.clone(),
                combine: sink.combine,
            });
        }
    }
    let divided = AtomicBool::new(false);
    let run_part = |p: usize, mut sinks: Vec<StridedSink<'_>>| {
        let mut part_lens = lens.to_vec();
        part_lens[0] = bounds[p + 1] - bounds[p];
        let sources: Vec<StridedSource<'_>> = (sources.iter())
            .map(|s| StridedSource {
                data: s.data,
                offset: (s.offset as isize + bounds[p] as isize * s.strides[0]) as usize,
                strides: s.strides.clone(),
            })
            .collect();
        take_division_by_zero();
        run_checked(
            Isa::detect(),
            program,
            &part_lens,
            sources.as_slice(),
            &mut sinks,
        );
        if take_division_by_zero() {
            divided.store(true, Ordering::Relaxed);
        }
    };
    let mut part_list = part_sinks.into_iter().enumerate();
    if threads < 2 {
        part_list.for_each(|(p, sinks)| run_part(p, sinks));
    } else {
        let (_, first) = part_list.next().expect("two parts or more");
        threads::in_place_scope(|scope| {
            for (p, sinks) in part_list {
                let run_part = &run_part;
                scope.spawn(move |_| run_part(p, sinks));
            }
            run_part(0, first);
        });
    }
    // The partial results, combined into their sinks in order.
    for (k, (sink, strides)) in combined.iter_mut().enumerate() {
        let rest = &lens[1..];
        for blocks in &partials {
            let source = StridedSource {
                data: blocks[k].elements(),
                offset: 0,
                strides: strides.clone(),
            };
            let mut target = [StridedSink {
                data: sink.data.reborrow(),
                offset: sink.offset,
                strides: Strides::from_slice(&sink.strides[1..]),
                combine: sink.combine,
            }];
            run_checked(
                Isa::detect(),
                &Program::copy(source.data.dtype()),
                rest,
                &[source],
                &mut target,
            );
        }
    }
    Ok(divided.into_inner())
}

/// Runs the whole space as one part, on this thread: whether an integer was divided by zero.
fn run_whole(
    program: &Program,
    lens: &[usize],
    sources: &[StridedSource<'_>],
    mut sinks: Sinks<'_>,
) -> bool {
    take_division_by_zero();
    run_checked(Isa::detect(), program, lens, sources, &mut sinks);
    take_division_by_zero()
}

/// The elements of a partial result over `lens` of a sink with `strides` there: one per
/// position along the axes it keeps (stride not 0).
fn partial_len(lens: &[usize], strides: &[isize]) -> usize {
    (lens.iter().zip(strides))
        .filter(|(_, s)| **s != 0)
        .map(|(l, _)| l)
        .product()
}

/// The strides of a partial result (row-major over the axes the sink keeps, 0 elsewhere).
fn partial_strides(lens: &[usize], strides: &[isize]) -> Strides {
    let mut out: Strides = smallvec::smallvec![0; lens.len()];
    let mut step = 1isize;
    for a in (0..lens.len()).rev() {
        if strides[a] != 0 {
            out[a] = step;
            step *= lens[a] as isize;
        }
    }
    out
}
