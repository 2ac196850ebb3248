//! Saving and loading parameters in the safetensors format, with each parameter's axis names
//! recorded in the file's metadata (`"axes:{name}": "In,Hidden"`), so a file can only be
//! loaded into a model whose parameters have the same names, axes and lengths.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::params::Params;
use crate::dispatch::placed;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::num::Float;

/// The metadata key that marks files written by this crate.
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "axes";
/// The metadata key of a parameter's axis names.
fn axes_key(name: &str) -> String {
    format!("axes:{name}")
}

fn io_error(path: &Path, reason: impl ToString) -> Error {
    Error::Io {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

fn dtype_of<T: Float>() -> Result<Dtype> {
    match T::DTYPE {
        DType::F32 => Ok(Dtype::F32),
        DType::F64 => Ok(Dtype::F64),
        other => Err(Error::Unsupported {
            what: format!("saving {} parameters", other.name()),
        }),
    }
}

fn to_bytes<T: Float>(values: impl Iterator<Item = T>, dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::F64 => values.flat_map(|v| v.to_f64().to_le_bytes()).collect(),
        _ => values
            .flat_map(|v| (v.to_f64() as f32).to_le_bytes())
            .collect(),
    }
}

fn from_bytes<T: Float>(bytes: &[u8], dtype: Dtype) -> Vec<T> {
    match dtype {
        Dtype::F64 => bytes
            .chunks_exact(8)
            .map(|b| T::from_f64(f64::from_le_bytes(b.try_into().expect("8 bytes"))))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|b| T::from_f64(f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64))
            .collect(),
    }
}

impl<T: Float> Params<T> {
    /// Writes every parameter to `path` (safetensors), with its axis names.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let dtype = dtype_of::<T>()?;
        let flat = self.arena.storage().host()?;
        let buffers: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .entries
            .iter()
            .zip(self.arena.layouts())
            .map(|(entry, layout)| {
                let values = layout.positions().map(|p| flat[p.expect("not padded")]);
                (
                    entry.name.clone(),
                    layout.lens().to_vec(),
                    to_bytes(values, dtype),
                )
            })
            .collect();
        let views = buffers
            .iter()
            .map(|(name, shape, bytes)| {
                TensorView::new(dtype, shape.clone(), bytes)
                    .map(|view| (name.as_str(), view))
                    .map_err(|e| io_error(path, e))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut metadata: HashMap<String, String> = self
            .entries
            .iter()
            .map(|e| (axes_key(&e.name), e.axes.join(",")))
            .collect();
        metadata.insert(FORMAT_KEY.into(), FORMAT.into());
        safetensors::serialize_to_file(views, Some(metadata), path).map_err(|e| io_error(path, e))
    }

    /// Replaces every parameter's values by those saved in `path` by [`Params::save`]. Every
    /// parameter must be in the file with the same axis names (in the same order) and lengths.
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| io_error(path, e))?;
        let axes_of = header.metadata().clone().unwrap_or_default();
        let file = SafeTensors::deserialize(&bytes).map_err(|e| io_error(path, e))?;
        let mismatch = |name: &str, reason: String| Error::ParameterMismatch {
            name: name.into(),
            reason,
        };
        let mut values = Vec::with_capacity(self.entries.len());
        for (entry, layout) in self.entries.iter().zip(self.arena.layouts()) {
            let view = file
                .tensor(&entry.name)
                .map_err(|_| mismatch(&entry.name, format!("not in {}", path.display())))?;
            let expected = entry.axes.join(",");
            match axes_of.get(&axes_key(&entry.name)) {
                Some(saved) if *saved == expected => {}
                Some(saved) => {
                    return Err(mismatch(
                        &entry.name,
                        format!("saved with axes ({saved}), the model has ({expected})"),
                    ));
                }
                None => {
                    return Err(mismatch(
                        &entry.name,
                        format!("{} records no axis names for it", path.display()),
                    ));
                }
            }
            if view.shape() != layout.lens() {
                return Err(mismatch(
                    &entry.name,
                    format!(
                        "saved with lengths {:?} for ({expected}), the model has {:?}",
                        view.shape(),
                        layout.lens()
                    ),
                ));
            }
            if !matches!(view.dtype(), Dtype::F32 | Dtype::F64) {
                return Err(mismatch(
                    &entry.name,
                    format!("saved as {:?}, expected f32 or f64", view.dtype()),
                ));
            }
            values.push(from_bytes::<T>(view.data(), view.dtype()));
        }
        // Read from a file, assembled in host memory, then placed where the arena lives.
        let mut flat = self.arena.storage().host()?.to_vec();
        for (layout, values) in self.arena.layouts().iter().zip(values) {
            for (pos, v) in layout.positions().zip(values) {
                flat[pos.expect("not padded")] = v;
            }
        }
        let flat = placed(flat, self.arena.device())?;
        self.arena.replace_storage(flat);
        Ok(())
    }
}
