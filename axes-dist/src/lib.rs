//! Data-parallel training for `axes` over MPI.
//!
//! Every process (rank) holds the whole model and trains on its shard of each global batch,
//! split along a named axis ([`Communicator::shard`]); after the backward pass one call,
//! [`Communicator::average_gradient`], all-reduces the gradient of every parameter at once (the
//! parameter arena's gradient is one buffer), so every rank takes the same optimizer step and
//! the parameters stay identical. [`Communicator::single`] is the default: the same training
//! code runs as one process without a launcher, and [`Communicator::from_launcher`] picks MPI
//! when `mpiexec` started the process.
//!
//! With the cargo feature `nccl`, `Communicator::with_nccl(ordinal)` adds NCCL on a CUDA
//! device: tensors and the gradient that live there are then all-reduced and broadcast by
//! NCCL on the device (queued on its stream, no copy through the host), bootstrapped by one
//! MPI broadcast of NCCL's token. Status: compiled, and tested where it cannot start (no NCCL,
//! no GPU: an error on every rank, naming the rank) in CI; **not yet run on a GPU**.
//!
//! ```
//! use axes::prelude::*;
//! use axes_dist::Communicator;
//! #[derive(Axis)] struct Batch;
//! let comm = Communicator::single();
//! assert_eq!((comm.rank(), comm.size()), (0, 1));
//! let x = Tensor::<f32, (Batch,)>::from_vec(Batch.len(4), vec![1., 2., 3., 4.])?;
//! assert_eq!(comm.shard::<Batch, _, _>(&x)?.to_vec(), [1., 2., 3., 4.]); // one rank: all of it
//! assert_eq!(comm.all_reduce_mean(&x)?.to_vec(), [1., 2., 3., 4.]);
//! # Ok::<(), axes_dist::Error>(())
//! ```
//!
//! # Cost
//!
//! A ring all-reduce of `B` bytes over `N` ranks moves `2 (N − 1) / N · B` bytes through each
//! rank's link and takes `2 (N − 1)` latency steps. Strong scaling (a fixed global batch) cuts
//! each rank's compute to `1/N` of one process's step, while this cost grows toward `2 B /
//! bandwidth`; communication dominates where the two meet:
//!
//! | model (gradient) | one-process step | 10 GbE (1.25 GB/s, ~20 µs) | 100 Gb InfiniBand (12.5 GB/s, ~2 µs) | NVLink (~300 GB/s, ~2 µs) |
//! |---|---|---|---|---|
//! | digits MLP 64-256-256-10 (85k f32, 0.34 MB) | ≈ 1 ms (2 cores) | 0.27 ms at N = 2, → 0.54 ms: dominates from N ≈ 2–4 | 0.03–0.05 ms: from N ≈ 16 | latency-bound (~2 µs per hop): from N ≈ 30 |
//! | GPT 4×128, context 128, batch 32 (828k f32, 3.3 MB) | ≈ 1 s (2 cores) | 2.7–5.3 ms: never below N ≈ 100 | 0.3–0.5 ms | ≈ 0.02 ms |
//!
//! (Bandwidths and latencies are the links' nominal figures; the step times were measured on
//! this project's 2-core machine.) One all-reduce of the whole gradient after the backward
//! pass is what this crate does; splitting it into buckets reduced while the backward pass
//! still runs (not done here) would hide up to the backward pass's share of the step (about
//! 60%) behind the transfer.

use axes::nn::{Gradient, Params};
use axes::prelude::*;
use axes::{Float, Layout, Storage};
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::topology::{Communicator as _, SimpleCommunicator};

/// What can go wrong between processes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error of a tensor operation.
    #[error(transparent)]
    Axes(#[from] axes::Error),
    /// MPI could not be started.
    #[error("MPI could not be initialised: {0}")]
    Init(String),
    /// NCCL could not start on a rank (see [`Communicator::with_nccl`]).
    #[error("NCCL could not start on rank {rank}: {reason}")]
    NcclUnavailable {
        /// The first rank where it could not.
        rank: usize,
        /// Why (on that rank; the others point to it).
        reason: String,
    },
    /// The ranks' models differ.
    #[error("the parameters differ between rank 0 and rank {rank}: {what}")]
    ParamsDiffer {
        /// The first rank whose parameters differ from rank 0's.
        rank: usize,
        /// The first difference.
        what: String,
    },
    /// A batch that does not split evenly across the ranks.
    #[error(
        "cannot shard axis `{axis}` of length {len} evenly across {ranks} ranks; use a length \
         divisible by {ranks}"
    )]
    UnevenShard {
        /// The axis.
        axis: String,
        /// Its length.
        len: usize,
        /// The number of ranks.
        ranks: usize,
    },
}

