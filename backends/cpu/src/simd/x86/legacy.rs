//! 32-weight block tiles: q4_0, q4_1, q5_0, q5_1, q8_0 against q8_0 / q8_1
//! activations.
//!
//! A weight block is unpacked once into 32 bytes (signed `q - offset` for
//! the `_0` types, unsigned `q` for the `_1` types) and multiplied with each
//! column's block by `maddubs` (the sign trick of ggml's `mul_sum_i8_pairs`
//! for signed values), summed to i32 by `madd`, scaled by `d_a * d_b` into
//! the f32 accumulators. The `_1` types add `m_a * s_b` per block.

use std::arch::x86_64::*;

use super::{PREFETCH_AHEAD, dispatch_tile, first, h2f, hsum, load128, prefetch, put};

const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q5_1: u8 = 3;
const Q8_0: u8 = 4;

/// Bytes per weight block.
const fn a_bytes(t: u8) -> usize {
    match t {
        Q4_0 => 18,
        Q4_1 => 20,
        Q5_0 => 22,
        Q5_1 => 24,
        _ => 34,
    }
}

/// Whether the unpacked values are signed (no min term).
const fn signed(t: u8) -> bool {
    matches!(t, Q4_0 | Q5_0 | Q8_0)
}

/// 32 nibbles at `p` (low nibbles first, then high) as bytes 0..15.
///
/// # Safety
/// `p` must cover 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: caller's contract.
    let x = unsafe { load128(p) };
    let both = _mm256_set_m128i(_mm_srli_epi16::<4>(x), x);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Spreads the 32 bits at `p` to 32 bytes of 0x00 / 0xFF (ggml's
/// `bytes_from_bits_32`).
///
/// # Safety
/// `p` must cover 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bits_to_bytes(p: *const u8) -> __m256i {
    // SAFETY: caller's contract.
    let x = unsafe { p.cast::<u32>().read_unaligned() } as i32;
    let shuf = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// Unpacks the weight block at `p`: (values, d, m). q4_0's values come
/// unsigned (`q`, not `q - 8`), see [`tile`].
///
/// # Safety
/// `p` must cover one block of type `T`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack<const T: u8>(p: *const u8) -> (__m256i, f32, f32) {
    // SAFETY: every offset lies within the block.
    unsafe {
        match T {
            // Unsigned here: the tile subtracts 8 * the column's pair sums.
            Q4_0 => (nibbles(p.add(2)), h2f(p), 0.0),
            Q4_1 => (nibbles(p.add(4)), h2f(p), h2f(p.add(2))),
            Q5_0 => {
                let hi =
                    _mm256_andnot_si256(bits_to_bytes(p.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
                (_mm256_or_si256(nibbles(p.add(6)), hi), h2f(p), 0.0)
            }
            Q5_1 => {
                let hi = _mm256_and_si256(bits_to_bytes(p.add(4)), _mm256_set1_epi8(0x10));
                (
                    _mm256_or_si256(nibbles(p.add(8)), hi),
                    h2f(p),
                    h2f(p.add(2)),
                )
            }
            _ => (_mm256_loadu_si256(p.add(2).cast()), h2f(p), 0.0),
        }
    }
}

/// One `RM x RN` tile over `k` weights.
///
/// # Safety
/// As [`crate::simd::TileFn`], with `b.len() == c.len() == RN`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<const T: u8, const RM: usize, const RN: usize>(
    k: usize,
    a: *const u8,
    lda: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    let ab = a_bytes(T);
    // Activation blocks: q8_0 (d, qs) or q8_1 (d, s, qs).
    let (bb, bqs) = if signed(T) { (34, 2) } else { (36, 4) };
    // SAFETY: the caller passes RN pointers.
    let (bp, cp): ([*const u8; RN], [*mut f32; RN]) = unsafe { (first(b), first(c)) };
    let ap: [*const u8; RM] = std::array::from_fn(|r| a.wrapping_add(r * lda));
    let ones = _mm256_set1_epi16(1);
    let mut sum = [[_mm256_setzero_ps(); RN]; RM];
    let mut summ = [[0.0f32; RN]; RM];
    for i in 0..k / 32 {
        // SAFETY: block i lies within every row (k is a whole number of blocks).
        unsafe {
            let by: [__m256i; RN] =
                std::array::from_fn(|j| _mm256_loadu_si256(bp[j].add(i * bb + bqs).cast()));
            let db: [__m256; RN] = std::array::from_fn(|j| _mm256_set1_ps(h2f(bp[j].add(i * bb))));
            // q4_0: sum (q - 8) y = sum q y - 8 sum y, pair by pair, so the
            // unsigned nibbles go straight into maddubs (no sign trick) and
            // 8 y's pair sums, shared by all rows, are subtracted.
            let corr: [__m256i; RN] = std::array::from_fn(|j| {
                if T == Q4_0 {
                    _mm256_maddubs_epi16(_mm256_set1_epi8(8), by[j])
                } else {
                    _mm256_setzero_si256()
                }
            });
            for r in 0..RM {
                if RN == 1 {
                    prefetch(ap[r].wrapping_add(i * ab + PREFETCH_AHEAD));
                }
                let (av, da, ma) = unpack::<T>(ap[r].add(i * ab));
                let dav = _mm256_set1_ps(da);
                let sign_trick = signed(T) && T != Q4_0;
                let ax = if sign_trick {
                    _mm256_sign_epi8(av, av)
                } else {
                    av
                };
                for j in 0..RN {
                    let y = if sign_trick {
                        _mm256_sign_epi8(by[j], av)
                    } else {
                        by[j]
                    };
                    let mut p16 = _mm256_maddubs_epi16(ax, y);
                    if T == Q4_0 {
                        p16 = _mm256_sub_epi16(p16, corr[j]);
                    }
                    let dot = _mm256_madd_epi16(p16, ones);
                    sum[r][j] = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(dot),
                        _mm256_mul_ps(dav, db[j]),
                        sum[r][j],
                    );
                    if !signed(T) {
                        summ[r][j] += ma * h2f(bp[j].add(i * bb + 2));
                    }
                }
            }
        }
    }
    for r in 0..RM {
        for j in 0..RN {
            // SAFETY: c[j] covers RM outputs.
            unsafe { put(cp[j].add(r), hsum(sum[r][j]) + summ[r][j], acc) };
        }
    }
}

macro_rules! legacy_tile {
    ($name:ident, $t:ident) => {
        #[doc = concat!("[`crate::simd::TileFn`] for ", stringify!($t), " weights (up to 2 rows x 4 columns, 4 rows x 1).")]
        ///
        /// # Safety
        /// As [`crate::simd::TileFn`]; the CPU must have AVX2, FMA and F16C.
        pub unsafe fn $name(
            k: usize,
            a: *const u8,
            lda: usize,
            mr: usize,
            b: &[*const u8],
            c: &[*mut f32],
            acc: bool,
        ) {
            // SAFETY: forwarded contract; features checked by the caller.
            unsafe {
                dispatch_tile!(tile[$t](k, a, lda, mr, b, c, acc) {
                    (1, 1), (2, 1), (3, 1), (4, 1),
                    (1, 2), (2, 2), (1, 3), (2, 3), (1, 4), (2, 4),
                })
            }
        }
    };
}

legacy_tile!(tile_q4_0, Q4_0);
legacy_tile!(tile_q4_1, Q4_1);
legacy_tile!(tile_q5_0, Q5_0);
legacy_tile!(tile_q5_1, Q5_1);
legacy_tile!(tile_q8_0, Q8_0);
