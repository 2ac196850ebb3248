//! [`HostVec`]: the elements of a host buffer, on a cache line's boundary.
//!
//! A `Vec<T>` is aligned to its element (4 bytes for `f32`), and glibc's allocator places a
//! large buffer 16 bytes past a page: every 64-byte vector load of such a buffer that starts at
//! an element a multiple of 16 from its start straddles two cache lines, and streaming stores
//! cannot write whole lines. The library's own buffers (every result, every buffer of the
//! pool) start on a 64-byte boundary instead. A `Vec` handed in by a user is adopted as it is,
//! without a copy (its alignment is then the allocator's).

use std::alloc::Layout;
use std::fmt;
use std::mem::{ManuallyDrop, MaybeUninit, size_of};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::pool::{self, RawBlock};
use crate::error::Result;

/// The alignment of the library's host buffers: a cache line, and an AVX-512 vector.
pub const HOST_ALIGN: usize = 64;

/// A growable buffer of elements in host memory, like a `Vec<T>`, on a [`HOST_ALIGN`]-byte
/// boundary unless it was adopted from a `Vec` without a copy (`From<Vec<T>>`: a `Vec` is
/// aligned to its element, and the allocator places large ones 16 bytes past a page, so
/// 64-byte vector loads from it straddle cache lines). Dropped, its memory goes back to the
/// host pool.
///
/// ```
/// use axes_core::storage::{HOST_ALIGN, HostVec};
/// let mut values = HostVec::<f32>::new();
/// values.extend_from_slice(&[1.0, 2.0]);
/// values.push(3.0);
/// assert_eq!(&values[..], &[1.0, 2.0, 3.0]);
/// assert_eq!(values.as_ptr() as usize % HOST_ALIGN, 0);
/// assert_eq!(values.into_vec(), vec![1.0, 2.0, 3.0]);
/// ```
pub struct HostVec<T> {
    ptr: NonNull<T>,
    len: usize,
    capacity: usize,
    /// The alignment the memory was allocated with: [`HOST_ALIGN`], or `T`'s own for the
    /// memory of an adopted `Vec`.
    align: usize,
}

// SAFETY: a `HostVec` owns its elements as a `Vec` does; sending or sharing it sends or
// shares them.
unsafe impl<T: Send> Send for HostVec<T> {}
// SAFETY: as above: `&HostVec<T>` gives only `&[T]`.
unsafe impl<T: Sync> Sync for HostVec<T> {}

impl<T: Copy> HostVec<T> {
    /// Elements have a size, and an alignment below [`HOST_ALIGN`] (so the alignment a
    /// buffer was allocated with tells an adopted `Vec`'s memory from the library's own).
    const ELEMENT_FITS: () = assert!(
        size_of::<T>() > 0 && align_of::<T>() < HOST_ALIGN,
        "elements are sized and aligned to less than a cache line"
    );

    /// An empty buffer; allocates nothing.
    pub fn new() -> Self {
        let () = Self::ELEMENT_FITS;
        HostVec {
            ptr: NonNull::dangling(),
            len: 0,
            capacity: 0,
            align: HOST_ALIGN,
        }
    }

    /// The layout of `capacity` elements on a [`HOST_ALIGN`] boundary; `None` when that
    /// overflows.
    pub(super) fn layout_for(capacity: usize) -> Option<Layout> {
        Layout::array::<T>(capacity).ok()?.align_to(HOST_ALIGN).ok()
    }

    /// An empty buffer with room for exactly `capacity` elements, from the allocator; an
    /// error when it has no room.
    pub(super) fn try_with_capacity(capacity: usize) -> Result<Self> {
        Self::allocate(capacity, false)
    }

    /// `len` elements whose bytes are all zero, in a new allocation (asked for huge pages, as
    /// [`HostVec::try_with_capacity`] is, before the zeros are written); an error when the
    /// allocator has no room.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T` (true of every element type).
    pub(super) unsafe fn try_zeroed(len: usize) -> Result<Self> {
        let mut values = Self::allocate(len, true)?;
        // SAFETY: the memory holds `len` elements' room, all bytes zero, a valid `T` (the
        // caller's contract).
        unsafe { values.set_len(len) };
        Ok(values)
    }

