//! Repacked weight layouts: the bytes of the `cpu_repack` buffer type.
//!
//! ggml stores a quantized matrix row after row, block after block. The
//! mat-vec and GEMM kernels want eight rows side by side instead (one row
//! per 32-bit vector lane), and transposing them on every product costs
//! more than the arithmetic. A tensor in a `cpu_repack` buffer is stored
//! in groups of eight rows, already transposed: for each group, for each
//! block of 32 weights along K,
//!
//! * the eight rows' f16 scales (16 bytes), then
//! * their quant bytes in 4-byte slices: slice `g` of row `r` at
//!   `16 + 32 * g + 4 * r` (q4_0: 4 slices of nibble pairs, q8_0: 8 slices
//!   of int8 quants);
//! * q4_K's super-blocks: each row's 16-byte header (`d`, `dmin`, 6-bit
//!   scales and mins) as four slices, then its quants as 32 slices;
//! * f16: element `k` of the eight rows side by side (16 bytes), so one
//!   16-byte load converts to every row's weight in its own f32 lane;
//! * q6_K's super-blocks likewise: the eight `d`, then each row's sixteen
//!   sub-block scales, then low and high quant bits as 4-byte slices in
//!   the order the kernels read them (see `fields`).
//!
//! A group takes exactly the bytes of its eight ggml rows (144, 272, 1152,
//! 1680 or 16 bytes per block), so a repacked tensor has the same size and offsets as in
//! ggml's layout, and row `r` (a multiple of 8) starts at the same byte.
//! Only whole groups are repacked: a tensor qualifies when its rows are
//! contiguous and their count is a multiple of eight ([`Repack::for_tensor`]).
//! The host reads and writes ggml's layout through `set_tensor` /
//! `get_tensor`, which convert ([`Repack::write`], [`Repack::read`]).

use backplane_abi::{DType, TensorDesc};

/// Rows per repacked group.
pub const GROUP_ROWS: usize = 8;

/// Where each field of a ggml block goes in a repacked group block: the
/// fields in repacked order as `(offset in the ggml block, bytes)`. A
/// 2-byte field (an f16 scale) is stored as the eight rows' values side by
/// side; a longer one as 4-byte slices, slice `g` of row `r` at
/// `32 * g + 4 * r` from the field's start.
fn fields(dtype: DType) -> &'static [(usize, usize)] {
    match dtype {
        DType::Q4_0 => &[(0, 2), (2, 16)],
        DType::Q8_0 => &[(0, 2), (2, 32)],
        // d, dmin and the 6-bit scales and mins as four slices (the
        // header the eight-row kernels unpack together), then the quants.
        DType::Q4_K => &[(0, 16), (16, 128)],
        DType::Q6_K => &Q6_K_FIELDS,
        // Element by element: the eight rows' element `k` side by side.
        DType::F16 => &[(0, 2)],
        _ => &[],
    }
}

/// q6_K's fields in repacked order: `d`, the 8-bit sub-block scales, then
/// the quants in the order the kernels consume them, so a group block is
/// read front to back in one stream: per half `h` of the super-block and
/// column `c` of its 8 slices, the low-bit slices `16h + c` and
/// `16h + 8 + c` of `ql` and the high-bit slice `8h + c` of `qh`.
const Q6_K_FIELDS: [(usize, usize); 50] = {
    let mut f = [(208, 2); 50];
    f[1] = (192, 16);
    let mut i = 0;
    while i < 16 {
        let (h, c) = (i / 8, i % 8);
        f[2 + 3 * i] = (64 * h + 4 * c, 4);
        f[3 + 3 * i] = (64 * h + 32 + 4 * c, 4);
        f[4 + 3 * i] = (128 + 32 * h + 4 * c, 4);
        i += 1;
    }
    f
};

/// A repackable weight type and the geometry of one tensor of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repack {
    /// The weight type.
    pub dtype: DType,
    /// Blocks per row.
    pub blocks: usize,
}

/// The weight types the repacked layout exists for.
pub const REPACK_TYPES: [DType; 5] = [
    DType::Q4_0,
    DType::Q8_0,
    DType::Q4_K,
    DType::Q6_K,
    DType::F16,
];

