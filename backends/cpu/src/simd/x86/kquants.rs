//! 256-weight super-block tiles: q2_K .. q6_K against q8_K activations.
//!
//! Every K-quant is brought to one form: unsigned quants `u` (0..63) in
//! eight chunks of 32, a signed 16-bit scale per 16 weights, a 16-bit "min"
//! per 16 weights and two f32 factors, so that
//!
//! `dot = d * db * sum_s sc_s * dot_s(u, q8) - dm * db * sum_s mn_s * bsum_s`.
//!
//! Signed quants become unsigned plus a min: q3_K's `q - 4` gives
//! `mn = 4 * sc`, q6_K's `q - 32` gives `mn = 32 * sc`, both with `dm = d`.
//! Per chunk, `maddubs(u, q8)` makes 16-bit pair sums and `madd` with the
//! chunk's scale vector (scale `2c` in the low lane, `2c + 1` in the high
//! one) sums them to i32, as ggml's AVX2 kernels do; the `bsums` of q8_K give
//! the min term in one more `madd`. A weight chunk is built once per tile
//! row and used for all `RN` columns.

use std::arch::x86_64::*;

use super::{PREFETCH_AHEAD, dispatch_tile, first, h2f, hsum, load128, load256, prefetch, put};

const Q2_K: u8 = 0;
const Q3_K: u8 = 1;
const Q4_K: u8 = 2;
const Q5_K: u8 = 3;
const Q6_K: u8 = 4;

/// Bytes per super-block.
const fn a_bytes(t: u8) -> usize {
    match t {
        Q2_K => 84,
        Q3_K => 110,
        Q4_K => 144,
        Q5_K => 176,
        _ => 210,
    }
}

/// Bytes of a q8_K block, and offsets of its quants and bsums.
const B_BYTES: usize = 292;
const B_QS: usize = 4;
const B_BSUMS: usize = 260;

/// Per super-block, per row: scales of chunks 0..4 in both lanes
/// (`lo`) and of chunks 4..8 (`hi`), the mins, `d` and `dm`.
#[derive(Clone, Copy)]
struct Scales {
    lo: __m256i,
    hi: __m256i,
    mn: __m256i,
    d: f32,
    dm: f32,
}

/// Unpacks q4_K / q5_K's twelve bytes of 6-bit scales and mins into
/// (scales, mins) bytes 0..8 of two vectors (ggml's `utmp` shuffle).
///
/// # Safety
/// `p` must cover 12 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k4_scales(p: *const u8) -> (__m128i, __m128i) {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    // SAFETY: caller's contract.
    let u: [u32; 3] = unsafe { std::array::from_fn(|i| p.cast::<u32>().add(i).read_unaligned()) };
    let m3 = ((u[2] >> 4) & KMASK2) | (((u[1] >> 6) & KMASK3) << 4);
    let m2 = u[1] & KMASK1;
    let m1 = (u[2] & KMASK2) | (((u[0] >> 6) & KMASK3) << 4);
    let m0 = u[0] & KMASK1;
    (
        _mm_set_epi32(0, 0, m1 as i32, m0 as i32),
        _mm_set_epi32(0, 0, m3 as i32, m2 as i32),
    )
}

/// Unpacks q3_K's twelve bytes into sixteen signed 6-bit scales (minus 32).
///
/// # Safety
/// `p` must cover 12 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k3_scales(p: *const u8) -> __m128i {
    const KMASK1: u32 = 0x03030303;
    const KMASK2: u32 = 0x0f0f0f0f;
    // SAFETY: caller's contract.
    let a: [u32; 3] = unsafe { std::array::from_fn(|i| p.cast::<u32>().add(i).read_unaligned()) };
    let s = _mm_set_epi32(
        (((a[1] >> 4) & KMASK2) | (((a[2] >> 6) & KMASK1) << 4)) as i32,
        (((a[0] >> 4) & KMASK2) | (((a[2] >> 4) & KMASK1) << 4)) as i32,
        ((a[1] & KMASK2) | (((a[2] >> 2) & KMASK1) << 4)) as i32,
        ((a[0] & KMASK2) | ((a[2] & KMASK1) << 4)) as i32,
    );
    _mm_sub_epi8(s, _mm_set1_epi8(32))
}

