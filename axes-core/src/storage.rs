//! Shared, reference-counted element buffers. Several tensors may view one buffer at
//! different offsets and strides (the Cortex split of description and data).

use std::sync::Arc;

/// A reference-counted buffer of elements on the CPU.
///
/// Cloning a `Storage` shares the buffer. Writing through [`Storage::make_mut`] copies the
/// buffer first when it is shared (copy-on-write), so a write never shows through another
/// tensor by accident.
#[derive(Debug)]
pub struct Storage<T>(Arc<Vec<T>>);

impl<T> Clone for Storage<T> {
    fn clone(&self) -> Self {
        Storage(Arc::clone(&self.0))
    }
}

impl<T: Clone> Storage<T> {
    /// A buffer holding `data`.
    pub fn new(data: Vec<T>) -> Self {
        Storage(Arc::new(data))
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// The elements for writing; copies them first if another handle shares this buffer.
    pub fn make_mut(&mut self) -> &mut [T] {
        Arc::make_mut(&mut self.0).as_mut_slice()
    }

    /// Number of elements in the buffer.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether two handles share one buffer.
    pub fn same_buffer(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
