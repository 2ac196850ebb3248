//! Parameters: typed tensors at offsets of one arena buffer, with names and initialisers.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use crate::arena::{Arena, ArenaBuilder, Slot};
use crate::autodiff::{Grads, Tape, Var};
use axes_macros::Axis;

use crate::dispatch::{assembled, filled, placed};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::Scalar;
use crate::io::axis_names;
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::named::NamedLengths;
use crate::num::Float;
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// How a parameter starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// All zeros (biases).
    Zeros,
    /// All ones (the gains of normalisations).
    Ones,
    /// He (Kaiming) normal: standard deviation `sqrt(2 / fan_in)`, for ReLU layers.
    He,
    /// Glorot (Xavier) normal: standard deviation `sqrt(2 / (fan_in + fan_out))`.
    Glorot,
    /// Normal with this standard deviation.
    Normal(f64),
    /// Uniform on `[-bound, bound]`; PyTorch starts its convolutions' and linear layers'
    /// weights and biases with `bound = 1/√fan_in`.
    Uniform(f64),
}

/// One parameter's description.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) axes: Vec<String>,
    pub(crate) init: Init,
    pub(crate) fan_in: usize,
    pub(crate) fan_out: usize,
}

/// Collects a model's parameters (see [`crate::nn::Linear::new`]), then allocates them all in
/// one arena with [`ParamsBuilder::build`].
#[derive(Default)]
pub struct ParamsBuilder {
    arena: ArenaBuilder,
    entries: Vec<Entry>,
}

impl ParamsBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves a parameter named `name` (unique, and not `__metadata__`, which safetensors
    /// files reserve) with axes `A`, started by `init`. `fan_in`/`fan_out` are the input and
    /// output sizes the He and Glorot rules use.
    pub fn add<A: AxisSet>(
        &mut self,
        name: &str,
        lengths: impl NamedLengths<Axes: SameAxes<A>>,
        init: Init,
        fan_in: usize,
        fan_out: usize,
    ) -> Result<Slot<A>> {
        if self.entries.iter().any(|e| e.name == name) {
            return Err(Error::ParameterMismatch {
                name: name.into(),
                reason: "a parameter of this name already exists".into(),
            });
        }
        crate::io::check_tensor_name(name)?;
        let slot = self.arena.add::<A, f32>(lengths)?;
        self.entries.push(Entry {
            name: name.into(),
            axes: axis_names::<A>(),
            init,
            fan_in,
            fan_out,
        });
        Ok(slot)
    }

    /// Allocates every parameter in one buffer and initialises it (reproducibly from `seed`).
    pub fn build<T: Float>(self, seed: u64) -> Result<Params<T>> {
        let mut arena = self.arena.build(T::zero());
        let layouts: Vec<Layout> = arena.layouts().to_vec();
        let flat = arena.flat_mut();
        for (k, (entry, layout)) in self.entries.iter().zip(&layouts).enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9E37_79B9));
            let cannot = |what: String| Error::ParameterMismatch {
                name: entry.name.clone(),
                reason: format!("cannot initialise from {what}"),
            };
            let std = match entry.init {
                Init::Zeros => continue,
                Init::Ones => {
                    for pos in layout.positions() {
                        flat[pos.expect("arena layouts are not padded")] = T::one();
                    }
                    continue;
                }
                Init::Uniform(bound) => {
                    if !(bound.is_finite() && bound >= 0.0) {
                        return Err(cannot(format!("a uniform distribution on ±{bound}")));
                    }
                    for pos in layout.positions() {
                        let u: f64 = rand::Rng::random_range(&mut rng, -1.0..=1.0);
                        flat[pos.expect("arena layouts are not padded")] = T::from_f64(u * bound);
                    }
                    continue;
                }
                Init::He => (2.0 / entry.fan_in.max(1) as f64).sqrt(),
                Init::Glorot => (2.0 / (entry.fan_in + entry.fan_out).max(1) as f64).sqrt(),
                Init::Normal(std) => std,
            };
            let invalid = !(std.is_finite() && std >= 0.0);
            let normal = Normal::new(0.0, std)
                .ok()
                .filter(|_| !invalid)
                .ok_or_else(|| cannot(format!("a normal distribution with std {std}")))?;
            for pos in layout.positions() {
                flat[pos.expect("arena layouts are not padded")] =
                    T::from_f64(normal.sample(&mut rng));
            }
        }
        Ok(Params {
            arena,
            entries: self.entries,
            working: Mutex::new(None),
        })
    }
}

