//! Tensors in safetensors files, the format PyTorch, candle and Hugging Face use for
//! checkpoints.
//!
//! A [`TensorFile`] holds named tensors of any element types and axes. Tensors written by
//! this crate carry their axis names in the file's metadata (`"axes:{name}": "In,Out"`), so
//! reading one back pairs its dimensions with axes by name, in any order. Files from other
//! tools record no axis names: their dimensions are taken in the order of the axes asked
//! for, or in the order named by [`TensorFile::get_stored_as`] (PyTorch stores a linear
//! layer's weight as (out, in)). Lengths are checked either way; f16, bf16, f32 and f64 data
//! load into any float type, and a value that does not fit the narrower type is an error.
//! Files are replaced atomically (never torn by a crash), the same tensors give the same
//! bytes, and each tensor's data carries a CRC-32 that reading checks.
//!
//! ```
//! # extern crate axes_core as axes;
//! use axes::io::TensorFile;
//! use axes::prelude::*;
//! #[derive(Axis)] struct In;
//! #[derive(Axis)] struct Out;
//! let w = Tensor::<f32, (In, Out)>::from_vec((In.len(2), Out.len(3)), vec![1., 2., 3., 4., 5., 6.])?;
//! let mut file = TensorFile::new();
//! file.insert("w", &w);
//! let path = std::env::temp_dir().join(format!("axes-io-doc-{}.safetensors", std::process::id()));
//! file.write(&path)?;
//!
//! let read = TensorFile::read(&path)?;
//! // axis names are in the file: any order of the same axes reads the same tensor
//! let w_t: Tensor<f64, (Out, In)> = read.get("w")?;
//! assert_eq!(w_t.to_vec(), [1., 4., 2., 5., 3., 6.]);
//! // a tensor the file lacks, or other axes than it records, is an error naming them
//! assert!(read.get::<f32, (In, Out)>("bias").is_err());
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), axes::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use half::{bf16, f16};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::list::{AxisList, AxisSet, SameAxes};
use crate::protocol::Device;
use crate::protocol::as_bytes;
use crate::storage::{HostVec, from_bytes};
use crate::tensor::Tensor;

mod atomic;

/// The metadata key that marks files written by this crate.
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "axes";

/// The metadata key of a tensor's axis names.
fn axes_key(name: &str) -> String {
    format!("axes:{name}")
}

/// The metadata key of the CRC-32 of a tensor's data, as 8 hex digits.
fn checksum_key(name: &str) -> String {
    format!("crc32:{name}")
}

/// The CRC-32 of `data`, as written in the metadata.
fn checksum(data: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(data))
}

