//! Weights stored split ([`crate::split`]) as the MUL_MAT kernels read
//! them: in place for the integer mat-vec, joined back into ggml's blocks
//! in scratch memory for every other path.

use backplane_abi::DType;
use backplane_shaders::PipelineKey;

use super::{Weights, u32_of};
use crate::encode::{Encoder, Params};
use crate::ops::matmul::plan::WeightLayout;
use crate::pipelines::Checks;
use crate::split::{QUANT_BYTES, Split};

/// Workgroup size of `mul_mat_split_join`.
const JOIN_WG: u32 = 256;

/// Bytes of a ggml q4_0 block.
const Q4_0_BLOCK: u64 = 18;

/// The split tensor `index`: its geometry, bound in whole 16-byte words
/// (the buffer type reserves them), with its byte offset in the binding.
fn bound(e: &Encoder, index: usize) -> Result<(Split, crate::encode::Binding), String> {
    let s = Split::for_tensor(e.tensor(index))?;
    let bytes = (s.bytes() as u64).next_multiple_of(16);
    let binding = e.binding_span(index, bytes)?;
    if !binding.rem_bytes.is_multiple_of(16) {
        return Err(format!(
            "split weights at offset {} are not 16-byte aligned",
            e.tensor(index).offset
        ));
    }
    Ok((s, binding))
}

impl Weights {
    /// Split q4_0 weights as the integer mat-vec reads them: rows of
    /// quants `16 * row_blocks` bytes apart, the scales after them.
    pub(super) fn split(e: &Encoder, index: usize) -> Result<Weights, String> {
        let (s, binding) = bound(e, index)?;
        let row = (s.row_blocks * QUANT_BYTES) as u64;
        let quants = (s.blocks * QUANT_BYTES) as u64;
        Ok(Weights {
            off: u32_of(binding.rem_bytes, "src0 offset")?,
            strides: [u32_of(row, "split row")?, 0, 0],
            scales: u32_of(binding.rem_bytes + quants, "split scales")?,
            binding,
            ty: DType::Q4_0,
            layout: WeightLayout::Split,
        })
    }

    /// Split q4_0 weights joined back into ggml's blocks in scratch
    /// memory by `mul_mat_split_join` (two blocks, nine words, per
    /// invocation), read as [`WeightLayout::Quant`].
    pub(super) fn joined(e: &mut Encoder, index: usize) -> Result<Weights, String> {
        let (s, binding) = bound(e, index)?;
        let row = s.row_blocks as u64 * Q4_0_BLOCK;
        // One matrix: the outer strides are never multiplied by more than 0.
        let matrix = u32_of(s.blocks as u64 * Q4_0_BLOCK, "src0 matrix")?;
        let scratch = e.scratch((s.blocks as u64 * Q4_0_BLOCK).next_multiple_of(4))?;
        let pairs = (s.blocks as u64).div_ceil(2);
        let quants = (s.blocks * QUANT_BYTES) as u64;
        let p = Params::new()
            .u32(u32_of(s.blocks as u64, "split blocks")?)
            .u32(u32_of(binding.rem_bytes / 16, "split offset")?)
            .u32(u32_of(binding.rem_bytes + quants, "split scales")?)
            .u32(0);
        let key = PipelineKey::new("mul_mat_split_join", "").wg(JOIN_WG);
        // Checked: a plain copy, not worth a proof.
        e.dispatch_linear(
            &key,
            Checks::On,
            &[binding, scratch.clone()],
            &p,
            pairs.div_ceil(u64::from(JOIN_WG)),
        )?;
        Ok(Weights {
            binding: scratch,
            ty: DType::Q4_0,
            layout: WeightLayout::Quant,
            off: 0,
            strides: [u32_of(row, "src0 row")?, matrix, matrix],
            scales: 0,
        })
    }
}
