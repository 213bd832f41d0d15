//! Kernels for weights in the repacked layout of [`crate::repack`].
//!
//! A repacked group of eight rows holds, per block, the rows' f16 scales
//! and then their quants already transposed into 4-byte slices (row `r` in
//! 32-bit lane `r`), so one contiguous 32-byte load gives what the
//! ggml-layout kernels of [`super::gemv`] build with eight loads and a
//! transpose: every row's own dot product accumulates in its own lane.
//!
//! The tiles take up to four activation columns at once, reusing each
//! unpacked weight vector for all of them. `tile_*` use AVX2 `maddubs`;
//! `tile_*_vnni` use AVX-512 VNNI's `dpbusd` on 256-bit vectors (one
//! instruction for the multiply and the widening sum). The packed GEMMs
//! read the repacked layout through packs of their own (`pack_*x8` in
//! [`super::qgemm`], [`super::kgemm`], [`super::k6gemm`] and
//! [`super::gemm`]): no transposes left, only unpacking nibbles and
//! converting scales.

use std::arch::x86_64::*;

use super::{
    PREFETCH_AHEAD, dot_vnni, dot16, dot32, first, h2f, load128, load256, prefetch, store_lanes,
};

/// Rows per repacked group.
pub(super) const ROWS: usize = crate::repack::GROUP_ROWS;
/// Bytes of a q8_0 activation block.
const B_BYTES: usize = 34;
/// Bytes of one block of a repacked q4_0 / q8_0 group.
pub(super) const Q4_GROUP_BLOCK: usize = 8 * 18;
pub(super) const Q8_GROUP_BLOCK: usize = 8 * 34;
/// Bytes of the scales opening each group block.
pub(super) const SCALES: usize = 16;

/// Prefetches the `bytes` bytes `ahead` bytes after `blk` into L1, a
/// cache line at a time. A thread's repacked groups are one forward
/// stream, yet the hardware prefetcher alone kept decode below the
/// memory's rate on a Zen 3 (docs/models.md). Never faults.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch_ahead(blk: *const u8, bytes: usize, ahead: usize) {
    let at = blk.wrapping_add(ahead);
    for line in (0..bytes).step_by(64) {
        prefetch(at.wrapping_add(line));
    }
}

/// Quants `4t..4t + 4` of activation block `i` of `b`, in every lane.
///
/// # Safety
/// `b` must cover block `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast(b: *const u8, i: usize, t: usize) -> __m256i {
    // SAFETY: caller's contract.
    _mm256_set1_epi32(unsafe {
        b.add(i * B_BYTES + 2 + 4 * t)
            .cast::<i32>()
            .read_unaligned()
    })
}

/// The q4_0 tile body: `$dot(acc, u8 weights, i8 activations)` adds the
/// 4-product sums of each 32-bit lane, in 16 bits (`$wide = false`, summed
/// to 32 by one `madd` per block) or 32 bits.
macro_rules! q4_0x8_body {
    ($n:ident, $k:ident, $a:ident, $b:ident, $c:ident, $mr:ident, $acc:ident, $dot:expr, $wide:expr) => {{
        // SAFETY: the caller passes N pointers of each kind.
        let (bp, cp): ([*const u8; $n], [*mut f32; $n]) = unsafe { (first($b), first($c)) };
        let m4 = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut sum = [_mm256_setzero_ps(); $n];
        for i in 0..$k / 32 {
            let blk = $a.wrapping_add(i * Q4_GROUP_BLOCK);
            prefetch_ahead(blk, Q4_GROUP_BLOCK, PREFETCH_AHEAD);
            // SAFETY: the group holds block i; every column covers it.
            unsafe {
                let da = _mm256_cvtph_ps(load128(blk));
                let v: [__m256i; 4] = std::array::from_fn(|g| load256(blk.add(SCALES + 32 * g)));
                let lo = v.map(|x| _mm256_and_si256(x, m4));
                let hi = v.map(|x| _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4));
                for j in 0..$n {
                    let mut isum = _mm256_setzero_si256();
                    for g in 0..4 {
                        isum = $dot(isum, lo[g], bcast(bp[j], i, g));
                        isum = $dot(isum, hi[g], bcast(bp[j], i, 4 + g));
                    }
                    let isum = if $wide {
                        isum
                    } else {
                        _mm256_madd_epi16(isum, ones)
                    };
                    let bb = bp[j].add(i * B_BYTES);
                    let dot = _mm256_sub_epi32(isum, super::gemv::offset_sum(bb));
                    let d = _mm256_mul_ps(da, _mm256_set1_ps(h2f(bb)));
                    sum[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot), sum[j]);
                }
            }
        }
        for j in 0..$n {
            // SAFETY: c[j] covers mr outputs.
            unsafe { store_lanes(cp[j], sum[j], $mr, $acc) };
        }
    }};
}

