//! A job of the CPU backend as its interpreter runs it on the backend's buffers: made once
//! (the program compiled, every leaf and result placed in its buffer), then run by the op
//! that made it and again at every replay of a recording that keeps it. Leaves are read and
//! results written in place; only leaves of a buffer the job writes in place are read from a
//! copy.

use std::sync::Arc;

use smallvec::SmallVec;

use super::buffers::{Buffer, Guards, buffer_of, elements, elements_mut, handle, new_buffer};
use crate::element::DType;
use crate::engine::interp::{self, Program, StridedSink, StridedSource, Strides, Values};
use crate::error::{Error, Result};
use crate::ir::ReduceOp;
use crate::protocol::{DeviceMemory, Job, JobLeaf, JobTarget, OutputJob, row_major_strides};
use crate::storage::{self, HostVec};

/// Where a leaf or a result lies: its buffer (an index into [`Launch::buffers`]), its element
/// type, its first element and its strides (in elements).
#[derive(Clone, Debug)]
struct Place {
    buffer: usize,
    dtype: DType,
    offset: usize,
    strides: Strides,
}

/// A leaf of a job, and whether it is read from a copy of the span it reaches (its buffer is
/// one the job writes in place).
#[derive(Debug)]
struct Leaf {
    place: Place,
    copied: bool,
}

/// What a result's elements hold before the job combines into them.
#[derive(Debug)]
enum Start {
    /// What they held: the job writes every one.
    Kept,
    /// The identity of the reduction (a new buffer's every element).
    Identity(ReduceOp),
    /// Values copied from a leaf, read over the result's kept axes (`lens`).
    Copied { from: Place, lens: Vec<usize> },
}

/// A result of a job.
#[derive(Debug)]
struct Output {
    /// Where it is written, with strides over the iteration axes (0 on those not kept).
    place: Place,
    /// How values meeting at one element combine; `None`: each overwrites it.
    combine: Option<ReduceOp>,
    start: Start,
    /// Where it does not go straight into its place.
    staged: Option<Staged>,
}

/// A result that reduces into a region of an existing buffer, or shares its buffer with
/// another result, is computed into a buffer of its own (row-major over its kept axes) and
/// then copied to its place.
#[derive(Debug)]
struct Staged {
    /// The lengths of the kept axes.
    lens: Vec<usize>,
    /// The own buffer's strides over the iteration axes.
    strides: Strides,
    /// The place's strides over the kept axes.
    to: Strides,
}

/// A job ready to run on the CPU backend's buffers (see the [module docs](self)).
#[derive(Debug)]
pub(super) struct Launch {
    program: Program,
    /// The lengths of the iteration axes.
    lens: Vec<usize>,
    /// Every buffer the job touches, each once, in the order of their addresses (the order
    /// [`Guards::lock`] locks them in, so a buffer's index is its position there).
    buffers: Vec<Buffer>,
    /// Whether a result is written straight into each buffer.
    written: Vec<bool>,
    leaves: Vec<Leaf>,
    outputs: Vec<Output>,
}

/// The interpreter program of `job`: its IR's last node from its leaves.
pub(super) fn compiled(job: &OutputJob<'_>) -> Result<Program> {
    let Some(root) = job.ir.nodes.len().checked_sub(1) else {
        return Err(Error::Unsupported {
            what: "an empty expression".into(),
        });
    };
    let types: Vec<DType> = job.leaves.iter().map(|leaf| leaf.dtype).collect();
    Program::compile(&job.ir, &[root], &types, job.out)
}

/// The interpreter program of `job`: each output's root from its leaves.
fn compiled_multi(job: &Job<'_>) -> Result<Program> {
    let roots: Vec<usize> = job.outputs.iter().map(|o| o.root).collect();
    let types: Vec<DType> = job.leaves.iter().map(|leaf| leaf.dtype).collect();
    Program::compile(&job.ir, &roots, &types, job.out)
}

/// The product of `lens`, or an error naming them.
pub(super) fn count_of(lens: &[usize]) -> Result<usize> {
    lens.iter()
        .try_fold(1usize, |n, &l| n.checked_mul(l))
        .ok_or_else(|| Error::SizeOverflow {
            lengths: format!("{lens:?}"),
        })
}

/// Row-major strides over the `kept` axes of an iteration space of `rank` axes, 0 on the
/// others.
fn kept_strides(rank: usize, kept: &[usize], lens: &[usize]) -> Strides {
    let kept_lens: Vec<usize> = kept.iter().map(|&a| lens[a]).collect();
    let mut strides: Strides = smallvec::smallvec![0; rank];
    for (&a, s) in kept.iter().zip(row_major_strides(&kept_lens)) {
        strides[a] = s;
    }
    strides
}

