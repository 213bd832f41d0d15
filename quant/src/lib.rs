//! ggml-compatible quantized block formats.
//!
//! Quantizes f32 rows into ggml's block formats and back, byte-for-byte
//! compatible with ggml's reference code (`ggml-quants.c`), and provides the
//! scalar reference dot products of ggml's portable CPU path
//! (`ggml-cpu/quants.c`, the `*_generic` functions) so SIMD backends can be
//! tested against them.
//!
//! Two levels of API:
//!
//! * [`quantize_row`] / [`dequantize_row`]: byte rows of any [`DType`], with
//!   length checks reported as [`QuantError`]. Byte slices may have any
//!   alignment.
//! * Typed per-format functions on the block structs of [`blocks`], e.g.
//!   [`quantize_row_q4_0`], [`dequantize_row_q4_k`], [`vec_dot_q4_0_q8_0`].
//!   These panic on length mismatches (a caller bug).
//!
//! For a matrix product `W · x` ggml quantizes the activations `x` to
//! [`vec_dot_type`]`(W's type)` (with [`quantize_row_q8_0`],
//! [`quantize_row_q8_1`] or [`quantize_row_q8_k`]) and calls the matching
//! `vec_dot_*` function per row.
//!
//! Byte layouts are little-endian, as in GGUF files; the byte-level functions
//! view blocks in host byte order, so they are only meaningful on
//! little-endian hosts (every target ggml supports in practice).
//!
//! Exactness: the code performs the same f32 operations in the same order as
//! the C, and Rust never fuses multiply-adds, so output matches ggml built
//! without floating-point contraction (clang's default across statements;
//! GCC with `-march=native` may fuse some multiply-adds and then differ in
//! rare last-bit cases). ggml builds `ggml-quants.c` without `-march` flags,
//! so on x86-64 its reference quantizers have no FMA to fuse with. The
//! ignored test `matches_ggml_bit_for_bit` checks every quantizer,
//! dequantizer and dot product against real ggml (see
//! `tests/ggml_harness.c`).

pub mod blocks;
mod float;
mod kquants;
mod legacy;

#[cfg(test)]
mod tests;

use std::fmt;

pub use backplane_abi::DType;
use bytemuck::Pod;
pub use half::{bf16, f16};

pub use blocks::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8_1, BlockQ8K, QK, QK_K, QuantBlock,
};
pub use float::{
    bf16_to_f32, dequantize_row_bf16, dequantize_row_f16, dequantize_row_f32, dequantize_row_i8,
    dequantize_row_i16, dequantize_row_i32, dequantize_row_i64, f32_to_bf16, quantize_row_bf16,
    quantize_row_f16, quantize_row_f32, quantize_row_i8, quantize_row_i16, quantize_row_i32,
    quantize_row_i64, vec_dot_bf16, vec_dot_f16, vec_dot_f32,
};
pub use kquants::{
    dequantize_row_q2_k, dequantize_row_q3_k, dequantize_row_q4_k, dequantize_row_q5_k,
    dequantize_row_q6_k, dequantize_row_q8_k, get_scale_min_k4, nearest_int, quantize_row_q2_k,
    quantize_row_q3_k, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k, quantize_row_q8_k,
    vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};
pub use legacy::{
    dequantize_row_q4_0, dequantize_row_q4_1, dequantize_row_q5_0, dequantize_row_q5_1,
    dequantize_row_q8_0, dequantize_row_q8_1, quantize_row_q4_0, quantize_row_q4_1,
    quantize_row_q5_0, quantize_row_q5_1, quantize_row_q8_0, quantize_row_q8_1, vec_dot_q4_0_q8_0,
    vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
};

/// A row could not be converted because its lengths do not fit the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantError {
    /// The element type of the byte row.
    pub dtype: DType,
    /// What was wrong.
    pub kind: QuantErrorKind,
}

/// The reason for a [`QuantError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantErrorKind {
    /// The number of f32 values is not a multiple of the block size.
    NotWholeBlocks {
        /// Number of f32 values given.
        len: usize,
        /// Weights per block of the type.
        block_size: usize,
    },
    /// The byte row does not have the size that many values take.
    ByteLen {
        /// Number of f32 values given.
        values: usize,
        /// Bytes those values take in the type.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
}