/// The q8_0 tile body: `$dot(acc, |w|, sign(y, w))` adds 32-bit sums.
macro_rules! q8_0x8_body {
    ($n:ident, $k:ident, $a:ident, $b:ident, $c:ident, $mr:ident, $acc:ident, $dot:expr) => {{
        // SAFETY: the caller passes N pointers of each kind.
        let (bp, cp): ([*const u8; $n], [*mut f32; $n]) = unsafe { (first($b), first($c)) };
        let mut sum = [_mm256_setzero_ps(); $n];
        for i in 0..$k / 32 {
            let blk = $a.wrapping_add(i * Q8_GROUP_BLOCK);
            prefetch_ahead(blk, Q8_GROUP_BLOCK, PREFETCH_AHEAD);
            // SAFETY: the group holds block i; every column covers it.
            unsafe {
                let da = _mm256_cvtph_ps(load128(blk));
                let mut isum = [_mm256_setzero_si256(); $n];
                for t in 0..8 {
                    let v = load256(blk.add(SCALES + 32 * t));
                    let ax = _mm256_sign_epi8(v, v);
                    for j in 0..$n {
                        let y = _mm256_sign_epi8(bcast(bp[j], i, t), v);
                        isum[j] = $dot(isum[j], ax, y);
                    }
                }
                for j in 0..$n {
                    let d = _mm256_mul_ps(da, _mm256_set1_ps(h2f(bp[j].add(i * B_BYTES))));
                    sum[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[j]), sum[j]);
                }
            }
        }
        for j in 0..$n {
            // SAFETY: c[j] covers mr outputs.
            unsafe { store_lanes(cp[j], sum[j], $mr, $acc) };
        }
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0x8<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q4_0x8_body!(N, k, a, b, c, mr, acc, dot16, false)
}

#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn q4_0x8_vnni<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q4_0x8_body!(N, k, a, b, c, mr, acc, dot_vnni, true)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0x8<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q8_0x8_body!(N, k, a, b, c, mr, acc, dot32)
}

#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn q8_0x8_vnni<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q8_0x8_body!(N, k, a, b, c, mr, acc, dot_vnni)
}

/// How many blocks ahead of the one being read the q6_K tiles prefetch:
/// a super-block's fields are read out of order (scales, then low and
/// high quant bits in step), which the hardware prefetcher follows late.
const Q6_PREFETCH_BLOCKS: usize = 2;

/// Bytes of one super-block of a repacked q6_K group and the offsets of
/// its fields (eight `d`, scales, then per half and slice column the two
/// low-bit slices and the high-bit slice, 96 bytes; see `repack`).
pub(super) const Q6_GROUP_BLOCK: usize = 8 * 210;
pub(super) const Q6_SCALES: usize = 16;
pub(super) const Q6_QUANTS: usize = Q6_SCALES + 128;
/// q8_K activation block bytes and field offsets.
pub(super) const K8_BYTES: usize = 292;
pub(super) const K8_QS: usize = 4;
pub(super) const K8_BSUMS: usize = 260;

/// The 6-bit quants (0..63) of one repacked q6_K slice column: from the
/// low-bit slices `v1`, `v2` and the high-bit slice `h`, the four 4-weight
/// slices `kq = 0..4` (weights `32 kq + 4c ..` of the half, `c` the
/// column), rows in lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_quants(v1: __m256i, v2: __m256i, h: __m256i) -> [__m256i; 4] {
    let m4 = _mm256_set1_epi8(0x0F);
    let m30 = _mm256_set1_epi8(0x30);
    [
        _mm256_or_si256(
            _mm256_and_si256(v1, m4),
            _mm256_and_si256(_mm256_slli_epi16::<4>(h), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(v2, m4),
            _mm256_and_si256(_mm256_slli_epi16::<2>(h), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(v1), m4),
            _mm256_and_si256(h, m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(v2), m4),
            _mm256_and_si256(_mm256_srli_epi16::<2>(h), m30),
        ),
    ]
}

