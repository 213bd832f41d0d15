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
use crate::legacy::check_len;

mod dot;
mod search;

pub use dot::{
    vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};
use search::{make_q3_quants, make_qkx2_quants, make_qx_quants};

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

/// The value of largest magnitude in `x` (the first of equals) and that
/// magnitude; `(0.0, 0.0)` when every value is zero (or `x` is empty).
#[inline]
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
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

/// The scales and mins of groups `2 g` and `2 g + 1` of a q4_K / q5_K
/// super-block, times its `d` and `dmin`, as the dequantizers use them.
#[inline]
fn pair_scales(d: f32, dmin: f32, scales: &[u8; 12], g: usize) -> [(f32, f32); 2] {
    [2 * g, 2 * g + 1].map(|j| {
        let (sc, m) = get_scale_min_k4(j, scales);
        (d * sc as f32, dmin * m as f32)
    })
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
            let [(d1, m1), (d2, m2)] = pair_scales(d, min, &x.scales, g);
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
            let [(d1, m1), (d2, m2)] = pair_scales(d, min, &x.scales, g);
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
        let (max, amax) = signed_absmax(x);
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
