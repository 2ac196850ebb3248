//! An optimizer's buffers: its state beside the parameter arena, the scalars each step
//! computes on the device, and how an update written as typed expressions runs.

use std::any::{Any, TypeId};

use crate::Device;
use crate::dispatch::{
    Input, JointJob, Output, filled, moved, overwrite, placed, run_in_place, run_outputs,
    unique_for_writing,
};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::expr::Expr;
use crate::io::TensorFile;
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp};
use crate::layout::Layout;
use crate::nn::params::{ArenaElement, Flat, flat};
use crate::nn::{Gradient, Params};
use crate::num::Float;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// One result of an optimizer's update, written once as a typed expression over the arena's
/// elements: in host memory a pass of the typed engine of its own, on a device a part of the
/// one job that computes every result.
pub(super) trait ArenaUpdate<W: Float> {
    /// The result, in `spare` where nothing else holds it, else in a new buffer.
    fn written(&self, spare: &mut Option<Storage<W>>) -> Result<Storage<W>>;
    /// Its nodes and leaves added to `job`; the node holding it.
    fn joined<'a>(&'a self, job: &mut JointJob<'a>) -> usize;
}

impl<W: Float, E> ArenaUpdate<W> for E
where
    E: Expr<Elem = W, Axes = (ArenaElement,)> + Copy,
{
    fn written(&self, spare: &mut Option<Storage<W>>) -> Result<Storage<W>> {
        match spare.take().filter(Storage::is_unique) {
            Some(buffer) => {
                let mut into = flat(buffer);
                into.assign(*self)?;
                Ok(into.storage().clone())
            }
            None => Ok(self.eval()?.storage().clone()),
        }
    }

    fn joined<'a>(&'a self, job: &mut JointJob<'a>) -> usize {
        job.add(self)
    }
}

/// An optimizer's buffers, each laid out like the parameter arena: its state (velocity,
/// moments) in the parameters' [`Float::Wide`] type (f32 for half types: a second moment of
/// 1e-3 · g² is 0 in f16 for every |g| below 8e-3), and its step scalars. On a device a step
/// writes the parameters and the state over themselves, so their buffers never change; in
/// host memory it writes them into the buffers the step before replaced.
#[derive(Clone, Debug)]
pub(super) struct Buffers<T: Float> {
    /// The parameters the state belongs to: their arena's identity, and how errors name
    /// them.
    bound: Option<(u64, String)>,
    state: Vec<Storage<T::Wide>>,
    /// The parameters' previous buffer (host memory).
    spare_params: Option<Storage<T>>,
    /// Each state's previous buffer (host memory).
    spare_state: Vec<Option<Storage<T::Wide>>>,
    /// A 1 on the parameters' device: the gate of a gradient no loss scale gated (see
    /// [`Buffers::views`]).
    ones: Option<Storage<T::Wide>>,
    pub(super) scalars: StepScalars<T::Wide>,
}

impl<T: Float> Default for Buffers<T> {
    fn default() -> Self {
        Buffers {
            bound: None,
            state: Vec::new(),
            spare_params: None,
            spare_state: Vec::new(),
            ones: None,
            scalars: StepScalars::default(),
        }
    }
}

impl<T: Float> Buffers<T> {
    /// Binds the optimizer (named `optimizer`) to `params` at its first step; an error
    /// naming both where it is bound to others.
    pub(super) fn bind(&mut self, params: &Params<T>, optimizer: &str) -> Result<()> {
        self.check_bound(params, optimizer)?;
        if self.bound.is_none() {
            self.bound = Some((params.arena().id(), params.described()));
        }
        Ok(())
    }