/// A launch under construction: the buffers it has named so far.
struct Builder {
    buffers: Vec<Buffer>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            buffers: Vec::new(),
        }
    }

    /// The index of `buffer`, named once.
    fn index(&mut self, buffer: &Buffer) -> usize {
        match self.buffers.iter().position(|b| Arc::ptr_eq(b, buffer)) {
            Some(at) => at,
            None => {
                self.buffers.push(Arc::clone(buffer));
                self.buffers.len() - 1
            }
        }
    }

    /// `leaf`'s place.
    fn place(&mut self, leaf: &JobLeaf<'_>) -> Result<Place> {
        Ok(Place {
            buffer: self.index(buffer_of(leaf.memory)?),
            dtype: leaf.dtype,
            offset: leaf.offset,
            strides: leaf.strides.as_slice().into(),
        })
    }

    /// The places of `leaves`, in order.
    fn places(&mut self, leaves: &[JobLeaf<'_>]) -> Result<Vec<Place>> {
        leaves.iter().map(|leaf| self.place(leaf)).collect()
    }

    /// The launch: buffers ordered by address, leaves of buffers written straight into read
    /// from copies, results sharing a buffer staged.
    fn finish(
        self,
        program: Program,
        lens: Vec<usize>,
        mut leaves: Vec<Place>,
        mut outputs: Vec<Output>,
    ) -> Launch {
        let mut order: Vec<usize> = (0..self.buffers.len()).collect();
        order.sort_unstable_by_key(|&b| Arc::as_ptr(&self.buffers[b]));
        let mut position = vec![0; order.len()];
        for (at, &b) in order.iter().enumerate() {
            position[b] = at;
        }
        let buffers: Vec<Buffer> = order
            .iter()
            .map(|&b| Arc::clone(&self.buffers[b]))
            .collect();
        for place in leaves.iter_mut() {
            place.buffer = position[place.buffer];
        }
        for output in outputs.iter_mut() {
            output.place.buffer = position[output.place.buffer];
            if let Start::Copied { from, .. } = &mut output.start {
                from.buffer = position[from.buffer];
            }
        }
        // Only results written over leaves share a buffer (new results and targets have one
        // each), and those keep every iteration axis.
        for k in 0..outputs.len() {
            let shared = (outputs.iter().enumerate())
                .any(|(j, other)| j != k && other.place.buffer == outputs[k].place.buffer);
            if shared && outputs[k].staged.is_none() {
                let output = &mut outputs[k];
                output.staged = Some(Staged {
                    lens: lens.clone(),
                    strides: row_major_strides(&lens).into(),
                    to: output.place.strides.clone(),
                });
            }
        }
        let mut written = vec![false; buffers.len()];
        for output in outputs.iter().filter(|o| o.staged.is_none()) {
            written[output.place.buffer] = true;
        }
        let leaves = (leaves.into_iter())
            .map(|place| Leaf {
                copied: written[place.buffer],
                place,
            })
            .collect();
        Launch {
            program,
            lens,
            buffers,
            written,
            leaves,
            outputs,
        }
    }
}

impl Launch {
    /// `job` (one result, over merged axes) into a new buffer, row-major over its kept axes.
    pub(super) fn new_result(job: &OutputJob<'_>) -> Result<Launch> {
        let (job, _) = job.merged(None);
        let program = compiled(&job)?;
        let mut b = Builder::new();
        let leaves = b.places(&job.leaves)?;
        let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
        let fresh = new_buffer(job.out, count_of(&job.kept)?)?;
        let mut strides: Strides = row_major_strides(&job.kept).into();
        strides.resize(lens.len(), 0);
        let combine = (!job.reduced.is_empty()).then_some(job.reduce);
        let output = Output {
            place: Place {
                buffer: b.index(&fresh),
                dtype: job.out,
                offset: 0,
                strides,
            },
            combine,
            start: combine.map_or(Start::Kept, Start::Identity),
            staged: None,
        };
        Ok(b.finish(program, lens, leaves, vec![output]))
    }

