//! Training checkpoints: the parameters, the optimizer's state and the caller's metadata in
//! one safetensors file, written atomically, read back to resume training exactly.

use std::collections::BTreeMap;
use std::path::Path;

use super::params::Params;
use crate::dispatch::overwrite;
use crate::error::{Error, Result};
use crate::io::TensorFile;
use crate::num::Float;
use crate::optim::OptimizerState;

/// Writes a checkpoint of a training run to `path`: every parameter under its name, with its
/// axis names (as [`Params::save`] writes them: PyTorch's `safetensors.torch.load_file`
/// reads them), the optimizer's state ([`OptimizerState`]: `{parameter}.exp_avg`, …,
/// `adam.step`) and `metadata`, the caller's (the data's position, seeds), stored as
/// `user:{key}` in the file's metadata. The file is replaced atomically: a crash during the
/// write leaves the previous checkpoint whole.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::nn::{Gradient, Init, ParamsBuilder, load_checkpoint, save_checkpoint};
/// use axes::optim::Adam;
/// #[derive(Axis)] struct Feature;
/// let model = || -> Result<_, axes::Error> {
///     let mut builder = ParamsBuilder::new();
///     builder.add::<(Feature,)>("bias", Feature.len(2), Init::Zeros, 2, 2)?;
///     builder.build::<f32>(0)
/// };
/// let mut params = model()?;
/// let mut adam = Adam::new(0.1);
/// let grad = Gradient::from_vec(&params, vec![1.0, -1.0])?;
/// adam.step(&mut params, &grad)?;
/// let path = std::env::temp_dir().join(format!("doc-checkpoint-{}.safetensors", std::process::id()));
/// save_checkpoint(&path, &params, &adam, &[("epoch", "1")])?;
///
/// // Later, in another process: the same model, resumed.
/// let (mut resumed, mut optimizer) = (model()?, Adam::new(0.1));
/// let metadata = load_checkpoint(&path, &mut resumed, &mut optimizer)?;
/// assert_eq!(metadata["epoch"], "1");
/// assert_eq!(optimizer.steps()?, 1);
/// assert_eq!(resumed.arena().flat(), params.arena().flat());
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), axes::Error>(())
/// ```
pub fn save_checkpoint<T: Float>(
    path: impl AsRef<Path>,
    params: &Params<T>,
    optimizer: &impl OptimizerState<T>,
    metadata: &[(&str, &str)],
) -> Result<()> {
    let mut file = TensorFile::new();
    params.insert_arena_values(params.arena().storage().host()?, "", &mut file);
    optimizer.save_state(params, &mut file)?;
    for (key, value) in metadata {
        file.set_metadata(key, value);
    }
    file.write(path)
}

/// Reads the checkpoint [`save_checkpoint`] wrote at `path` into `params` and `optimizer`
/// (into their current buffers, so a recorded step goes on reading them), and returns the
/// caller's metadata. The parameters must have the names, axes and lengths saved, and the
/// optimizer be of the kind saved; an error — a tensor absent or different, a tensor of no
/// parameter, another optimizer's state, a damaged file — names what differs and changes
/// nothing.
pub fn load_checkpoint<T: Float>(
    path: impl AsRef<Path>,
    params: &mut Params<T>,
    optimizer: &mut impl OptimizerState<T>,
) -> Result<BTreeMap<String, String>> {
    let path = path.as_ref();
    let file = TensorFile::read(path)?;
    let values = params.arena_values_in::<T>(&file, "")?;
    let owned = |name: &str| {
        name.ends_with(".step")
            || (params.entries.iter()).any(|e| {
                name == e.name
                    || name
                        .strip_prefix(e.name.as_str())
                        .is_some_and(|rest| rest.starts_with('.') && !rest[1..].contains('.'))
            })
    };
    if let Some(extra) = file.names().find(|name| !owned(name)) {
        return Err(Error::ParameterMismatch {
            name: extra.into(),
            reason: format!(
                "in the checkpoint {} but neither a parameter of the model nor its state",
                path.display()
            ),
        });
    }
    // The state first: it checks everything before it changes anything, and the
    // parameters' values are checked already.
    optimizer.load_state(params, &file)?;
    overwrite(params.arena_mut().storage_mut(), &values)?;
    Ok(file.user_metadata().clone())
}