/// A model's parameters: every tensor at its offset of one arena buffer, so that an optimizer
/// updates them all in one pass.
pub struct Params<T: Float> {
    pub(crate) arena: Arena<T>,
    pub(crate) entries: Vec<Entry>,
    /// The parameters rounded to a narrower type for [`Params::bind_as`], where one was asked
    /// for.
    working: Mutex<Option<WorkingCopy<T>>>,
}

/// The parameters rounded to a narrower type (mixed precision's 16-bit weights): its buffer,
/// and whether it holds the parameters' current values (an optimizer's step rewrites it; any
/// other write to the arena leaves it stale until the next [`Params::bind_as`]).
struct WorkingCopy<T> {
    buffer: Box<dyn Narrowed<T>>,
    current: bool,
}

/// A buffer laid out like a parameter arena of `T`, in a narrower type (type-erased, so that
/// an optimizer rewrites it without knowing the type).
trait Narrowed<T>: Send + Sync {
    /// Writes `master` rounded to this buffer's type over this buffer, on its device.
    fn rewrite(&mut self, master: &Storage<T>) -> Result<()>;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Float, H: Float> Narrowed<T> for Storage<H> {
    fn rewrite(&mut self, master: &Storage<T>) -> Result<()> {
        // Moved into the tensor written, so that the write lands in this buffer where nothing
        // else holds it (a tensor from an earlier binding keeps its values: copy-on-write).
        let mut into = flat(std::mem::replace(self, Storage::new(Vec::new())));
        into.assign(flat(master.clone()).cast::<H>())?;
        *self = into.storage().clone();
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<T: Float> Params<T> {
    /// The parameter `slot`'s current values (a view of the arena).
    pub fn tensor<A: AxisSet>(&self, slot: &Slot<A>) -> Result<Tensor<T, A>> {
        self.arena.tensor(slot)
    }

    /// These parameters on `device`: the same values, names and handles (a copy unless they
    /// are there already). Training runs where its parameters and data are.
    pub fn to(&self, device: &Device) -> Result<Params<T>> {
        Ok(Params {
            arena: self.arena.to(device)?,
            entries: self.entries.clone(),
            working: Mutex::new(None),
        })
    }

    /// The device holding the parameters.
    pub fn device(&self) -> Device {
        self.arena.device()
    }

    /// The arena holding every parameter.
    pub fn arena(&self) -> &Arena<T> {
        &self.arena
    }

    /// The arena, for writing (see [`Arena::set`]).
    pub fn arena_mut(&mut self) -> &mut Arena<T> {
        if let Some(copy) = self.working_mut() {
            copy.current = false;
        }
        &mut self.arena
    }

    /// The working copy, for writing (none where a thread panicked while writing it).
    fn working_mut(&mut self) -> Option<&mut WorkingCopy<T>> {
        self.working.get_mut().ok()?.as_mut()
    }

    /// Rewrites the working copy of [`Params::bind_as`], where there is one, from the
    /// parameters: an optimizer's step ends with it. One pass reading the parameters and
    /// writing the copy, into the copy's own buffer (a recorded step keeps it).
    /// A copy whose rewrite failed is dropped (the next `bind_as` makes another).
    pub(crate) fn rewrite_working_copy(&mut self) -> Result<()> {
        let master = self.arena.storage().clone();
        let Ok(working) = self.working.get_mut() else {
            return Ok(());
        };
        let Some(copy) = working else {
            return Ok(());
        };
        match copy.buffer.rewrite(&master) {
            Ok(()) => {
                copy.current = true;
                Ok(())
            }
            Err(error) => {
                *working = None;
                Err(error)
            }
        }
    }

    /// These parameters as errors name them: the model's number in this process (one per
    /// [`ParamsBuilder`]; kept by [`Params::to`]), its size and its first and last names.
    pub(crate) fn described(&self) -> String {
        let names = match (self.entries.first(), self.entries.last()) {
            (Some(first), Some(last)) if self.entries.len() > 1 => {
                format!(": `{}` … `{}`", first.name, last.name)
            }
            (Some(only), _) => format!(": `{}`", only.name),
            _ => String::new(),
        };
        format!(
            "the parameters of model #{} ({} elements{names})",
            self.arena.id(),
            self.count()
        )
    }

    /// The number of parameters (elements), gaps between tensors excluded.
    pub fn count(&self) -> usize {
        self.arena
            .layouts()
            .iter()
            .map(|l| l.lens().iter().product::<usize>())
            .sum()
    }

    /// The parameters' names, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// One line per parameter, in order: its name, axes with their lengths, and element type,
    /// e.g. `out.weight (Hidden 8, Class 3) f32` — what two copies of a model must agree on.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::nn::{Init, Linear, ParamsBuilder};
    /// #[derive(Axis)] struct Hidden;
    /// #[derive(Axis)] struct Class;
    /// let mut builder = ParamsBuilder::new();
    /// Linear::<Hidden, Class>::new(&mut builder, "out", Hidden.len(8), Class.len(3), Init::He)?;
    /// let params = builder.build::<f32>(0)?;
    /// assert_eq!(params.describe(), ["out.weight (Hidden 8, Class 3) f32", "out.bias (Class 3) f32"]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn describe(&self) -> Vec<String> {
        (self.entries.iter().zip(self.arena.layouts()))
            .map(|(entry, layout)| {
                let axes: Vec<String> = (entry.axes.iter().zip(layout.lens()))
                    .map(|(axis, len)| format!("{axis} {len}"))
                    .collect();
                format!("{} ({}) {}", entry.name, axes.join(", "), T::DTYPE.name())
            })
            .collect()
    }

    /// Records every parameter on `tape` as a variable; layers take theirs from the result.
    /// [`Bound::gradient`] consumes the binding, so an optimizer's step may follow at once;
    /// variables and tensors still held keep the values they were recorded with.
    pub fn bind(&self, tape: &Tape<T>) -> Bound<'_, T> {
        let arena = self.arena.with_storage(self.arena.storage().clone());
        Bound::new(arena, tape)
    }

    /// Records every parameter on `tape` rounded to `H` — mixed precision: the model runs in
    /// `H` (f16 or bf16: half the bytes of f32 to read and keep), while these parameters stay
    /// the master weights an optimizer updates in `T`. The rounded copy is made at the first
    /// call, and rewritten in place by each optimizer step after it (one pass); the
    /// gradient comes back in `H` ([`Bound::gradient`]), and [`Gradient::widened`] makes it
    /// the gradient of these parameters. With `H` the parameters' own type, this is
    /// [`Params::bind`].
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::autodiff::Tape;
    /// use axes::nn::{Init, ParamsBuilder};
    /// use axes::optim::Adam;
    /// use half::bf16;
    /// #[derive(Axis)] struct Feature;
    /// let mut builder = ParamsBuilder::new();
    /// let w = builder.add::<(Feature,)>("w", Feature.len(2), Init::Ones, 2, 2)?;
    /// let mut params = builder.build::<f32>(0)?;
    /// let mut adam = Adam::new(1e-3);
    /// for _ in 0..3 {
    ///     let tape = Tape::<bf16>::new();
    ///     let p = params.bind_as::<bf16>(&tape)?;
    ///     let loss = p.var(&w)?.square().sum::<(Feature,)>()?;
    ///     let grad = p.gradient(&loss.backward()?)?.widened()?;
    ///     adam.step(&mut params, &grad)?;
    /// }
    /// // The f32 master weights took three steps of 1e-3, which bf16 (8 bits) cannot hold.
    /// assert!((params.tensor(&w)?.to_vec()[0] - 0.997).abs() < 1e-5);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn bind_as<H: Float<Wide = T>>(&self, tape: &Tape<H>) -> Result<Bound<'_, H>> {
        let storage = self.working_storage::<H>()?;
        Ok(Bound::new(self.arena.with_storage(storage), tape))
    }

