//! Row-sized f32 helpers for the kernels outside mat-mul (attention's
//! scores, softmax weights and value sums), chosen once per CPU like the
//! mat-mul tiles: AVX2 + FMA where present, portable loops otherwise.

/// The helpers one CPU runs.
#[derive(Clone, Copy, Debug)]
pub struct VecOps {
    /// `sum(a[i] * b[i])` over the shorter length.
    pub dot: fn(&[f32], &[f32]) -> f32,
    /// `out[j] = dot(q, rows[j])` for `out.len()` rows of `q.len()`
    /// elements each in `rows`.
    pub dots: fn(&[f32], &[f32], &mut [f32]),
    /// `acc += sum_j p[j] * rows[j]` for `p.len()` rows of `acc.len()`
    /// elements each in `rows`; rows with `p[j] == 0` are skipped (never
    /// read), as masked keys' values may be anything.
    pub weighted_sum: fn(&mut [f32], &[f32], &[f32]),
    /// `y[i] *= a`.
    pub scale: fn(&mut [f32], f32),
    /// `acc[i] = f16(acc[i] + a * x[i])`, `acc` holding f16 values in f32
    /// (ggml's `ggml_vec_mad_f16`: fused where the CPU has FMA).
    pub mad_f16: fn(&mut [f32], f32, &[f32]),
    /// `acc[i] = f16(acc[i] * a)` (ggml's `ggml_vec_scale_f16`).
    pub scale_f16: fn(&mut [f32], f32),
    /// `s[i] = exp(s[i] - max)` (0 where `s[i]` is -inf; results below f32's
    /// normal range may be 0), returning the sum.
    pub exp_sum: fn(&mut [f32], f32) -> f32,
}

/// The portable helpers.
pub const PORTABLE: VecOps = VecOps {
    dot: dot_portable,
    dots: |q, rows, out| {
        for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len().max(1))) {
            *o = dot_portable(q, r);
        }
    },
    weighted_sum: |acc, p, rows| {
        for (&pj, r) in p.iter().zip(rows.chunks_exact(acc.len().max(1))) {
            if pj != 0.0 {
                axpy_portable(acc, pj, r);
            }
        }
    },
    scale: |y, a| y.iter_mut().for_each(|y| *y *= a),
    mad_f16: |acc, a, x| {
        for (y, &x) in acc.iter_mut().zip(x) {
            *y = round_f16(*y + a * x);
        }
    },
    scale_f16: |acc, a| acc.iter_mut().for_each(|y| *y = round_f16(*y * a)),
    exp_sum: |s, max| {
        let mut sum = 0.0;
        for v in s {
            *v = (*v - max).exp();
            sum += *v;
        }
        sum
    },
};

/// `x` rounded to the nearest f16 value (ties to even, overflow to
/// infinity, NaN kept, as F16C's conversion), kept in f32; integer
/// operations and selects only, so that loops over it vectorize.
#[inline]
pub fn round_f16(x: f32) -> f32 {
    /// Bits of the smallest normal f16 (2^-14) as an f32.
    const F16_MIN_NORMAL_BITS: u32 = 0x3880_0000;
    /// Bits of the largest finite f16 (65504) as an f32.
    const F16_MAX_BITS: u32 = 0x477f_e000;
    let b = x.to_bits();
    let a = b & 0x7fff_ffff;
    // Normal f16 range: keep 10 mantissa bits, the 13 dropped ones rounded
    // to even.
    let normal = (a + 0x0fff + ((a >> 13) & 1)) & !0x1fff;
    // Subnormal f16 values are multiples of 2^-24, f32's step at 0.5.
    let subnormal = ((f32::from_bits(a) + 0.5) - 0.5).to_bits();
    let r = if a < F16_MIN_NORMAL_BITS {
        subnormal
    } else if a > 0x7f80_0000 {
        a
    } else if normal > F16_MAX_BITS {
        0x7f80_0000
    } else {
        normal
    };
    f32::from_bits(r | (b & 0x8000_0000))
}