impl fmt::Display for QuantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            QuantErrorKind::NotWholeBlocks { len, block_size } => write!(
                f,
                "{}: {len} values is not a multiple of the block size {block_size}",
                self.dtype
            ),
            QuantErrorKind::ByteLen {
                values,
                expected,
                actual,
            } => write!(
                f,
                "{}: a row of {values} values takes {expected} bytes, but the buffer has {actual}",
                self.dtype
            ),
        }
    }
}

impl std::error::Error for QuantError {}

/// Checks that `values` f32 elements of `dtype` take exactly `bytes` bytes.
fn check_row(dtype: DType, values: usize, bytes: usize) -> Result<(), QuantError> {
    let err = |kind| Err(QuantError { dtype, kind });
    match dtype.row_size(values) {
        None => err(QuantErrorKind::NotWholeBlocks {
            len: values,
            block_size: dtype.block_size(),
        }),
        Some(expected) if expected != bytes => err(QuantErrorKind::ByteLen {
            values,
            expected,
            actual: bytes,
        }),
        Some(_) => Ok(()),
    }
}

/// Runs a typed quantizer on a byte row of any alignment. Lengths are
/// already checked. When `dst` is not aligned for `B`, each block is built on
/// the stack and copied out.
fn quantize_bytes<B: Pod>(src: &[f32], dst: &mut [u8], qk: usize, f: fn(&[f32], &mut [B])) {
    match bytemuck::try_cast_slice_mut::<u8, B>(dst) {
        Ok(blocks) => f(src, blocks),
        Err(_) => {
            for (x, out) in src
                .chunks_exact(qk)
                .zip(dst.chunks_exact_mut(size_of::<B>()))
            {
                let mut block = B::zeroed();
                f(x, std::slice::from_mut(&mut block));
                out.copy_from_slice(bytemuck::bytes_of(&block));
            }
        }
    }
}

/// Runs a typed dequantizer on a byte row of any alignment (see
/// [`quantize_bytes`]).
fn dequantize_bytes<B: Pod>(src: &[u8], dst: &mut [f32], qk: usize, f: fn(&[B], &mut [f32])) {
    match bytemuck::try_cast_slice::<u8, B>(src) {
        Ok(blocks) => f(blocks, dst),
        Err(_) => {
            for (bytes, y) in src
                .chunks_exact(size_of::<B>())
                .zip(dst.chunks_exact_mut(qk))
            {
                let block: B = bytemuck::pod_read_unaligned(bytes);
                f(std::slice::from_ref(&block), y);
            }
        }
    }
}

/// Converts a row of f32 values into `dtype`'s byte layout.
///
/// `src.len()` must be a multiple of `dtype.block_size()` and `dst.len()`
/// must equal `dtype.row_size(src.len())`. Quantized types use ggml's
/// reference quantizers; F16/BF16 round to nearest even; integer types round
/// half away from zero and saturate (NaN → 0), a choice of this crate since
/// ggml has no such conversion.
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    check_row(dtype, src.len(), dst.len())?;
    let qk = dtype.block_size();
    match dtype {
        DType::F32 => quantize_bytes(src, dst, qk, quantize_row_f32),
        DType::F16 => quantize_bytes(src, dst, qk, quantize_row_f16),
        DType::BF16 => quantize_bytes(src, dst, qk, quantize_row_bf16),
        DType::I8 => quantize_bytes(src, dst, qk, quantize_row_i8),
        DType::I16 => quantize_bytes(src, dst, qk, quantize_row_i16),
        DType::I32 => quantize_bytes(src, dst, qk, quantize_row_i32),
        DType::I64 => quantize_bytes(src, dst, qk, quantize_row_i64),
        DType::Q4_0 => quantize_bytes(src, dst, qk, quantize_row_q4_0),
        DType::Q4_1 => quantize_bytes(src, dst, qk, quantize_row_q4_1),
        DType::Q5_0 => quantize_bytes(src, dst, qk, quantize_row_q5_0),
        DType::Q5_1 => quantize_bytes(src, dst, qk, quantize_row_q5_1),
        DType::Q8_0 => quantize_bytes(src, dst, qk, quantize_row_q8_0),
        DType::Q8_1 => quantize_bytes(src, dst, qk, quantize_row_q8_1),
        DType::Q2_K => quantize_bytes(src, dst, qk, quantize_row_q2_k),
        DType::Q3_K => quantize_bytes(src, dst, qk, quantize_row_q3_k),
        DType::Q4_K => quantize_bytes(src, dst, qk, quantize_row_q4_k),
        DType::Q5_K => quantize_bytes(src, dst, qk, quantize_row_q5_k),
        DType::Q6_K => quantize_bytes(src, dst, qk, quantize_row_q6_k),
        DType::Q8_K => quantize_bytes(src, dst, qk, quantize_row_q8_k),
    }
    Ok(())
}