    /// The buffer of the working copy in `H`: the arena's own where `H` is `T`; else the copy,
    /// made (or made current) here.
    fn working_storage<H: Float>(&self) -> Result<Storage<H>> {
        let master = self.arena.storage();
        if let Some(same) = (master as &dyn Any).downcast_ref::<Storage<H>>() {
            return Ok(same.clone());
        }
        let mut working = self.working.lock().map_err(|_| Error::Unsupported {
            what: "a working copy of parameters whose last rewrite panicked".into(),
        })?;
        let held = |copy: &WorkingCopy<T>| copy.buffer.as_any().is::<Storage<H>>();
        if !working.as_ref().is_some_and(held) {
            let made: Storage<H> = flat(master.clone()).cast::<H>().eval()?.storage().clone();
            *working = Some(WorkingCopy {
                buffer: Box::new(made),
                current: true,
            });
        }
        let copy = working.as_mut().expect("made above");
        if !copy.current {
            if let Err(error) = copy.buffer.rewrite(master) {
                *working = None;
                return Err(error);
            }
            copy.current = true;
        }
        let buffer = copy.buffer.as_any().downcast_ref::<Storage<H>>();
        Ok(buffer.expect("checked above").clone())
    }
}

/// The parameters recorded on one tape: typed variables for the layers, and the gradient of
/// all of them gathered back into the arena's layout.
pub struct Bound<'p, T: Float> {
    /// The parameters' buffer (or their working copy's) and layouts.
    arena: Arena<T>,
    tape: Tape<T>,
    nodes: Vec<usize>,
    /// Borrows the parameters: none may be updated while they are bound.
    params: PhantomData<&'p ()>,
}