    fn allocate(capacity: usize, zeroed: bool) -> Result<Self> {
        let mut values = Self::new();
        let bytes = capacity.saturating_mul(size_of::<T>());
        let layout = Self::layout_for(capacity).ok_or_else(|| pool::out_of_memory(bytes))?;
        if layout.size() == 0 {
            return Ok(values);
        }
        // SAFETY: the layout's size is not zero (checked above).
        let ptr = unsafe { std::alloc::alloc(layout) };
        values.ptr = NonNull::new(ptr.cast::<T>()).ok_or_else(|| pool::out_of_memory(bytes))?;
        values.capacity = capacity;
        // The advice comes before the zeros: the kernel picks a page's size at the first write
        // to it, and `alloc_zeroed` at this alignment is `alloc` and a fill, which would write
        // every page first.
        if layout.size() >= HUGE_PAGES_FROM {
            advise_huge_pages(ptr, layout.size());
        }
        if zeroed {
            // SAFETY: the allocation just made holds `layout.size()` bytes.
            unsafe { ptr.write_bytes(0, layout.size()) };
        }
        Ok(values)
    }

    /// A buffer over a block of the pool, with its first `len` elements taken as written.
    ///
    /// # Safety
    /// `ptr` was allocated by the global allocator with [`HostVec::layout_for`]`(capacity)`
    /// of this `T` (equal size and alignment will do), nothing else owns it, and its first
    /// `len <= capacity` elements are initialised values of `T`.
    pub(super) unsafe fn from_block(ptr: NonNull<u8>, len: usize, capacity: usize) -> Self {
        let () = Self::ELEMENT_FITS;
        HostVec {
            ptr: ptr.cast(),
            len,
            capacity,
            align: HOST_ALIGN,
        }
    }

    /// Sets the length.
    ///
    /// # Safety
    /// `len <= capacity`, and the first `len` elements are initialised.
    pub unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.capacity);
        self.len = len;
    }

    /// The room after the elements, for writing before [`HostVec::set_len`].
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: the memory holds `capacity` elements' room; the part after `len` is owned
        // by this buffer and read by nothing else; `MaybeUninit` claims no value.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(self.len).cast::<MaybeUninit<T>>(),
                self.capacity - self.len,
            )
        }
    }

    /// Makes room for `additional` more elements, moving them to a larger allocation when
    /// needed (aborts when the allocator has none, as a `Vec` does).
    #[inline]
    pub fn reserve(&mut self, additional: usize) {
        let needed = self
            .len
            .checked_add(additional)
            .expect("a host buffer's capacity overflows");
        if needed > self.capacity {
            self.grow(needed);
        }
    }

    /// Moves the elements to a buffer of at least `needed` elements (twice the capacity at
    /// least, so that appending one by one costs amortised constant time).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, needed: usize) {
        let capacity = needed.max(self.capacity.saturating_mul(2)).max(8);
        let mut grown = match Self::try_with_capacity(capacity) {
            Ok(grown) => grown,
            Err(_) => std::alloc::handle_alloc_error(
                Self::layout_for(capacity).unwrap_or(Layout::new::<T>()),
            ),
        };
        grown.extend_from_slice(self);
        *self = grown;
    }

    /// Appends an element.
    #[inline]
    pub fn push(&mut self, value: T) {
        if self.len == self.capacity {
            self.reserve(1);
        }
        // SAFETY: len < capacity (made so above): the slot is inside the allocation.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Appends the elements of `values`.
    #[inline]
    pub fn extend_from_slice(&mut self, values: &[T]) {
        self.reserve(values.len());
        // SAFETY: room for `values.len()` more elements was made above; `values` cannot
        // overlap this buffer's unused room (nothing else refers to it).
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                values.len(),
            )
        };
        self.len += values.len();
    }

    /// Makes the length `len`: drops the elements past it, or appends copies of `value`.
    pub fn resize(&mut self, len: usize, value: T) {
        if len <= self.len {
            self.len = len;
            return;
        }
        let added = len - self.len;
        self.reserve(added);
        self.spare_capacity_mut()[..added].fill(MaybeUninit::new(value));
        self.len = len;
    }

    /// Drops every element; keeps the room.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The elements as a `Vec`: the adopted `Vec` itself, else a copy (a `Vec` cannot own
    /// memory of a larger alignment than its element's).
    pub fn into_vec(self) -> Vec<T> {
        if self.align == align_of::<T>() {
            let values = ManuallyDrop::new(self);
            // SAFETY: the memory is a `Vec<T>`'s of this capacity, taken apart in `From<Vec>`
            // (only an adopted `Vec`'s memory has `T`'s own alignment), with `len`
            // initialised elements; the `HostVec` is forgotten, so the `Vec` is its only
            // owner.
            return unsafe {
                Vec::from_raw_parts(values.ptr.as_ptr(), values.len, values.capacity)
            };
        }
        self.to_vec()
    }
}

