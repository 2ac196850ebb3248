//! Many typed tensors at offsets of one buffer: an [`Arena`] holds, for example, every
//! parameter of a model, so that one pass over [`Arena::flat_mut`] updates them all.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::dispatch::{copied_into, moved};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::named::NamedLengths;
use crate::num::Num;
use crate::protocol::Device;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// Each tensor starts at a multiple of this many elements (64 bytes of f32), so that vector
/// loads of one tensor never straddle into the previous one.
const ALIGN: usize = 16;

/// A typed handle on one tensor of the arena its [`ArenaBuilder`] builds; using it with any
/// other arena is [`Error::ForeignSlot`].
pub struct Slot<A> {
    index: usize,
    /// The builder it came from.
    builder: u64,
    _axes: PhantomData<fn() -> A>,
}

impl<A> Clone for Slot<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for Slot<A> {}

impl<A> Slot<A> {
    /// The slot's position among the arena's tensors, in the order they were added.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// Collects the shapes of an arena's tensors, then allocates them all at once.
pub struct ArenaBuilder {
    layouts: Vec<Layout>,
    len: usize,
    /// Distinct for every builder made in this process.
    id: u64,
}

impl Default for ArenaBuilder {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        ArenaBuilder {
            layouts: Vec::new(),
            len: 0,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl ArenaBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves a tensor with axes `A` and the given named lengths.
    pub fn add<A: AxisSet, T: Element>(
        &mut self,
        lengths: impl NamedLengths<Axes: SameAxes<A>>,
    ) -> Result<Slot<A>> {
        // Reuse the constructor's checks (fixed lengths, overflow) on an empty tensor.
        let lens = Tensor::<T, A>::checked_lens(&lengths)?;
        let count: usize = lens.iter().product();
        let start = self.len.next_multiple_of(ALIGN);
        let end = start
            .checked_add(count)
            .ok_or_else(|| Error::SizeOverflow {
                lengths: format!("arena of {} elements", self.len),
            })?;
        let mut layout = Layout::row_major(&lens);
        layout =
            Layout::new(layout.lens(), layout.strides(), start, end).expect("fits its own span");
        self.layouts.push(layout);
        self.len = end;
        Ok(Slot {
            index: self.layouts.len() - 1,
            builder: self.id,
            _axes: PhantomData,
        })
    }

    /// Allocates one buffer for every reserved tensor, filled with `value`.
    pub fn build<T: Element>(self, value: T) -> Arena<T> {
        Arena {
            storage: Storage::from_host_vec(std::iter::repeat_n(value, self.len).collect()),
            layouts: self.layouts,
            builder: self.id,
        }
    }
}

/// Typed tensors at offsets of one buffer.
///
/// Tensors taken out with [`Arena::tensor`] view the arena's buffer without copying.
/// Writes go through the arena (`set`, `flat_mut`); if views taken earlier are still alive,
/// the first write copies the buffer (copy-on-write), so those views keep the values they
/// had — take tensors out again after writing.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::arena::ArenaBuilder;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
///
/// let mut builder = ArenaBuilder::new();
/// let w = builder.add::<(In, Out), f32>((In.len(2), Out.len(3)))?;
/// let b = builder.add::<(Out,), f32>(Out.len(3))?;
/// let mut params = builder.build(0.5f32);
/// // one pass over every parameter
/// params.flat_mut().iter_mut().for_each(|p| *p *= 2.0);
/// assert_eq!(params.tensor(&b)?.to_vec(), [1.0, 1.0, 1.0]);
/// assert!(params.tensor(&w)?.shares_storage_with(&params.tensor(&b)?));
/// // a handle from another builder is an error, not another tensor
/// let mut other = ArenaBuilder::new();
/// let v = other.add::<(Out,), f32>(Out.len(3))?;
/// assert!(params.tensor(&v).is_err());
/// # Ok::<(), axes::Error>(())
/// ```
pub struct Arena<T: Element> {
    storage: Storage<T>,
    layouts: Vec<Layout>,
    /// The builder it came from.
    builder: u64,
}

impl<T: Element> Arena<T> {
    /// The layout behind `slot`, or an error if `slot` comes from another builder.
    fn layout_of<A>(&self, slot: &Slot<A>) -> Result<Layout> {
        match self.layouts.get(slot.index) {
            Some(&layout) if slot.builder == self.builder => Ok(layout),
            _ => Err(Error::ForeignSlot { index: slot.index }),
        }
    }

    /// Whether `slot` is a handle on this arena.
    pub fn owns<A>(&self, slot: &Slot<A>) -> bool {
        self.layout_of(slot).is_ok()
    }

