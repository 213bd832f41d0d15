//! Activation conversion with AVX2: f32 rows to q8_0 and to f16.

use std::arch::x86_64::*;

/// Quantizes `src` to q8_0 blocks in `dst` as ggml's AVX2
/// `quantize_row_q8_0`: `d = amax / 127`, `q = round(x * 127 / amax)` with
/// ties to even (the reference rounds ties away from zero; the two differ
/// only on exact halves).
///
/// # Safety
/// `src.len()` must be a multiple of 32 and `dst` hold `src.len() / 32`
/// blocks of 34 bytes; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    let sign = _mm256_set1_ps(-0.0);
    let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        // SAFETY: x holds 32 floats, y 34 bytes.
        unsafe {
            let p = x.as_ptr();
            let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(p.add(8 * i)));
            let mut m = _mm256_andnot_ps(sign, v[0]);
            for vi in &v[1..] {
                m = _mm256_max_ps(m, _mm256_andnot_ps(sign, *vi));
            }
            let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
            let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            let m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            let amax = _mm_cvtss_f32(m4);
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let dh =
                _mm_cvtsi128_si32(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d))) as u16;
            y.as_mut_ptr().cast::<u16>().write_unaligned(dh);
            let mul = _mm256_set1_ps(id);
            let q: [__m256i; 4] = std::array::from_fn(|i| {
                _mm256_cvtps_epi32(_mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(
                    v[i], mul,
                )))
            });
            let a = _mm256_packs_epi32(q[0], q[1]);
            let b = _mm256_packs_epi32(q[2], q[3]);
            let q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), perm);
            _mm256_storeu_si256(y.as_mut_ptr().add(2).cast(), q8);
        }
    }
}

/// Converts `src` to f16 (round to nearest even) into `dst` bytes.
///
/// # Safety
/// `dst` must hold `2 * src.len()` bytes; the CPU must have AVX2, FMA and
/// F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn to_f16(src: &[f32], dst: &mut [u8]) {
    let n8 = src.len() / 8 * 8;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 <= src.len() and dst holds 2 bytes per value.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.add(i)));
            _mm_storeu_si128(d.add(2 * i).cast(), h);
        }
        i += 8;
    }
    for (t, &v) in src.iter().enumerate().skip(n8) {
        // SAFETY: dst holds 2 bytes per value.
        unsafe {
            d.add(2 * t)
                .cast::<u16>()
                .write_unaligned(half::f16::from_f32(v).to_bits())
        };
    }
}
