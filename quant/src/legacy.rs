//! The 32-weight "legacy" formats: q4_0, q4_1, q5_0, q5_1, q8_0, q8_1.
//!
//! Quantizers follow ggml's `quantize_row_*_ref` (ggml-quants.c), the
//! dequantizers `dequantize_row_*`, and the dot products the portable
//! `ggml_vec_dot_*_generic` functions (ggml-cpu/quants.c), with the same
//! order of floating-point operations so results are bit-identical.
//!
//! Rounding differs between functions, as in ggml: q4/q5 truncate `x + 0.5`
//! (after an offset that keeps the value positive), q8 uses C `roundf`
//! (ties away from zero, [`f32::round`]).

use half::f16;

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

/// Panics unless `src` holds exactly `blocks` blocks of `QK` weights.
#[inline]
#[track_caller]
pub(crate) fn check_len(values: usize, blocks: usize, qk: usize) {
    assert!(
        values == blocks * qk,
        "{values} values do not fill {blocks} blocks of {qk}"
    );
}

/// Panics unless `n` is a whole number of blocks and both operands hold them.
#[inline]
#[track_caller]
pub(crate) fn check_dot(n: usize, qk: usize, x: usize, y: usize) -> usize {
    assert!(
        n.is_multiple_of(qk),
        "dot length {n} is not a multiple of {qk}"
    );
    let nb = n / qk;
    assert!(
        x >= nb && y >= nb,
        "dot of {n} values needs {nb} blocks, got {x} and {y}"
    );
    nb
}

/// Returns the element of largest magnitude, keeping the first on ties (and
/// `0.0` for an all-zero block), as ggml's `amax < fabsf(v)` loops do.
#[inline]
fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Returns `(min, max)` of a block, as ggml's q4_1/q5_1 loops compute them.
#[inline]
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// Reciprocal that maps a zero scale to zero (`d ? 1.0f/d : 0.0f`).
#[inline]
fn inv(d: f32) -> f32 {
    if d != 0.0 { 1.0 / d } else { 0.0 }
}

/// Quantizes to q4_0 (ggml `quantize_row_q4_0_ref`).
///
/// The scale is `max / -8` where `max` is the signed value of largest
/// magnitude, so that value maps exactly to quant 0.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q4_0(src: &[f32], dst: &mut [BlockQ4_0]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = signed_absmax(x) / -8.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        for j in 0..QK / 2 {
            // `as i8` truncates toward zero like C's float -> int8_t conversion.
            let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}

/// Dequantizes q4_0 (ggml `dequantize_row_q4_0`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q4_0(src: &[BlockQ4_0], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        for j in 0..QK / 2 {
            y[j] = ((x.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((x.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// Quantizes to q4_1 (ggml `quantize_row_q4_1_ref`): `d = (max - min) / 15`.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q4_1(src: &[f32], dst: &mut [BlockQ4_1]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        y.m = f16::from_f32(min);
        for j in 0..QK / 2 {
            let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let q1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}

/// Dequantizes q4_1 (ggml `dequantize_row_q4_1`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q4_1(src: &[BlockQ4_1], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        let m = x.m.to_f32();
        for j in 0..QK / 2 {
            y[j] = (x.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (x.qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// Quantizes to q5_0 (ggml `quantize_row_q5_0_ref`): `d = max / -16`.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q5_0(src: &[f32], dst: &mut [BlockQ5_0]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = signed_absmax(x) / -16.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let q0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
            let q1 = ((x[j + QK / 2] * id + 16.5) as i8).min(31) as u8;
            y.qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
            qh |= ((q0 as u32 & 0x10) >> 4) << j;
            qh |= ((q1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

/// Dequantizes q5_0 (ggml `dequantize_row_q5_0`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q5_0(src: &[BlockQ5_0], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        let qh = u32::from_le_bytes(x.qh);
        for j in 0..QK / 2 {
            let (q0, q1) = q5_pair(x.qs[j], qh, j);
            y[j] = (q0 - 16) as f32 * d;
            y[j + QK / 2] = (q1 - 16) as f32 * d;
        }
    }
}

/// The two unsigned 5-bit quants `j` and `j + 16` of a q5 block.
#[inline]
fn q5_pair(qs: u8, qh: u32, j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) << 4) & 0x10;
    let h1 = (qh >> (j + 12)) & 0x10;
    ((qs & 0x0F) as i32 | h0 as i32, (qs >> 4) as i32 | h1 as i32)
}

/// Quantizes to q5_1 (ggml `quantize_row_q5_1_ref`): `d = (max - min) / 31`.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q5_1(src: &[f32], dst: &mut [BlockQ5_1]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        y.m = f16::from_f32(min);
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            // ggml does not clamp here: the top value rounds to exactly 31.
            let q0 = ((x[j] - min) * id + 0.5) as u8;
            let q1 = ((x[j + QK / 2] - min) * id + 0.5) as u8;
            y.qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
            qh |= ((q0 as u32 & 0x10) >> 4) << j;
            qh |= ((q1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

/// Dequantizes q5_1 (ggml `dequantize_row_q5_1`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q5_1(src: &[BlockQ5_1], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        let m = x.m.to_f32();
        let qh = u32::from_le_bytes(x.qh);
        for j in 0..QK / 2 {
            let (q0, q1) = q5_pair(x.qs[j], qh, j);
            y[j] = q0 as f32 * d + m;
            y[j + QK / 2] = q1 as f32 * d + m;
        }
    }
}

/// Largest magnitude of a block (`MAX(amax, fabsf(v))`).
#[inline]
fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |a, &v| a.max(v.abs()))
}

/// Quantizes to q8_0 (ggml `quantize_row_q8_0_ref`): `d = amax / 127`,
/// `q = roundf(x / d)`. This is also the activation quantizer paired with
/// q4_0, q5_0 and q8_0 weights.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = absmax(x) / 127.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
    }
}

/// Dequantizes q8_0 (ggml `dequantize_row_q8_0`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q8_0(src: &[BlockQ8_0], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        for (o, &q) in y.iter_mut().zip(&x.qs) {
            *o = q as f32 * d;
        }
    }
}