/// The result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;

/// The processes training one model together: this one's rank and how many there are, and the
/// collective operations between them.
pub struct Communicator {
    world: Option<World>,
    /// NCCL on this rank's CUDA device, for the tensors that live there.
    #[cfg(feature = "nccl")]
    nccl: Option<axes_backends::nccl::Nccl>,
}

/// An initialised MPI: the universe (finalised when dropped) and its world communicator.
struct World {
    comm: SimpleCommunicator,
    _universe: Universe,
}

impl Communicator {
    /// One process on its own: every collective returns its input.
    pub fn single() -> Self {
        Communicator {
            world: None,
            #[cfg(feature = "nccl")]
            nccl: None,
        }
    }

    /// MPI when a launcher (`mpiexec`, `mpirun`, `srun`) started this process, else
    /// [`Communicator::single`].
    pub fn from_launcher() -> Result<Self> {
        let launched = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if launched {
            Self::mpi()
        } else {
            Ok(Self::single())
        }
    }

    /// The world of MPI processes (initialising MPI; an error if it already was).
    pub fn mpi() -> Result<Self> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| Error::Init("it was initialised already".into()))?;
        Ok(Communicator {
            world: Some(World {
                comm: universe.world(),
                _universe: universe,
            }),
            #[cfg(feature = "nccl")]
            nccl: None,
        })
    }

    /// This communicator with NCCL on CUDA device `ordinal` (cargo feature `nccl`): tensors
    /// and gradients on that device are then reduced and broadcast on the device by NCCL,
    /// queued on its stream, never copied through the host; tensors elsewhere still go
    /// through MPI. Every rank calls it, each with its own device (NCCL takes one rank per
    /// GPU). Rank 0 makes NCCL's rendezvous token and MPI broadcasts it. When a rank cannot
    /// start NCCL (no library, no such device), every rank returns
    /// [`Error::NcclUnavailable`] naming it, instead of waiting for it.
    ///
    /// Compiled and tested for a missing NCCL in CI, which has no GPU; not yet run on one.
    ///
    /// ```
    /// let comm = axes_dist::Communicator::single();
    /// if let Err(why) = comm.with_nccl(0) {
    ///     assert!(why.to_string().contains("NCCL could not start on rank 0"));
    /// }
    /// ```
    #[cfg(feature = "nccl")]
    pub fn with_nccl(mut self, ordinal: usize) -> Result<Self> {
        use axes_backends::nccl::{Nccl, NcclId, nccl_available};
        let mine = nccl_available()
            .and_then(|()| axes_backends::cuda::Cuda::shared(ordinal).map(drop))
            .and_then(|()| self.is_root().then(NcclId::new).transpose());
        if let Some(rank) = self.first_flagged(mine.is_err()) {
            let reason = match mine {
                Err(why) if rank == self.rank() => why.to_string(),
                _ => format!("see rank {rank}'s message"),
            };
            return Err(Error::NcclUnavailable { rank, reason });
        }
        let mut token = mine?.map_or([0; 128], NcclId::to_bytes);
        if let Some(world) = &self.world {
            world.comm.process_at_rank(0).broadcast_into(&mut token[..]);
        }
        let nccl = Nccl::new(ordinal, self.rank(), self.size(), NcclId::from_bytes(token));
        self.nccl = Some(nccl.map_err(|why| Error::NcclUnavailable {
            rank: self.rank(),
            reason: why.to_string(),
        })?);
        Ok(self)
    }

    /// NCCL, when this communicator has it on `device`.
    #[cfg(feature = "nccl")]
    fn nccl_on(&self, device: axes::Device) -> Option<&axes_backends::nccl::Nccl> {
        self.nccl.as_ref().filter(|nccl| nccl.device() == device)
    }

    /// The first rank whose `flag` is set (every rank passes its own), on every rank.
    fn first_flagged(&self, flag: bool) -> Option<usize> {
        let Some(world) = &self.world else {
            return flag.then_some(0);
        };
        let mut flags = vec![0u8; self.size()];
        world.comm.all_gather_into(&u8::from(flag), &mut flags[..]);
        flags.iter().position(|&f| f != 0)
    }

    /// This process's rank, in `0..size`.
    pub fn rank(&self) -> usize {
        self.world.as_ref().map_or(0, |w| w.comm.rank() as usize)
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.world.as_ref().map_or(1, |w| w.comm.size() as usize)
    }

    /// Whether this is rank 0 (the one that prints and writes files).
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Waits until every rank has called it (for timing: what a collective waits for the
    /// slowest rank, apart from what it transfers).
    pub fn barrier(&self) {
        if let Some(world) = &self.world {
            world.comm.barrier();
        }
    }

    /// This rank's part of `t` along the axis `X`: the `rank`-th of `size` equal stretches (a
    /// view). A length that does not divide evenly is an error; naming an axis `t` lacks, a
    /// compile error.
    pub fn shard<X: Axis, T: Element, A: AxisSet + HasAxis<X>>(
        &self,
        t: &Tensor<T, A>,
    ) -> Result<Tensor<T, A>> {
        let (len, ranks) = (t.len_of::<X>(), self.size());
        if len % ranks != 0 {
            return Err(Error::UnevenShard {
                axis: X::name().into_owned(),
                len,
                ranks,
            });
        }
        let part = len / ranks;
        let start = self.rank() * part;
        Ok(t.slice::<X>(start..start + part, 1)?)
    }

    /// The element-wise sum of `t` over every rank, on every rank (on `t`'s device).
    pub fn all_reduce_sum<T, A>(&self, t: &Tensor<T, A>) -> Result<Tensor<T, A>>
    where
        T: Float + Equivalence,
        A: AxisSet,
    {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = self.nccl_on(t.device()) {
            use axes_backends::nccl::Reduction::Sum;
            return through_buffer(t, |buffer| nccl.all_reduce(buffer, Sum));
        }
        let summed = self.all_reduce_values(t.try_to_vec()?);
        Ok(like(t, summed)?)
    }

    /// The element-wise mean of `t` over every rank, on every rank.
    pub fn all_reduce_mean<T, A>(&self, t: &Tensor<T, A>) -> Result<Tensor<T, A>>
    where
        T: Float + Equivalence,
        A: AxisSet,
    {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = self.nccl_on(t.device()) {
            use axes_backends::nccl::Reduction::Mean;
            return through_buffer(t, |buffer| nccl.all_reduce(buffer, Mean));
        }
        let mut values = self.all_reduce_values(t.try_to_vec()?);
        scale(&mut values, self.size());
        Ok(like(t, values)?)
    }

    /// Rank `root`'s `t`, on every rank (`t` must have the same lengths everywhere).
    pub fn broadcast<T, A>(&self, t: &Tensor<T, A>, root: usize) -> Result<Tensor<T, A>>
    where
        T: Element + Equivalence,
        A: AxisSet,
    {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = self.nccl_on(t.device()) {
            return through_buffer(t, |buffer| nccl.broadcast(buffer, root));
        }
        let mut values = t.try_to_vec()?;
        if let Some(world) = &self.world {
            world
                .comm
                .process_at_rank(root as i32)
                .broadcast_into(&mut values[..]);
        }
        Ok(like(t, values)?)
    }

    /// Every rank's `t` joined along the axis `X` in rank order (the other axes must have the
    /// same lengths on every rank; `X` may differ).
    pub fn all_gather<X, T, A>(&self, t: &Tensor<T, A>) -> Result<Tensor<T, A>>
    where
        X: Axis,
        T: Float + Equivalence,
        A: AxisSet + HasAxis<X>,
    {
        let Some(world) = &self.world else {
            return Ok(t.clone());
        };
        let lens = t.lens().to_vec();
        let axis = <A as HasAxis<X>>::POS;
        let mut lengths = vec![0u64; self.size()];
        world
            .comm
            .all_gather_into(&(lens[axis] as u64), &mut lengths[..]);
        // Gathered in X-major order, then each rank's block read back in `A`'s order.
        let mine = t.to_vec_moved_first::<X>();
        let rest: usize = (lens.iter().enumerate())
            .filter(|&(a, _)| a != axis)
            .map(|(_, &l)| l)
            .product();
        let counts: Vec<i32> = lengths
            .iter()
            .map(|&l| (l as usize * rest) as i32)
            .collect();
        let displs: Vec<i32> = (counts.iter())
            .scan(0, |at, &c| {
                let here = *at;
                *at += c;
                Some(here)
            })
            .collect();
        let mut all = vec![T::zero(); counts.iter().map(|&c| c as usize).sum()];
        {
            let mut partition =
                mpi::datatype::PartitionMut::new(&mut all[..], counts.clone(), &displs[..]);
            world
                .comm
                .all_gather_varcount_into(&mine[..], &mut partition);
        }
        let parts: Vec<Tensor<T, A>> = (lengths.iter().zip(&displs))
            .map(|(&l, &at)| {
                let mut part_lens = lens.clone();
                part_lens[axis] = l as usize;
                let count = l as usize * rest;
                from_moved_first(&all[at as usize..at as usize + count], &part_lens, axis)
            })
            .collect::<axes::Result<_>>()?;
        let refs: Vec<&Tensor<T, A>> = parts.iter().collect();
        Ok(Tensor::concat::<X>(&refs)?.to(&t.device())?)
    }

    /// The gradient of every parameter averaged over the ranks, in one all-reduce of the whole
    /// buffer: call it after the backward pass, before the optimizer's step.
    pub fn average_gradient<T>(&self, params: &Params<T>, grad: Gradient<T>) -> Result<Gradient<T>>
    where
        T: Float + Equivalence,
    {
        if self.world.is_none() {
            return Ok(grad);
        }
        #[cfg(feature = "nccl")]
        if let Some(nccl) = self.nccl_on(grad.device()) {
            let mean = nccl.all_reduce(grad.storage(), axes_backends::nccl::Reduction::Mean)?;
            return Ok(grad.replaced(mean)?);
        }
        let mut values = self.all_reduce_values(grad.to_vec()?);
        scale(&mut values, self.size());
        Ok(Gradient::from_vec(params, values)?)
    }

    /// Checks that every rank's model has the same parameters (names, axes, lengths, element
    /// type) as rank 0's, so that a mismatch is an error on every rank, naming the first
    /// difference, instead of a collective that waits forever. Call it once before training.
    pub fn check_same_params<T: Float>(&self, params: &Params<T>) -> Result<()> {
        let Some(world) = &self.world else {
            return Ok(());
        };
        let mine = params.describe().join("\n");
        let root = world.comm.process_at_rank(0);
        let mut len = mine.len() as u64;
        root.broadcast_into(&mut len);
        let mut bytes = if self.is_root() {
            mine.clone().into_bytes()
        } else {
            vec![0u8; len as usize]
        };
        root.broadcast_into(&mut bytes[..]);
        let theirs = String::from_utf8_lossy(&bytes).into_owned();
        let difference = first_difference(&theirs, &mine);
        let Some(rank) = self.first_flagged(difference.is_some()) else {
            return Ok(());
        };
        let what = match difference {
            Some(what) if rank == self.rank() => what,
            _ => format!("see rank {rank}'s message"),
        };
        Err(Error::ParamsDiffer { rank, what })
    }

    /// Rank 0's parameters on every rank (so that training starts from the same values
    /// however each rank initialised them).
    pub fn broadcast_params<T: Float + Equivalence>(&self, params: &mut Params<T>) -> Result<()> {
        let Some(world) = &self.world else {
            return Ok(());
        };
        let device = params.device();
        #[cfg(feature = "nccl")]
        if let Some(nccl) = self.nccl_on(device) {
            let rank0 = nccl.broadcast(params.arena().storage(), 0)?;
            params.arena_mut().replace_storage(rank0)?;
            return Ok(());
        }
        let mut host = params.to(&axes::Device::Cpu)?;
        world
            .comm
            .process_at_rank(0)
            .broadcast_into(host.arena_mut().flat_mut());
        *params = host.to(&device)?;
        Ok(())
    }

    /// The element-wise sum of `values` over every rank.
    fn all_reduce_values<T: Float + Equivalence>(&self, values: Vec<T>) -> Vec<T> {
        let Some(world) = &self.world else {
            return values;
        };
        let mut sum = vec![T::zero(); values.len()];
        world
            .comm
            .all_reduce_into(&values[..], &mut sum[..], SystemOperation::sum());
        sum
    }
}