impl<T: Float> Bound<'_, T> {
    /// `arena`'s tensors, recorded on `tape`.
    fn new(arena: Arena<T>, tape: &Tape<T>) -> Self {
        let nodes = (0..arena.layouts().len())
            .map(|_| tape.push_leaf())
            .collect();
        Bound {
            arena,
            tape: tape.clone(),
            nodes,
            params: PhantomData,
        }
    }

    /// The variable of parameter `slot` (an error if `slot` belongs to other parameters).
    pub fn var<A: AxisSet>(&self, slot: &Slot<A>) -> Result<Var<T, A>> {
        let value = self.arena.tensor(slot)?;
        Ok(Var::new(
            self.tape.clone(),
            self.nodes[slot.index()],
            true,
            value,
        ))
    }

    /// The tape the parameters are recorded on.
    pub fn tape(&self) -> &Tape<T> {
        &self.tape
    }

    /// The gradient of every parameter, each at its parameter's offset of a buffer laid out
    /// like the arena (zeros where none flowed), on the parameters' device, ready for an
    /// optimizer's step. An error if `grads` come from another tape or a result recorded
    /// before the parameters were bound. Consumes the binding, so the parameters are free to
    /// update right after.
    pub fn gradient(self, grads: &Grads<T>) -> Result<Gradient<T>> {
        if let Some(&last) = self.nodes.last() {
            grads.check(&self.tape, last)?;
        }
        let arena = &self.arena;
        let parts: Vec<_> = (arena.layouts().iter().zip(&self.nodes))
            .filter_map(|(layout, &node)| {
                let buf = grads.buf(node)?;
                Some((buf.storage, buf.layout, *layout))
            })
            .collect();
        Ok(Gradient {
            storage: assembled(arena.device(), arena.len(), &parts)?,
            arena: arena.id(),
            gate: None,
        })
    }
}

