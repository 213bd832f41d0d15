//! Plain element types: f16, bf16 and the signed integers.
//!
//! * f32 → f16 rounds to nearest, ties to even ([`half::f16::from_f32`]),
//!   as ggml's `GGML_FP32_TO_FP16`.
//! * f32 → bf16 is ggml's `ggml_compute_fp32_to_bf16`: round to nearest even,
//!   NaN kept NaN with the quiet bit forced, subnormals kept.
//! * f32 → integer rounds half away from zero ([`f32::round`], like C's
//!   `roundf`) and saturates to the type's range; NaN becomes 0. ggml has no
//!   such conversion; this is our documented choice.
//! * Integers → f32 use Rust's `as` conversion (exact up to 2²⁴, then
//!   round-to-nearest-even), matching a C cast.

use half::{bf16, f16};

use crate::legacy::check_len;

/// Converts one `f32` to bf16 exactly as ggml's `GGML_FP32_TO_BF16`.
#[inline]
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    bf16::from_bits((u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16)
}

/// Converts one bf16 to `f32` (exact: the bits move to the upper half).
#[inline]
pub fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

/// Copies an f32 row (the identity "quantizer" for F32).
///
/// # Panics
/// If the lengths differ.
pub fn quantize_row_f32(src: &[f32], dst: &mut [f32]) {
    dst.copy_from_slice(src);
}

/// Copies an f32 row (the identity "dequantizer" for F32).
///
/// # Panics
/// If the lengths differ.
pub fn dequantize_row_f32(src: &[f32], dst: &mut [f32]) {
    dst.copy_from_slice(src);
}

/// Converts f32 → f16, round to nearest even (ggml `ggml_fp32_to_fp16_row`).
///
/// # Panics
/// If the lengths differ.
pub fn quantize_row_f16(src: &[f32], dst: &mut [f16]) {
    check_len(src.len(), dst.len(), 1);
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = f16::from_f32(v);
    }
}

/// Converts f16 → f32, exactly (ggml `ggml_fp16_to_fp32_row`).
///
/// # Panics
/// If the lengths differ.
pub fn dequantize_row_f16(src: &[f16], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), 1);
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = v.to_f32();
    }
}

/// Converts f32 → bf16 with [`f32_to_bf16`] (ggml `ggml_fp32_to_bf16_row_ref`).
///
/// # Panics
/// If the lengths differ.
pub fn quantize_row_bf16(src: &[f32], dst: &mut [bf16]) {
    check_len(src.len(), dst.len(), 1);
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = f32_to_bf16(v);
    }
}

/// Converts bf16 → f32, exactly (ggml `ggml_bf16_to_fp32_row`).
///
/// # Panics
/// If the lengths differ.
pub fn dequantize_row_bf16(src: &[bf16], dst: &mut [f32]) {
    check_len(dst.len(), src.len(), 1);
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = bf16_to_f32(v);
    }
}

macro_rules! int_rows {
    ($t:ty, $q:ident, $dq:ident, $name:literal) => {
        #[doc = concat!("Converts f32 → ", $name, ": rounds half away from zero, saturates, NaN → 0.")]
        ///
        /// # Panics
        /// If the lengths differ.
        pub fn $q(src: &[f32], dst: &mut [$t]) {
            check_len(src.len(), dst.len(), 1);
            for (o, &v) in dst.iter_mut().zip(src) {
                *o = v.round() as $t;
            }
        }

        #[doc = concat!("Converts ", $name, " → f32 (a C-style cast; exact up to 2^24 in magnitude).")]
        ///
        /// # Panics
        /// If the lengths differ.
        pub fn $dq(src: &[$t], dst: &mut [f32]) {
            check_len(dst.len(), src.len(), 1);
            for (o, &v) in dst.iter_mut().zip(src) {
                *o = v as f32;
            }
        }
    };
}

int_rows!(i8, quantize_row_i8, dequantize_row_i8, "i8");
int_rows!(i16, quantize_row_i16, dequantize_row_i16, "i16");
int_rows!(i32, quantize_row_i32, dequantize_row_i32, "i32");
int_rows!(i64, quantize_row_i64, dequantize_row_i64, "i64");

/// Scalar f32 dot product, accumulated in f64 like ggml's scalar
/// `ggml_vec_dot_f32` (each product is rounded to f32 first).
///
/// # Panics
/// If either slice is shorter than `n`.
pub fn vec_dot_f32(n: usize, x: &[f32], y: &[f32]) -> f32 {
    let mut sum = 0.0f64;
    for (&a, &b) in x[..n].iter().zip(&y[..n]) {
        sum += (a * b) as f64;
    }
    sum as f32
}

/// Scalar f16 dot product (ggml `ggml_vec_dot_f16`, scalar path): products in
/// f32, accumulated in f64.
///
/// # Panics
/// If either slice is shorter than `n`.
pub fn vec_dot_f16(n: usize, x: &[f16], y: &[f16]) -> f32 {
    let mut sum = 0.0f64;
    for (&a, &b) in x[..n].iter().zip(&y[..n]) {
        sum += (a.to_f32() * b.to_f32()) as f64;
    }
    sum as f32
}

/// Scalar bf16 dot product (ggml `ggml_vec_dot_bf16`, scalar path): products
/// in f32, accumulated in f64.
///
/// # Panics
/// If either slice is shorter than `n`.
pub fn vec_dot_bf16(n: usize, x: &[bf16], y: &[bf16]) -> f32 {
    let mut sum = 0.0f64;
    for (&a, &b) in x[..n].iter().zip(&y[..n]) {
        sum += (bf16_to_f32(a) * bf16_to_f32(b)) as f64;
    }
    sum as f32
}