/// Builds [`Scales`] from sixteen 16-bit scales and mins.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales16(sc: __m256i, mn: __m256i, d: f32, dm: f32) -> Scales {
    Scales {
        lo: _mm256_permute2x128_si256::<0x00>(sc, sc),
        hi: _mm256_permute2x128_si256::<0x11>(sc, sc),
        mn,
        d,
        dm,
    }
}

/// The scales of the super-block at `p`.
///
/// # Safety
/// `p` must cover one super-block of type `T`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales<const T: u8>(p: *const u8) -> Scales {
    // SAFETY: every offset lies within the block.
    unsafe {
        match T {
            Q2_K => {
                let raw = load128(p);
                let m4 = _mm_set1_epi8(0x0F);
                let sc = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
                let mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(raw), m4));
                scales16(sc, mn, h2f(p.add(80)), h2f(p.add(82)))
            }
            Q3_K => {
                let sc = _mm256_cvtepi8_epi16(k3_scales(p.add(96)));
                let d = h2f(p.add(108));
                scales16(sc, _mm256_slli_epi16::<2>(sc), d, d)
            }
            Q4_K | Q5_K => {
                let (sc8, mn8) = k4_scales(p.add(4));
                // Each 6-bit value covers 32 weights = two 16-weight slots.
                let dup = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
                let sc = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc8, dup));
                let mn = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(mn8, dup));
                scales16(sc, mn, h2f(p), h2f(p.add(2)))
            }
            _ => {
                let sc = _mm256_cvtepi8_epi16(load128(p.add(192)));
                let d = h2f(p.add(208));
                scales16(sc, _mm256_slli_epi16::<5>(sc), d, d)
            }
        }
    }
}

/// The scale vector of chunk `C`: scale `2C` in the low lane, `2C + 1` in
/// the high lane (ggml's `get_scale_shuffle_q3k`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn chunk_scale<const C: usize>(s: &Scales) -> __m256i {
    let m = (C % 4) as i8 * 4;
    let (l0, l1, h0, h1) = (m, m + 1, m + 2, m + 3);
    let mask = _mm256_set_epi8(
        h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, //
        l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0,
    );
    _mm256_shuffle_epi8(if C < 4 { s.lo } else { s.hi }, mask)
}

/// Shifts every 16-bit lane right by `n` and keeps the bits of `mask` in
/// each byte.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bits(x: __m256i, n: i32, mask: i8) -> __m256i {
    _mm256_and_si256(
        _mm256_srl_epi16(x, _mm_cvtsi32_si128(n)),
        _mm256_set1_epi8(mask),
    )
}

/// The unsigned quants of chunk `C` (weights `32C..32C + 32`).
///
/// # Safety
/// `p` must cover one super-block of type `T`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn chunk<const T: u8, const C: usize>(p: *const u8) -> __m256i {
    let (h, t) = ((C / 4) as i32, (C % 4) as i32);
    // SAFETY: every offset lies within the block.
    unsafe {
        match T {
            Q2_K => bits(load256(p.add(16 + 32 * h as usize)), 2 * t, 3),
            Q3_K => {
                let lo = bits(load256(p.add(32 + 32 * h as usize)), 2 * t, 3);
                let hb = bits(load256(p), 4 * h + t, 1);
                _mm256_or_si256(lo, _mm256_slli_epi16::<2>(hb))
            }
            Q4_K => bits(load256(p.add(16 + 32 * (C / 2))), 4 * (C % 2) as i32, 0x0F),
            Q5_K => {
                let lo = bits(load256(p.add(48 + 32 * (C / 2))), 4 * (C % 2) as i32, 0x0F);
                let hb = bits(load256(p.add(16)), C as i32, 1);
                _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hb))
            }
            _ => {
                // ql: chunks 4h+0 / 4h+2 from bytes 64h.., 4h+1 / 4h+3 from 64h+32..
                let ql = load256(p.add(64 * h as usize + 32 * (t as usize % 2)));
                let lo = bits(ql, 4 * (t / 2), 0x0F);
                let hb = bits(load256(p.add(128 + 32 * h as usize)), 2 * t, 3);
                _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hb))
            }
        }
    }
}