    /// A view of the tensor behind `slot` (no copy).
    pub fn tensor<A: AxisSet>(&self, slot: &Slot<A>) -> Result<Tensor<T, A>> {
        Tensor::from_parts(self.storage.clone(), self.layout_of(slot)?).ok_or_else(|| {
            Error::Unsupported {
                what: "a tensor of an arena whose buffer a failed device copy lost".into(),
            }
        })
    }

    /// The layout (offset into [`Arena::flat`], lengths, strides) of every tensor, in the
    /// order they were added.
    pub fn layouts(&self) -> &[Layout] {
        &self.layouts
    }

    /// Every element of the arena (including alignment gaps), for reading in one pass.
    pub fn flat(&self) -> &[T] {
        self.storage.as_slice()
    }

    /// Every element of the arena, for updating in one pass.
    pub fn flat_mut(&mut self) -> &mut [T] {
        self.storage.make_mut()
    }

    /// The device holding the arena.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// This arena on `device`: the same buffer when it is there already, else a copy (the
    /// same tensors, reached with the same handles).
    pub fn to(&self, device: &Device) -> Result<Arena<T>> {
        let storage = if self.device() == *device {
            self.storage.clone()
        } else {
            moved(&self.storage, *device)?
        };
        Ok(Arena {
            storage,
            layouts: self.layouts.clone(),
            builder: self.builder,
        })
    }

    /// The buffer holding every tensor (for collectives that send it in one call).
    pub fn storage(&self) -> &Storage<T> {
        &self.storage
    }

    /// Puts `storage` in place of the arena's buffer, which it returns: how an optimizer
    /// writes the next values into a buffer of its own, and a collective its result. An error
    /// unless `storage` is as long as the arena's buffer and on the same device.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// use axes::Storage;
    /// use axes::arena::ArenaBuilder;
    /// #[derive(Axis)] struct Out;
    /// let mut builder = ArenaBuilder::new();
    /// let b = builder.add::<(Out,), f32>(Out.len(2))?;
    /// let mut arena = builder.build(0.0f32);
    /// arena.replace_storage(Storage::new(vec![1.0; arena.len()]))?;
    /// assert_eq!(arena.tensor(&b)?.to_vec(), [1.0, 1.0]);
    /// assert!(arena.replace_storage(Storage::new(vec![1.0; 1])).is_err());
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn replace_storage(&mut self, storage: Storage<T>) -> Result<Storage<T>> {
        self.storage
            .check_replacement(&storage, "the parameter arena")?;
        Ok(std::mem::replace(&mut self.storage, storage))
    }

    /// An arena laid out as this one, holding `storage` (as long as this arena's buffer):
    /// the same handles reach its tensors.
    pub(crate) fn with_storage<U: Element>(&self, storage: Storage<U>) -> Arena<U> {
        debug_assert_eq!(storage.len(), self.len());
        Arena {
            storage,
            layouts: self.layouts.clone(),
            builder: self.builder,
        }
    }

    /// The buffer, for an optimizer that writes it in place.
    pub(crate) fn storage_mut(&mut self) -> &mut Storage<T> {
        &mut self.storage
    }

    /// Distinct for arenas built by different builders.
    pub(crate) fn id(&self) -> u64 {
        self.builder
    }

    /// The number of elements in the buffer.
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether the arena holds no elements.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }
}

impl<T: Num> Arena<T> {
    /// Copies `value` into the tensor behind `slot`, on the arena's device; every axis must
    /// have the slot's length.
    pub fn set<A: AxisSet, B: AxisSet + SameAxes<A>>(
        &mut self,
        slot: &Slot<A>,
        value: &Tensor<T, B>,
    ) -> Result<()> {
        let layout = self.layout_of(slot)?;
        let value = value.axes_with_order::<A>();
        for (axis, (&mine, &theirs)) in layout.lens().iter().zip(value.lens()).enumerate() {
            if mine != theirs {
                return Err(Error::LengthMismatch {
                    axis: A::names()[axis].to_string(),
                    left: theirs,
                    right: mine,
                });
            }
        }
        if value.device() != self.device() {
            return Err(Error::DeviceMismatch {
                left: self.device().to_string(),
                right: value.device().to_string(),
            });
        }
        let value = if value.layout().is_padded() {
            value.contiguous()?
        } else {
            value
        };
        // Checked above, the copy can fail only with the device itself (then the arena is
        // left empty, and `tensor` says so); the buffer goes into the job so that it is
        // written in place when nothing else holds it.
        let storage = std::mem::replace(&mut self.storage, Storage::new(Vec::new()));
        let written = copied_into(value.storage(), value.layout(), storage, layout);
        self.storage = written?.0;
        Ok(())
    }
}
