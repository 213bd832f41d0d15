//! The split layout: the bytes of a device's `webgpu-<device>-split`
//! buffer type, q4_0 and q4_K weights laid out for the mat-vec kernel's
//! reads.
//!
//! ggml's q4_0 block is 18 bytes (an f16 scale, then 16 bytes of quants),
//! so blocks are only 2-byte aligned and the mat-vec kernel assembles each
//! block's quants from a window of five words. A q4_K block is 144 bytes:
//! a 16-byte head (`d`, `dmin`, 12 bytes of scales), then 128 of quants. A
//! tensor in a split buffer holds, for its `B` blocks in row-major order,
//!
//! * the quants of every block (`Q` = 16 or 128 bytes each): block `b`'s
//!   at `Q b`, so a unit of work is whole `vec4<u32>` loads and
//!   neighbouring invocations (which take neighbouring units of a row)
//!   read neighbouring bytes, then
//! * the head of every block (`H` = 2 or 16 bytes): block `b`'s at
//!   `Q B + H b`,
//!
//! the same byte count as ggml's layout. One matrix per tensor: q4_0 or
//! q4_K, two dimensions, dense rows, not a view ([`Split::for_tensor`]). The host
//! reads and writes ggml's layout at any offset and length through
//! `set_tensor` / `get_tensor`, which convert whole blocks on the host.
//!
//! Readers: MUL_MAT, every path reading the split bytes as they are
//! (`W_SPLIT`: the WGSL mat-vecs, GEMMs and conversion to half rows, the
//! native q4_0 mat-vec and KHR GEMM). Any other op reading such a tensor (GET_ROWS included) is refused, so
//! the scheduler leaves the weights of such ops in ggml's layout.

use backplane_abi::{DType, Op, TensorDesc};

/// Suffix of a device's split buffer type name (`webgpu-gpu0-split`).
pub const SPLIT_SUFFIX: &str = "-split";

/// The weight types the split layout exists for.
pub const SPLIT_TYPES: [DType; 2] = [DType::Q4_0, DType::Q4_K];

/// The split geometry of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The weight type.
    pub dtype: DType,
    /// Blocks in the whole tensor.
    pub blocks: usize,
    /// Blocks per row.
    pub row_blocks: usize,
}