impl Repack {
    /// The repacked geometry of `t`, or why it cannot be repacked.
    pub fn for_tensor(t: &TensorDesc) -> Result<Repack, String> {
        let dtype = t.dtype().map_err(|e| e.to_string())?;
        if !REPACK_TYPES.contains(&dtype) {
            return Err(format!(
                "{dtype} has no repacked layout (only {REPACK_TYPES:?})"
            ));
        }
        if t.view_source().is_some() {
            return Err("a view cannot live in a repacked buffer".into());
        }
        if t.ne.iter().any(|&n| n <= 0) {
            return Err(format!("shape {:?} has an empty dimension", t.ne));
        }
        let ne0 = t.ne[0] as usize;
        let row = dtype
            .row_size(ne0)
            .ok_or_else(|| format!("row length {ne0} is not whole {dtype} blocks"))?;
        let dense = TensorDesc::new(dtype, t.ne);
        if t.nb != dense.nb {
            return Err(format!(
                "strides {:?} are not contiguous rows (expected {:?})",
                t.nb, dense.nb
            ));
        }
        if !(t.ne[1] as usize).is_multiple_of(GROUP_ROWS) {
            return Err(format!(
                "{} rows are not a multiple of {GROUP_ROWS}",
                t.ne[1]
            ));
        }
        Ok(Repack {
            dtype,
            blocks: row / dtype.type_size(),
        })
    }

    /// Bytes of one ggml row.
    pub fn row_bytes(self) -> usize {
        self.blocks * self.dtype.type_size()
    }

    /// Bytes of one group of [`GROUP_ROWS`] rows (in either layout).
    pub fn group_bytes(self) -> usize {
        GROUP_ROWS * self.row_bytes()
    }

    /// Repacks one group: `rows` (eight ggml rows) into `out`.
    fn pack_group(self, rows: &[u8], out: &mut [u8]) {
        let (tb, rb) = (self.dtype.type_size(), self.row_bytes());
        if self.dtype == DType::F16 {
            // One 2-byte field per block: a plain 8-way interleave, done
            // row by row (the generic walk costs seconds on a 1B model).
            for (r, row) in rows.chunks_exact(rb).enumerate() {
                for (k, e) in row.chunks_exact(2).enumerate() {
                    out[16 * k + 2 * r..][..2].copy_from_slice(e);
                }
            }
            return;
        }
        for (i, blk) in out.chunks_exact_mut(GROUP_ROWS * tb).enumerate() {
            let mut at = 0;
            for &(off, len) in fields(self.dtype) {
                for r in 0..GROUP_ROWS {
                    let src = &rows[r * rb + i * tb + off..][..len];
                    if len == 2 {
                        blk[at + 2 * r..][..2].copy_from_slice(src);
                    } else {
                        for g in 0..len / 4 {
                            blk[at + 32 * g + 4 * r..][..4].copy_from_slice(&src[4 * g..][..4]);
                        }
                    }
                }
                at += GROUP_ROWS * len;
            }
        }
    }

    /// Undoes [`Repack::pack_group`]: `group` back into eight ggml rows.
    fn unpack_group(self, group: &[u8], rows: &mut [u8]) {
        let (tb, rb) = (self.dtype.type_size(), self.row_bytes());
        if self.dtype == DType::F16 {
            for (r, row) in rows.chunks_exact_mut(rb).enumerate() {
                for (k, e) in row.chunks_exact_mut(2).enumerate() {
                    e.copy_from_slice(&group[16 * k + 2 * r..][..2]);
                }
            }
            return;
        }
        for (i, blk) in group.chunks_exact(GROUP_ROWS * tb).enumerate() {
            let mut at = 0;
            for &(off, len) in fields(self.dtype) {
                for r in 0..GROUP_ROWS {
                    let dst = &mut rows[r * rb + i * tb + off..][..len];
                    if len == 2 {
                        dst.copy_from_slice(&blk[at + 2 * r..][..2]);
                    } else {
                        for g in 0..len / 4 {
                            dst[4 * g..][..4].copy_from_slice(&blk[at + 32 * g + 4 * r..][..4]);
                        }
                    }
                }
                at += GROUP_ROWS * len;
            }
        }
    }

