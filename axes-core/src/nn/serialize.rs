//! Saving and loading parameters in the safetensors format ([`crate::io::TensorFile`]): each
//! parameter under its name, with its axis names in the file's metadata. Files written by
//! other tools (PyTorch, candle, Hugging Face) load by name too: their dimensions are taken in
//! the order of the parameter's axes, or in the order [`Load::stored_as`] names.

use std::collections::HashMap;
use std::path::Path;

use super::params::Params;
use crate::dispatch::placed;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::io::{TensorFile, axis_names};
use crate::layout::Layout;
use crate::list::AxisList;
use crate::num::Float;

/// How [`Params::load_with`] reads a file: strict by default (every tensor of the file must be
/// a parameter of the model, every parameter must be in the file).
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::nn::Load;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Pixel;
/// #[derive(Axis)] struct Hidden;
/// // a PyTorch checkpoint: `fc1.weight` is stored (out, in); other tensors in it are ignored
/// let options = Load::new().partial().stored_as::<(Hidden, Pixel)>("fc1.weight");
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Load {
    partial: bool,
    stored: HashMap<String, Vec<String>>,
}

impl Load {
    /// Strict loading, each parameter stored in the order of its own axes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tensors of the file that are not parameters of the model are skipped (by default each
    /// one is an error). Every parameter must still be in the file.
    pub fn partial(mut self) -> Self {
        self.partial = true;
        self
    }

    /// The file stores parameter `name` with its dimensions in the order of the axes `S`
    /// (the parameter's axes in another order), as PyTorch stores a linear layer's weight as
    /// (out, in). Files written by this crate record their order; it must agree.
    pub fn stored_as<S: AxisList>(mut self, name: &str) -> Self {
        self.stored.insert(name.into(), axis_names::<S>());
        self
    }
}

/// The values of tensor `name` of `file` for a parameter with axes `axes` laid out as
/// `layout`, with the layout that reads them in the parameter's axis order (stored in the
/// order of `stored` where the file records none); an error where the lengths differ.
fn entry_values<W: Float>(
    file: &TensorFile,
    name: &str,
    axes: &[String],
    layout: &Layout,
    stored: Option<&[String]>,
) -> Result<(crate::storage::HostVec<W>, Layout)> {
    let (data, lens, from) = file.values_in_order::<W>(name, axes, stored)?;
    let wanted: Vec<usize> = from.iter().map(|&at| lens[at]).collect();
    if wanted != layout.lens() {
        return Err(Error::ParameterMismatch {
            name: name.into(),
            reason: format!(
                "saved with lengths {wanted:?} for ({}), the model has {:?}",
                axes.join(", "),
                layout.lens()
            ),
        });
    }
    Ok((data, Layout::row_major(&lens).permuted(&from)))
}

impl<T: Float> Params<T> {
    /// Writes every parameter to `path` (safetensors), with its axis names. PyTorch's
    /// `safetensors.torch.load_file` reads the file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut file = TensorFile::new();
        self.insert_arena_values(self.arena.storage().host()?, "", &mut file);
        file.write(path)
    }

    /// Adds to `file`, for each parameter, the tensor `{name}{suffix}` holding the elements
    /// of `flat` (laid out like the arena) at the parameter's place, with its axis names.
    pub(crate) fn insert_arena_values<W: Element>(
        &self,
        flat: &[W],
        suffix: &str,
        file: &mut TensorFile,
    ) {
        for (entry, layout) in self.entries.iter().zip(self.arena.layouts()) {
            let values: Vec<W> = layout
                .positions()
                .map(|p| flat[p.expect("not padded")])
                .collect();
            file.insert_values(
                &format!("{}{suffix}", entry.name),
                entry.axes.clone(),
                layout.lens().to_vec(),
                &values,
            );
        }
    }

    /// The elements of the tensors `{name}{suffix}` of `file` (as [`Params::insert_arena_values`]
    /// writes them), laid out like the arena, zeros between the parameters. An error names
    /// the first tensor absent or of other axes or lengths.
    pub(crate) fn arena_values_in<W: Float>(
        &self,
        file: &TensorFile,
        suffix: &str,
    ) -> Result<Vec<W>> {
        let mut flat = vec![W::zero(); self.arena.len()];
        for (entry, layout) in self.entries.iter().zip(self.arena.layouts()) {
            let name = format!("{}{suffix}", entry.name);
            if !file.names().any(|n| n == name) {
                return Err(Error::ParameterMismatch {
                    name,
                    reason: "not in the file".into(),
                });
            }
            let (data, stored) = entry_values::<W>(file, &name, &entry.axes, layout, None)?;
            for (to, from) in layout.positions().zip(stored.positions()) {
                flat[to.expect("not padded")] = data[from.expect("not padded")];
            }
        }
        Ok(flat)
    }

    /// Replaces every parameter's values by those of the tensors of the same names in the
    /// safetensors file `path` ([`Params::load_with`] with strict [`Load`] options).
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.load_with(path, &Load::new())
    }

    /// Replaces every parameter's values by those of the tensor of the same name in `path`:
    /// written by [`Params::save`] (its axis names must be the parameter's, in any order) or
    /// by another tool (dimensions in the parameter's axis order, or as `options` says). The
    /// lengths must be the model's; f16, bf16, f32 and f64 files load into any float type, and
    /// a value that overflows `T` is an error, as is (unless `options` is partial) a tensor of
    /// the file that is not a parameter.
    pub fn load_with(&mut self, path: impl AsRef<Path>, options: &Load) -> Result<()> {
        let path = path.as_ref();
        let file = TensorFile::read(path)?;
        let mismatch = |name: &str, reason: String| Error::ParameterMismatch {
            name: name.into(),
            reason,
        };
        if let Some(unknown) =
            (options.stored.keys()).find(|n| !self.entries.iter().any(|e| e.name == **n))
        {
            return Err(mismatch(
                unknown,
                "named by `Load::stored_as`, but the model has no parameter of this name".into(),
            ));
        }
        let mut values = Vec::with_capacity(self.entries.len());
        for (entry, layout) in self.entries.iter().zip(self.arena.layouts()) {
            if !file.names().any(|n| n == entry.name) {
                return Err(mismatch(&entry.name, format!("not in {}", path.display())));
            }
            let stored = options.stored.get(&entry.name).map(Vec::as_slice);
            values.push(entry_values::<T>(
                &file,
                &entry.name,
                &entry.axes,
                layout,
                stored,
            )?);
        }
        if !options.partial
            && let Some(extra) = file
                .names()
                .find(|n| !self.entries.iter().any(|e| e.name == *n))
        {
            return Err(mismatch(
                extra,
                format!(
                    "in {} but not a parameter of the model (to skip such tensors, load with `Load::new().partial()`)",
                    path.display()
                ),
            ));
        }
        // Read from a file, assembled in host memory, then placed where the arena lives.
        let mut flat = crate::storage::copied(self.arena.storage().host()?)?;
        for (layout, (data, stored)) in self.arena.layouts().iter().zip(values) {
            for (to, from) in layout.positions().zip(stored.positions()) {
                flat[to.expect("not padded")] = data[from.expect("not padded")];
            }
        }
        let flat = placed(flat, self.arena.device())?;
        self.arena_mut().replace_storage(flat)?;
        Ok(())
    }
}