/// A tensor with `t`'s lengths whose buffer is `collective` of a buffer holding exactly
/// `t`'s elements in row-major order (`t`'s own when it is one, else a copy on its device).
#[cfg(feature = "nccl")]
fn through_buffer<T: Element, A: AxisSet>(
    t: &Tensor<T, A>,
    collective: impl FnOnce(&Storage<T>) -> axes::Result<Storage<T>>,
) -> Result<Tensor<T, A>> {
    let dense = Layout::row_major(t.lens());
    let t = if *t.layout() == dense && t.storage().len() == t.element_count() {
        t.clone()
    } else {
        t.contiguous()?
    };
    let storage = collective(t.storage())?;
    Ok(Tensor::from_parts(storage, dense).expect("as many elements"))
}

/// `values` divided by `ranks`.
fn scale<T: Float>(values: &mut [T], ranks: usize) {
    let n = T::from_f64(ranks as f64);
    for v in values {
        *v = v.div(n);
    }
}

/// A tensor with `t`'s lengths holding `values` (row-major in `A`'s order), on `t`'s device.
fn like<T: Element, A: AxisSet>(t: &Tensor<T, A>, values: Vec<T>) -> axes::Result<Tensor<T, A>> {
    Tensor::from_parts(Storage::new(values), Layout::row_major(t.lens()))
        .expect("as many values as elements")
        .to(&t.device())
}

