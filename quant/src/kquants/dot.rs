//! Scalar K-quant · q8_K dot products, as ggml's portable
//! `ggml_vec_dot_*_q8_K_generic` (ggml-cpu/quants.c).

use half::f16;

use super::{get_scale_min_k4, q3k_scales, q6k_quads};
use crate::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K};
use crate::legacy::check_dot;

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