    /// Writes `data` (ggml layout) at byte `offset` of the tensor whose
    /// repacked bytes are `tensor`. Groups the range covers only in part
    /// are unpacked, patched and packed again.
    pub fn write(self, tensor: &mut [u8], offset: usize, data: &[u8]) {
        let gb = self.group_bytes();
        let mut rows = vec![0u8; gb];
        let end = offset + data.len();
        for g in offset / gb..end.div_ceil(gb) {
            let group = &mut tensor[g * gb..(g + 1) * gb];
            let (lo, hi) = ((g * gb).max(offset), ((g + 1) * gb).min(end));
            if hi - lo < gb {
                self.unpack_group(group, &mut rows);
            }
            rows[lo - g * gb..hi - g * gb].copy_from_slice(&data[lo - offset..hi - offset]);
            self.pack_group(&rows, group);
        }
    }

    /// Reads `out.len()` bytes of ggml layout at byte `offset` of the
    /// tensor whose repacked bytes are `tensor`.
    pub fn read(self, tensor: &[u8], offset: usize, out: &mut [u8]) {
        let gb = self.group_bytes();
        let mut rows = vec![0u8; gb];
        let end = offset + out.len();
        for g in offset / gb..end.div_ceil(gb) {
            self.unpack_group(&tensor[g * gb..(g + 1) * gb], &mut rows);
            let (lo, hi) = ((g * gb).max(offset), ((g + 1) * gb).min(end));
            out[lo - offset..hi - offset].copy_from_slice(&rows[lo - g * gb..hi - g * gb]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn round_trip_restores_ggml_bytes_for_any_range() {
        for dtype in REPACK_TYPES {
            let k = if dtype.block_size() == 256 { 512 } else { 96 };
            let t = TensorDesc::new(dtype, [k, 16, 2, 1]);
            let r = Repack::for_tensor(&t).unwrap();
            let n = t.nbytes() as usize;
            let ggml = bytes(n, 7);
            let mut packed = vec![0u8; n];
            r.write(&mut packed, 0, &ggml);
            assert_ne!(packed, ggml, "{dtype}: the layout differs from ggml's");
            let mut back = vec![0u8; n];
            r.read(&packed, 0, &mut back);
            assert_eq!(back, ggml, "{dtype}");
            // Partial writes and reads at ranges that cut groups and blocks.
            let patch = bytes(301, 9);
            let mut expect = ggml.clone();
            expect[517..818].copy_from_slice(&patch);
            r.write(&mut packed, 517, &patch);
            let mut part = vec![0u8; 1000];
            r.read(&packed, 100, &mut part);
            assert_eq!(part, expect[100..1100], "{dtype}");
        }
    }

    #[test]
    fn layout_puts_slice_g_of_row_r_at_its_lane() {
        let t = TensorDesc::new(DType::Q4_0, [32, 8, 1, 1]);
        let r = Repack::for_tensor(&t).unwrap();
        let ggml: Vec<u8> = (0..144).map(|i| i as u8).collect();
        let mut packed = vec![0u8; 144];
        r.write(&mut packed, 0, &ggml);
        // Row 3's scale, then row 3's quant bytes 4..8 (slice 1).
        assert_eq!(packed[6..8], ggml[3 * 18..3 * 18 + 2]);
        assert_eq!(packed[16 + 32 + 12..][..4], ggml[3 * 18 + 2 + 4..][..4]);
    }

    #[test]
    fn refusals_name_the_reason() {
        let odd = TensorDesc::new(DType::Q4_0, [64, 12, 1, 1]);
        assert!(
            Repack::for_tensor(&odd)
                .unwrap_err()
                .contains("multiple of 8")
        );
        let f = TensorDesc::new(DType::BF16, [64, 16, 1, 1]);
        assert!(
            Repack::for_tensor(&f)
                .unwrap_err()
                .contains("no repacked layout")
        );
        let mut strided = TensorDesc::new(DType::Q8_0, [64, 16, 1, 1]);
        strided.nb[1] *= 2;
        assert!(
            Repack::for_tensor(&strided)
                .unwrap_err()
                .contains("contiguous")
        );
    }
}