/// Byte `B` of each 32-bit lane of `v`, sign-extended.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn lane_byte<const B: i32>(v: __m256i) -> __m256i {
    match B {
        0 => _mm256_srai_epi32::<24>(_mm256_slli_epi32::<24>(v)),
        1 => _mm256_srai_epi32::<24>(_mm256_slli_epi32::<16>(v)),
        2 => _mm256_srai_epi32::<24>(_mm256_slli_epi32::<8>(v)),
        _ => _mm256_srai_epi32::<24>(v),
    }
}

/// The q6_K tile body: 6-bit quants rebuilt per 4-byte slice (low 4 bits
/// from `ql`, high 2 from `qh`), `$dot(acc, q, y)` into 32-bit sums per
/// 16-weight sub-block, then `scale * (dot - 32 * bsum)` per sub-block.
macro_rules! q6_kx8_body {
    ($n:ident, $k:ident, $a:ident, $b:ident, $c:ident, $mr:ident, $acc:ident, $dot:expr) => {{
        // SAFETY: the caller passes N pointers of each kind.
        let (bp, cp): ([*const u8; $n], [*mut f32; $n]) = unsafe { (first($b), first($c)) };
        let mut sum = [_mm256_setzero_ps(); $n];
        for i in 0..$k / 256 {
            let blk = $a.wrapping_add(i * Q6_GROUP_BLOCK);
            prefetch_ahead(blk, Q6_GROUP_BLOCK, Q6_PREFETCH_BLOCKS * Q6_GROUP_BLOCK);
            // SAFETY: the group holds super-block i; every column covers it.
            unsafe {
                let d = _mm256_cvtph_ps(load128(blk));
                let scv: [__m256i; 4] =
                    std::array::from_fn(|t| load256(blk.add(Q6_SCALES + 32 * t)));
                let mut isum = [_mm256_setzero_si256(); $n];
                for half in 0..2 {
                    for quarter in 0..2 {
                        // Sub-blocks 8 * half + quarter + {0, 2, 4, 6}.
                        let mut dots = [[_mm256_setzero_si256(); 4]; $n];
                        for c in 4 * quarter..4 * quarter + 4 {
                            let at = blk.add(Q6_QUANTS + 96 * (8 * half + c));
                            let (v1, v2, h) =
                                (load256(at), load256(at.add(32)), load256(at.add(64)));
                            let q = q6_quants(v1, v2, h);
                            for j in 0..$n {
                                let y = bp[j].add(i * K8_BYTES + K8_QS + 128 * half + 4 * c);
                                for (kq, qk) in q.iter().enumerate() {
                                    let yv = _mm256_set1_epi32(
                                        y.add(32 * kq).cast::<i32>().read_unaligned(),
                                    );
                                    dots[j][kq] = $dot(dots[j][kq], *qk, yv);
                                }
                            }
                        }
                        for kq in 0..4 {
                            let s = 8 * half + quarter + 2 * kq;
                            let v = scv[s / 4];
                            let scale = match s % 4 {
                                0 => lane_byte::<0>(v),
                                1 => lane_byte::<1>(v),
                                2 => lane_byte::<2>(v),
                                _ => lane_byte::<3>(v),
                            };
                            for j in 0..$n {
                                let bsum = bp[j]
                                    .add(i * K8_BYTES + K8_BSUMS + 2 * s)
                                    .cast::<i16>()
                                    .read_unaligned();
                                let off = _mm256_set1_epi32(32 * i32::from(bsum));
                                let t = _mm256_sub_epi32(dots[j][kq], off);
                                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(t, scale));
                            }
                        }
                    }
                }
                for j in 0..$n {
                    let db = bp[j].add(i * K8_BYTES).cast::<f32>().read_unaligned();
                    let dd = _mm256_mul_ps(d, _mm256_set1_ps(db));
                    sum[j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[j]), sum[j]);
                }
            }
        }
        for j in 0..$n {
            // SAFETY: c[j] covers mr outputs.
            unsafe { store_lanes(cp[j], sum[j], $mr, $acc) };
        }
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_kx8<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q6_kx8_body!(N, k, a, b, c, mr, acc, dot32)
}

