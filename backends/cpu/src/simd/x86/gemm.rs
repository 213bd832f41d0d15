//! Packed f32 GEMM for float weights (f32, f16, bf16) and f32 activations.
//!
//! The classic outer-product form: a panel of weight rows is packed once
//! per block as f32, K-major, [`MR`] rows per K step (weight row `r` in
//! vector lane `r % 8`), so one micro-kernel step loads two vectors of 8
//! rows and multiplies them with `NR` activation values broadcast from
//! the activations packed once per node ([`crate::simd::pack_columns`]:
//! one sequential stream per call, where the `NR` rows of the source would
//! be `NR` short streams, each a fresh start for the hardware prefetchers
//! and all on the same cache sets when rows are 4 KiB multiples apart),
//! into `2 x NR` accumulators that hold
//! 16 consecutive outputs of each column: no horizontal sums, and f16 /
//! bf16 weights cost the same as f32 ones (converted once while packing).

use std::arch::x86_64::*;

use super::first;
use super::float::{BF16, F16, F32, load1, load8};
use super::load128;
use crate::repack::GROUP_ROWS as ROWS;

/// Weight rows per micro-tile (two vectors).
pub const MR: usize = 16;
/// Most activation columns per micro-tile.
pub const NR: usize = 6;

/// Transposes eight vectors (rows) of eight elements in place.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose8(r: &mut [__m256; 8]) {
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(x, y)
        } else {
            _mm256_unpackhi_ps(x, y)
        }
    });
    // s[4g + 0..4] from t[4g..4g + 4]: (lo lo), (hi lo), (lo hi), (hi hi) pairs.
    let s: [__m256; 8] = std::array::from_fn(|i| {
        let g = i / 4 * 4;
        let (x, y) = (t[g + (i % 4) / 2], t[g + 2 + (i % 4) / 2]);
        if i % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(x, y)
        } else {
            _mm256_shuffle_ps::<0xEE>(x, y)
        }
    });
    for i in 0..4 {
        r[i] = _mm256_permute2f128_ps::<0x20>(s[i], s[4 + i]);
        r[4 + i] = _mm256_permute2f128_ps::<0x31>(s[i], s[4 + i]);
    }
}

/// Packs elements `k0..k0 + kc` of `rows` weight rows of kind `T` (rows
/// `lda` bytes apart from `a`) into `dst` (any alignment):
/// `rows.div_ceil(S * MR) * S` groups of `kc * MR` floats (or halves,
/// when `H`), element `k` of row `g * MR + r` at `(g * kc + k) * MR + r`,
/// rows past `rows` zero. `S` is the number of such groups a kernel's
/// call takes ([`super::gemm512`] takes two).
///
/// # Safety
/// Every row must cover `k0 + kc` elements; `dst` must hold
/// `rows.div_ceil(S * MR) * S * kc * MR` elements.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn pack<const T: u8, const H: bool, const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    let dst = dst.cast::<f32>();
    let es = if T == F32 { 4 } else { 2 };
    let k8 = kc / 8 * 8;
    for g in 0..rows.div_ceil(S * MR) * S {
        let out = dst.wrapping_add(g * kc * MR);
        let half_out = dst.cast::<u16>().wrapping_add(g * kc * MR);
        for half in 0..2 {
            let r0 = g * MR + half * 8;
            let row = |r: usize| a.wrapping_add((r0 + r) * lda + k0 * es);
            let live = rows.saturating_sub(r0).min(8);
            let mut k = 0;
            while k < k8 {
                let mut v = [_mm256_setzero_ps(); 8];
                for r in 0..live {
                    // SAFETY: row r0 + r < rows covers k0 + k + 8 elements.
                    v[r] = unsafe { load8::<T>(row(r), k) };
                }
                transpose8(&mut v);
                for (i, vi) in v.iter().enumerate() {
                    let at = (k + i) * MR + half * 8;
                    // SAFETY: at + 8 <= kc * MR elements of the group.
                    unsafe {
                        if H {
                            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(*vi);
                            _mm_storeu_si128(half_out.add(at).cast(), h);
                        } else {
                            _mm256_storeu_ps(out.add(at), *vi);
                        }
                    }
                }
                k += 8;
            }
            for k in k8..kc {
                for r in 0..8 {
                    // SAFETY: as above, one element at a time.
                    unsafe {
                        let x = if r < live { load1::<T>(row(r), k) } else { 0.0 };
                        let at = k * MR + half * 8 + r;
                        if H {
                            let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x));
                            half_out
                                .add(at)
                                .write_unaligned(_mm_extract_epi16::<0>(h) as u16);
                        } else {
                            out.add(at).write_unaligned(x);
                        }
                    }
                }
            }
        }
    }
}

/// [`crate::simd::PackFn`] for f32 weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_f32(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<F32, false, 1>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for f16 weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_f16(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<F16, false, 1>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for f16 weights kept in f16 ([`panel_f16`]).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_f16_half(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<F16, true, 1>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for bf16 weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_bf16(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<BF16, false, 1>(a, lda, rows, k0, kc, d) }
}

