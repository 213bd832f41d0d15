//! f32, f16 and bf16 weight tiles: `RM x RN` f32 accumulators along K.

use std::arch::x86_64::*;

use super::{dispatch_tile, first, hsum, prefetch, put};

/// How far ahead (bytes) a float mat-vec row is prefetched.
const FLOAT_PREFETCH_AHEAD: usize = 2048;

/// Element kinds of the float tiles.
pub(super) const F32: u8 = 0;
pub(super) const F16: u8 = 1;
pub(super) const BF16: u8 = 2;

/// Loads elements `i..i + 8` of a row of kind `T` as f32.
///
/// # Safety
/// `p` must cover `i + 8` elements.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load8<const T: u8>(p: *const u8, i: usize) -> __m256 {
    // SAFETY: caller's contract.
    unsafe {
        match T {
            F32 => _mm256_loadu_ps(p.cast::<f32>().add(i)),
            F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<u16>().add(i).cast())),
            _ => {
                let h = _mm_loadu_si128(p.cast::<u16>().add(i).cast());
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
            }
        }
    }
}

/// Loads element `i` of a row of kind `T` as f32.
///
/// # Safety
/// `p` must cover `i + 1` elements.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load1<const T: u8>(p: *const u8, i: usize) -> f32 {
    // SAFETY: caller's contract.
    unsafe {
        match T {
            F32 => p.cast::<f32>().add(i).read_unaligned(),
            F16 => super::h2f(p.add(2 * i)),
            _ => f32::from_bits((p.cast::<u16>().add(i).read_unaligned() as u32) << 16),
        }
    }
}

/// Adds the products of elements `i..i + 8` of the `RM` rows and `RN`
/// columns to `sum`.
///
/// # Safety
/// Every row and column must cover `i + 8` elements.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn step<const T: u8, const RM: usize, const RN: usize>(
    ap: &[*const u8; RM],
    bp: &[*const u8; RN],
    i: usize,
    sum: &mut [[__m256; RN]; RM],
) {
    // SAFETY: caller's contract.
    unsafe {
        if RM <= RN {
            let av: [__m256; RM] = std::array::from_fn(|r| load8::<T>(ap[r], i));
            for j in 0..RN {
                let bv = load8::<T>(bp[j], i);
                for r in 0..RM {
                    sum[r][j] = _mm256_fmadd_ps(av[r], bv, sum[r][j]);
                }
            }
        } else {
            let bv: [__m256; RN] = std::array::from_fn(|j| load8::<T>(bp[j], i));
            for r in 0..RM {
                let av = load8::<T>(ap[r], i);
                for j in 0..RN {
                    sum[r][j] = _mm256_fmadd_ps(av, bv[j], sum[r][j]);
                }
            }
        }
    }
}

/// One `RM x RN` tile over `k` elements.
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
    // SAFETY: the caller passes RN pointers.
    let (bp, cp): ([*const u8; RN], [*mut f32; RN]) = unsafe { (first(b), first(c)) };
    let ap: [*const u8; RM] = std::array::from_fn(|r| a.wrapping_add(r * lda));
    let mut sum = [[_mm256_setzero_ps(); RN]; RM];
    let k8 = k / 8 * 8;
    let mut i = 0;
    if RM * RN >= 8 {
        // Enough independent accumulators to cover the FMA latency: one
        // step per loop, no other live vectors (a 4 x 3 tile uses all 16
        // registers: 12 sums, 3 columns, 1 row).
        while i < k8 {
            // SAFETY: i + 8 <= k and every row covers k elements.
            unsafe { step::<T, RM, RN>(&ap, &bp, i, &mut sum) };
            i += 8;
        }
    } else {
        // Two accumulator sets (even / odd 8-element steps).
        let mut sum2 = [[_mm256_setzero_ps(); RN]; RM];
        let k16 = k / 16 * 16;
        let es = if T == F32 { 4 } else { 2 };
        while i < k16 {
            if RN == 1 {
                // Mat-vec: every row is its own memory stream.
                for p in ap {
                    prefetch(p.wrapping_add(i * es + FLOAT_PREFETCH_AHEAD));
                }
            }
            // SAFETY: i + 16 <= k and every row covers k elements.
            unsafe {
                step::<T, RM, RN>(&ap, &bp, i, &mut sum);
                step::<T, RM, RN>(&ap, &bp, i + 8, &mut sum2);
            }
            i += 16;
        }
        if i < k8 {
            // SAFETY: i + 8 <= k.
            unsafe { step::<T, RM, RN>(&ap, &bp, i, &mut sum) };
        }
        for r in 0..RM {
            for j in 0..RN {
                sum[r][j] = _mm256_add_ps(sum[r][j], sum2[r][j]);
            }
        }
    }
    for r in 0..RM {
        for j in 0..RN {
            let mut s = hsum(sum[r][j]);
            for t in k8..k {
                // SAFETY: t < k.
                unsafe { s += load1::<T>(ap[r], t) * load1::<T>(bp[j], t) };
            }
            // SAFETY: c[j] covers RM outputs.
            unsafe { put(cp[j].add(r), s, acc) };
        }
    }
}

macro_rules! float_tile {
    ($name:ident, $t:ident) => {
        #[doc = concat!("[`crate::simd::TileFn`] for ", stringify!($t), " weights (up to 4 rows x 3 columns).")]
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
                    (1, 2), (2, 2), (3, 2), (4, 2),
                    (1, 3), (2, 3), (3, 3), (4, 3),
                })
            }
        }
    };
}

float_tile!(tile_f32, F32);
float_tile!(tile_f16, F16);
float_tile!(tile_bf16, BF16);