#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn q6_kx8_vnni<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q6_kx8_body!(N, k, a, b, c, mr, acc, dot_vnni)
}

/// Bytes of one super-block of a repacked q4_K group (four header
/// slices, then 32 quant slices).
const Q4K_GROUP_BLOCK: usize = 8 * 144;
const Q4K_QS: usize = 128;

/// The q4_K tile body: the rows' headers unpacked once per super-block
/// ([`super::gemv::k4_lanes_of`]), quants from their slices, the mins
/// through the activations' sub-block sums. `$dot(acc, u8 weights, i8
/// activations)` sums per 32-weight sub-block either in 16 bits (`$wide =
/// false`: `maddubs`, at most 8 * 2 * 15 * 127 < 2^15, then one `madd`
/// with the scales) or in 32 bits (`dpbusd`, then a 32-bit multiply).
macro_rules! q4_kx8_body {
    ($n:ident, $k:ident, $a:ident, $b:ident, $c:ident, $mr:ident, $acc:ident, $dot:expr, $wide:expr) => {{
        // SAFETY: the caller passes N pointers of each kind.
        let (bp, cp): ([*const u8; $n], [*mut f32; $n]) = unsafe { (first($b), first($c)) };
        let m4 = _mm256_set1_epi8(0x0F);
        let mut sum = [_mm256_setzero_ps(); $n];
        for i in 0..$k / 256 {
            let blk = $a.wrapping_add(i * Q4K_GROUP_BLOCK);
            prefetch_ahead(blk, Q4K_GROUP_BLOCK, Q4K_GROUP_BLOCK);
            // SAFETY: the group holds super-block i; every column covers it.
            unsafe {
                let s = super::gemv::k4_lanes_of(std::array::from_fn(|t| load256(blk.add(32 * t))));
                let mut isum = [_mm256_setzero_si256(); $n];
                for ch in 0..4 {
                    let mut lo_sum = [_mm256_setzero_si256(); $n];
                    let mut hi_sum = [_mm256_setzero_si256(); $n];
                    for t in 0..8 {
                        let v = load256(blk.add(Q4K_QS + 32 * (8 * ch + t)));
                        let lo = _mm256_and_si256(v, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                        for j in 0..$n {
                            let bq = bp[j].add(i * K8_BYTES + K8_QS + 64 * ch).cast::<i32>();
                            let blo = _mm256_set1_epi32(bq.add(t).read_unaligned());
                            let bhi = _mm256_set1_epi32(bq.add(8 + t).read_unaligned());
                            lo_sum[j] = $dot(lo_sum[j], lo, blo);
                            hi_sum[j] = $dot(hi_sum[j], hi, bhi);
                        }
                    }
                    let (sl, sh) = (s.sc[2 * ch], s.sc[2 * ch + 1]);
                    for j in 0..$n {
                        let (x, y) = if $wide {
                            // The scale sits in both 16-bit halves.
                            (
                                _mm256_mullo_epi32(lo_sum[j], _mm256_srli_epi32::<16>(sl)),
                                _mm256_mullo_epi32(hi_sum[j], _mm256_srli_epi32::<16>(sh)),
                            )
                        } else {
                            (
                                _mm256_madd_epi16(lo_sum[j], sl),
                                _mm256_madd_epi16(hi_sum[j], sh),
                            )
                        };
                        isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(x, y));
                    }
                }
                for j in 0..$n {
                    let y = bp[j].add(i * K8_BYTES);
                    let db = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
                    let msum = super::gemv::k4_min_sum(&s.mn, y);
                    let d = _mm256_mul_ps(s.d, db);
                    sum[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[j]), sum[j]);
                    let dmin = _mm256_mul_ps(s.dmin, db);
                    sum[j] = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(msum), sum[j]);
                }
            }
        }
        for j in 0..$n {
            // SAFETY: c[j] covers mr outputs.
            unsafe { store_lanes(cp[j], sum[j], $mr, $acc) };
        }
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_kx8<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q4_kx8_body!(N, k, a, b, c, mr, acc, dot16, false)
}

#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn q4_kx8_vnni<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    q4_kx8_body!(N, k, a, b, c, mr, acc, dot_vnni, true)
}

