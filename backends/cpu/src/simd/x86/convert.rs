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

/// Quantizes `src` to q8_K blocks in `dst` exactly as ggml's reference
/// `quantize_row_q8_K` (and [`backplane_quant::quantize_row`]) does: the
/// scale from the first value of largest magnitude, `iscale = -127 / max`,
/// `q = min(127, nearest_int(iscale * x))` (ties to even), the 16 sums of
/// 16 quants, `d = 1 / iscale`: the same f32 operations and the same
/// integer steps, in vectors.
///
/// # Safety
/// `src.len()` must be a multiple of 256 and `dst` hold `src.len() / 256`
/// blocks of 292 bytes; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    let sign = _mm256_set1_ps(-0.0);
    let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let magic = _mm256_set1_ps(12_582_912.0);
    let (mant, half) = (
        _mm256_set1_epi32(0x007f_ffff),
        _mm256_set1_epi32(0x0040_0000),
    );
    let (top, low) = (_mm256_set1_epi32(127), _mm256_set1_epi32(0xFF));
    for (x, y) in src.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        // SAFETY: x holds 256 floats.
        let m = unsafe {
            let p = x.as_ptr();
            let mut m = _mm256_setzero_ps();
            for i in 0..32 {
                // A NaN magnitude keeps `m` (the second operand), as the
                // reference's `>` skips it.
                m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(8 * i))), m);
            }
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), m);
            lanes
        };
        let amax = m.iter().fold(0.0f32, |a, &b| if b > a { b } else { a });
        if amax == 0.0 {
            y.fill(0);
            continue;
        }
        // The reference keeps the first value whose magnitude exceeds all
        // before it: the first one reaching the largest magnitude.
        let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0 / max;
        let mul = _mm256_set1_ps(iscale);
        let (d, rest) = y.split_at_mut(4);
        let (qs, bsums) = rest.split_at_mut(256);
        d.copy_from_slice(&(1.0 / iscale).to_le_bytes());
        for (c, q8) in x.chunks_exact(32).zip(qs.chunks_exact_mut(32)) {
            // SAFETY: c holds 32 floats and q8 32 bytes.
            unsafe {
                let p = c.as_ptr();
                // The reference's `nearest_int` (its magic-number rounding,
                // NaN payloads included), `min(127)` and cast to i8 (the
                // low byte, unsigned packs of 0..255 keep it).
                let q: [__m256i; 4] = std::array::from_fn(|i| {
                    let v = _mm256_mul_ps(_mm256_loadu_ps(p.add(8 * i)), mul);
                    let bits = _mm256_castps_si256(_mm256_add_ps(v, magic));
                    let n = _mm256_sub_epi32(_mm256_and_si256(bits, mant), half);
                    _mm256_and_si256(_mm256_min_epi32(n, top), low)
                });
                let a = _mm256_packus_epi32(q[0], q[1]);
                let b = _mm256_packus_epi32(q[2], q[3]);
                let v = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), perm);
                _mm256_storeu_si256(q8.as_mut_ptr().cast(), v);
            }
        }
        for (s, g) in bsums.chunks_exact_mut(2).zip(qs.chunks_exact(16)) {
            let sum: i16 = g.iter().map(|&q| q as i8 as i16).sum();
            s.copy_from_slice(&sum.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use backplane_abi::DType;

    /// Bytes equal to the reference quantizer's, over ordinary values,
    /// ties, repeated magnitudes of both signs, zeros, NaNs (with a payload)
    /// and an infinity.
    #[test]
    fn q8_k_equals_the_reference() {
        if !super::super::available() {
            return;
        }
        let mut x = crate::simd::test_values(256 * 7, 11);
        // A block whose largest magnitude comes first negative, then positive.
        x[256 + 3] = -2.0;
        x[256 + 9] = 2.0;
        // And the other way round.
        x[512 + 1] = 3.0;
        x[512 + 200] = -3.0;
        // Exact halves after scaling by 127 / 127.
        for (i, v) in x[768..1024].iter_mut().enumerate() {
            *v = (i as f32 - 128.0) + 0.5;
        }
        x[768] = -127.0;
        // A block of zeros, one with a NaN.
        x[1024..1280].fill(0.0);
        x[1280 + 7] = f32::NAN;
        x[1280 + 9] = f32::from_bits(0x7fc0_0123);
        // An infinity (the scale becomes -0, every product 0 or NaN).
        x[1536 + 5] = f32::INFINITY;
        let rows = DType::Q8_K.row_size(x.len()).unwrap();
        let (mut want, mut got) = (vec![0u8; rows], vec![1u8; rows]);
        backplane_quant::quantize_row(DType::Q8_K, &x, &mut want).unwrap();
        // SAFETY: whole blocks.
        unsafe { super::quantize_q8_k(&x, &mut got) };
        let first = got.iter().zip(&want).position(|(g, w)| g != w);
        assert!(
            first.is_none(),
            "first difference at byte {first:?} (block of 292)"
        );
    }
}