/// An error about the file at `path`.
pub(crate) fn io_error(path: &Path, reason: impl ToString) -> Error {
    Error::Io {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// The safetensors file of `views` and `metadata`, the same bytes for the same tensors and
/// metadata: safetensors writes the metadata map in hash order, so its entries are put back
/// in sorted order (the same entries, so the same length: nothing else moves).
fn serialized(
    views: Vec<(&str, TensorView<'_>)>,
    metadata: BTreeMap<String, String>,
) -> Result<Vec<u8>, String> {
    let sorted = serde_json::to_string(&metadata).map_err(|e| e.to_string())?;
    let unordered: HashMap<String, String> = metadata.into_iter().collect();
    let mut bytes = safetensors::serialize(views, Some(unordered)).map_err(|e| e.to_string())?;
    // The header follows its 8-byte length and opens with the metadata.
    let start = 8 + br#"{"__metadata__":"#.len();
    let opens_with_metadata = bytes.get(8..start) == Some(&br#"{"__metadata__":"#[..]);
    match bytes.get_mut(start..start + sorted.len()) {
        Some(slot)
            if opens_with_metadata && slot.first() == Some(&b'{') && slot.last() == Some(&b'}') =>
        {
            slot.copy_from_slice(sorted.as_bytes());
            Ok(bytes)
        }
        _ => Err("the safetensors header does not open with its metadata".into()),
    }
}

/// The name safetensors files keep for their metadata: no tensor can have it.
const RESERVED_NAME: &str = "__metadata__";

/// An error if `name` cannot name a tensor in a safetensors file (`__metadata__`, which the
/// format reserves: a file with such a tensor can never be read back).
pub(crate) fn check_tensor_name(name: &str) -> Result<()> {
    if name == RESERVED_NAME {
        return Err(mismatch(
            name,
            "the name is reserved by the safetensors format for the file's metadata".into(),
        ));
    }
    Ok(())
}

/// An error about the tensor `name`.
fn mismatch(name: &str, reason: String) -> Error {
    Error::ParameterMismatch {
        name: name.into(),
        reason,
    }
}

/// One tensor of a file: its element type, lengths in stored order, axis names (when the
/// file records them) and little-endian data.
struct Stored {
    dtype: Dtype,
    lens: Vec<usize>,
    axes: Option<Vec<String>>,
    data: Vec<u8>,
}

/// Named tensors read from, or to be written to, a safetensors file (see the [module
/// docs](self)).
#[derive(Default)]
pub struct TensorFile {
    tensors: BTreeMap<String, Stored>,
    /// The caller's metadata (stored under `user:{key}` in the file's metadata).
    user: BTreeMap<String, String>,
}

/// The prefix of the caller's keys in a file's metadata.
const USER_PREFIX: &str = "user:";

impl TensorFile {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the safetensors file at `path`. A malformed file is an [`Error::Io`] naming it,
    /// as is a file this crate wrote whose tensor data no longer matches the CRC-32 written
    /// with each tensor (a flipped bit; files of other tools carry none).
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let file = SafeTensors::deserialize(&bytes).map_err(|e| io_error(path, e))?;
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| io_error(path, e))?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let user = (metadata.iter())
            .filter_map(|(key, value)| Some((key.strip_prefix(USER_PREFIX)?.into(), value.clone())))
            .collect();
        let tensors = file
            .tensors()
            .into_iter()
            .map(|(name, view)| {
                if let Some(written) = metadata.get(&checksum_key(&name))
                    && *written != checksum(view.data())
                {
                    return Err(io_error(
                        path,
                        format!(
                            "the data of tensor `{name}` does not match the checksum written \
                             with it: the file is damaged"
                        ),
                    ));
                }
                let axes = metadata.get(&axes_key(&name)).map(|names| {
                    names
                        .split(',')
                        .filter(|n| !n.is_empty())
                        .map(String::from)
                        .collect()
                });
                let stored = Stored {
                    dtype: view.dtype(),
                    lens: view.shape().to_vec(),
                    axes,
                    data: view.data().to_vec(),
                };
                Ok((name, stored))
            })
            .collect::<Result<_>>()?;
        Ok(TensorFile { tensors, user })
    }

    /// Writes every tensor to `path` with its axis names; PyTorch's
    /// `safetensors.torch.load_file` reads the file (the dimensions in each tensor's axis order).
    /// The file is replaced atomically (a temporary beside it, synced, renamed over it): a
    /// crash or a full disk during the write leaves the previous file whole. The same tensors
    /// give the same bytes.
    /// A tensor named `__metadata__` (reserved by the format) is an error.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        for name in self.tensors.keys() {
            check_tensor_name(name)?;
        }
        let views = self
            .tensors
            .iter()
            .map(|(name, t)| {
                TensorView::new(t.dtype, t.lens.clone(), &t.data)
                    .map(|view| (name.as_str(), view))
                    .map_err(|e| io_error(path, e))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut metadata: BTreeMap<String, String> = self
            .tensors
            .iter()
            .filter_map(|(name, t)| Some((axes_key(name), t.axes.as_ref()?.join(","))))
            .collect();
        metadata.insert(FORMAT_KEY.into(), FORMAT.into());
        for (key, value) in &self.user {
            metadata.insert(format!("{USER_PREFIX}{key}"), value.clone());
        }
        for (name, t) in &self.tensors {
            metadata.insert(checksum_key(name), checksum(&t.data));
        }
        let bytes = serialized(views, metadata).map_err(|e| io_error(path, e))?;
        atomic::write(path, &bytes)
    }

    /// Adds (or replaces) the tensor `name`, stored in its axis order with its axis names.
    pub fn insert<T: Element, A: AxisSet>(&mut self, name: &str, tensor: &Tensor<T, A>) {
        self.insert_values(
            name,
            axis_names::<A>(),
            tensor.lens().to_vec(),
            &tensor.to_vec(),
        );
    }

    /// Adds the tensor `name` from its values in row-major order of `axes` (with `lens`).
    pub(crate) fn insert_values<T: Element>(
        &mut self,
        name: &str,
        axes: Vec<String>,
        lens: Vec<usize>,
        values: &[T],
    ) {
        let dtype = match T::DTYPE {
            DType::F32 => Dtype::F32,
            DType::F64 => Dtype::F64,
            DType::F16 => Dtype::F16,
            DType::BF16 => Dtype::BF16,
            DType::I32 => Dtype::I32,
            DType::I64 => Dtype::I64,
            DType::U8 => Dtype::U8,
            DType::Bool => Dtype::BOOL,
        };
        let stored = Stored {
            dtype,
            lens,
            axes: Some(axes),
            data: little_endian(as_bytes(values), T::DTYPE.size()),
        };
        self.tensors.insert(name.into(), stored);
    }

    /// Sets the caller's metadata `key` (a step, a seed, a data loader's position), written
    /// into the file's metadata as `user:{key}`.
    pub fn set_metadata(&mut self, key: &str, value: &str) {
        self.user.insert(key.into(), value.into());
    }

    /// The caller's metadata `key`, where the file has it.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.user.get(key).map(String::as_str)
    }

    /// The caller's metadata, by key.
    pub fn user_metadata(&self) -> &BTreeMap<String, String> {
        &self.user
    }

    /// The names of the file's tensors, in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The tensor `name` with the axes `A`. Its dimensions pair with `A`'s axes by the names
    /// the file records, in whatever order it stored them; a file that records none (one
    /// written by another tool) stores them in `A`'s order. Errors name the tensor: absent,
    /// other axes, other lengths, an element type that does not convert, a value that
    /// overflows `T`.
    pub fn get<T: Element, A: AxisSet>(&self, name: &str) -> Result<Tensor<T, A>> {
        self.get_in_order(name, None)
    }

    /// [`get`](Self::get) for a tensor that a file without axis names stores in the order of
    /// the axes `S` (the same axes as `A`): a PyTorch `nn.Linear` weight is stored as
    /// (out, in), read into `(In, Out)` with `get_stored_as::<_, (In, Out), (Out, In)>`.
    pub fn get_stored_as<T: Element, A: AxisSet, S: SameAxes<A>>(
        &self,
        name: &str,
    ) -> Result<Tensor<T, A>> {
        self.get_in_order(name, Some(&axis_names::<S>()))
    }

    /// The tensor `name` read into `A`, its stored dimensions in the order of the axis names
    /// the file records, else `stored` (when given), else `A`'s.
    pub(crate) fn get_in_order<T: Element, A: AxisSet>(
        &self,
        name: &str,
        stored: Option<&[String]>,
    ) -> Result<Tensor<T, A>> {
        let (values, lens, from) = self.values_in_order::<T>(name, &axis_names::<A>(), stored)?;
        Tensor::from_stored_order(&lens, &from, values).map_err(|e| mismatch(name, e.to_string()))
    }

    /// The values of tensor `name` converted to `T`, in stored order, with the stored lengths
    /// and, for each of `axes`, its stored position.
    pub(crate) fn values_in_order<T: Element>(
        &self,
        name: &str,
        axes: &[String],
        stored: Option<&[String]>,
    ) -> Result<(HostVec<T>, Vec<usize>, Vec<usize>)> {
        let tensor = self
            .tensors
            .get(name)
            .ok_or_else(|| mismatch(name, "not in the file".into()))?;
        let order = match (&tensor.axes, stored) {
            (Some(recorded), Some(asked)) if recorded != asked => {
                return Err(mismatch(
                    name,
                    format!(
                        "the file records the axes ({}), not ({})",
                        recorded.join(", "),
                        asked.join(", ")
                    ),
                ));
            }
            (Some(recorded), _) => recorded.as_slice(),
            (None, Some(asked)) => asked,
            (None, None) => axes,
        };
        let from = positions(axes, order).ok_or_else(|| {
            mismatch(
                name,
                format!(
                    "stored with the axes ({}), wanted ({})",
                    order.join(", "),
                    axes.join(", ")
                ),
            )
        })?;
        if tensor.lens.len() != axes.len() {
            return Err(mismatch(
                name,
                format!(
                    "stored with {} dimensions {:?}, wanted {} axes ({})",
                    tensor.lens.len(),
                    tensor.lens,
                    axes.len(),
                    order.join(", ")
                ),
            ));
        }
        let values = decode::<T>(name, tensor)?;
        Ok((values, tensor.lens.clone(), from))
    }
}

/// `A`'s axis names.
pub(crate) fn axis_names<A: AxisList>() -> Vec<String> {
    A::names().iter().map(|n| n.to_string()).collect()
}

/// For each of `axes`, its position in `order`; `None` unless `order` is a reordering of them.
fn positions(axes: &[String], order: &[String]) -> Option<Vec<usize>> {
    if axes.len() != order.len() {
        return None;
    }
    let from: Vec<usize> = axes
        .iter()
        .map(|a| order.iter().position(|o| o == a))
        .collect::<Option<_>>()?;
    let mut seen = vec![false; order.len()];
    from.iter()
        .all(|&at| !std::mem::replace(&mut seen[at], true))
        .then_some(from)
}

/// The element type of a stored tensor, if this crate has it.
fn element_type(dtype: Dtype) -> Option<DType> {
    Some(match dtype {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        _ => return None,
    })
}

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// Native-order bytes as little-endian (the file's order), element by element.
fn little_endian(bytes: &[u8], size: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if cfg!(target_endian = "big") {
        out.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
    out
}

/// A stored tensor's values as `T`: the same type bit for bit; a float type from any float
/// type, where every finite value must stay finite.
fn decode<T: Element>(name: &str, tensor: &Stored) -> Result<HostVec<T>> {
    let Some(dtype) = element_type(tensor.dtype) else {
        return Err(mismatch(
            name,
            format!(
                "stored as {:?}, which this crate has no type for",
                tensor.dtype
            ),
        ));
    };
    let count = tensor.lens.iter().product();
    if dtype == T::DTYPE {
        let bytes = little_endian(&tensor.data, dtype.size());
        return from_bytes(&bytes, count, Device::Cpu).map_err(|e| mismatch(name, e.to_string()));
    }
    if !(is_float(dtype) && is_float(T::DTYPE)) {
        return Err(mismatch(
            name,
            format!(
                "stored as {}, asked for {}: load it as {} and cast",
                dtype.name(),
                T::DTYPE.name(),
                dtype.name()
            ),
        ));
    }
    let chunks = tensor.data.chunks_exact(dtype.size());
    let wide: Vec<f64> = match dtype {
        DType::F32 => chunks
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)
            .collect(),
        DType::F64 => chunks
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        DType::F16 => chunks
            .map(|b| f16::from_le_bytes(b.try_into().expect("2 bytes")).to_f64())
            .collect(),
        _ => chunks
            .map(|b| bf16::from_le_bytes(b.try_into().expect("2 bytes")).to_f64())
            .collect(),
    };
    wide.into_iter()
        .map(|v| {
            let narrowed = T::from_f64(v);
            if v.is_finite() && !narrowed.to_f64().is_finite() {
                return Err(mismatch(
                    name,
                    format!(
                        "the {} value {v:e} overflows {}",
                        dtype.name(),
                        T::DTYPE.name()
                    ),
                ));
            }
            Ok(narrowed)
        })
        .collect()
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// Writes this tensor alone to a safetensors file at `path` (as the tensor `"tensor"`,
    /// with its axis names).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// let t = Tensor::<half::bf16, (Time,)>::from_vec(Time.len(2), vec![half::bf16::from_f32(1.5), half::bf16::ONE])?;
    /// let path = std::env::temp_dir().join(format!("axes-save-doc-{}.safetensors", std::process::id()));
    /// t.save(&path)?;
    /// let back: Tensor<f32, (Time,)> = Tensor::load(&path)?;
    /// assert_eq!(back.to_vec(), [1.5, 1.0]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut file = TensorFile::new();
        file.insert("tensor", self);
        file.write(path)
    }

    /// Reads the one tensor of the safetensors file at `path` (see [`TensorFile::get`]); a
    /// file of several tensors is an error (read it with [`TensorFile`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = TensorFile::read(path)?;
        let mut names = file.names();
        match (names.next(), names.next()) {
            (Some(name), None) => file.get(name),
            _ => Err(io_error(
                path,
                format!(
                    "holds {} tensors, not one: read it with TensorFile",
                    file.tensors.len()
                ),
            )),
        }
    }
}
