//! The 256-weight "K-quant" super-block formats: q2_K, q3_K, q4_K, q5_K,
//! q6_K and the activation format q8_K.
//!
//! Quantizers follow ggml's `quantize_row_*_ref` (ggml-quants.c) including
//! the scale searches `make_qx_quants`, `make_q3_quants` and
//! `make_qkx2_quants`; dequantizers follow `dequantize_row_*`; dot products
//! follow the portable `ggml_vec_dot_*_q8_K_generic` (ggml-cpu/quants.c).
//! Floating-point operations are done in the same order as the C, so the
//! output is bit-identical (given C compiled without FMA contraction).
//!
//! Rounding in this family is ggml's `nearest_int`: round half to even,
//! computed with the 1.5·2²³ magic-number trick ([`nearest_int`]).

use half::f16;

use crate::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K};
use crate::legacy::{check_dot, check_len};

/// ggml's `GROUP_MAX_EPS`: blocks whose largest magnitude is below this are
/// treated as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: rounds to the nearest integer, ties to even.
///
/// Adding 1.5·2²³ pushes the value into the range where an `f32` has no
/// fraction bits, so the FPU's round-to-nearest-even does the work; the
/// integer is then read back from the mantissa. Valid for
/// `|x| <= 4194303`; outside that (or for NaN) it returns the same garbage
/// as ggml rather than panicking.
#[inline]
pub fn nearest_int(x: f32) -> i32 {
    let val = x + 12_582_912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// ggml's `make_qx_quants`: symmetric quantization of `x` to the signed range
/// `-nmax..nmax`, stored in `l` offset by `nmax`, returning the scale.
///
/// `rmse_type` 0 takes the plain `max / -nmax` scale; otherwise the scale is
/// refined by least squares with weights `qw` (or, without `qw`, weights
/// chosen by `rmse_type`: 1 → x², 2 → 1, 3 → |x|, else √|x|) over 18 nearby
/// trial scales. A negative `rmse_type` returns after the first refinement.
fn make_qx_quants(
    nmax: i32,
    x: &[f32],
    l: &mut [i8],
    mut rmse_type: i32,
    qw: Option<&[f32]>,
) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for (li, &v) in l.iter_mut().zip(x) {
            let q = nearest_int(iscale * v);
            *li = (nmax + q.clamp(-nmax, nmax - 1)) as i8;
        }
        return 1.0 / iscale;
    }
    let return_early = rmse_type < 0;
    if return_early {
        rmse_type = -rmse_type;
    }
    let weight = |i: usize| -> f32 {
        match qw {
            Some(w) => w[i],
            None => match rmse_type {
                1 => x[i] * x[i],
                2 => 1.0,
                3 => x[i].abs(),
                _ => x[i].abs().sqrt(),
            },
        }
    };
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (i, (li, &v)) in l.iter_mut().zip(x).enumerate() {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *li = (q + nmax) as i8;
        let w = weight(i);
        let qf = q as f32;
        sumlx += w * v * qf;
        suml2 += w * qf * qf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for (i, &v) in x.iter().enumerate() {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = weight(i);
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                let q = nearest_int(iscale * v);
                *li = (nmax + q.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants`: symmetric quantization to `-nmax..nmax`, stored
/// in `l` offset by `nmax`. With `do_rmse` the quants are improved one at a
/// time (up to 5 passes) to minimise the x²-weighted squared error, and the
/// least-squares scale is returned.
fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8], do_rmse: bool) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    if do_rmse {
        let mut sumlx = 0.0f32;
        let mut suml2 = 0.0f32;
        for (li, &v) in l.iter_mut().zip(x) {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
            *li = q as i8;
            let w = v * v;
            sumlx += w * v * q as f32;
            suml2 += w * q as f32 * q as f32;
        }
        for _ in 0..5 {
            let mut n_changed = 0;
            for (li, &v) in l.iter_mut().zip(x) {
                let w = v * v;
                let cur = *li as f32;
                let mut slx = sumlx - w * v * cur;
                if slx > 0.0 {
                    let mut sl2 = suml2 - w * cur * cur;
                    let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                    if new_l != *li as i32 {
                        slx += w * v * new_l as f32;
                        sl2 += w * new_l as f32 * new_l as f32;
                        if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                            *li = new_l as i8;
                            sumlx = slx;
                            suml2 = sl2;
                            n_changed += 1;
                        }
                    }
                }
            }
            if n_changed == 0 {
                break;
            }
        }
        for li in l.iter_mut() {
            *li += nmax as i8;
        }
        return if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    }
    for (li, &v) in l.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *li = (q + nmax) as i8;
    }
    1.0 / iscale
}

/// ggml's `make_qkx2_quants`: asymmetric quantization `x ≈ scale * l - min`
/// with `l` in `0..=nmax`, searching `nstep + 1` trial scales
/// `(nmax + rmin + rdelta * is) / (max - min)` for the lowest weighted error
/// (absolute error with `use_mad`, squared otherwise). Returns
/// `(scale, min)` where `min >= 0` is the amount subtracted.
///
/// `laux` is scratch of the same length as `x`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let mut sum_l = 0.0f32;
        let mut sum_l2 = 0.0f32;
        let mut sum_xl = 0.0f32;
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let qf = q as f32;
            sum_l += w * qf;
            sum_l2 += w * qf * qf;
            sum_xl += w * qf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `get_scale_min_k4`: unpacks the 6-bit scale and min of group `j`
/// (0..8) from the 12-byte `scales` array of q4_K / q5_K.
///
/// Groups 0..4 keep their scale and min in the low six bits of bytes `j` and
/// `j + 4`; groups 4..8 keep the low four bits in nibbles of byte `j + 4` and
/// the top two bits in the spare high bits of bytes `j - 4` and `j`.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs eight 6-bit scales and mins the way [`get_scale_min_k4`] reads them.
#[inline]
fn set_scale_min_k4(scales: &mut [u8; 12], j: usize, ls: u8, lm: u8) {
    if j < 4 {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        scales[j - 4] |= (ls >> 4) << 6;
        scales[j] |= (lm >> 4) << 6;
    }
}

/// Unpacks the sixteen 6-bit q3_K scales (still offset by 32).
///
/// Bytes 0..8 hold the low nibbles (groups 0..8 in the low nibble, 8..16 in
/// the high nibble); bytes 8..12 hold the top two bits, group `j` at bit
/// `2 * (j / 4)` of byte `8 + j % 4`.
#[inline]
fn q3k_scales(s: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { s[j] & 0xF } else { s[j - 8] >> 4 };
        let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = (low | (high << 4)) as i8;
    }
    out
}

/// Packs 2-bit values `l` (256 of them, each 0..4) four to a byte in the
/// q2_K/q3_K order: byte `32 * (j / 128) + i` holds values
/// `j + i`, `j + i + 32`, `j + i + 64`, `j + i + 96` from low to high bits.
#[inline]
fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
}

/// Quantizes to q2_K (ggml `quantize_row_q2_K_ref`).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q2_k(src: &[f32], dst: &mut [BlockQ2K]) {
    check_len(src.len(), dst.len(), QK_K);
    const Q4SCALE: f32 = 15.0;
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 16];
    let mut weights = [0f32; 16];
    let mut mins = [0f32; QK_K / 16];
    let mut scales = [0f32; QK_K / 16];

    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let (scale, min) = make_qkx2_quants(
                3,
                xs,
                &weights,
                &mut l[16 * j..16 * j + 16],
                &mut laux,
                -0.5,
                0.1,
                15,
                true,
            );
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }

        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &sc) in y.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * sc) as u8;
            }
            y.d = f16::from_f32(max_scale / Q4SCALE);
        } else {
            y.scales = [0; 16];
            y.d = f16::from_f32(0.0);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &m) in y.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * m) << 4) as u8;
            }
            y.dmin = f16::from_f32(max_min / Q4SCALE);
        } else {
            y.dmin = f16::from_f32(0.0);
        }

        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * (y.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = y.dmin.to_f32() * (y.scales[j] >> 4) as f32;
            for ii in 0..16 {
                let q = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3);
                l[16 * j + ii] = q as u8;
            }
        }

        pack_2bit(&l, &mut y.qs);
    }
}

/// Dequantizes q2_K (ggml `dequantize_row_q2_K`).
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q2_k(src: &[BlockQ2K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = x.d.to_f32();
        let min = x.dmin.to_f32();
        let mut out = y.iter_mut();
        let mut is = 0;
        for q in x.qs.chunks_exact(32) {
            for shift in (0..8).step_by(2) {
                for half in q.chunks_exact(16) {
                    let sc = x.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for &b in half {
                        *out.next().unwrap() = dl * ((b >> shift) & 3) as f32 - ml;
                    }
                }
            }
        }
    }
}

/// Quantizes to q3_K (ggml `quantize_row_q3_K_ref`).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q3_k(src: &[f32], dst: &mut [BlockQ3K]) {
    check_len(src.len(), dst.len(), QK_K);
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];

    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(
                4,
                &x[16 * j..16 * j + 16],
                &mut l[16 * j..16 * j + 16],
                true,
            );
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }

        y.scales = [0; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &sc) in scales.iter().enumerate() {
                // C stores nearest_int's result in an int8_t first.
                let q = (nearest_int(iscale * sc) as i8).clamp(-32, 31) + 32;
                let q = q as u8;
                if j < 8 {
                    y.scales[j] = q & 0xF;
                } else {
                    y.scales[j - 8] |= (q & 0xF) << 4;
                }
                y.scales[j % 4 + 8] |= (q >> 4) << (2 * (j / 4));
            }
            y.d = f16::from_f32(1.0 / iscale);
        } else {
            y.d = f16::from_f32(0.0);
        }

        let sc = q3k_scales(&y.scales);
        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * (sc[j] as i32 - 32) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                l[16 * j + ii] = (q + 4) as i8;
            }
        }

        // High bit of value j goes to bit j / 32 of hmask[j % 32].
        y.hmask = [0; QK_K / 8];
        let mut low = [0u8; QK_K];
        for (j, (&q, lo)) in l.iter().zip(low.iter_mut()).enumerate() {
            let mut q = q as u8;
            if q > 3 {
                y.hmask[j % 32] |= 1 << (j / 32);
                q -= 4;
            }
            *lo = q;
        }
        pack_2bit(&low, &mut y.qs);
    }
}

/// Dequantizes q3_K (ggml `dequantize_row_q3_K`).
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q3_k(src: &[BlockQ3K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d_all = x.d.to_f32();
        let scales = q3k_scales(&x.scales);
        let mut out = y.iter_mut();
        let mut is = 0;
        let mut m = 1u8;
        for n in (0..QK_K).step_by(128) {
            let q = &x.qs[n / 4..n / 4 + 32];
            for shift in (0..8).step_by(2) {
                for half in 0..2 {
                    let dl = d_all * (scales[is] as i32 - 32) as f32;
                    is += 1;
                    let range = 16 * half..16 * half + 16;
                    for (&qb, &hb) in q[range.clone()].iter().zip(&x.hmask[range]) {
                        let hi = if hb & m != 0 { 0 } else { 4 };
                        let v = ((qb >> shift) & 3) as i32 - hi;
                        *out.next().unwrap() = dl * v as f32;
                    }
                }
                m <<= 1;
            }
        }
    }
}

/// Shared body of the q4_K and q5_K reference quantizers: per 32-weight group
/// scales/mins via [`make_qkx2_quants`], packed to 6 bits, then requantized
/// against the rounded scales into `l` (values `0..=nmax`).
#[allow(clippy::too_many_arguments)]
fn quantize_qkx_super_block(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
    l: &mut [u8; QK_K],
    scales_out: &mut [u8; 12],
    d_out: &mut f16,
    dmin_out: &mut f16,
) {
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2: f32 = xs.iter().fold(0.0, |acc, &v| acc + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            rmin,
            0.1,
            nstep,
            false,
        );
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    for j in 0..QK_K / 32 {
        // C assigns nearest_int's result to a uint8_t (wrapping), then clamps.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        set_scale_min_k4(scales_out, j, ls, lm);
    }
    *d_out = f16::from_f32(max_scale / 63.0);
    *dmin_out = f16::from_f32(max_min / 63.0);

    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, scales_out);
        let d = d_out.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_out.to_f32() * m as f32;
        for ii in 0..32 {
            let q = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, nmax);
            l[32 * j + ii] = q as u8;
        }
    }
}

/// Quantizes to q4_K (ggml `quantize_row_q4_K_ref`).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q4_k(src: &[f32], dst: &mut [BlockQ4K]) {
    check_len(src.len(), dst.len(), QK_K);
    let mut l = [0u8; QK_K];
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        y.scales = [0; 12];
        quantize_qkx_super_block(
            x,
            15,
            -1.0,
            20,
            &mut l,
            &mut y.scales,
            &mut y.d,
            &mut y.dmin,
        );
        for (j, q) in (0..QK_K).step_by(64).zip(y.qs.chunks_exact_mut(32)) {
            for (i, b) in q.iter_mut().enumerate() {
                *b = l[j + i] | (l[j + i + 32] << 4);
            }
        }
    }
}

/// Dequantizes q4_K (ggml `dequantize_row_q4_K`).
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q4_k(src: &[BlockQ4K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = x.d.to_f32();
        let min = x.dmin.to_f32();
        for (g, (q, out)) in
            x.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc, m) = get_scale_min_k4(2 * g, &x.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = get_scale_min_k4(2 * g + 1, &x.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let (lo, hi) = out.split_at_mut(32);
            for i in 0..32 {
                lo[i] = d1 * (q[i] & 0xF) as f32 - m1;
                hi[i] = d2 * (q[i] >> 4) as f32 - m2;
            }
        }
    }
}

/// Quantizes to q5_K (ggml `quantize_row_q5_K_ref`).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q5_k(src: &[f32], dst: &mut [BlockQ5K]) {
    check_len(src.len(), dst.len(), QK_K);
    let mut l = [0u8; QK_K];
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        y.scales = [0; 12];
        quantize_qkx_super_block(
            x,
            31,
            -0.5,
            15,
            &mut l,
            &mut y.scales,
            &mut y.d,
            &mut y.dmin,
        );
        y.qh = [0; QK_K / 8];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (n, ql) in (0..QK_K).step_by(64).zip(y.qs.chunks_exact_mut(32)) {
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    y.qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    y.qh[j] |= m2;
                }
                ql[j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
    }
}

/// Dequantizes q5_K (ggml `dequantize_row_q5_K`).
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q5_k(src: &[BlockQ5K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = x.d.to_f32();
        let min = x.dmin.to_f32();
        let (mut u1, mut u2) = (1u8, 2u8);
        for (g, (ql, out)) in
            x.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc, m) = get_scale_min_k4(2 * g, &x.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = get_scale_min_k4(2 * g + 1, &x.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            let (lo, hi) = out.split_at_mut(32);
            for i in 0..32 {
                let h1 = if x.qh[i] & u1 != 0 { 16 } else { 0 };
                let h2 = if x.qh[i] & u2 != 0 { 16 } else { 0 };
                lo[i] = d1 * ((ql[i] & 0xF) + h1) as f32 - m1;
                hi[i] = d2 * ((ql[i] >> 4) + h2) as f32 - m2;
            }
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

/// Quantizes to q6_K (ggml `quantize_row_q6_K_ref`).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q6_k(src: &[f32], dst: &mut [BlockQ6K]) {
    check_len(src.len(), dst.len(), QK_K);
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..QK_K / 16 {
            let scale = make_qx_quants(
                32,
                &x[16 * ib..16 * ib + 16],
                &mut l[16 * ib..16 * ib + 16],
                1,
                None,
            );
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }

        if max_abs_scale < GROUP_MAX_EPS {
            *y = BlockQ6K::default();
            continue;
        }

        let iscale = -128.0 / max_scale;
        y.d = f16::from_f32(1.0 / iscale);
        for (s, &sc) in y.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * sc).min(127) as i8;
        }

        for j in 0..QK_K / 16 {
            let d = y.d.to_f32() * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }

        for (j, (ql, qh)) in (0..QK_K)
            .step_by(128)
            .zip(y.ql.chunks_exact_mut(64).zip(y.qh.chunks_exact_mut(32)))
        {
            for i in 0..32 {
                let q1 = l[j + i] as u8;
                let q2 = l[j + i + 32] as u8;
                let q3 = l[j + i + 64] as u8;
                let q4 = l[j + i + 96] as u8;
                ql[i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
                ql[i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
                qh[i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
            }
        }
    }
}

/// The four signed 6-bit q6_K quants `i`, `i + 32`, `i + 64`, `i + 96` of
/// one 128-weight half, from its 64 `ql` bytes and 32 `qh` bytes.
#[inline]
fn q6k_quads(ql: &[u8], qh: &[u8], i: usize) -> [i32; 4] {
    let h = qh[i];
    [
        ((ql[i] & 0xF) | ((h & 3) << 4)) as i32 - 32,
        ((ql[i + 32] & 0xF) | (((h >> 2) & 3) << 4)) as i32 - 32,
        ((ql[i] >> 4) | (((h >> 4) & 3) << 4)) as i32 - 32,
        ((ql[i + 32] >> 4) | (((h >> 6) & 3) << 4)) as i32 - 32,
    ]
}

/// Dequantizes q6_K (ggml `dequantize_row_q6_K`).
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q6_k(src: &[BlockQ6K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = x.d.to_f32();
        for (half, out) in y.chunks_exact_mut(128).enumerate() {
            let ql = &x.ql[64 * half..64 * half + 64];
            let qh = &x.qh[32 * half..32 * half + 32];
            let sc = &x.scales[8 * half..8 * half + 8];
            for i in 0..32 {
                let is = i / 16;
                let q = q6k_quads(ql, qh, i);
                for k in 0..4 {
                    out[i + 32 * k] = d * sc[is + 2 * k] as f32 * q[k] as f32;
                }
            }
        }
    }
}

/// Quantizes to q8_K (ggml `quantize_row_q8_K_ref`): `d = max / -127` for
/// the signed value of largest magnitude, `q = nearest_int(x / d)`, and the
/// per-16 sums in `bsums`. The activation quantizer for every K-quant dot
/// product.
///
/// An all-zero block gets `d = 0` and zero quants and sums (ggml leaves its
/// `bsums` untouched in that case).
///
/// # Panics
/// If `src.len() != 256 * dst.len()`.
pub fn quantize_row_q8_k(src: &[f32], dst: &mut [BlockQ8K]) {
    check_len(src.len(), dst.len(), QK_K);
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *y = BlockQ8K::default();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
    }
}

/// Dequantizes q8_K (ggml `dequantize_row_q8_K`): `w = d * q`.
///
/// # Panics
/// If `dst.len() != 256 * src.len()`.
pub fn dequantize_row_q8_k(src: &[BlockQ8K], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK_K);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
        for (o, &q) in y.iter_mut().zip(&x.qs) {
            *o = x.d * q as f32;
        }
    }
}

/// Scalar q2_K · q8_K dot product of `n` values (ggml
/// `ggml_vec_dot_q2_K_q8_K_generic`).
///
/// # Panics
/// If `n` is not a multiple of 256 or either operand has fewer than
/// `n / 256` blocks.
pub fn vec_dot_q2_k_q8_k(n: usize, x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let nb = check_dot(n, QK_K, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let sc = &x.scales;
        let summs: i32 = y
            .bsums
            .iter()
            .zip(sc)
            .map(|(&b, &s)| b as i32 * (s >> 4) as i32)
            .sum();
        let dall = y.d * x.d.to_f32();
        let dmin = y.d * x.dmin.to_f32();

        let mut isum = 0i32;
        let mut is = 0;
        let mut q8 = y.qs.chunks_exact(16);
        for q2 in x.qs.chunks_exact(32) {
            for shift in (0..8).step_by(2) {
                for half in q2.chunks_exact(16) {
                    let d = (sc[is] & 0xF) as i32;
                    is += 1;
                    let isuml: i32 = q8
                        .next()
                        .unwrap()
                        .iter()
                        .zip(half)
                        .map(|(&a, &b)| a as i32 * ((b >> shift) & 3) as i32)
                        .sum();
                    isum += d * isuml;
                }
            }
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// Accumulates `scale * q8[l] * a[l]` over 16 products into eight lanes,
/// the way ggml's generic K-quant dots use `aux16`/`aux32` (the lane sums are
/// integers, so lane order only matters for the final float reduction).
#[inline]
fn acc8x2(aux32: &mut [i32; 8], scale: i32, q8: &[i8], a: &[i8]) {
    for k in 0..2 {
        for l in 0..8 {
            let p = q8[8 * k + l] as i16 * a[8 * k + l] as i16;
            aux32[l] += scale * p as i32;
        }
    }
}

/// Scalar q3_K · q8_K dot product (ggml `ggml_vec_dot_q3_K_q8_K_generic`).
///
/// # Panics
/// As [`vec_dot_q2_k_q8_k`].
pub fn vec_dot_q3_k_q8_k(n: usize, x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let nb = check_dot(n, QK_K, x.len(), y.len());
    let mut sums = [0f32; 8];
    let mut aux8 = [0i8; QK_K];
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut m = 1u8;
        for (j, a) in aux8.chunks_exact_mut(32).enumerate() {
            let q3 = &x.qs[32 * (j / 4)..32 * (j / 4) + 32];
            let shift = 2 * (j % 4);
            for l in 0..32 {
                let hi = if x.hmask[l] & m != 0 { 0 } else { 4 };
                a[l] = ((q3[l] >> shift) & 3) as i8 - hi;
            }
            m = m.wrapping_shl(1);
        }
        let scales = q3k_scales(&x.scales);
        let mut aux32 = [0i32; 8];
        for (j, (q8, a)) in y.qs.chunks_exact(16).zip(aux8.chunks_exact(16)).enumerate() {
            acc8x2(&mut aux32, scales[j] as i32 - 32, q8, a);
        }
        let d = x.d.to_f32() * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    sums.iter().fold(0.0f32, |acc, &s| acc + s)
}

/// Unpacks all eight (scale, min) pairs of a q4_K/q5_K block.
#[inline]
fn k4_scales_mins(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        (sc[j], mn[j]) = get_scale_min_k4(j, s);
    }
    (sc, mn)
}

/// Shared tail of the q4_K and q5_K dots, given the unpacked quants `aux8`.
#[inline]
fn dot_qkx_q8k(
    aux8: &[i8; QK_K],
    scales: &[u8; 12],
    d: f16,
    dmin: f16,
    y: &BlockQ8K,
    sums: &mut [f32; 8],
    sumf: &mut f32,
) {
    let (sc, mn) = k4_scales_mins(scales);
    let sumi: i32 = y
        .bsums
        .iter()
        .enumerate()
        .map(|(j, &b)| b as i32 * mn[j / 2] as i32)
        .sum();
    let mut aux32 = [0i32; 8];
    for (j, (q8, a)) in y.qs.chunks_exact(32).zip(aux8.chunks_exact(32)).enumerate() {
        let scale = sc[j] as i32;
        acc8x2(&mut aux32, scale, &q8[..16], &a[..16]);
        acc8x2(&mut aux32, scale, &q8[16..], &a[16..]);
    }
    let d = d.to_f32() * y.d;
    for (s, &v) in sums.iter_mut().zip(&aux32) {
        *s += d * v as f32;
    }
    let dmin = dmin.to_f32() * y.d;
    *sumf -= dmin * sumi as f32;
}

/// Scalar q4_K · q8_K dot product (ggml `ggml_vec_dot_q4_K_q8_K_generic`).
///
/// # Panics
/// As [`vec_dot_q2_k_q8_k`].
pub fn vec_dot_q4_k_q8_k(n: usize, x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let nb = check_dot(n, QK_K, x.len(), y.len());
    let mut sums = [0f32; 8];
    let mut sumf = 0.0f32;
    let mut aux8 = [0i8; QK_K];
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        for (q4, a) in x.qs.chunks_exact(32).zip(aux8.chunks_exact_mut(64)) {
            for l in 0..32 {
                a[l] = (q4[l] & 0xF) as i8;
                a[l + 32] = (q4[l] >> 4) as i8;
            }
        }
        dot_qkx_q8k(&aux8, &x.scales, x.d, x.dmin, y, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// Scalar q5_K · q8_K dot product (ggml `ggml_vec_dot_q5_K_q8_K_generic`).
///
/// # Panics
/// As [`vec_dot_q2_k_q8_k`].
pub fn vec_dot_q5_k_q8_k(n: usize, x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let nb = check_dot(n, QK_K, x.len(), y.len());
    let mut sums = [0f32; 8];
    let mut sumf = 0.0f32;
    let mut aux8 = [0i8; QK_K];
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut m = 1u8;
        for (q4, a) in x.qs.chunks_exact(32).zip(aux8.chunks_exact_mut(64)) {
            for l in 0..32 {
                let h = if x.qh[l] & m != 0 { 16 } else { 0 };
                a[l] = (q4[l] & 0xF) as i8 + h;
            }
            m = m.wrapping_shl(1);
            for l in 0..32 {
                let h = if x.qh[l] & m != 0 { 16 } else { 0 };
                a[l + 32] = (q4[l] >> 4) as i8 + h;
            }
            m = m.wrapping_shl(1);
        }
        dot_qkx_q8k(&aux8, &x.scales, x.d, x.dmin, y, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// Scalar q6_K · q8_K dot product (ggml `ggml_vec_dot_q6_K_q8_K_generic`).
///
/// # Panics
/// As [`vec_dot_q2_k_q8_k`].
pub fn vec_dot_q6_k_q8_k(n: usize, x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let nb = check_dot(n, QK_K, x.len(), y.len());
    let mut sums = [0f32; 8];
    let mut aux8 = [0i8; QK_K];
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        for (half, a) in aux8.chunks_exact_mut(128).enumerate() {
            let ql = &x.ql[64 * half..64 * half + 64];
            let qh = &x.qh[32 * half..32 * half + 32];
            for i in 0..32 {
                let q = q6k_quads(ql, qh, i);
                for k in 0..4 {
                    a[i + 32 * k] = q[k] as i8;
                }
            }
        }
        let mut aux32 = [0i32; 8];
        for (j, (q8, a)) in y.qs.chunks_exact(16).zip(aux8.chunks_exact(16)).enumerate() {
            acc8x2(&mut aux32, x.scales[j] as i32, q8, a);
        }
        let d = x.d.to_f32() * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    sums.iter().fold(0.0f32, |acc, &s| acc + s)
}
