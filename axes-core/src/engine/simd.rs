//! x86-64 SIMD helpers of the engine: cache-line prefetch, an AVX2 8×8 transpose for tiles
//! of transposed operands, and streaming (non-temporal) stores for large results.

/// Asks the memory system for the cache lines holding the `bytes` bytes from `first`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_bytes(first: *const i8, bytes: usize) {
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(first, bytes);
}

/// Asks the memory system to bring the cache lines holding the `bytes` bytes from `first`
/// into L2, not L1: for data wanted some time later.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_bytes_to_l2(first: *const i8, bytes: usize) {
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T1 }>(first, bytes);
}

/// One prefetch of kind `HINT` per cache line of the `bytes` bytes from `first`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_lines<const HINT: i32>(first: *const i8, bytes: usize) {
    if bytes == 0 {
        return;
    }
    // From the line holding the first byte to the one holding the last, once each.
    let skip = first as usize % 64;
    for byte in (0..skip + bytes).step_by(64) {
        // SAFETY: a prefetch is a hint: it reads nothing and never faults, and the address
        // is formed with wrapping arithmetic.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<HINT>(first.wrapping_sub(skip).wrapping_add(byte))
        };
    }
}

/// How far ahead of the columns it transposes [`transpose_4byte_avx2`] asks for source
/// columns, in bytes of columns (into L2): enough requests in flight to keep the memory busy
/// while each column is only a few lines (distances measured on the transposed add:
/// `benches/NOTES.md`).
#[cfg(target_arch = "x86_64")]
const TRANSPOSE_PREFETCH_BYTES: usize = 256 << 10;

/// Copies the `rows × n` block whose element `(r, k)` is at `src + r + k * across` into `dst`
/// row-major (`dst[r * stride + k]`), moving 8×8 blocks through registers; the last `rows % 8`
/// rows are left to the caller. Elements are moved bit for bit (any 4-byte type). Eight
/// source columns are walked down all the rows before the next eight, so each column is read
/// front to back while its cache lines are still in L1.
///
/// # Safety
/// AVX2 must be available; every `src + r + k * across` (r < rows − rows % 8, k < n) must be
/// readable and `dst` must hold `rows * stride` elements, `stride >= n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose_4byte_avx2(
    src: *const f32,
    across: isize,
    dst: *mut f32,
    stride: usize,
    rows: usize,
    n: usize,
) {
    use std::arch::x86_64::*;
    let full_rows = rows - rows % 8;
    let full_cols = n - n % 8;
    let ahead = (TRANSPOSE_PREFETCH_BYTES / (rows * 4).max(1)).max(16);
    for k0 in (0..full_cols).step_by(8) {
        // The source columns `ahead` columns on, whole, into L2: a column is a few cache
        // lines, too short for the hardware prefetcher, and the ones after it a page or more
        // apart. Past the tile's last column this asks for the next tile's first columns
        // where the rows go on, else for lines no tile reads: a hint, harmless.
        for j in 0..8 {
            let column = (k0 + ahead + j) as isize * across;
            prefetch_bytes_to_l2(src.wrapping_offset(column).cast(), rows * 4);
        }
        for r0 in (0..full_rows).step_by(8) {
            // SAFETY: column k0 + j, rows r0..r0 + 8: readable by the caller's contract.
            let column = |j: usize| unsafe {
                _mm256_loadu_ps(src.offset((k0 + j) as isize * across + r0 as isize))
            };
            let (v0, v1, v2, v3) = (column(0), column(1), column(2), column(3));
            let (v4, v5, v6, v7) = (column(4), column(5), column(6), column(7));
            let t0 = _mm256_unpacklo_ps(v0, v1);
            let t1 = _mm256_unpackhi_ps(v0, v1);
            let t2 = _mm256_unpacklo_ps(v2, v3);
            let t3 = _mm256_unpackhi_ps(v2, v3);
            let t4 = _mm256_unpacklo_ps(v4, v5);
            let t5 = _mm256_unpackhi_ps(v4, v5);
            let t6 = _mm256_unpacklo_ps(v6, v7);
            let t7 = _mm256_unpackhi_ps(v6, v7);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let rows_out = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (i, row) in rows_out.into_iter().enumerate() {
                // SAFETY: (r0 + i) * stride + k0 + 8 <= rows * stride, inside dst.
                unsafe { _mm256_storeu_ps(dst.add((r0 + i) * stride + k0), row) };
            }
        }
    }
    // The columns past the last full block, for the rows the blocks covered.
    for k in full_cols..n {
        for r in 0..full_rows {
            // SAFETY: as above, element by element.
            unsafe { *dst.add(r * stride + k) = *src.offset(k as isize * across + r as isize) };
        }
    }
}

/// Copies `count` elements from `src` to `dst`, with 16-byte streaming stores from the first
/// 16-byte boundary of `dst` on and plain stores for the elements before and after.
///
/// # Safety
/// `dst` must be valid for `count` writes and `src` for `count` reads, not overlapping, and
/// `16` must be a multiple of `size_of::<T>()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn stream_copy<T: Copy>(dst: *mut T, src: *const T, count: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let per_store = 16 / std::mem::size_of::<T>();
    let mut i = 0;
    while i < count && !(dst.wrapping_add(i) as usize).is_multiple_of(16) {
        // SAFETY: i < count (the caller's contract).
        unsafe { *dst.add(i) = *src.add(i) };
        i += 1;
    }
    while i + per_store <= count {
        // SAFETY: elements i..i + per_store (16 bytes) lie within both buffers; dst + i is
        // 16-byte aligned (the loop above stopped there, and each step adds 16 bytes); SSE2
        // is part of x86-64.
        unsafe {
            _mm_stream_si128(
                dst.add(i).cast::<__m128i>(),
                _mm_loadu_si128(src.add(i).cast::<__m128i>()),
            )
        };
        i += per_store;
    }
    while i < count {
        // SAFETY: i < count.
        unsafe { *dst.add(i) = *src.add(i) };
        i += 1;
    }
}

/// [`stream_copy`] with 64-byte streaming stores (a whole cache line each) from the first
/// 64-byte boundary of `dst` on, 16-byte ones before it and after the last whole line, and
/// plain stores for the elements outside 16-byte boundaries.
///
/// # Safety
/// AVX-512F must be available; otherwise as [`stream_copy`].
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn stream_copy_lines<T: Copy>(dst: *mut T, src: *const T, count: usize) {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_stream_si512};
    let per_line = 64 / std::mem::size_of::<T>();
    // The elements before the first line boundary, and those after the last whole line.
    let lead = dst.align_offset(64).min(count);
    let lines = (count - lead) / per_line;
    // SAFETY: the three ranges split 0..count; the caller's contract covers each.
    unsafe { stream_copy(dst, src, lead) };
    for line in 0..lines {
        let at = lead + line * per_line;
        // SAFETY: elements at..at + per_line (64 bytes) lie within both buffers; dst + at is
        // on a 64-byte boundary (dst + lead is, and each step adds 64 bytes); AVX-512F is
        // available (the caller's contract).
        unsafe {
            _mm512_stream_si512(
                dst.add(at).cast::<__m512i>(),
                _mm512_loadu_si512(src.add(at).cast::<__m512i>()),
            )
        };
    }
    let done = lead + lines * per_line;
    // SAFETY: as above, for the rest.
    unsafe { stream_copy(dst.add(done), src.add(done), count - done) };
}
