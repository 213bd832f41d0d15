//! Weights stored split ([`crate::split`]) as the MUL_MAT kernels read
//! them: in place (`W_SPLIT`), by every path.

use super::{Weights, u32_of};
use crate::encode::{Binding, Encoder};
use crate::ops::matmul::plan::WeightLayout;
use crate::split::Split;

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

/// Split weights `index` as the kernels that read them in place (WGSL
/// and native) see them.
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
    /// Split weights as the WGSL kernels read them (`W_SPLIT`): rows of
    /// quants `quant_bytes * row_blocks` bytes apart, the heads after
    /// them.
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
}