/// The gradient of every parameter of a [`Params`], each at its parameter's offset of one
/// buffer laid out like the arena, on the parameters' device: what an optimizer's step
/// takes. [`Bound::gradient`] makes one from a backward pass; [`Gradient::from_vec`] from
/// values.
pub struct Gradient<T: Float> {
    storage: Storage<T>,
    /// The arena it is laid out like.
    arena: u64,
    /// Whether an optimizer takes its step (1) or skips it (0), as a loss scale found the
    /// gradient finite or not: one element on the gradient's device, read there.
    gate: Option<Storage<T>>,
}

impl<T: Float> std::fmt::Debug for Gradient<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gradient({} elements on {})", self.len(), self.device())
    }
}

impl<T: Float> Gradient<T> {
    /// A gradient for `params` from `values`, laid out like the arena (see
    /// [`crate::arena::Arena::layouts`]), placed on the parameters' device; an error unless
    /// there is one value per element of the arena.
    pub fn from_vec(params: &Params<T>, values: Vec<T>) -> Result<Self> {
        let arena = params.arena();
        if values.len() != arena.len() {
            return Err(Error::ElementCount {
                lengths: "the parameter arena".into(),
                expected: arena.len(),
                got: values.len(),
            });
        }
        Ok(Gradient {
            storage: placed(crate::storage::on_boundary(values)?, arena.device())?,
            arena: arena.id(),
            gate: None,
        })
    }