/// Adds chunk `C`'s products of the `RM` rows with the `RN` columns.
///
/// # Safety
/// `ap` / `bp` must point at super-blocks of type `T` / q8_K.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn step<const T: u8, const C: usize, const RM: usize, const RN: usize>(
    ap: &[*const u8; RM],
    bp: &[*const u8; RN],
    sc: &[Scales; RM],
    isum: &mut [[__m256i; RN]; RM],
) {
    // SAFETY: caller's contract.
    unsafe {
        let q8: [__m256i; RN] = std::array::from_fn(|j| load256(bp[j].add(B_QS + 32 * C)));
        for r in 0..RM {
            let u = chunk::<T, C>(ap[r]);
            let s = chunk_scale::<C>(&sc[r]);
            for j in 0..RN {
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, q8[j]), s);
                isum[r][j] = _mm256_add_epi32(isum[r][j], p);
            }
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
    // SAFETY: the caller passes RN pointers.
    let (b0, cp): ([*const u8; RN], [*mut f32; RN]) = unsafe { (first(b), first(c)) };
    let mut sum = [[_mm256_setzero_ps(); RN]; RM];
    for i in 0..k / 256 {
        let ap: [*const u8; RM] = std::array::from_fn(|r| a.wrapping_add(r * lda + i * ab));
        let bp: [*const u8; RN] = std::array::from_fn(|j| b0[j].wrapping_add(i * B_BYTES));
        if RN == 1 {
            for r in 0..RM {
                for l in (0..ab).step_by(64) {
                    prefetch(ap[r].wrapping_add(l + PREFETCH_AHEAD));
                }
            }
        }
        // SAFETY: super-block i lies within every row.
        unsafe {
            let sc: [Scales; RM] = std::array::from_fn(|r| scales::<T>(ap[r]));
            let mut isum = [[_mm256_setzero_si256(); RN]; RM];
            step::<T, 0, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 1, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 2, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 3, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 4, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 5, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 6, RM, RN>(&ap, &bp, &sc, &mut isum);
            step::<T, 7, RM, RN>(&ap, &bp, &sc, &mut isum);
            for j in 0..RN {
                let db = bp[j].cast::<f32>().read_unaligned();
                let bsums = load256(bp[j].add(B_BSUMS));
                for r in 0..RM {
                    let m = _mm256_cvtepi32_ps(_mm256_madd_epi16(sc[r].mn, bsums));
                    let s = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(isum[r][j]),
                        _mm256_set1_ps(sc[r].d * db),
                        sum[r][j],
                    );
                    sum[r][j] = _mm256_fmadd_ps(m, _mm256_set1_ps(-sc[r].dm * db), s);
                }
            }
        }
    }
    for r in 0..RM {
        for j in 0..RN {
            // SAFETY: c[j] covers RM outputs.
            unsafe { put(cp[j].add(r), hsum(sum[r][j]), acc) };
        }
    }
}

macro_rules! k_tile {
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

k_tile!(tile_q2_k, Q2_K);
k_tile!(tile_q3_k, Q3_K);
k_tile!(tile_q4_k, Q4_K);
k_tile!(tile_q5_k, Q5_K);
k_tile!(tile_q6_k, Q6_K);