    /// Adds the state for `params` to `file` (see [`super::OptimizerState`]): each state
    /// buffer `k` as `{parameter}.{tensors[k]}` per parameter, and the steps taken as
    /// `{kind}.step`; zeros where no step was taken yet. The values are read from the device
    /// as they are now (a recorded step's replays write them there).
    pub(super) fn save(
        &self,
        params: &Params<T>,
        names: StateNames,
        file: &mut TensorFile,
    ) -> Result<()> {
        self.check_bound(params, names.optimizer)?;
        let kind = names.kind;
        for (k, name) in names.tensors.iter().enumerate() {
            let suffix = format!(".{name}");
            match self.state.get(k) {
                Some(state) => params.insert_arena_values(&state.current_values()?, &suffix, file),
                None => {
                    let zeros = vec![T::Wide::zero(); params.arena().len()];
                    params.insert_arena_values(&zeros, &suffix, file);
                }
            }
        }
        let steps = i64::try_from(self.steps_taken()?).unwrap_or(i64::MAX);
        file.insert_values(&format!("{kind}.step"), Vec::new(), Vec::new(), &[steps]);
        Ok(())
    }

    /// Reads the state [`Buffers::save`] wrote for `params` into the state's buffers (made
    /// where there are none), and binds the optimizer to `params`; the steps taken. Every
    /// tensor is read and checked before anything changes: an error leaves the optimizer as
    /// it was.
    pub(super) fn load(
        &mut self,
        params: &Params<T>,
        names: StateNames,
        file: &TensorFile,
    ) -> Result<usize> {
        self.check_bound(params, names.optimizer)?;
        let step = format!("{}.step", names.kind);
        if !file.names().any(|n| n == step) {
            let other =
                (file.names()).find_map(|n| n.strip_suffix(".step").filter(|k| !k.contains('.')));
            return Err(Error::ParameterMismatch {
                name: step,
                reason: match other {
                    Some(other) => format!("not in the file, which holds the state of `{other}`"),
                    None => "not in the file, which holds no optimizer's state".into(),
                },
            });
        }
        let steps = file.get::<i64, ()>(&step)?.to_vec()[0];
        let steps = usize::try_from(steps).map_err(|_| Error::ParameterMismatch {
            name: step.clone(),
            reason: format!("{steps} steps taken"),
        })?;
        let values = (names.tensors.iter())
            .map(|name| params.arena_values_in::<T::Wide>(file, &format!(".{name}")))
            .collect::<Result<Vec<_>>>()?;
        let device = params.device();
        let count = names.tensors.len();
        let fits = self.state.len() == count && self.state.iter().all(|s| s.device() == device);
        if fits {
            // Written into the buffers the step writes (a recorded step keeps them).
            for (state, values) in self.state.iter_mut().zip(&values) {
                overwrite(state, values)?;
            }
        } else {
            self.state = (values.iter())
                .map(|values| placed(crate::storage::copied(values)?, device))
                .collect::<Result<_>>()?;
            self.spare_params = None;
            self.spare_state = vec![None; count];
        }
        self.scalars.set_count(steps, device)?;
        self.bound = Some((params.arena().id(), params.described()));
        Ok(steps)
    }

    /// The steps taken, as the parameters' device counts them (a recorded step's replays
    /// advance the count there, and not on the host).
    pub(super) fn steps_taken(&self) -> Result<usize> {
        match &self.scalars.scalars {
            Some(scalars) => Ok(scalars.current_values()?[0].to_f64() as usize),
            None => Ok(self.scalars.start),
        }
    }