/// One `MR x N` micro-tile: `kc` steps of packed rows `a` times the
/// packed f32 columns `b` ([`crate::simd::pack_columns`]), written (or
/// added) to the `mr` first outputs of each `c`.
///
/// # Safety
/// As [`crate::simd::PanelFn`], with `c.len() == N` and `b` holding
/// `kc * N` floats.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn micro<const N: usize, const H: bool>(
    kc: usize,
    a: *const u8,
    b: *const f32,
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers.
    let cp: [*mut f32; N] = unsafe { first(c) };
    let mut sum = [[_mm256_setzero_ps(); 2]; N];
    for k in 0..kc {
        // SAFETY: the packed panels hold kc steps of MR rows and N columns.
        unsafe {
            let (a0, a1) = if H {
                let a = a.cast::<u16>().add(k * MR);
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(a.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(a.add(8).cast())),
                )
            } else {
                let a = a.cast::<f32>().add(k * MR);
                (_mm256_loadu_ps(a), _mm256_loadu_ps(a.add(8)))
            };
            for j in 0..N {
                let bv = _mm256_broadcast_ss(&*b.add(k * N + j));
                sum[j][0] = _mm256_fmadd_ps(a0, bv, sum[j][0]);
                sum[j][1] = _mm256_fmadd_ps(a1, bv, sum[j][1]);
            }
        }
    }
    for j in 0..N {
        if mr == MR {
            // SAFETY: c[j] covers MR outputs.
            unsafe {
                for h in 0..2 {
                    let p = cp[j].add(8 * h);
                    let v = if acc {
                        _mm256_add_ps(sum[j][h], _mm256_loadu_ps(p))
                    } else {
                        sum[j][h]
                    };
                    _mm256_storeu_ps(p, v);
                }
            }
        } else {
            let mut t = [0.0f32; MR];
            // SAFETY: t holds MR floats.
            unsafe {
                _mm256_storeu_ps(t.as_mut_ptr(), sum[j][0]);
                _mm256_storeu_ps(t.as_mut_ptr().add(8), sum[j][1]);
            }
            for (r, &v) in t.iter().enumerate().take(mr) {
                // SAFETY: c[j] covers mr outputs.
                unsafe { super::put(cp[j].add(r), v, acc) };
            }
        }
    }
}

/// Dispatches a panel call to the micro-tile of its width.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX2, FMA and F16C.
#[inline(always)]
unsafe fn panel_of<const H: bool>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    let Some(&bp) = b.first() else {
        return;
    };
    let bp = bp.cast::<f32>();
    // SAFETY: forwarded contract; features checked by the caller.
    unsafe {
        match b.len() {
            6 => micro::<6, H>(kc, a, bp, c, mr, acc),
            5 => micro::<5, H>(kc, a, bp, c, mr, acc),
            4 => micro::<4, H>(kc, a, bp, c, mr, acc),
            3 => micro::<3, H>(kc, a, bp, c, mr, acc),
            2 => micro::<2, H>(kc, a, bp, c, mr, acc),
            1 => micro::<1, H>(kc, a, bp, c, mr, acc),
            _ => debug_assert!(false, "panel width outside the kernel's contract"),
        }
    }
}

/// [`crate::simd::PanelFn`]: up to [`MR`] rows packed as f32 x [`NR`]
/// packed columns (`b[0]` at their panel, [`crate::simd::Gemm::b_packed`]).
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn panel(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { panel_of::<false>(kc, a, b, c, mr, acc) }
}

/// [`crate::simd::PanelFn`]: up to [`MR`] rows packed as f16
/// ([`pack_f16_half`]: half the bytes to stream from L2, converted in
/// the loop) x [`NR`] packed columns.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn panel_f16(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { panel_of::<true>(kc, a, b, c, mr, acc) }
}

/// [`crate::simd::PackFn`] for repacked f16 groups, feeding the f16 GEMM
/// of [`panel_f16`]: its group of 16 rows holds, per element,
/// the 16 rows' halves side by side, which is two repacked groups' 16
/// bytes each, copied as they are.
///
/// # Safety
/// As [`crate::simd::PackFn`], with `a` at the start of a repacked group
/// and `rows` a multiple of eight.
pub unsafe fn pack_f16x8_half(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_f16x8::<1>(a, lda, rows, k0, kc, d) }
}

/// [`pack_f16x8_half`] for the AVX-512 f16 GEMM of
/// [`super::gemm512::panel_f16`], whose groups are two of those groups.
///
/// # Safety
/// As [`pack_f16x8_half`].
pub unsafe fn pack_f16x8_half_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_f16x8::<2>(a, lda, rows, k0, kc, d) }
}

/// Packs `rows.div_ceil(S * 16) * S` groups of 16 rows as
/// [`pack_f16x8_half`] describes, rows past `rows` zero.
///
/// # Safety
/// As [`pack_f16x8_half`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_f16x8<const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    for g in 0..rows.div_ceil(S * MR) * S {
        for half in 0..MR / ROWS {
            let r0 = g * MR + half * ROWS;
            let src = a.wrapping_add(r0 * lda + 16 * k0);
            for k in 0..kc {
                let at = 2 * ((g * kc + k) * MR + half * ROWS);
                // SAFETY: the group covers k0 + kc elements when r0 <
                // rows; the destination holds the whole packed block.
                unsafe {
                    let v = if r0 < rows {
                        load128(src.add(16 * k))
                    } else {
                        _mm_setzero_si128()
                    };
                    _mm_storeu_si128(d.add(at).cast(), v);
                }
            }
        }
    }
}