/// Quantizes to q8_1 (ggml `quantize_row_q8_1_ref`): as q8_0, plus
/// `s = d * sum(q)`. The activation quantizer paired with q4_1 and q5_1.
///
/// # Panics
/// If `src.len() != 32 * dst.len()`.
pub fn quantize_row_q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
    check_len(src.len(), dst.len(), QK);
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let d = absmax(x) / 127.0;
        let id = inv(d);
        y.d = f16::from_f32(d);
        let mut sum = 0i32;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        y.s = f16::from_f32(sum as f32 * d);
    }
}

/// Dequantizes q8_1: `w = d * q` (ggml has no row dequantizer for this
/// activation-only type; this is the obvious one, and ignores `s`).
///
/// # Panics
/// If `dst.len() != 32 * src.len()`.
pub fn dequantize_row_q8_1(src: &[BlockQ8_1], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), QK);
    for (x, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = x.d.to_f32();
        for (o, &q) in y.iter_mut().zip(&x.qs) {
            *o = q as f32 * d;
        }
    }
}

/// Scalar q4_0 · q8_0 dot product of `n` values (ggml
/// `ggml_vec_dot_q4_0_q8_0_generic`).
///
/// # Panics
/// If `n` is not a multiple of 32 or either operand has fewer than `n / 32`
/// blocks.
pub fn vec_dot_q4_0_q8_0(n: usize, x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let nb = check_dot(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32 - 8;
            let v1 = (x.qs[j] >> 4) as i32 - 8;
            sumi0 += v0 * y.qs[j] as i32;
            sumi1 += v1 * y.qs[j + QK / 2] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sumf
}

/// Scalar q4_1 · q8_1 dot product (ggml `ggml_vec_dot_q4_1_q8_1_generic`).
///
/// # Panics
/// As [`vec_dot_q4_0_q8_0`].
pub fn vec_dot_q4_1_q8_1(n: usize, x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let nb = check_dot(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32;
            let v1 = (x.qs[j] >> 4) as i32;
            sumi0 += v0 * y.qs[j] as i32;
            sumi1 += v1 * y.qs[j + QK / 2] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

/// Scalar q5_0 · q8_0 dot product (ggml `ggml_vec_dot_q5_0_q8_0_generic`).
///
/// # Panics
/// As [`vec_dot_q4_0_q8_0`].
pub fn vec_dot_q5_0_q8_0(n: usize, x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let nb = check_dot(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for j in 0..QK / 2 {
            let (q0, q1) = q5_pair(x.qs[j], qh, j);
            sumi0 += (q0 - 16) * y.qs[j] as i32;
            sumi1 += (q1 - 16) * y.qs[j + QK / 2] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32;
    }
    sumf
}

/// Scalar q5_1 · q8_1 dot product (ggml `ggml_vec_dot_q5_1_q8_1_generic`).
///
/// # Panics
/// As [`vec_dot_q4_0_q8_0`].
pub fn vec_dot_q5_1_q8_1(n: usize, x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let nb = check_dot(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let qh = u32::from_le_bytes(x.qh);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for j in 0..QK / 2 {
            let (q0, q1) = q5_pair(x.qs[j], qh, j);
            sumi0 += q0 * y.qs[j] as i32;
            sumi1 += q1 * y.qs[j + QK / 2] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sumf
}

/// Scalar q8_0 · q8_0 dot product (ggml `ggml_vec_dot_q8_0_q8_0_generic`).
///
/// # Panics
/// As [`vec_dot_q4_0_q8_0`].
pub fn vec_dot_q8_0_q8_0(n: usize, x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let nb = check_dot(n, QK, x.len(), y.len());
    let mut sumf = 0.0f32;
    for (x, y) in x[..nb].iter().zip(&y[..nb]) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
        sumf += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sumf
}
