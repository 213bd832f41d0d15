//! The reordered weight layout: the bytes of a device's `<device>_reorder`
//! buffer type (ggml-sycl's "reorder" of Q4_0 / Q8_0 weights, done once
//! when the weights are written instead of before every product).
//!
//! ggml stores a q4_0 matrix block after block, each block an f16 scale
//! followed by its quants (18 bytes; q8_0: 34). The reordered mat-vec
//! (`k_mmvq_reordered` in `kernels/mul_mat.cpp`) wants the quants of
//! a row contiguous and the scales apart, so a work-group streams one run
//! of quants and one of scales. A tensor in a reorder buffer holds, for
//! its `B` blocks in row-major order,
//!
//! * the quants of every block (`B * 16` bytes for q4_0, `B * 32` for
//!   q8_0), block `b`'s at `b * q`, then
//! * the f16 scales of every block (`B * 2` bytes), block `b`'s at
//!   `B * q + 2 * b`,
//!
//! the same byte count as ggml's layout, so sizes and offsets are unchanged.
//! One matrix per tensor: two-dimensional, dense rows, not a view
//! ([`Reorder::for_tensor`]). The host reads and writes ggml's layout at
//! any offset and length through `set_tensor` / `get_tensor`
//! ([`write`], [`read`]), which convert whole blocks on the host and move
//! one run of quants and one of scales.

use backplane_abi::{DType, TensorDesc};

use crate::runtime::Queue;

/// Suffix of a device's reordered buffer type name (`sycl0_reorder`).
pub const REORDER_SUFFIX: &str = "_reorder";

/// The weight types the reordered layout exists for.
pub const REORDER_TYPES: [DType; 2] = [DType::Q4_0, DType::Q8_0];

/// Bytes of a block's f16 scale.
const SCALE_BYTES: usize = 2;

/// The reordered geometry of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reorder {
    /// The weight type.
    pub dtype: DType,
    /// Blocks in the whole tensor.
    pub blocks: usize,
}

impl Reorder {
    /// The reordered geometry of `t`, or why it cannot be reordered.
    pub fn for_tensor(t: &TensorDesc) -> Result<Reorder, String> {
        let dtype = t.dtype().map_err(|e| e.to_string())?;
        if !REORDER_TYPES.contains(&dtype) {
            return Err(format!(
                "{dtype} has no reordered layout (only q4_0 and q8_0)"
            ));
        }
        if t.view_source().is_some() {
            return Err("a view cannot be read in the reordered layout".into());
        }
        if t.ne.iter().any(|&n| n <= 0) {
            return Err(format!("shape {:?} has an empty dimension", t.ne));
        }
        if t.ne[2] != 1 || t.ne[3] != 1 {
            return Err(format!(
                "shape {:?} is not one matrix (the reordered layout holds two dimensions)",
                t.ne
            ));
        }
        let dense = TensorDesc::new(dtype, t.ne);
        if t.nb != dense.nb {
            return Err(format!(
                "strides {:?} are not dense rows (expected {:?})",
                t.nb, dense.nb
            ));
        }
        let ne0 = t.ne[0] as usize;
        if !ne0.is_multiple_of(dtype.block_size()) {
            return Err(format!("row length {ne0} is not whole {dtype} blocks"));
        }
        Ok(Reorder {
            dtype,
            blocks: ne0 / dtype.block_size() * t.ne[1] as usize,
        })
    }

    /// Bytes of one block in either layout.
    pub fn block_bytes(self) -> usize {
        self.dtype.type_size()
    }

    /// Quant bytes of one block.
    pub fn quant_bytes(self) -> usize {
        self.block_bytes() - SCALE_BYTES
    }

    /// Bytes of the whole tensor (either layout).
    pub fn bytes(self) -> usize {
        self.blocks * self.block_bytes()
    }

    /// Byte offset of the scales region in the tensor.
    pub fn scales_at(self) -> usize {
        self.blocks * self.quant_bytes()
    }

    /// Splits whole ggml blocks `ggml` into their quants and scales.
    pub fn split(self, ggml: &[u8], quants: &mut [u8], scales: &mut [u8]) {
        let q = self.quant_bytes();
        for ((b, qo), so) in ggml
            .chunks_exact(self.block_bytes())
            .zip(quants.chunks_exact_mut(q))
            .zip(scales.chunks_exact_mut(SCALE_BYTES))
        {
            so.copy_from_slice(&b[..SCALE_BYTES]);
            qo.copy_from_slice(&b[SCALE_BYTES..]);
        }
    }

    /// Joins quants and scales back into whole ggml blocks `ggml`.
    pub fn join(self, quants: &[u8], scales: &[u8], ggml: &mut [u8]) {
        let q = self.quant_bytes();
        for ((b, qi), si) in ggml
            .chunks_exact_mut(self.block_bytes())
            .zip(quants.chunks_exact(q))
            .zip(scales.chunks_exact(SCALE_BYTES))
        {
            b[..SCALE_BYTES].copy_from_slice(si);
            b[SCALE_BYTES..].copy_from_slice(qi);
        }
    }

    /// The blocks `[first, end)` that ggml bytes `[offset, offset + len)`
    /// touch.
    pub fn blocks_of(self, offset: usize, len: usize) -> (usize, usize) {
        let bb = self.block_bytes();
        (offset / bb, (offset + len).div_ceil(bb))
    }
}