    /// An error where the optimizer (named `optimizer`) steps parameters other than
    /// `params`.
    fn check_bound(&self, params: &Params<T>, optimizer: &str) -> Result<()> {
        match &self.bound {
            Some((bound, described)) if *bound != params.arena().id() => {
                Err(Error::OptimizerMismatch {
                    optimizer: optimizer.into(),
                    bound: described.clone(),
                    given: params.described(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Makes `count` state buffers of zeros for `params` at the first step, moves the state
    /// to the parameters' device where they moved, and makes the parameters' buffer and the
    /// state's ones that only this optimizer writes.
    pub(super) fn prepare(&mut self, params: &mut Params<T>, count: usize) -> Result<()> {
        let arena = params.arena();
        let device = arena.device();
        if self.state.len() != count {
            self.state = (0..count)
                .map(|_| filled(device, arena.len(), T::Wide::zero()))
                .collect::<Result<_>>()?;
            self.spare_params = None;
            self.spare_state = vec![None; count];
            self.scalars = StepScalars::default();
        } else if self.state.iter().any(|s| s.device() != device) {
            // The parameters moved: their state, step count and settings follow them.
            for state in &mut self.state {
                *state = moved(state, device)?;
            }
            self.scalars.move_to(device)?;
            self.spare_params = None;
            self.spare_state = vec![None; count];
        }
        if self
            .ones
            .as_ref()
            .is_none_or(|ones| ones.device() != device)
        {
            self.ones = Some(filled(device, 1, T::Wide::one())?);
        }
        unique_for_writing(params.arena_mut().storage_mut())?;
        for state in &mut self.state {
            unique_for_writing(state)?;
        }
        Ok(())
    }

    /// The parameters, the gradient (as flat tensors) and the gradient's gate: 1 where the
    /// step is taken, 0 where a loss scale found the gradient not finite and the step is
    /// skipped (the update selects the old values, and the step count stays); 1 where no
    /// loss scale gated the gradient.
    pub(super) fn views(
        &self,
        params: &Params<T>,
        grad: &Gradient<T>,
    ) -> Result<(Flat<T>, Flat<T>, Gate<T>)> {
        // Operands on two devices are an error of the evaluation itself.
        let arena = params.arena();
        let storage = grad.storage_for(arena)?;
        let gate = match grad.gate() {
            // A loss scale gates wide gradients only: this is the gate as it is.
            Some(gate) => match (gate as &dyn Any).downcast_ref::<Storage<T::Wide>>() {
                Some(wide) => element(wide, 0),
                None => element(gate, 0).cast::<T::Wide>().eval()?,
            },
            None => element(self.ones.as_ref().expect("made by `prepare`"), 0),
        };
        Ok((flat(arena.storage().clone()), flat(storage.clone()), gate))
    }

    /// State buffer `k`, as a flat tensor.
    pub(super) fn state(&self, k: usize) -> Flat<T::Wide> {
        flat(self.state[k].clone())
    }

    /// Takes a step: `p_next` becomes the parameters and `state[k]` state `k`. On a device
    /// all of them are one job written over the buffers they replace — one launch, two for
    /// half-precision parameters (a job's results share one type; the parameters go first,
    /// as no state reads them). In host memory each result is one pass of the typed engine
    /// into the buffer it replaced last step where nothing else holds that buffer (each
    /// reads only the buffers of the step before, so their order does not matter).
    pub(super) fn apply<const S: usize>(
        &mut self,
        params: &mut Params<T>,
        p_next: &dyn ArenaUpdate<T>,
        state: [&dyn ArenaUpdate<T::Wide>; S],
    ) -> Result<()> {
        if let Device::Backend(_) = params.device() {
            return self.in_place(params, p_next, state);
        }
        let next_state = (state.iter().zip(&mut self.spare_state))
            .map(|(next, spare)| next.written(spare))
            .collect::<Result<Vec<_>>>()?;
        let next_p = p_next.written(&mut self.spare_params)?;
        self.spare_params = Some(params.arena_mut().replace_storage(next_p)?);
        for (k, next) in next_state.into_iter().enumerate() {
            self.spare_state[k] = Some(std::mem::replace(&mut self.state[k], next));
        }
        Ok(())
    }

    /// [`Buffers::apply`] on a device: the results written over the parameters and the state.
    fn in_place<const S: usize>(
        &mut self,
        params: &Params<T>,
        p_next: &dyn ArenaUpdate<T>,
        state: [&dyn ArenaUpdate<T::Wide>; S],
    ) -> Result<()> {
        let p = flat(params.arena().storage().clone());
        let states: Vec<Flat<T::Wide>> = (0..S).map(|k| self.state(k)).collect();
        let mut job = JointJob::default();
        let p_root = p_next.joined(&mut job);
        let state_roots = state.map(|next| next.joined(&mut job));
        // The buffers written, as leaves (added where an update does not read its own).
        let p_leaf = job.leaf_of(&p);
        let state_leaves: Vec<usize> = states.iter().map(|s| job.leaf_of(s)).collect();
        let inputs = job.inputs(&[TypeId::of::<ArenaElement>()])?;
        let (ir, lens) = (job.ir(), [params.arena().len()]);
        if TypeId::of::<T>() == TypeId::of::<T::Wide>() {
            let roots: Vec<usize> = [p_root].into_iter().chain(state_roots).collect();
            let over: Vec<usize> = [p_leaf].into_iter().chain(state_leaves).collect();
            return run_in_place::<T>(ir, &lens, &inputs, &roots, &over);
        }
        run_in_place::<T>(ir, &lens, &inputs, &[p_root], &[p_leaf])?;
        run_in_place::<T::Wide>(ir, &lens, &inputs, &state_roots, &state_leaves)
    }
}

/// Whether an optimizer takes a step (1) or skips it (0), in the parameters' wide type.
pub(super) type Gate<T> = Tensor<<T as Float>::Wide, ()>;

/// The scalars an optimizer's update reads that may change from step to step, on the
/// parameters' device: its settings (placed there again only when they change), and the
/// step count with the values each step derives from it and from the settings (the
/// schedule's rate, bias corrections), which one small job per step computes — on a device
/// in place — so that no step reads a value back or builds a kernel again.
#[derive(Clone, Debug, Default)]
pub(super) struct StepScalars<W: Float> {
    /// The settings as last placed, and their buffer.
    settings: Option<(Vec<f64>, Storage<W>)>,
    /// The step count (steps taken, as `W`), then the values of the last step.
    scalars: Option<Storage<W>>,
    /// The count a new step-count buffer starts from (a resumed optimizer's steps).
    start: usize,
}

/// The settings and a step's values, as tensors of no axes (views of one buffer each).
pub(super) struct Scalars<W: Element> {
    pub(super) settings: Vec<Tensor<W, ()>>,
    pub(super) values: Vec<Tensor<W, ()>>,
}

/// The tensor of no axes at element `k` of `storage`.
pub(super) fn element<W: Element>(storage: &Storage<W>, k: usize) -> Tensor<W, ()> {
    let at = Layout::new(&[], &[], k, storage.len()).expect("inside the buffer");
    Tensor::from_parts(storage.clone(), at).expect("rank 0 fits")
}

/// How an optimizer's state is saved: its kind (`{kind}.step` holds the steps taken), the
/// optimizer's name for errors, and the name of each state tensor (`{parameter}.{name}`).
#[derive(Clone, Copy, Debug)]
pub(super) struct StateNames {
    pub(super) kind: &'static str,
    pub(super) optimizer: &'static str,
    pub(super) tensors: &'static [&'static str],
}

impl<W: Float> StepScalars<W> {
    /// Sets the steps taken to `count` (a resumed optimizer's), on `device`.
    fn set_count(&mut self, count: usize, device: Device) -> Result<()> {
        self.start = count;
        if let Some(scalars) = &mut self.scalars {
            let mut values = scalars.current_values()?;
            values[0] = W::from_f64(count as f64);
            if scalars.device() == device {
                // Written into the buffer a recorded step reads.
                overwrite(scalars, &values)?;
            } else {
                *scalars = placed(values, device)?;
            }
        }
        Ok(())
    }

    /// Moves the settings and the step's values to `device`.
    fn move_to(&mut self, device: Device) -> Result<()> {
        if let Some((_, settings)) = &mut self.settings {
            *settings = moved(settings, device)?;
        }
        if let Some(scalars) = &mut self.scalars {
            *scalars = moved(scalars, device)?;
        }
        Ok(())
    }

    /// Advances the step count on `device` and computes the step's values: `derive` adds
    /// them to an IR whose node `step` is the count before this step (0 at the first) and
    /// whose nodes `settings[i]` hold `settings[i]`, and returns their nodes.
    ///
    /// The count advances by `gate` (one element: 1, or 0 for a step a loss scale skips).
    pub(super) fn advance(
        &mut self,
        device: Device,
        gate: &Tensor<W, ()>,
        settings: &[f64],
        derive: impl FnOnce(&mut Ir, usize, &[usize]) -> Vec<usize>,
    ) -> Result<Scalars<W>> {
        let placed_now = |(values, storage): &(Vec<f64>, Storage<W>)| {
            storage.device() == device
                && values.len() == settings.len()
                && values
                    .iter()
                    .zip(settings)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        if !self.settings.as_ref().is_some_and(placed_now) {
            let mut buffer = crate::storage::with_capacity(settings.len())?;
            buffer.extend(settings.iter().map(|&v| W::from_f64(v)));
            self.settings = Some((settings.to_vec(), placed(buffer, device)?));
        }
        let (_, setting_buffer) = self.settings.as_ref().expect("placed above");
        let mut ir = Ir::default();
        let step = ir.leaf();
        let setting_nodes: Vec<usize> = settings.iter().map(|_| ir.leaf()).collect();
        let taken = ir.leaf();
        let next = ir.push(IrNode::Binary(BinaryOp::Add, step, taken));
        let derived = derive(&mut ir, step, &setting_nodes);
        let count = 1 + derived.len();
        let fits = |s: &Storage<W>| s.device() == device && s.len() == count;
        if !self.scalars.as_ref().is_some_and(fits) {
            let mut values = crate::storage::with_capacity(count)?;
            values.push(W::from_f64(self.start as f64));
            values.resize(count, W::zero());
            self.scalars = Some(placed(values, device)?);
        }
        let scalars = self.scalars.as_mut().expect("made above");
        unique_for_writing(scalars)?;
        // Leaves: the count, the settings, the gate, then the buffer's other elements (written
        // over).
        for _ in 1..count {
            ir.leaf();
        }
        let written_leaves = (1..count).map(|k| settings.len() + 1 + k);
        let roots: Vec<usize> = [next].into_iter().chain(derived).collect();
        let scalar_at = |k: usize| Layout::new(&[], &[], k, count).expect("inside the buffer");
        let setting_at =
            |k: usize| Layout::new(&[], &[], k, settings.len()).expect("inside the buffer");
        let mut inputs = vec![Input::new(&*scalars, &scalar_at(0), &[], 0)?];
        for k in 0..settings.len() {
            inputs.push(Input::new(setting_buffer, &setting_at(k), &[], 0)?);
        }
        inputs.push(Input::new(gate.storage(), gate.layout(), &[], 0)?);
        for k in 1..count {
            inputs.push(Input::new(&*scalars, &scalar_at(k), &[], 0)?);
        }
        let over: Vec<usize> = [0].into_iter().chain(written_leaves).collect();
        if let Some(values) = scalars_written::<W>(device, &ir, inputs, &roots, &over)? {
            *scalars = values;
        }
        let scalars = self.scalars.as_ref().expect("made above");
        Ok(Scalars {
            settings: (0..settings.len())
                .map(|k| element(setting_buffer, k))
                .collect(),
            values: (1..count).map(|k| element(scalars, k)).collect(),
        })
    }
}

/// Runs `ir`'s `roots` over one element each, written over the buffer of scalars whose
/// element `k` leaf `over[k]` reads: in place on a device (a recorded step replays the
/// write), and on the CPU into a new buffer, returned to put in place of the old one.
pub(super) fn scalars_written<W: Float>(
    device: Device,
    ir: &Ir,
    inputs: Vec<Input<'_>>,
    roots: &[usize],
    over: &[usize],
) -> Result<Option<Storage<W>>> {
    if let Device::Backend(_) = device {
        run_in_place::<W>(ir, &[], &inputs, roots, over)?;
        return Ok(None);
    }
    let outputs = (roots.iter())
        .map(|&root| Output::new(root, Vec::new(), ReduceOp::Sum))
        .collect();
    let results = run_outputs::<W>(ir, &[], &inputs, outputs)?;
    let mut values = crate::storage::with_capacity(roots.len())?;
    for (storage, layout) in &results {
        values.push(storage.host()?[layout.offset()]);
    }
    Ok(Some(Storage::from_host_vec(values)))
}
