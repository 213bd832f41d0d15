//! Element types and their storage layout.
//!
//! Discriminants are ggml's `ggml_type` values, so a GGUF file's type field
//! maps onto [`DType`] without a table. Block sizes and byte sizes match
//! ggml's block structs exactly.

use std::fmt;

/// An element type: plain numbers or one of ggml's quantized block formats.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types)]
pub enum DType {
    /// IEEE 754 binary32.
    F32 = 0,
    /// IEEE 754 binary16.
    F16 = 1,
    /// 32 weights: f16 scale + 32 x 4-bit, value = d * (q - 8).
    Q4_0 = 2,
    /// 32 weights: f16 scale and min + 32 x 4-bit, value = d * q + m.
    Q4_1 = 3,
    /// 32 weights: f16 scale + 32 x 5-bit, value = d * (q - 16).
    Q5_0 = 6,
    /// 32 weights: f16 scale and min + 32 x 5-bit, value = d * q + m.
    Q5_1 = 7,
    /// 32 weights: f16 scale + 32 x i8.
    Q8_0 = 8,
    /// 32 weights: f16 scale, f16 d*sum(q) + 32 x i8 (activations only).
    Q8_1 = 9,
    /// 256-weight super-block, 2-bit with 4-bit sub-block scales and mins.
    Q2_K = 10,
    /// 256-weight super-block, 3-bit with 6-bit sub-block scales.
    Q3_K = 11,
    /// 256-weight super-block, 4-bit with 6-bit sub-block scales and mins.
    Q4_K = 12,
    /// 256-weight super-block, 5-bit with 6-bit sub-block scales and mins.
    Q5_K = 13,
    /// 256-weight super-block, 6-bit with 8-bit sub-block scales.
    Q6_K = 14,
    /// 256-weight super-block, f32 scale + i8 + 16 block sums (activations only).
    Q8_K = 15,
    /// Signed 8-bit integer.
    I8 = 24,
    /// Signed 16-bit integer.
    I16 = 25,
    /// Signed 32-bit integer.
    I32 = 26,
    /// Signed 64-bit integer.
    I64 = 27,
    /// bfloat16: the upper half of an f32.
    BF16 = 30,
}

/// Error for a raw type code that this build does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownDType(pub u32);

impl fmt::Display for UnknownDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown element type code {}", self.0)
    }
}

impl std::error::Error for UnknownDType {}

impl DType {
    /// Every type, in code order.
    pub const ALL: [DType; 19] = [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::BF16,
    ];

    /// The block formats weights come in (ggml's GGUF weight types; q8_1
    /// and q8_K hold activations only).
    pub const WEIGHT_BLOCKS: [DType; 10] = [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];

    /// Every type a mat-mul weight (MUL_MAT src0) comes in: the floats and
    /// [`DType::WEIGHT_BLOCKS`].
    pub const WEIGHT_TYPES: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];

    /// Every type FLASH_ATTN_EXT's K and V come in (as in ggml's CPU
    /// backend): the floats and the legacy block formats. Core validates
    /// against it; a backend that decodes fewer says which in supports_op.
    pub const ATTENTION_KV_TYPES: [DType; 8] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
    ];

    /// The type the library quantizes to when a caller does not choose one.
    pub const DEFAULT_QUANT: DType = DType::Q8_0;

    /// Decodes a raw `ggml_type` code.
    pub fn from_code(code: u32) -> Result<DType, UnknownDType> {
        DType::ALL
            .iter()
            .copied()
            .find(|t| t.code() == code)
            .ok_or(UnknownDType(code))
    }

    /// The raw `ggml_type` code.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// ggml's name for the type (`"q4_0"`, `"f32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q8_0 => "q8_0",
            DType::Q8_1 => "q8_1",
            DType::Q2_K => "q2_K",
            DType::Q3_K => "q3_K",
            DType::Q4_K => "q4_K",
            DType::Q5_K => "q5_K",
            DType::Q6_K => "q6_K",
            DType::Q8_K => "q8_K",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::BF16 => "bf16",
        }
    }

    /// Parses a name as printed by [`DType::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Elements per block (1 for plain types).
    pub const fn block_size(self) -> usize {
        match self {
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::Q8_1 => 32,
            DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
                256
            }
            _ => 1,
        }
    }

    /// Bytes per block (bytes per element for plain types).
    pub const fn type_size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 => 1,
            DType::I64 => 8,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q8_0 => 34,
            DType::Q8_1 => 36,
            DType::Q2_K => 84,
            DType::Q3_K => 110,
            DType::Q4_K => 144,
            DType::Q5_K => 176,
            DType::Q6_K => 210,
            DType::Q8_K => 292,
        }
    }

    /// True for the block-quantized formats.
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// True for F32, F16 and BF16.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// True for the signed integer types.
    pub const fn is_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// Bytes taken by a row of `ne0` elements, or `None` when `ne0` is not a
    /// whole number of blocks or the size does not fit a `usize`.
    pub const fn row_size(self, ne0: usize) -> Option<usize> {
        let bs = self.block_size();
        if !ne0.is_multiple_of(bs) {
            return None;
        }
        (ne0 / bs).checked_mul(self.type_size())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for t in DType::ALL {
            assert_eq!(DType::from_code(t.code()), Ok(t));
            assert_eq!(DType::from_name(t.name()), Some(t));
        }
        assert_eq!(DType::from_code(4), Err(UnknownDType(4)));
    }

    #[test]
    fn row_size_of_a_huge_row_is_none_not_an_overflow() {
        assert_eq!(DType::F32.row_size(usize::MAX / 2), None);
        assert_eq!(DType::Q8_0.row_size((usize::MAX / 32) * 32), None);
    }

    #[test]
    fn row_size_requires_whole_blocks() {
        assert_eq!(DType::Q4_0.row_size(64), Some(36));
        assert_eq!(DType::Q4_0.row_size(33), None);
        assert_eq!(DType::Q4_K.row_size(512), Some(288));
        assert_eq!(DType::F16.row_size(3), Some(6));
    }
}