/// Reads blocks `[first, end)` of the reordered tensor at device address
/// `base` back into ggml's layout.
fn read_blocks(
    queue: &Queue,
    r: Reorder,
    base: *const u8,
    first: usize,
    end: usize,
) -> Result<Vec<u8>, String> {
    let n = end - first;
    let (q, mut quants, mut scales) = (r.quant_bytes(), Vec::new(), Vec::new());
    quants.resize(n * q, 0);
    scales.resize(n * SCALE_BYTES, 0);
    // SAFETY: both runs lie inside the tensor's `r.bytes()` bytes at `base`
    // (blocks below `r.blocks`), which the caller checked against its
    // buffer; the host vectors outlive the blocking copies.
    unsafe {
        queue.memcpy(quants.as_mut_ptr(), base.add(first * q), quants.len(), true)?;
        queue.memcpy(
            scales.as_mut_ptr(),
            base.add(r.scales_at() + first * SCALE_BYTES),
            scales.len(),
            true,
        )?;
    }
    let mut ggml = vec![0u8; n * r.block_bytes()];
    r.join(&quants, &scales, &mut ggml);
    Ok(ggml)
}

/// Writes `data`, ggml bytes at `offset` of the tensor, into the reordered
/// tensor at device address `base` (whose whole `r.bytes()` the caller
/// checked lie in its buffer, as `offset + data.len() <= r.bytes()`).
/// Blocks only partly covered are read back first and merged.
pub(crate) fn write(
    queue: &Queue,
    r: Reorder,
    base: *mut u8,
    offset: usize,
    data: &[u8],
) -> Result<(), String> {
    if data.is_empty() {
        return Ok(());
    }
    let (first, end) = r.blocks_of(offset, data.len());
    let bb = r.block_bytes();
    let whole = offset.is_multiple_of(bb) && (offset + data.len()).is_multiple_of(bb);
    let mut ggml = if whole {
        vec![0u8; (end - first) * bb]
    } else {
        read_blocks(queue, r, base, first, end)?
    };
    let at = offset - first * bb;
    ggml[at..at + data.len()].copy_from_slice(data);
    let n = end - first;
    let q = r.quant_bytes();
    let (mut quants, mut scales) = (vec![0u8; n * q], vec![0u8; n * SCALE_BYTES]);
    r.split(&ggml, &mut quants, &mut scales);
    // SAFETY: as in read_blocks, writing.
    unsafe {
        queue.memcpy(base.add(first * q), quants.as_ptr(), quants.len(), true)?;
        queue.memcpy(
            base.add(r.scales_at() + first * SCALE_BYTES),
            scales.as_ptr(),
            scales.len(),
            true,
        )
    }
}

/// Reads ggml bytes at `offset` of the reordered tensor at device address
/// `base` into `out` (bounds as for [`write`]).
pub(crate) fn read(
    queue: &Queue,
    r: Reorder,
    base: *const u8,
    offset: usize,
    out: &mut [u8],
) -> Result<(), String> {
    if out.is_empty() {
        return Ok(());
    }
    let (first, end) = r.blocks_of(offset, out.len());
    let ggml = read_blocks(queue, r, base, first, end)?;
    let at = offset - first * r.block_bytes();
    out.copy_from_slice(&ggml[at..at + out.len()]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q4_0(k: i64, m: i64) -> TensorDesc {
        TensorDesc::new(DType::Q4_0, [k, m, 1, 1])
    }

    #[test]
    fn geometry_of_a_q4_0_matrix() {
        let r = Reorder::for_tensor(&q4_0(64, 3)).unwrap();
        assert_eq!(r.blocks, 6);
        assert_eq!((r.quant_bytes(), r.bytes(), r.scales_at()), (16, 108, 96));
        assert_eq!(r.blocks_of(17, 20), (0, 3));
        assert_eq!(r.blocks_of(18, 18), (1, 2));
    }

    #[test]
    fn split_then_join_restores_the_blocks() {
        let r = Reorder::for_tensor(&TensorDesc::new(DType::Q8_0, [32, 4, 1, 1])).unwrap();
        let ggml: Vec<u8> = (0..r.bytes()).map(|i| (i * 7 % 251) as u8).collect();
        let (mut q, mut s) = (vec![0; r.scales_at()], vec![0; r.blocks * 2]);
        r.split(&ggml, &mut q, &mut s);
        // Block 1's scale and first quant.
        assert_eq!(&s[2..4], &ggml[34..36]);
        assert_eq!(q[32], ggml[36]);
        let mut back = vec![0; r.bytes()];
        r.join(&q, &s, &mut back);
        assert_eq!(back, ggml);
    }

    #[test]
    fn tensors_the_layout_cannot_hold_are_refused_with_the_reason() {
        let f32 = TensorDesc::new(DType::F32, [32, 4, 1, 1]);
        assert!(Reorder::for_tensor(&f32).unwrap_err().contains("f32"));
        let batched = TensorDesc::new(DType::Q4_0, [32, 4, 2, 1]);
        assert!(
            Reorder::for_tensor(&batched)
                .unwrap_err()
                .contains("one matrix")
        );
        let mut strided = q4_0(64, 4);
        strided.nb[1] *= 2;
        assert!(
            Reorder::for_tensor(&strided)
                .unwrap_err()
                .contains("dense rows")
        );
    }
}
