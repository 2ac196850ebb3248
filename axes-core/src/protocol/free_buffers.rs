//! The bookkeeping of a pool of freed buffers, shared by the host's and the backends' pools.

use std::collections::BTreeMap;

/// Freed buffers kept for reuse under a key (a size, or a size and an alignment), with the
/// bytes they hold in all and a limit on them. Only bookkeeping: the caller frees what
/// [`keep`](Self::keep) refuses and what [`shrink_to`](Self::shrink_to) hands back.
///
/// ```
/// use axes_core::protocol::FreeBuffers;
/// let mut free: FreeBuffers<usize, &str> = FreeBuffers::new(100, |&size| size);
/// assert!(free.keep(64, "a").is_none());
/// assert_eq!(free.keep(64, "b"), Some("b")); // 128 bytes would pass the limit
/// assert_eq!(free.take(64, |_| true), Some("a"));
/// assert!(free.take(64, |_| true).is_none());
/// ```
pub struct FreeBuffers<K, B> {
    lists: BTreeMap<K, Vec<B>>,
    bytes: usize,
    limit: usize,
    bytes_of: fn(&K) -> usize,
}

impl<K: Ord + Copy, B> FreeBuffers<K, B> {
    /// An empty pool that holds at most `limit` bytes; `bytes_of` gives a key's buffer size.
    pub const fn new(limit: usize, bytes_of: fn(&K) -> usize) -> Self {
        FreeBuffers {
            lists: BTreeMap::new(),
            bytes: 0,
            limit,
            bytes_of,
        }
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most bytes held.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Sets the limit and hands every buffer past it to `free` (largest keys first); the
    /// bytes handed back.
    pub fn set_limit(&mut self, limit: usize, free: impl FnMut(K, B)) -> usize {
        self.limit = limit;
        self.shrink_to(limit, free)
    }

    /// Keeps `buffer` under `key`, or gives it back when keeping it would pass the limit.
    pub fn keep(&mut self, key: K, buffer: B) -> Option<B> {
        let size = (self.bytes_of)(&key);
        if self.bytes + size > self.limit {
            return Some(buffer);
        }
        self.lists.entry(key).or_default().push(buffer);
        self.bytes += size;
        None
    }

    /// A buffer kept under `key`: the last kept one for which `prefer` holds, else the last
    /// kept one.
    pub fn take(&mut self, key: K, prefer: impl Fn(&B) -> bool) -> Option<B> {
        let list = self.lists.get_mut(&key)?;
        let k = list.iter().rposition(prefer).unwrap_or(list.len() - 1);
        let buffer = list.swap_remove(k);
        // No empty list is kept: shrinking takes from the last list there is.
        if list.is_empty() {
            self.lists.remove(&key);
        }
        self.bytes -= (self.bytes_of)(&key);
        Some(buffer)
    }

    /// Hands buffers to `free` (largest keys first) until at most `limit` bytes are held; the
    /// bytes handed back.
    pub fn shrink_to(&mut self, limit: usize, mut free: impl FnMut(K, B)) -> usize {
        let before = self.bytes;
        while self.bytes > limit {
            let Some(mut entry) = self.lists.last_entry() else {
                break;
            };
            let key = *entry.key();
            let buffer = entry.get_mut().pop().expect("no empty list is kept");
            if entry.get().is_empty() {
                entry.remove();
            }
            self.bytes -= (self.bytes_of)(&key);
            free(key, buffer);
        }
        before - self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Taking the last buffer of a key removes its list, so that shrinking never meets an
    /// empty one; shrinking frees the largest first and counts the bytes.
    #[test]
    fn taking_and_shrinking_keep_the_count() {
        let mut free: FreeBuffers<usize, u32> = FreeBuffers::new(10_000, |&size| size);
        for (size, id) in [(100, 1), (1000, 2), (1000, 3), (400, 4)] {
            assert!(free.keep(size, id).is_none());
        }
        assert_eq!(free.bytes(), 2500);
        assert_eq!(free.take(1000, |&id| id == 2), Some(2));
        assert_eq!(free.take(400, |_| false), Some(4));
        assert!(free.take(400, |_| true).is_none());
        let mut freed = Vec::new();
        assert_eq!(free.set_limit(100, |size, id| freed.push((size, id))), 1000);
        assert_eq!(freed, [(1000, 3)]);
        assert_eq!((free.bytes(), free.limit()), (100, 100));
        assert_eq!(free.keep(1, 5), Some(5), "over the limit");
        assert_eq!(free.shrink_to(0, |_, _| {}), 100);
        assert!(free.lists.is_empty());
    }
}
