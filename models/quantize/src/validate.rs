//! The check llama.cpp makes on every quantized chunk (`ggml_validate_row_data`):
//! no NaN or infinite scale, and no NaN or infinite value in float output.

use backplane_abi::DType;

/// Byte offsets of the f16 scale fields inside one block of `dtype`.
fn scale_offsets(dtype: DType) -> &'static [usize] {
    match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
        DType::Q2_K => &[80, 82],
        DType::Q3_K => &[108],
        DType::Q6_K => &[208],
        _ => &[],
    }
}

/// True when the f16 bit pattern is an infinity or a NaN.
fn f16_not_finite(bits: u16) -> bool {
    bits & 0x7c00 == 0x7c00
}

/// The index of the first block (or value, for float types) in `bytes`
/// that llama.cpp's validation rejects, or `None` when all pass.
pub(crate) fn first_invalid(dtype: DType, bytes: &[u8]) -> Option<usize> {
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .position(|b| !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite()),
        DType::F16 => bytes
            .chunks_exact(2)
            .position(|b| f16_not_finite(u16_at(b, 0))),
        DType::BF16 => bytes
            .chunks_exact(2)
            .position(|b| u16_at(b, 0) & 0x7fff >= 0x7f80),
        _ => {
            let offsets = scale_offsets(dtype);
            bytes
                .chunks_exact(dtype.type_size())
                .position(|block| offsets.iter().any(|&at| f16_not_finite(u16_at(block, at))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finite_scales_pass_and_an_infinite_scale_names_its_block() {
        let mut row = vec![0u8; 3 * DType::Q6_K.type_size()];
        assert_eq!(first_invalid(DType::Q6_K, &row), None);
        let at = 2 * DType::Q6_K.type_size() + 208;
        row[at..at + 2].copy_from_slice(&0x7c00u16.to_le_bytes());
        assert_eq!(first_invalid(DType::Q6_K, &row), Some(2));
    }

    #[test]
    fn nan_min_of_q4_1_is_rejected() {
        let mut row = vec![0u8; DType::Q4_1.type_size()];
        row[2..4].copy_from_slice(&0x7e00u16.to_le_bytes());
        assert_eq!(first_invalid(DType::Q4_1, &row), Some(0));
    }

    #[test]
    fn float_rows_reject_infinities_and_nans() {
        let row: Vec<u8> = [1.0f32, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(first_invalid(DType::F32, &row), Some(1));
        assert_eq!(first_invalid(DType::BF16, &[0x80, 0x7f, 0, 0]), Some(0));
        assert_eq!(first_invalid(DType::F16, &[0, 0x3c]), None);
    }
}