impl Split {
    /// The split geometry of `t`, or why it cannot be split.
    pub fn for_tensor(t: &TensorDesc) -> Result<Split, String> {
        let dtype = t.dtype().map_err(|e| e.to_string())?;
        if !SPLIT_TYPES.contains(&dtype) {
            return Err(format!("{dtype} has no split layout (only q4_0 and q4_K)"));
        }
        if t.view_source().is_some() {
            return Err("a view cannot be read in the split layout".into());
        }
        if t.ne.iter().any(|&n| n <= 0) {
            return Err(format!("shape {:?} has an empty dimension", t.ne));
        }
        if t.ne[2] != 1 || t.ne[3] != 1 {
            return Err(format!(
                "shape {:?} is not one matrix (the split layout holds two dimensions)",
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
        let row_blocks = t.ne[0] as usize / dtype.block_size();
        Ok(Split {
            dtype,
            blocks: row_blocks * t.ne[1] as usize,
            row_blocks,
        })
    }

    /// Bytes of one block (either layout).
    pub fn block_bytes(self) -> usize {
        self.dtype.type_size()
    }

    /// Bytes of a block's head (q4_0: its scale; q4_K: `d`, `dmin` and
    /// the scales), which ggml stores first.
    pub fn head_bytes(self) -> usize {
        if self.dtype == DType::Q4_K { 16 } else { 2 }
    }

    /// Bytes of a block's quants.
    pub fn quant_bytes(self) -> usize {
        self.block_bytes() - self.head_bytes()
    }

    /// Bytes of the whole tensor (either layout).
    pub fn bytes(self) -> usize {
        self.blocks * self.block_bytes()
    }

    /// Byte offset of the heads in the tensor.
    pub fn heads_at(self) -> usize {
        self.blocks * self.quant_bytes()
    }

    /// The blocks `[first, end)` that ggml bytes `[offset, offset + len)`
    /// touch.
    pub fn blocks_of(self, offset: usize, len: usize) -> (usize, usize) {
        let bb = self.block_bytes();
        (offset / bb, (offset + len).div_ceil(bb))
    }

    /// Byte ranges `(start, len)` in the tensor of the quants and of the
    /// heads of blocks `[first, end)`.
    pub fn runs(self, first: usize, end: usize) -> [(usize, usize); 2] {
        let (n, q, h) = (end - first, self.quant_bytes(), self.head_bytes());
        [(first * q, n * q), (self.heads_at() + first * h, n * h)]
    }

    /// Splits whole ggml blocks into their quants and heads.
    pub fn split(self, ggml: &[u8], quants: &mut [u8], heads: &mut [u8]) {
        let h = self.head_bytes();
        for ((b, q), s) in ggml
            .chunks_exact(self.block_bytes())
            .zip(quants.chunks_exact_mut(self.quant_bytes()))
            .zip(heads.chunks_exact_mut(h))
        {
            s.copy_from_slice(&b[..h]);
            q.copy_from_slice(&b[h..]);
        }
    }

    /// Joins quants and heads back into whole ggml blocks.
    pub fn join(self, quants: &[u8], heads: &[u8], ggml: &mut [u8]) {
        let h = self.head_bytes();
        for ((b, q), s) in ggml
            .chunks_exact_mut(self.block_bytes())
            .zip(quants.chunks_exact(self.quant_bytes()))
            .zip(heads.chunks_exact(h))
        {
            b[..h].copy_from_slice(s);
            b[h..].copy_from_slice(q);
        }
    }
}

/// Refuses node `node` when it reads a tensor in the split layout
/// (`in_split(index)`, of the layout called `layout`) other than as the
/// weights of a MUL_MAT the layout holds.
pub fn check_reads(
    graph: &[TensorDesc],
    node: usize,
    layout: &str,
    in_split: impl Fn(usize) -> bool,
) -> Result<(), String> {
    let d = &graph[node];
    let op = d.op().map_err(|e| e.to_string())?;
    for (k, s) in (0..4).filter_map(|k| Some((k, d.src(k)?))) {
        if !in_split(s) {
            continue;
        }
        let why = if k == 0 && op == Op::MulMat {
            match graph.get(s).map(Split::for_tensor) {
                Some(Ok(_)) => continue,
                Some(Err(e)) => e,
                None => "not in the graph".to_string(),
            }
        } else {
            "only the weights of MUL_MAT are read in it".to_string()
        };
        return Err(format!(
            "source {k} (tensor {s}) is in the split layout of {layout}: {why}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_runs_of_q4_0_and_q4_k_matrices() {
        let s = Split::for_tensor(&TensorDesc::new(DType::Q4_0, [64, 3, 1, 1])).unwrap();
        assert_eq!(
            (s.blocks, s.row_blocks, s.bytes(), s.heads_at()),
            (6, 2, 108, 96)
        );
        assert_eq!(s.blocks_of(17, 2), (0, 2));
        assert_eq!(s.runs(1, 3), [(16, 32), (98, 4)]);
        let k = Split::for_tensor(&TensorDesc::new(DType::Q4_K, [512, 3, 1, 1])).unwrap();
        assert_eq!(
            (k.head_bytes(), k.quant_bytes(), k.heads_at()),
            (16, 128, 768)
        );
        assert_eq!(k.runs(1, 2), [(128, 128), (784, 16)]);
    }

    #[test]
    fn split_then_join_restores_the_blocks() {
        for (t, k) in [(DType::Q4_0, 96), (DType::Q4_K, 256)] {
            let s = Split::for_tensor(&TensorDesc::new(t, [k, 2, 1, 1])).unwrap();
            let ggml: Vec<u8> = (0..s.bytes()).map(|i| (i * 5 % 251) as u8).collect();
            let (mut q, mut h) = (vec![0; s.heads_at()], vec![0; s.blocks * s.head_bytes()]);
            s.split(&ggml, &mut q, &mut h);
            let (bb, hb) = (s.block_bytes(), s.head_bytes());
            assert_eq!(&h[hb..2 * hb], &ggml[bb..bb + hb]);
            assert_eq!(
                &q[s.quant_bytes()..2 * s.quant_bytes()],
                &ggml[bb + hb..2 * bb]
            );
            let mut back = vec![0; s.bytes()];
            s.join(&q, &h, &mut back);
            assert_eq!(back, ggml, "{t}");
        }
    }

    #[test]
    fn tensors_and_readers_the_layout_cannot_take_are_refused_naming_it() {
        let q8 = TensorDesc::new(DType::Q8_0, [32, 4, 1, 1]);
        assert!(Split::for_tensor(&q8).unwrap_err().contains("q4_K"));
        assert!(Split::for_tensor(&q8).unwrap_err().contains("q8_0"));
        let batched = TensorDesc::new(DType::Q4_0, [32, 4, 2, 1]);
        assert!(
            Split::for_tensor(&batched)
                .unwrap_err()
                .contains("one matrix")
        );
        let w = TensorDesc::new(DType::Q4_0, [32, 4, 1, 1]);
        let mut c = TensorDesc::new(DType::Q4_0, [32, 4, 1, 1]);
        c.op = Op::Cont.code();
        c.src[0] = 0;
        let e = check_reads(&[w, c], 1, "webgpu-gpu0-split", |i| i == 0).unwrap_err();
        assert!(
            e.contains("webgpu-gpu0-split") && e.contains("MUL_MAT"),
            "{e}"
        );
        assert_eq!(check_reads(&[w, c], 1, "x", |_| false), Ok(()));
    }
}