    /// The number of elements (the arena's, gaps included).
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }

    /// The device holding the gradient.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// The values, copied to the host; an error when the device fails.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.storage.host()?.to_vec())
    }

    /// The buffer holding every parameter's gradient, laid out like the arena (for
    /// collectives that reduce it in one call on its device).
    pub fn storage(&self) -> &Storage<T> {
        &self.storage
    }

    /// A gradient for the same parameters holding `storage` instead: what a collective returns
    /// after reducing [`Gradient::storage`]. An error unless `storage` has as many elements and
    /// lives on the same device.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::Storage;
    /// use axes::nn::{Gradient, Init, ParamsBuilder};
    /// #[derive(Axis)] struct Feature;
    /// let mut builder = ParamsBuilder::new();
    /// builder.add::<(Feature,)>("bias", Feature.len(3), Init::Zeros, 3, 3)?;
    /// let params = builder.build::<f32>(7)?;
    /// let grad = Gradient::from_vec(&params, vec![1.0; params.arena().len()])?;
    /// let doubled: Vec<f32> = grad.storage().as_slice().iter().map(|g| 2.0 * g).collect();
    /// let doubled = grad.replaced(Storage::new(doubled))?;
    /// assert_eq!(doubled.to_vec()?[0], 2.0);
    /// assert!(grad.replaced(Storage::new(vec![0.0f32; 1])).is_err());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn replaced(&self, storage: Storage<T>) -> Result<Self> {
        self.storage
            .check_replacement(&storage, "the parameter arena")?;
        Ok(self.with_storage(storage))
    }

    /// Zeros for every parameter of `params`, on their device: where a sum of gradients
    /// starts.
    pub fn zeros(params: &Params<T>) -> Result<Self> {
        let arena = params.arena();
        Ok(Gradient {
            storage: filled(arena.device(), arena.len(), T::zero())?,
            arena: arena.id(),
            gate: None,
        })
    }

    /// The sum of two gradients of the same parameters, in one pass on their device: the
    /// gradient of a batch from its micro-batches' (with [`Gradient::scaled`] for a mean).
    /// Half-precision sums are computed in f32 and rounded once per call. An error if `other`
    /// is for other parameters or on another device.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::nn::{Gradient, Init, ParamsBuilder};
    /// #[derive(Axis)] struct Feature;
    /// let mut builder = ParamsBuilder::new();
    /// builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
    /// let params = builder.build::<f32>(0)?;
    /// let mut sum = Gradient::zeros(&params)?;
    /// for micro in [vec![1.0, 2.0], vec![3.0, 6.0]] {
    ///     sum = sum.add(&Gradient::from_vec(&params, micro)?)?;
    /// }
    /// assert_eq!(sum.scaled(0.5)?.to_vec()?, [2.0, 4.0]); // the mean of the two
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn add(&self, other: &Gradient<T>) -> Result<Self> {
        if other.arena != self.arena {
            return Err(Error::ForeignGradient);
        }
        let sum = (&flat(self.storage.clone()) + &flat(other.storage.clone())).eval()?;
        // Either skipped step skips the sum's.
        let gate = match (&self.gate, &other.gate) {
            (Some(a), Some(b)) => Some((&flat(a.clone()) * &flat(b.clone())).eval()?),
            (a, b) => a.as_ref().or(b.as_ref()).map(|g| flat(g.clone())),
        };
        Ok(Gradient {
            gate: gate.map(|g| g.storage().clone()),
            ..self.with_storage(sum.storage().clone())
        })
    }

    /// Every element times `factor` (computed in f32 for half types), in one pass on the
    /// gradient's device.
    pub fn scaled(&self, factor: f64) -> Result<Self> {
        let g = flat(self.storage.clone());
        let wide = g.cast::<T::Wide>() * Scalar(T::Wide::from_f64(factor));
        let scaled = wide.cast::<T>().eval()?;
        Ok(self.with_storage(scaled.storage().clone()))
    }

    /// A gradient for the same arena holding `storage` (of the same length).
    pub(crate) fn with_storage(&self, storage: Storage<T>) -> Self {
        debug_assert_eq!(storage.len(), self.storage.len());
        Gradient {
            storage,
            arena: self.arena,
            gate: self.gate.clone(),
        }
    }

    /// This gradient in `T`'s [`Float::Wide`] type — f32 for f16 and bf16, itself otherwise:
    /// the gradient of the master weights behind [`Params::bind_as`], which an optimizer
    /// steps. One pass on the gradient's device (none for a wide type).
    pub fn widened(&self) -> Result<Gradient<T::Wide>> {
        let cast = |storage: &Storage<T>| -> Result<Storage<T::Wide>> {
            if let Some(same) = (storage as &dyn Any).downcast_ref::<Storage<T::Wide>>() {
                return Ok(same.clone());
            }
            Ok(flat(storage.clone())
                .cast::<T::Wide>()
                .eval()?
                .storage()
                .clone())
        };
        Ok(Gradient {
            storage: cast(&self.storage)?,
            arena: self.arena,
            gate: self.gate.as_ref().map(cast).transpose()?,
        })
    }

    /// A gradient for the same arena holding `storage` (of the same length, in any type),
    /// taken by an optimizer as `gate` says (see [`Gradient::gate`]).
    pub(crate) fn gated<U: Float>(&self, storage: Storage<U>, gate: Storage<U>) -> Gradient<U> {
        debug_assert_eq!(storage.len(), self.storage.len());
        Gradient {
            storage,
            arena: self.arena,
            gate: Some(gate),
        }
    }

    /// Whether an optimizer takes its step (1) or skips it (0), where a loss scale decided:
    /// one element on the gradient's device.
    pub(crate) fn gate(&self) -> Option<&Storage<T>> {
        self.gate.as_ref()
    }

    /// The buffer, checked to be laid out like `arena`.
    pub(crate) fn storage_for(&self, arena: &Arena<T>) -> Result<&Storage<T>> {
        if self.arena != arena.id() || self.storage.len() != arena.len() {
            return Err(Error::ForeignGradient);
        }
        Ok(&self.storage)
    }
}

/// One element of a parameter arena: the axis passes over a whole arena run along (`Copy`,
/// so that expressions over it are too: an optimizer's update reuses its parts).
#[derive(Axis, Clone, Copy)]
pub(crate) struct ArenaElement;

/// A buffer laid out like a parameter arena, as a tensor.
pub(crate) type Flat<T> = Tensor<T, (ArenaElement,)>;

/// `storage`, as a flat tensor over all its elements.
pub(crate) fn flat<T: Float>(storage: Storage<T>) -> Flat<T> {
    let layout = Layout::row_major(&[storage.len()]);
    Tensor::from_parts(storage, layout).expect("a buffer fits itself")
}