/// The size from which a new host buffer asks for huge pages (see [`advise_huge_pages`]).
const HUGE_PAGES_FROM: usize = 4 << 20;

/// Asks the kernel to back the whole 2 MiB pages inside the `bytes` bytes from `start` with
/// transparent huge pages (where the system leaves that to the program: `madvise` mode): a
/// loop over a large buffer then takes one TLB entry per 2 MiB instead of per 4 KiB, which
/// matters most to operands read across rows (the transposed add in `benches/NOTES.md`). Only
/// pages wholly inside the buffer are asked for, so no memory outside it is committed;
/// `AXES_HUGE_PAGES=0` turns it off. A refusal changes nothing but speed, so it is ignored.
fn advise_huge_pages(start: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::sync::OnceLock;
        static ENABLED: OnceLock<bool> = OnceLock::new();
        const HUGE: usize = 2 << 20;
        if !*ENABLED.get_or_init(|| std::env::var("AXES_HUGE_PAGES").map_or(true, |v| v != "0")) {
            return;
        }
        let first = (start as usize).next_multiple_of(HUGE);
        let end = (start as usize + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside the allocation just made (rounded inwards to
            // whole huge pages); MADV_HUGEPAGE changes how the kernel backs it, never its
            // contents.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

impl<T> HostVec<T> {
    /// The layout the memory was allocated with; `None` when nothing was.
    fn layout(&self) -> Option<Layout> {
        let size = self.capacity * size_of::<T>();
        // SAFETY: `size` and `align` are those of the allocation made (by `allocate`, or by
        // the adopted `Vec`), which `Layout` accepted then.
        (size > 0).then(|| unsafe { Layout::from_size_align_unchecked(size, self.align) })
    }

    /// Whether the memory is on a [`HOST_ALIGN`] boundary (false only for an adopted `Vec`
    /// that the allocator placed elsewhere).
    ///
    /// ```
    /// use axes_core::storage::HostVec;
    /// let made: HostVec<f64> = (0..10).map(f64::from).collect();
    /// assert!(made.is_aligned());
    /// let adopted = HostVec::from(vec![1u8, 2, 3]);
    /// assert_eq!(adopted.is_aligned(), adopted.as_ptr() as usize % 64 == 0);
    /// ```
    pub fn is_aligned(&self) -> bool {
        (self.ptr.as_ptr() as usize).is_multiple_of(HOST_ALIGN)
    }

    /// How many elements it holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many elements it has room for without growing.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A growable buffer of elements: a `Vec` or a [`HostVec`].
pub(crate) trait ElementBuffer<T>: Extend<T> {
    /// Appends the elements of `values`.
    fn extend_from_slice(&mut self, values: &[T]);
}

impl<T: Copy> ElementBuffer<T> for Vec<T> {
    fn extend_from_slice(&mut self, values: &[T]) {
        Vec::extend_from_slice(self, values);
    }
}

impl<T: Copy> ElementBuffer<T> for HostVec<T> {
    #[inline]
    fn extend_from_slice(&mut self, values: &[T]) {
        HostVec::extend_from_slice(self, values);
    }
}

impl<T: Copy> From<Vec<T>> for HostVec<T> {
    /// Adopts the `Vec`'s memory, without a copy (its alignment stays the allocator's).
    fn from(values: Vec<T>) -> Self {
        let () = Self::ELEMENT_FITS;
        let mut values = ManuallyDrop::new(values);
        HostVec {
            // A `Vec`'s pointer is never null (dangling when nothing is allocated).
            ptr: NonNull::new(values.as_mut_ptr()).expect("a Vec's pointer is not null"),
            len: values.len(),
            capacity: values.capacity(),
            align: align_of::<T>(),
        }
    }
}

impl<T> Drop for HostVec<T> {
    /// The memory goes back to the pool, or to the allocator (every `HostVec` holds `Copy`
    /// elements, which need no drop: its constructors ask for `T: Copy`).
    fn drop(&mut self) {
        let Some(layout) = self.layout() else {
            return;
        };
        let block = RawBlock {
            ptr: self.ptr.cast(),
            layout,
            initialised: self.len * size_of::<T>(),
        };
        // An adopted `Vec`'s memory (another alignment) is freed: no request would take it.
        if layout.align() == HOST_ALIGN {
            pool::give_back(block);
        } else {
            pool::free(block);
        }
    }
}

impl<T: Copy> Default for HostVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> Deref for HostVec<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` elements are initialised and owned by this buffer; the
        // pointer is aligned for `T` and not null (dangling only when `len` is 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for HostVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Extend<T> for HostVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        let mut values = values.into_iter();
        self.reserve(values.size_hint().0);
        // Into the room there is without a check per element, then one by one.
        let room = self.spare_capacity_mut();
        let mut written = 0;
        for (slot, value) in room.iter_mut().zip(&mut values) {
            slot.write(value);
            written += 1;
        }
        self.len += written;
        for value in values {
            self.push(value);
        }
    }
}

impl<'a, T: Copy> IntoIterator for &'a HostVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: Copy> IntoIterator for &'a mut HostVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<T: Copy> FromIterator<T> for HostVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let mut collected = Self::new();
        collected.extend(values);
        collected
    }
}

impl<T: Copy> Clone for HostVec<T> {
    fn clone(&self) -> Self {
        let mut copy = Self::new();
        copy.extend_from_slice(self);
        copy
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for HostVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_keeps_the_alignment() {
        let mut values = HostVec::<u8>::new();
        for k in 0..1000u32 {
            values.push(k as u8);
            assert!(values.is_aligned());
        }
        assert_eq!(values.len(), 1000);
        assert!(values.iter().enumerate().all(|(k, &v)| v == k as u8));
        values.resize(10, 0);
        values.resize(20, 7);
        assert_eq!(&values[8..12], &[8, 9, 7, 7]);
        values.extend((0..5).map(|k| k * 2));
        assert_eq!(values.len(), 25);
        assert_eq!(values[24], 8);
    }

    #[test]
    fn an_adopted_vec_comes_back_without_a_copy() {
        let original = vec![1i64, 2, 3];
        let address = original.as_ptr();
        let adopted = HostVec::from(original);
        assert_eq!(&adopted[..], &[1, 2, 3]);
        let back = adopted.into_vec();
        assert_eq!(back.as_ptr(), address);
        // An aligned buffer comes back as a copy.
        let mut aligned = HostVec::try_with_capacity(3).unwrap();
        aligned.extend_from_slice(&back);
        assert!(aligned.is_aligned());
        assert_eq!(aligned.clone().into_vec(), back);
        // Growing an adopted buffer moves it onto the boundary.
        let mut adopted = HostVec::from(back);
        adopted.push(4);
        assert!(adopted.is_aligned());
        assert_eq!(&adopted[..], &[1, 2, 3, 4]);
    }

    #[test]
    fn zeroed_buffers_read_zero() {
        // SAFETY: all-zero bytes are a valid f64.
        let zeros = unsafe { HostVec::<f64>::try_zeroed(5000) }.unwrap();
        assert!(zeros.is_aligned());
        assert!(zeros.iter().all(|&z| z == 0.0));
        assert!(HostVec::<f32>::try_with_capacity(usize::MAX / 2).is_err());
    }

    /// The kibibytes of huge pages backing the mapping that holds `at`, from
    /// `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn huge_page_kib(at: *const u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let at = at as u64;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            if let Some((lo, hi)) = range
                && let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&at);
            } else if inside && let Some(kib) = line.strip_prefix("AnonHugePages:") {
                return kib.trim().trim_end_matches("kB").trim().parse().unwrap();
            }
        }
        0
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_zeroed_buffer_gets_huge_pages_where_a_written_one_does() {
        // 64 MiB of f32: above the most glibc's mmap threshold rises to (32 MiB), so that the
        // buffer is a fresh mapping, never heap memory another test touched and freed (whose
        // pages are small already, whatever the advice).
        const LEN: usize = 16 << 20;
        // SAFETY: all-zero bytes are a valid f32.
        let zeroed = unsafe { HostVec::<f32>::try_zeroed(LEN) }.unwrap();
        let middle = zeroed[LEN / 2..].as_ptr().cast::<u8>();
        let zeroed_kib = huge_page_kib(middle);
        // Measured before the written buffer exists: should the two share a mapping, the
        // zeroed figure counts the zeroed buffer's pages alone.
        let mut written = HostVec::<f32>::try_with_capacity(LEN).unwrap();
        written.resize(LEN, 1.0);
        let written_kib = huge_page_kib(written[LEN / 2..].as_ptr().cast());
        if written_kib == 0 || std::env::var("AXES_HUGE_PAGES").is_ok_and(|v| v == "0") {
            println!("SKIPPED: this system gives no huge pages to a written buffer");
            return;
        }
        assert!(
            zeroed_kib > 0,
            "a zeroed buffer is on small pages where a written one has {written_kib} KiB of huge pages"
        );
    }
}