    /// Every result of `job` into a new buffer of its own, row-major over its kept axes.
    pub(super) fn new_results(job: &Job<'_>) -> Result<Launch> {
        let program = compiled_multi(job)?;
        let counts = job.output_counts()?;
        let mut b = Builder::new();
        let leaves = b.places(&job.leaves)?;
        let rank = job.lens.len();
        let mut outputs = Vec::with_capacity(counts.len());
        for (output, &count) in job.outputs.iter().zip(&counts) {
            let fresh = new_buffer(job.out, count)?;
            let accumulates = output.start.is_some() || output.kept.len() < rank;
            let combine = accumulates.then_some(output.reduce);
            let start = match &output.start {
                Some(start) => Start::Copied {
                    from: Place {
                        strides: output.kept.iter().map(|&a| start.strides[a]).collect(),
                        ..b.place(start)?
                    },
                    lens: output.kept.iter().map(|&a| job.lens[a]).collect(),
                },
                None => combine.map_or(Start::Kept, Start::Identity),
            };
            outputs.push(Output {
                place: Place {
                    buffer: b.index(&fresh),
                    dtype: job.out,
                    offset: 0,
                    strides: kept_strides(rank, &output.kept, &job.lens),
                },
                combine,
                start,
                staged: None,
            });
        }
        Ok(b.finish(program, job.lens.clone(), leaves, outputs))
    }

    /// Result `k` of `job` over the elements of leaf `over[k]` ([`Job::check_in_place`]
    /// checked by the caller).
    pub(super) fn over(job: &Job<'_>, over: &[usize]) -> Result<Launch> {
        let program = compiled_multi(job)?;
        let mut b = Builder::new();
        let leaves = b.places(&job.leaves)?;
        let outputs = (over.iter())
            .map(|&k| Output {
                place: leaves[k].clone(),
                combine: None,
                start: Start::Kept,
                staged: None,
            })
            .collect();
        Ok(b.finish(program, job.lens.clone(), leaves, outputs))
    }

    /// `job` (one result, over merged axes) into `target` (checked by the caller).
    pub(super) fn into_target(job: &OutputJob<'_>, target: &JobTarget<'_>) -> Result<Launch> {
        let (job, to) = job.merged(Some(&target.strides));
        let to = to.ok_or_else(|| bug("no strides for its target"))?;
        let program = compiled(&job)?;
        let mut b = Builder::new();
        let leaves = b.places(&job.leaves)?;
        let lens: Vec<usize> = job.kept.iter().chain(&job.reduced).copied().collect();
        let mut strides: Strides = to.as_slice().into();
        strides.resize(lens.len(), 0);
        // A reduction starts from its identity, which the target's region does not hold.
        let reduces = !job.reduced.is_empty();
        let staged = reduces.then(|| {
            let mut own: Strides = row_major_strides(&job.kept).into();
            own.resize(lens.len(), 0);
            Staged {
                lens: job.kept.clone(),
                strides: own,
                to: to.into(),
            }
        });
        let output = Output {
            place: Place {
                buffer: b.index(buffer_of(target.memory)?),
                dtype: job.out,
                offset: target.offset,
                strides,
            },
            combine: reduces.then_some(job.reduce),
            start: Start::Kept,
            staged,
        };
        Ok(b.finish(program, lens, leaves, vec![output]))
    }

    /// A handle on result `k`'s buffer.
    pub(super) fn result(&self, k: usize) -> DeviceMemory {
        handle(&self.buffers[self.outputs[k].place.buffer])
    }

    /// The number of results.
    pub(super) fn results(&self) -> usize {
        self.outputs.len()
    }