/// `y[i] += a * x[i]` over the shorter length.
pub(crate) fn axpy_portable(y: &mut [f32], a: f32, x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(y, &x)| *y += a * x);
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = (ca.remainder().iter().zip(cb.remainder()))
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values in [-10, 10].
    fn values(n: usize, seed: u32) -> Vec<f32> {
        crate::simd::test_values(n, seed)
            .iter()
            .map(|v| 10.0 * v)
            .collect()
    }

    /// The chosen helpers agree with the portable ones (exp within a few
    /// ulps, sums in another order) on lengths that leave every tail.
    #[test]
    fn chosen_helpers_agree_with_the_portable_ones() {
        let ops = crate::simd::kernels().vec;
        for n in [0, 1, 7, 8, 9, 31, 64, 67, 128, 130] {
            let (a, b) = (values(n, 3), values(n, 4));
            let (d0, d1) = ((PORTABLE.dot)(&a, &b), (ops.dot)(&a, &b));
            assert!(
                (d0 - d1).abs() <= 1e-4 * (1.0 + d0.abs()),
                "dot {n}: {d0} vs {d1}"
            );
            if n > 0 {
                let rows = values(5 * n, 9);
                let (mut o0, mut o1) = ([0f32; 5], [0f32; 5]);
                (PORTABLE.dots)(&a, &rows, &mut o0);
                (ops.dots)(&a, &rows, &mut o1);
                for (p, q) in o0.iter().zip(&o1) {
                    assert!(
                        (p - q).abs() <= 1e-4 * (1.0 + p.abs()),
                        "dots {n}: {p} vs {q}"
                    );
                }
                let mut rows = rows;
                rows[2 * n] = f32::NAN; // a row whose weight is 0 is never read
                let p = [0.5, -1.0, 0.0, 2.0, 0.25];
                let (mut w0, mut w1) = (b.clone(), b.clone());
                (PORTABLE.weighted_sum)(&mut w0, &p, &rows);
                (ops.weighted_sum)(&mut w1, &p, &rows);
                for (x, y) in w0.iter().zip(&w1) {
                    assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "weighted sum {n}");
                }
            }
            let (mut y0, mut y1) = (b.clone(), b.clone());
            // One row of weight 0.37: y += 0.37 a.
            axpy_portable(&mut y0, 0.37, &a);
            (ops.weighted_sum)(&mut y1, &[0.37], &a);
            for (p, q) in y0.iter().zip(&y1) {
                assert!((p - q).abs() <= 1e-6 * (1.0 + p.abs()), "axpy {n}");
            }
            let (mut h0, mut h1): (Vec<f32>, Vec<f32>) = (
                b.iter().map(|&x| round_f16(x)).collect(),
                b.iter().map(|&x| round_f16(x)).collect(),
            );
            (PORTABLE.mad_f16)(&mut h0, 0.37, &a);
            (ops.mad_f16)(&mut h1, 0.37, &a);
            (PORTABLE.scale_f16)(&mut h0, -1.5);
            (ops.scale_f16)(&mut h1, -1.5);
            for (p, q) in h0.iter().zip(&h1) {
                // One f16 step at most: fused or not before the rounding.
                assert!(
                    (p - q).abs() <= p.abs() / 1024.0,
                    "f16 steps {n}: {p} vs {q}"
                );
                assert_eq!(*q, round_f16(*q), "f16 steps {n}: {q} is not an f16 value");
            }
            (PORTABLE.scale)(&mut y0, -1.5);
            (ops.scale)(&mut y1, -1.5);
            for (p, q) in y0.iter().zip(&y1) {
                assert!((p - q).abs() <= 1e-6 * (1.0 + p.abs()), "scale {n}");
            }
            let mut s0: Vec<f32> = a.iter().map(|x| x * 9.0).collect();
            if n > 2 {
                s0[1] = f32::NEG_INFINITY;
                s0[n - 1] = -200.0;
            }
            let max = s0.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut s1 = s0.clone();
            let (t0, t1) = (
                (PORTABLE.exp_sum)(&mut s0, max),
                (ops.exp_sum)(&mut s1, max),
            );
            assert!(
                (t0 - t1).abs() <= 1e-5 * t0.abs().max(1.0),
                "exp sum {n}: {t0} vs {t1}"
            );
            for (p, q) in s0.iter().zip(&s1) {
                // Below f32's normal range the fast form gives 0.
                let close = (p - q).abs() <= 4.0 * f32::EPSILON * p.abs() + f32::MIN_POSITIVE;
                assert!(close, "exp {n}: {p} vs {q}");
            }
            if n > 2 {
                assert_eq!(s1[1], 0.0);
            }
        }
    }

    /// The bit form rounds as the f16 conversion does, on f32 bit patterns
    /// spread over the whole range (normal, subnormal, overflowing, both
    /// signs, infinities) and on the ties around each f16 step.
    #[test]
    fn round_f16_matches_the_f16_conversion() {
        let check = |x: f32| {
            let want = half::f16::from_f32(x).to_f32();
            let got = round_f16(x);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x:e} ({:#010x}): {got:e} vs {want:e}",
                x.to_bits()
            );
        };
        for bits in (0..=u32::MAX).step_by(4099) {
            check(f32::from_bits(bits));
        }
        for h in 0..=u16::MAX {
            let v = half::f16::from_bits(h).to_f32();
            let next = half::f16::from_bits(h.wrapping_add(1)).to_f32();
            if v.is_finite() && next.is_finite() {
                let mid = (f64::from(v) + f64::from(next)) / 2.0;
                for x in [mid as f32, v, next] {
                    check(x);
                    check(f32::from_bits((mid as f32).to_bits() + 1));
                    check(f32::from_bits((mid as f32).to_bits().saturating_sub(1)));
                }
            }
        }
        for x in [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            65519.0,
            65520.0,
            -65520.0,
        ] {
            check(x);
        }
    }
}