/// Activation elements converted to f32 at a time by the f16 tile.
const F16_CHUNK: usize = 256;

/// Repacked f16, eight rows x `N` columns: per element `k`, one 16-byte
/// load converts to the eight rows' weights in their f32 lanes, times the
/// column's element `k` broadcast (the f16 activations are converted a
/// chunk at a time). Four accumulators per column (elements `k mod 4`)
/// cover the multiply-add latency.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x8<const N: usize>(
    k: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, cp): ([*const u8; N], [*mut f32; N]) = unsafe { (first(b), first(c)) };
    let mut sum = [[_mm256_setzero_ps(); 4]; N];
    let mut x = [[0f32; F16_CHUNK]; N];
    let mut k0 = 0;
    while k0 < k {
        let len = F16_CHUNK.min(k - k0);
        for j in 0..N {
            let mut t = 0;
            // SAFETY: every column covers k elements.
            unsafe {
                while t + 8 <= len {
                    let v = _mm256_cvtph_ps(_mm_loadu_si128(bp[j].add(2 * (k0 + t)).cast()));
                    _mm256_storeu_ps(x[j].as_mut_ptr().add(t), v);
                    t += 8;
                }
                for (u, xu) in x[j].iter_mut().enumerate().take(len).skip(t) {
                    *xu = h2f(bp[j].add(2 * (k0 + u)));
                }
            }
        }
        let mut t = 0;
        // SAFETY: the group holds 16 bytes per element, k elements.
        unsafe {
            while t + 4 <= len {
                prefetch_ahead(a.wrapping_add(16 * (k0 + t)), 64, PREFETCH_AHEAD);
                for u in 0..4 {
                    let w = _mm256_cvtph_ps(load128(a.add(16 * (k0 + t + u))));
                    for j in 0..N {
                        let xv = _mm256_set1_ps(x[j][t + u]);
                        sum[j][u] = _mm256_fmadd_ps(w, xv, sum[j][u]);
                    }
                }
                t += 4;
            }
            while t < len {
                let w = _mm256_cvtph_ps(load128(a.add(16 * (k0 + t))));
                for j in 0..N {
                    sum[j][0] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[j][t]), sum[j][0]);
                }
                t += 1;
            }
        }
        k0 += len;
    }
    for j in 0..N {
        let [s0, s1, s2, s3] = sum[j];
        let total = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        // SAFETY: c[j] covers mr outputs.
        unsafe { store_lanes(cp[j], total, mr, acc) };
    }
}

/// Tile functions for repacked groups: one group of eight rows (`a` at
/// the group, whole K: the driver never cuts K for these) x 1..=4 columns.
macro_rules! repacked_tile {
    ($name:ident, $kern:ident, $what:literal) => {
        #[doc = concat!("[`crate::simd::TileFn`] for repacked ", $what, ".")]
        ///
        /// # Safety
        /// As [`crate::simd::TileFn`], with `a` at the start of a repacked
        /// group covering `k` weights, `mr <= 8` and 1..=4 columns; the CPU
        /// must have the kernel's features.
        pub unsafe fn $name(
            k: usize,
            a: *const u8,
            _lda: usize,
            mr: usize,
            b: &[*const u8],
            c: &[*mut f32],
            acc: bool,
        ) {
            // SAFETY: forwarded contract; features checked at detection.
            unsafe {
                match b.len() {
                    1 => $kern::<1>(k, a, b, c, mr, acc),
                    2 => $kern::<2>(k, a, b, c, mr, acc),
                    3 => $kern::<3>(k, a, b, c, mr, acc),
                    4 => $kern::<4>(k, a, b, c, mr, acc),
                    _ => debug_assert!(false, "tile width outside the kernel's contract"),
                }
            }
        }
    };
}

repacked_tile!(tile_q4_0x8, q4_0x8, "q4_0 (AVX2)");
repacked_tile!(tile_q4_0x8_vnni, q4_0x8_vnni, "q4_0 (AVX-512 VNNI)");
repacked_tile!(tile_q8_0x8, q8_0x8, "q8_0 (AVX2)");
repacked_tile!(tile_q8_0x8_vnni, q8_0x8_vnni, "q8_0 (AVX-512 VNNI)");
repacked_tile!(tile_q4_kx8, q4_kx8, "q4_K (AVX2)");
repacked_tile!(tile_q4_kx8_vnni, q4_kx8_vnni, "q4_K (AVX-512 VNNI)");
repacked_tile!(tile_q6_kx8, q6_kx8, "q6_K (AVX2)");
repacked_tile!(tile_q6_kx8_vnni, q6_kx8_vnni, "q6_K (AVX-512 VNNI)");
repacked_tile!(tile_f16x8, f16x8, "f16");

