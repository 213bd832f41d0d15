//! The block structs, laid out exactly like ggml's `block_*` C structs.
//!
//! Every struct is `#[repr(C)]`, has no padding, and is [`Pod`], so a row of
//! blocks can be viewed as bytes (and, when suitably aligned, bytes as blocks)
//! with [`bytemuck`]. Sizes are checked at compile time against
//! [`DType::type_size`]. Half-precision fields use [`half::f16`], whose bit
//! pattern is the IEEE binary16 value ggml stores in `ggml_half`.

use backplane_abi::DType;
use bytemuck::{Pod, Zeroable};
use half::f16;

/// Weights per block of the legacy formats (q4_0 .. q8_1): ggml's `QK4_0` etc.
pub const QK: usize = 32;
/// Weights per super-block of the K-quant formats: ggml's `QK_K`.
pub const QK_K: usize = 256;
/// Size of the packed 6-bit scale/min array of q3_K, q4_K and q5_K: `K_SCALE_SIZE`.
pub const K_SCALE_SIZE: usize = 12;

/// A quantized block type: ties a block struct to its [`DType`].
pub trait QuantBlock: Pod {
    /// The element type this block encodes.
    const DTYPE: DType;
    /// Weights per block.
    const BLOCK_SIZE: usize;
}

macro_rules! block_type {
    ($t:ty, $dtype:expr, $qk:expr) => {
        impl QuantBlock for $t {
            const DTYPE: DType = $dtype;
            const BLOCK_SIZE: usize = $qk;
        }
        const _: () = assert!(size_of::<$t>() == $dtype.type_size());
        const _: () = assert!($qk == $dtype.block_size());
    };
}

/// q4_0: 32 weights as 4-bit `q` with `w = d * (q - 8)` (18 bytes).
///
/// `qs[j]` holds weight `j` in its low nibble and weight `j + 16` in its high
/// nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Packed nibbles.
    pub qs: [u8; QK / 2],
}

/// q4_1: 32 weights as 4-bit `q` with `w = d * q + m` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (offset).
    pub m: f16,
    /// Packed nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; QK / 2],
}

/// q5_0: 32 weights as 5-bit `q` with `w = d * (q - 16)` (22 bytes).
///
/// The low four bits are packed like [`BlockQ4_0`]; bit `j` of the
/// little-endian `qh` word is the fifth bit of weight `j`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Fifth bits, a little-endian `u32`.
    pub qh: [u8; 4],
    /// Low nibbles.
    pub qs: [u8; QK / 2],
}

/// q5_1: 32 weights as 5-bit `q` with `w = d * q + m` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (offset).
    pub m: f16,
    /// Fifth bits, a little-endian `u32`.
    pub qh: [u8; 4],
    /// Low nibbles.
    pub qs: [u8; QK / 2],
}

/// q8_0: 32 weights as `i8` with `w = d * q` (34 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quants.
    pub qs: [i8; QK],
}

/// q8_1: like q8_0 plus `s = d * sum(qs)`, used for activations (36 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_1 {
    /// Scale.
    pub d: f16,
    /// `d * sum(qs)`.
    pub s: f16,
    /// Quants.
    pub qs: [i8; QK],
}

/// q2_K: 256 weights in 16 groups of 16, 2-bit quants with 4-bit scales and
/// mins: `w = d * sc * q - dmin * m` (84 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ2K {
    /// Per group: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// Quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale for the scales.
    pub d: f16,
    /// Super-block scale for the mins.
    pub dmin: f16,
}

/// q3_K: 256 weights in 16 groups of 16, 3-bit quants with 6-bit signed
/// scales: `w = d * (sc - 32) * (q - 4)` (110 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ3K {
    /// High bit of each quant.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of each quant, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales, packed.
    pub scales: [u8; K_SCALE_SIZE],
    /// Super-block scale.
    pub d: f16,
}

/// q4_K: 256 weights in 8 groups of 32, 4-bit quants with 6-bit scales and
/// mins: `w = d * sc * q - dmin * m` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale for the scales.
    pub d: f16,
    /// Super-block scale for the mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; K_SCALE_SIZE],
    /// Quants, two per byte.
    pub qs: [u8; QK_K / 2],
}

/// q5_K: 256 weights in 8 groups of 32, 5-bit quants with 6-bit scales and
/// mins: `w = d * sc * q - dmin * m` (176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale for the scales.
    pub d: f16,
    /// Super-block scale for the mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; K_SCALE_SIZE],
    /// Fifth bit of each quant.
    pub qh: [u8; QK_K / 8],
    /// Low four bits of each quant, two per byte.
    pub qs: [u8; QK_K / 2],
}

/// q6_K: 256 weights in 16 groups of 16, 6-bit quants with 8-bit signed
/// scales: `w = d * sc * (q - 32)` (210 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ6K {
    /// Low four bits of each quant.
    pub ql: [u8; QK_K / 2],
    /// High two bits of each quant.
    pub qh: [u8; QK_K / 4],
    /// Group scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}

/// q8_K: 256 weights as `i8` with an `f32` scale and per-16 sums, used for
/// activations in K-quant dot products (292 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale (a full `f32`, unlike the other formats).
    pub d: f32,
    /// Quants.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 quants.
    pub bsums: [i16; QK_K / 16],
}

macro_rules! zero_default {
    ($($t:ty),*) => {$(
        impl Default for $t {
            fn default() -> Self {
                Self::zeroed()
            }
        }
    )*};
}
zero_default!(BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K);

block_type!(BlockQ4_0, DType::Q4_0, QK);
block_type!(BlockQ4_1, DType::Q4_1, QK);
block_type!(BlockQ5_0, DType::Q5_0, QK);
block_type!(BlockQ5_1, DType::Q5_1, QK);
block_type!(BlockQ8_0, DType::Q8_0, QK);
block_type!(BlockQ8_1, DType::Q8_1, QK);
block_type!(BlockQ2K, DType::Q2_K, QK_K);
block_type!(BlockQ3K, DType::Q3_K, QK_K);
block_type!(BlockQ4K, DType::Q4_K, QK_K);
block_type!(BlockQ5K, DType::Q5_K, QK_K);
block_type!(BlockQ6K, DType::Q6_K, QK_K);
block_type!(BlockQ8K, DType::Q8_K, QK_K);

// Exact ggml sizes, spelled out (also implied by the `type_size` checks above).
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ2K>() == 2 * 2 + QK_K / 16 + QK_K / 4);
const _: () = assert!(size_of::<BlockQ3K>() == 2 + QK_K / 4 + QK_K / 8 + 12);
const _: () = assert!(size_of::<BlockQ4K>() == 2 * 2 + K_SCALE_SIZE + QK_K / 2);
const _: () = assert!(size_of::<BlockQ5K>() == 2 * 2 + K_SCALE_SIZE + QK_K / 2 + QK_K / 8);
const _: () = assert!(size_of::<BlockQ6K>() == 2 + QK_K / 16 + 3 * QK_K / 4);
const _: () = assert!(size_of::<BlockQ8K>() == 4 + QK_K + QK_K / 16 * 2);