/// A tensor of lengths `lens` (in `A`'s order) from `values` laid out with axis `axis` first.
fn from_moved_first<T: Element, A: AxisSet>(
    values: &[T],
    lens: &[usize],
    axis: usize,
) -> axes::Result<Tensor<T, A>> {
    let order: Vec<usize> = std::iter::once(axis)
        .chain((0..lens.len()).filter(|&a| a != axis))
        .collect();
    let stored: Vec<usize> = order.iter().map(|&a| lens[a]).collect();
    // Axis `a` of `A` is axis `position of a in order` of the stored layout.
    let back: Vec<usize> = (0..lens.len())
        .map(|a| order.iter().position(|&o| o == a).expect("a permutation"))
        .collect();
    let layout = Layout::row_major(&stored).permuted(&back);
    Ok(Tensor::from_parts(Storage::new(values.to_vec()), layout)
        .expect("as many values as elements"))
}

/// Extension for gathering: a tensor's values with one axis moved first.
trait MovedFirst<T> {
    fn to_vec_moved_first<X: Axis>(&self) -> Vec<T>;
}

impl<T: Element, A: AxisSet> MovedFirst<T> for Tensor<T, A> {
    fn to_vec_moved_first<X: Axis>(&self) -> Vec<T> {
        let axis = (A::IDS.iter())
            .position(|&id| id == std::any::TypeId::of::<X>())
            .expect("the axis is one of the tensor's");
        let order: Vec<usize> = std::iter::once(axis)
            .chain((0..A::RANK).filter(|&a| a != axis))
            .collect();
        let values = self.to_vec();
        let layout = Layout::row_major(self.lens()).permuted(&order);
        layout
            .positions()
            .map(|p| values[p.expect("a row-major layout has no padding")])
            .collect()
    }
}

/// The first line where `theirs` (rank 0's description) and `mine` differ, described.
fn first_difference(theirs: &str, mine: &str) -> Option<String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (theirs.lines().collect(), mine.lines().collect());
    for k in 0..a.len().max(b.len()) {
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => {
                return Some(format!("parameter {k}: rank 0 has `{x}`, this rank `{y}`"));
            }
            (Some(x), None) => {
                return Some(format!(
                    "rank 0 has parameter {k} `{x}`, this rank has {} parameters",
                    b.len()
                ));
            }
            (None, Some(y)) => {
                return Some(format!(
                    "this rank has parameter {k} `{y}`, rank 0 has {} parameters",
                    a.len()
                ));
            }
            (None, None) => unreachable!(),
        }
    }
    None
}