#[cfg(test)]
mod tests {
    use backplane_abi::{DType, TensorDesc};

    use super::*;
    use crate::repack::Repack;

    use crate::simd::test_values as values;

    /// Every tile variant of this file (AVX2 always, VNNI where the CPU
    /// has it) gives the ggml-layout kernel's results.
    #[test]
    fn avx2_and_vnni_tiles_equal_the_ggml_layout_kernel() {
        if !super::super::available() {
            return;
        }
        let vnni = is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512vl");
        let n = 3usize;
        for dtype in crate::repack::REPACK_TYPES {
            let k = match dtype.block_size() {
                256 => 512,
                1 => 263,
                _ => 256,
            };
            let t = TensorDesc::new(dtype, [k as i64, 8, 1, 1]);
            let r = Repack::for_tensor(&t).unwrap();
            let mut ggml = vec![0u8; t.nbytes() as usize];
            for (row, out) in ggml.chunks_exact_mut(r.row_bytes()).enumerate() {
                backplane_quant::quantize_row(dtype, &values(k, row as u32 + 3), out).unwrap();
            }
            let mut packed = vec![0u8; ggml.len()];
            r.write(&mut packed, 0, &ggml);
            let cols: Vec<Vec<u8>> = (0..n)
                .map(|j| {
                    let vt = backplane_quant::vec_dot_type(dtype);
                    let mut q = vec![0u8; vt.row_size(k).unwrap()];
                    backplane_quant::quantize_row(vt, &values(k, 99 + j as u32), &mut q).unwrap();
                    q
                })
                .collect();
            let b: Vec<*const u8> = cols.iter().map(|c| c.as_ptr()).collect();
            let reference = super::super::kernel(dtype).unwrap();
            let mut tiles: Vec<(&str, crate::simd::TileFn)> = Vec::new();
            match dtype {
                DType::Q4_0 => {
                    tiles.push(("avx2", tile_q4_0x8));
                    if vnni {
                        tiles.push(("vnni", tile_q4_0x8_vnni));
                    }
                }
                DType::Q4_K => {
                    tiles.push(("avx2", tile_q4_kx8));
                    if vnni {
                        tiles.push(("vnni", tile_q4_kx8_vnni));
                    }
                }
                DType::F16 => tiles.push(("avx2", tile_f16x8)),
                DType::Q8_0 => {
                    tiles.push(("avx2", tile_q8_0x8));
                    if vnni {
                        tiles.push(("vnni", tile_q8_0x8_vnni));
                    }
                }
                _ => {
                    tiles.push(("avx2", tile_q6_kx8));
                    if vnni {
                        tiles.push(("vnni", tile_q6_kx8_vnni));
                    }
                }
            }
            let mut want = vec![[0f32; 8]; n];
            for j in 0..n {
                for r0 in (0..8).step_by(reference.mr_vec) {
                    let c = [want[j][r0..].as_mut_ptr()];
                    let a = ggml[r0 * r.row_bytes()..].as_ptr();
                    let mr = reference.mr_vec.min(8 - r0);
                    // SAFETY: mr ggml rows and one column of k weights.
                    unsafe { (reference.tile)(k, a, r.row_bytes(), mr, &b[j..j + 1], &c, false) };
                }
            }
            for (name, tile) in tiles {
                let mut got = vec![[0f32; 8]; n];
                let c: Vec<*mut f32> = got.iter_mut().map(|g| g.as_mut_ptr()).collect();
                // SAFETY: one repacked group of k weights and n columns.
                unsafe { tile(k, packed.as_ptr(), r.row_bytes(), 8, &b, &c, false) };
                if matches!(dtype, DType::Q6_K | DType::F16) {
                    // Same products; the float sums run in another order.
                    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                        assert!(
                            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                            "{dtype} {name}: {g} vs {w}"
                        );
                    }
                } else {
                    assert_eq!(got, want, "{dtype} {name}");
                }
            }
        }
    }
}
