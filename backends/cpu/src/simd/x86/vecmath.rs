//! AVX2 + FMA forms of [`crate::simd::vecmath`]'s helpers.

use std::arch::x86_64::*;

use crate::simd::vecmath::{PORTABLE, VecOps};

/// The AVX2 helpers. Only use when [`super::available`] returned true.
pub const OPS: VecOps = VecOps {
    // SAFETY: chosen only after the features were detected.
    dot: |a, b| unsafe { dot(a, b) },
    // SAFETY: as above.
    dots: |q, rows, out| unsafe { dots(q, rows, out) },
    // SAFETY: as above.
    weighted_sum: |acc, p, rows| unsafe { weighted_sum(acc, p, rows) },
    // SAFETY: as above.
    scale: |y, a| unsafe { scale(y, a) },
    // SAFETY: as above.
    mad_f16: |acc, a, x| unsafe { mad_f16(acc, a, x) },
    // SAFETY: as above.
    scale_f16: |acc, a| unsafe { scale_f16(acc, a) },
    // SAFETY: as above.
    exp_sum: |s, max| unsafe { exp_sum(s, max) },
};

#[target_feature(enable = "avx2,fma,f16c")]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY: every load reads 8 elements below n of both slices.
    unsafe {
        while i + 32 <= n {
            for (u, s) in acc.iter_mut().enumerate() {
                let x = _mm256_loadu_ps(a.as_ptr().add(i + 8 * u));
                let y = _mm256_loadu_ps(b.as_ptr().add(i + 8 * u));
                *s = _mm256_fmadd_ps(x, y, *s);
            }
            i += 32;
        }
        while i + 8 <= n {
            let x = _mm256_loadu_ps(a.as_ptr().add(i));
            let y = _mm256_loadu_ps(b.as_ptr().add(i));
            acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
            i += 8;
        }
    }
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    super::hsum(v) + (PORTABLE.dot)(&a[i..n], &b[i..n])
}

/// Four rows at a time: each 8 elements of `q` loaded once for the four,
/// the four sums reduced together.
#[target_feature(enable = "avx2,fma,f16c")]
fn dots(q: &[f32], rows: &[f32], out: &mut [f32]) {
    let n = q.len();
    if n == 0 {
        out.fill(0.0);
        return;
    }
    let n8 = n / 8 * 8;
    let m = out.len().min(rows.len() / n);
    let mut j = 0;
    while j + 4 <= m {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY: rows j..j + 4 lie in `rows`; i + 8 <= n.
        unsafe {
            while i < n8 {
                let x = _mm256_loadu_ps(q.as_ptr().add(i));
                for (r, s) in acc.iter_mut().enumerate() {
                    let y = _mm256_loadu_ps(rows.as_ptr().add((j + r) * n + i));
                    *s = _mm256_fmadd_ps(x, y, *s);
                }
                i += 8;
            }
        }
        // Lanes of (0, 1) and (2, 3) pairwise, then the halves.
        let h01 = _mm256_hadd_ps(acc[0], acc[1]);
        let h23 = _mm256_hadd_ps(acc[2], acc[3]);
        let h = _mm256_hadd_ps(h01, h23);
        let v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
        let mut four = [0f32; 4];
        // SAFETY: four floats.
        unsafe { _mm_storeu_ps(four.as_mut_ptr(), v) };
        for (r, o) in out[j..j + 4].iter_mut().enumerate() {
            *o = four[r] + (PORTABLE.dot)(&q[n8..], &rows[(j + r) * n + n8..(j + r + 1) * n]);
        }
        j += 4;
    }
    for jj in j..m {
        out[jj] = dot(q, &rows[jj * n..(jj + 1) * n]);
    }
}

