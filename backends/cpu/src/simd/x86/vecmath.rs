//! AVX2 + FMA forms of [`crate::simd::vecmath`]'s helpers.

use std::arch::x86_64::*;

use crate::simd::vecmath::{PORTABLE, VecOps};

/// The AVX2 helpers. Only use when [`super::available`] returned true.
pub const OPS: VecOps = VecOps {
    // SAFETY: chosen only after the features were detected.
    dot: |a, b| unsafe { dot(a, b) },
    // SAFETY: as above.
    axpy: |y, a, x| unsafe { axpy(y, a, x) },
    // SAFETY: as above.
    scale: |y, a| unsafe { scale(y, a) },
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
    (PORTABLE.axpy)(&mut y[i..n], a, &x[i..n]);
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