    /// Runs the job: its results' starting values, then the program over the iteration
    /// space, then the staged results copied to their places.
    pub(super) fn run(&self) -> Result<()> {
        let mut guards = Guards::lock(&self.buffers);
        for output in self.outputs.iter().filter(|o| o.staged.is_none()) {
            let place = &output.place;
            match &output.start {
                Start::Kept => {}
                Start::Identity(op) => interp::fill(
                    elements_mut(guards.bytes_mut(place.buffer), place.dtype)?,
                    Some(*op),
                ),
                Start::Copied { from, lens } => {
                    let (reads, mut writes) = guards.split(|at| at == place.buffer);
                    let (Some(source), Some(sink)) =
                        (reads[from.buffer], writes[place.buffer].take())
                    else {
                        return Err(bug("starting values in the result's own buffer"));
                    };
                    interp::run(
                        &Program::copy(from.dtype),
                        lens,
                        &[StridedSource {
                            data: elements(source, from.dtype)?,
                            offset: from.offset,
                            strides: from.strides.clone(),
                        }],
                        &mut [StridedSink {
                            data: elements_mut(sink, place.dtype)?,
                            offset: 0,
                            strides: row_major_strides(lens).into(),
                            combine: None,
                        }],
                    )?;
                }
            }
        }
        if self.lens.contains(&0) {
            return Ok(());
        }
        // Built by pushing, not collected: these lists are large and moving them costs.
        let mut copies: SmallVec<[Option<SpanCopy>; 8]> = SmallVec::new();
        for leaf in &self.leaves {
            let copy = if leaf.copied {
                Some(span_copy(
                    guards.bytes(leaf.place.buffer),
                    &leaf.place,
                    &self.lens,
                )?)
            } else {
                None
            };
            copies.push(copy);
        }
        let mut staged: SmallVec<[Option<Values>; 4]> = SmallVec::new();
        for output in &self.outputs {
            staged.push(match &output.staged {
                Some(s) => Some(Values::filled(
                    output.place.dtype,
                    count_of(&s.lens)?,
                    output.combine,
                )?),
                None => None,
            });
        }
        {
            let (reads, mut writes) = guards.split(|at| self.written[at]);
            let mut sources: SmallVec<[StridedSource<'_>; 8]> = SmallVec::new();
            for (leaf, copy) in self.leaves.iter().zip(&copies) {
                let place = &leaf.place;
                sources.push(match copy {
                    Some(copy) => StridedSource {
                        data: elements(&copy.bytes, place.dtype)?,
                        offset: place.offset - copy.first,
                        strides: place.strides.clone(),
                    },
                    None => StridedSource {
                        data: elements(
                            reads[place.buffer].ok_or_else(|| bug("a leaf read in place"))?,
                            place.dtype,
                        )?,
                        offset: place.offset,
                        strides: place.strides.clone(),
                    },
                });
            }
            let mut sinks: SmallVec<[StridedSink<'_>; 4]> = SmallVec::new();
            for (output, own) in self.outputs.iter().zip(&mut staged) {
                let place = &output.place;
                sinks.push(match (own, &output.staged) {
                    (Some(own), Some(staged)) => StridedSink {
                        data: own.elements_mut(),
                        offset: 0,
                        strides: staged.strides.clone(),
                        combine: output.combine,
                    },
                    _ => StridedSink {
                        data: elements_mut(
                            (writes[place.buffer].take())
                                .ok_or_else(|| bug("one result per buffer written"))?,
                            place.dtype,
                        )?,
                        offset: place.offset,
                        strides: place.strides.clone(),
                        combine: output.combine,
                    },
                });
            }
            interp::run(&self.program, &self.lens, &sources, &mut sinks)?;
        }
        for (output, own) in self.outputs.iter().zip(&staged) {
            let (Some(own), Some(staged)) = (own, &output.staged) else {
                continue;
            };
            let place = &output.place;
            interp::run(
                &Program::copy(place.dtype),
                &staged.lens,
                &[StridedSource {
                    data: own.elements(),
                    offset: 0,
                    strides: row_major_strides(&staged.lens).into(),
                }],
                &mut [StridedSink {
                    data: elements_mut(guards.bytes_mut(place.buffer), place.dtype)?,
                    offset: place.offset,
                    strides: staged.to.clone(),
                    combine: None,
                }],
            )?;
        }
        Ok(())
    }
}

/// An error for a broken invariant of a launch (never expected).
fn bug(what: &str) -> Error {
    Error::Unsupported {
        what: format!("a CPU backend job with {what} (a bug)"),
    }
}

/// A copy of the elements a leaf reaches, for a job that writes the leaf's buffer.
struct SpanCopy {
    bytes: HostVec<u8>,
    /// The position in the buffer of the copy's first element.
    first: usize,
}

/// A copy of the bytes of the elements `place` reaches over `lens` (none 0); an error where
/// they leave `bytes`.
fn span_copy(bytes: &[u8], place: &Place, lens: &[usize]) -> Result<SpanCopy> {
    let (low, high) = (place.strides.iter().zip(lens)).fold(
        (place.offset as i128, place.offset as i128),
        |(low, high), (&stride, &len)| {
            let far = stride as i128 * (len as i128 - 1);
            (low + far.min(0), high + far.max(0))
        },
    );
    let size = place.dtype.size() as i128;
    if low < 0 || (high + 1) * size > bytes.len() as i128 {
        return Err(Error::Unsupported {
            what: "an operand layout that leaves its buffer".into(),
        });
    }
    let first = low as usize;
    let span = &bytes[first * place.dtype.size()..(high as usize + 1) * place.dtype.size()];
    Ok(SpanCopy {
        bytes: storage::copied(span)?,
        first,
    })
}
