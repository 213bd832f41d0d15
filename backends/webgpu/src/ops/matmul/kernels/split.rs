//! Weights stored split ([`crate::split`]) as the MUL_MAT kernels read
//! them: in place for the integer mat-vec and the conversion to half
//! rows, joined back into ggml's blocks in scratch memory for every other
//! path.

use backplane_abi::DType;
use backplane_shaders::PipelineKey;

use super::{Weights, quant_flag, u32_of};
use crate::encode::{Binding, Encoder, Params};
use crate::ops::matmul::plan::WeightLayout;
use crate::pipelines::Checks;
use crate::split::Split;

/// Workgroup size of `mul_mat_split_join`.
const JOIN_WG: u32 = 256;

/// The split tensor `index`: its geometry, bound in whole 16-byte words
/// (the buffer type reserves them), with its byte offset in the binding.
fn bound(e: &Encoder, index: usize) -> Result<(Split, Binding), String> {
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

/// Split weights `index` as the kernels that read them in place (the
/// integer mat-vecs, WGSL and native, and the conversion to half rows)
/// see them.
pub struct SplitRows {
    /// The geometry.
    pub split: Split,
    /// The binding, whole 16-byte words.
    pub binding: Binding,
    /// Bytes from one row's quants to the next's.
    pub row: u64,
    /// Byte offset of the heads in the binding.
    pub heads: u64,
}

impl SplitRows {
    /// The split tensor `index` of the graph `e` encodes.
    pub fn of(e: &Encoder, index: usize) -> Result<SplitRows, String> {
        let (split, binding) = bound(e, index)?;
        Ok(SplitRows {
            split,
            row: (split.row_blocks * split.quant_bytes()) as u64,
            heads: binding.rem_bytes + split.heads_at() as u64,
            binding,
        })
    }
}

impl Weights {
    /// Split weights as the integer mat-vec and the conversion to half
    /// rows read them: rows of quants `quant_bytes * row_blocks` bytes
    /// apart, the heads after them.
    pub(super) fn split(e: &Encoder, index: usize) -> Result<Weights, String> {
        let r = SplitRows::of(e, index)?;
        Ok(Weights {
            off: u32_of(r.binding.rem_bytes, "src0 offset")?,
            strides: [u32_of(r.row, "split row")?, 0, 0],
            scales: u32_of(r.heads, "split heads")?,
            binding: r.binding,
            ty: r.split.dtype,
            layout: WeightLayout::Split,
        })
    }

    /// Split weights joined back into ggml's blocks in scratch memory by
    /// `mul_mat_split_join` (q4_0: two blocks, nine words, per invocation;
    /// q4_K: one block, nine vec4s), read as [`WeightLayout::Quant`].
    pub(super) fn joined(e: &mut Encoder, index: usize) -> Result<Weights, String> {
        let (s, binding) = bound(e, index)?;
        let block = s.block_bytes() as u64;
        let row = s.row_blocks as u64 * block;
        // One matrix: the outer strides are never multiplied by more than 0.
        let matrix = u32_of(s.blocks as u64 * block, "src0 matrix")?;
        let scratch = e.scratch((s.blocks as u64 * block).next_multiple_of(4))?;
        let invocations = if s.dtype == DType::Q4_0 {
            (s.blocks as u64).div_ceil(2)
        } else {
            s.blocks as u64
        };
        let p = Params::new()
            .u32(u32_of(s.blocks as u64, "split blocks")?)
            .u32(u32_of(binding.rem_bytes / 16, "split offset")?)
            .u32(u32_of(
                binding.rem_bytes + s.heads_at() as u64,
                "split heads",
            )?)
            .u32(0);
        let flag = quant_flag(s.dtype).ok_or("split weights of a block type")?;
        let key = PipelineKey::new("mul_mat_split_join", "")
            .define(flag, "")
            .wg(JOIN_WG);
        // Checked: a plain copy, not worth a proof.
        e.dispatch_linear(
            &key,
            Checks::On,
            &[binding, scratch.clone()],
            &p,
            invocations.div_ceil(u64::from(JOIN_WG)),
        )?;
        Ok(Weights {
            binding: scratch,
            ty: s.dtype,
            layout: WeightLayout::Quant,
            off: 0,
            strides: [u32_of(row, "src0 row")?, matrix, matrix],
            scales: 0,
        })
    }
}