/// Up to 64 accumulators held in registers across all rows, then stored.
#[target_feature(enable = "avx2,fma,f16c")]
fn weighted_sum(acc: &mut [f32], p: &[f32], rows: &[f32]) {
    let n = acc.len();
    if n == 0 {
        return;
    }
    let m = p.len().min(rows.len() / n);
    let mut c0 = 0;
    while c0 + 64 <= n {
        // SAFETY: columns c0..c0 + 64 lie in acc and in every row.
        unsafe {
            let mut v: [__m256; 8] =
                std::array::from_fn(|u| _mm256_loadu_ps(acc.as_ptr().add(c0 + 8 * u)));
            for (j, &pj) in p.iter().enumerate().take(m) {
                if pj != 0.0 {
                    let pv = _mm256_set1_ps(pj);
                    let r = rows.as_ptr().add(j * n + c0);
                    for (u, x) in v.iter_mut().enumerate() {
                        *x = _mm256_fmadd_ps(pv, _mm256_loadu_ps(r.add(8 * u)), *x);
                    }
                }
            }
            for (u, x) in v.iter().enumerate() {
                _mm256_storeu_ps(acc.as_mut_ptr().add(c0 + 8 * u), *x);
            }
        }
        c0 += 64;
    }
    if c0 < n {
        for (j, &pj) in p.iter().enumerate().take(m) {
            if pj != 0.0 {
                axpy(&mut acc[c0..], pj, &rows[j * n + c0..(j + 1) * n]);
            }
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let av = _mm256_set1_ps(a);
    let mut i = 0;
    // SAFETY: every access covers 8 elements below n of both slices.
    unsafe {
        while i + 8 <= n {
            let p = y.as_mut_ptr().add(i);
            let v = _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr().add(i)), _mm256_loadu_ps(p));
            _mm256_storeu_ps(p, v);
            i += 8;
        }
    }
    crate::simd::vecmath::axpy_portable(&mut y[i..n], a, &x[i..n]);
}

#[target_feature(enable = "avx2,fma,f16c")]
fn scale(y: &mut [f32], a: f32) {
    let av = _mm256_set1_ps(a);
    let mut chunks = y.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: c has 8 elements.
        unsafe {
            _mm256_storeu_ps(
                c.as_mut_ptr(),
                _mm256_mul_ps(av, _mm256_loadu_ps(c.as_ptr())),
            )
        };
    }
    (PORTABLE.scale)(chunks.into_remainder(), a);
}

/// Rounds eight lanes to f16 (to nearest, ties to even) and back.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn round8(x: __m256) -> __m256 {
    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn mad_f16(acc: &mut [f32], w: f32, v: &[f32]) {
    let n = acc.len().min(v.len());
    let (acc, v) = (&mut acc[..n], &v[..n]);
    let wv = _mm256_set1_ps(w);
    let mut chunks = acc.chunks_exact_mut(8);
    let mut vchunks = v.chunks_exact(8);
    for (a, x) in (&mut chunks).zip(&mut vchunks) {
        // SAFETY: a and x hold eight f32 each.
        unsafe {
            let y = _mm256_loadu_ps(a.as_ptr());
            let r = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr()), wv, y);
            _mm256_storeu_ps(a.as_mut_ptr(), round8(r));
        }
    }
    for (a, &x) in chunks.into_remainder().iter_mut().zip(vchunks.remainder()) {
        *a = crate::simd::vecmath::round_f16(x.mul_add(w, *a));
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn scale_f16(acc: &mut [f32], a: f32) {
    let av = _mm256_set1_ps(a);
    let mut chunks = acc.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: c holds eight f32.
        unsafe {
            let r = _mm256_mul_ps(_mm256_loadu_ps(c.as_ptr()), av);
            _mm256_storeu_ps(c.as_mut_ptr(), round8(r));
        }
    }
    for x in chunks.into_remainder() {
        *x = crate::simd::vecmath::round_f16(*x * a);
    }
}

/// `exp(x)` of 8 lanes: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, a degree-6
/// polynomial for `exp(r)` (Cephes' coefficients, about 1 ulp), `2^n`
/// built in the exponent bits; lanes below -87.3 (-inf included) give 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    let tiny = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(-87.3));
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(-87.3)),
        _mm256_set1_ps(88.3),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    // ln 2 in two parts, so r keeps its low bits.
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let p = _mm256_fmadd_ps(
        p,
        _mm256_mul_ps(r, r),
        _mm256_add_ps(r, _mm256_set1_ps(1.0)),
    );
    let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(pow2)))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn exp_sum(s: &mut [f32], max: f32) -> f32 {
    let mv = _mm256_set1_ps(max);
    let mut acc = _mm256_setzero_ps();
    let mut chunks = s.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: c has 8 elements.
        unsafe {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), mv));
            _mm256_storeu_ps(c.as_mut_ptr(), e);
            acc = _mm256_add_ps(acc, e);
        }
    }
    super::hsum(acc) + (PORTABLE.exp_sum)(chunks.into_remainder(), max)
}