/// Converts a row in `dtype`'s byte layout to f32 values.
///
/// `dst.len()` must be a multiple of `dtype.block_size()` and `src.len()`
/// must equal `dtype.row_size(dst.len())`. Works for every type, integers
/// included (converted as by a C cast).
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    check_row(dtype, dst.len(), src.len())?;
    let qk = dtype.block_size();
    match dtype {
        DType::F32 => dequantize_bytes(src, dst, qk, dequantize_row_f32),
        DType::F16 => dequantize_bytes(src, dst, qk, dequantize_row_f16),
        DType::BF16 => dequantize_bytes(src, dst, qk, dequantize_row_bf16),
        DType::I8 => dequantize_bytes(src, dst, qk, dequantize_row_i8),
        DType::I16 => dequantize_bytes(src, dst, qk, dequantize_row_i16),
        DType::I32 => dequantize_bytes(src, dst, qk, dequantize_row_i32),
        DType::I64 => dequantize_bytes(src, dst, qk, dequantize_row_i64),
        DType::Q4_0 => dequantize_bytes(src, dst, qk, dequantize_row_q4_0),
        DType::Q4_1 => dequantize_bytes(src, dst, qk, dequantize_row_q4_1),
        DType::Q5_0 => dequantize_bytes(src, dst, qk, dequantize_row_q5_0),
        DType::Q5_1 => dequantize_bytes(src, dst, qk, dequantize_row_q5_1),
        DType::Q8_0 => dequantize_bytes(src, dst, qk, dequantize_row_q8_0),
        DType::Q8_1 => dequantize_bytes(src, dst, qk, dequantize_row_q8_1),
        DType::Q2_K => dequantize_bytes(src, dst, qk, dequantize_row_q2_k),
        DType::Q3_K => dequantize_bytes(src, dst, qk, dequantize_row_q3_k),
        DType::Q4_K => dequantize_bytes(src, dst, qk, dequantize_row_q4_k),
        DType::Q5_K => dequantize_bytes(src, dst, qk, dequantize_row_q5_k),
        DType::Q6_K => dequantize_bytes(src, dst, qk, dequantize_row_q6_k),
        DType::Q8_K => dequantize_bytes(src, dst, qk, dequantize_row_q8_k),
    }
    Ok(())
}

/// The type ggml converts the second operand (activations) to before a dot
/// product with a row of `dtype` (ggml's `type_traits_cpu[..].vec_dot_type`).
///
/// q4_0/q5_0/q8_0 → Q8_0; q4_1/q5_1 → Q8_1; every K-quant → Q8_K;
/// F32/F16/BF16 → themselves. For the activation-only Q8_1 and Q8_K this
/// returns the type itself (ggml has no dot product for them), and for the
/// integer types F32 (ggml leaves the entry unset, which reads as F32).
pub const fn vec_dot_type(dtype: DType) -> DType {
    match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => DType::Q8_0,
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 => DType::Q8_1,
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
            DType::Q8_K
        }
        DType::F16 => DType::F16,
        DType::BF16 => DType::BF16,
        DType::F32 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => DType::F32,
    }
}
