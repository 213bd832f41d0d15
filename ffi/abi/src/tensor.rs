//! The plain `#[repr(C)]` tensor descriptor that carries graphs across the
//! plugin boundary.

use abi_stable::StableAbi;

use crate::dtype::{DType, UnknownDType};
use crate::op::{Op, UnknownOp};

/// Dimensions of a tensor, as in ggml.
pub const MAX_DIMS: usize = 4;
/// Sources an op may read, as ggml's `GGML_MAX_SRC`.
pub const MAX_SRC: usize = 10;
/// 32-bit op parameters per node, as ggml's `GGML_MAX_OP_PARAMS / 4`.
pub const MAX_OP_PARAMS: usize = 16;
/// Marks an absent source or view source.
pub const NO_TENSOR: i32 = -1;

/// Bit flags of a [`TensorDesc`].
pub mod flags {
    /// Filled by the host before each compute.
    pub const INPUT: u32 = 1;
    /// Read back by the host after compute; its memory is never reused.
    pub const OUTPUT: u32 = 2;
    /// A model weight: long-lived, placed before the graph runs.
    pub const WEIGHT: u32 = 4;
}

/// One tensor of a graph: shape, strides, the op that produces it and where
/// its bytes live. Graphs cross the ABI as a slice of these in topological
/// order; `src` and `view_src` are indices into that slice. Plain integers
/// without padding (`bytemuck::Pod`), so a graph can be compared or hashed
/// as bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, StableAbi, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TensorDesc {
    /// Raw [`DType`] code (decode with [`TensorDesc::dtype`]).
    pub dtype: u32,
    /// Raw [`Op`] code (decode with [`TensorDesc::op`]).
    pub op: u32,
    /// Element counts per dimension; unused dims are 1.
    pub ne: [i64; MAX_DIMS],
    /// Byte strides per dimension (for quantized types nb[0] is the block
    /// size in bytes and nb[1] the row size).
    pub nb: [u64; MAX_DIMS],
    /// Op parameters, ggml's layout per op (f32 values stored by bit pattern).
    pub op_params: [i32; MAX_OP_PARAMS],
    /// Source tensor indices, [`NO_TENSOR`] when absent.
    pub src: [i32; MAX_SRC],
    /// Index of the tensor whose memory this one aliases, or [`NO_TENSOR`].
    pub view_src: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// Byte offset of this tensor within `view_src`'s memory.
    pub view_offset: u64,
    /// Id of the buffer holding the bytes (0 = not allocated).
    pub buffer: u64,
    /// Byte offset of the first element within that buffer.
    pub offset: u64,
}

impl TensorDesc {
    /// A contiguous leaf tensor of the given type and shape.
    pub fn new(dtype: DType, ne: [i64; MAX_DIMS]) -> TensorDesc {
        TensorDesc {
            dtype: dtype.code(),
            op: Op::None.code(),
            ne,
            nb: contiguous_strides(dtype, ne),
            op_params: [0; MAX_OP_PARAMS],
            src: [NO_TENSOR; MAX_SRC],
            view_src: NO_TENSOR,
            flags: 0,
            view_offset: 0,
            buffer: 0,
            offset: 0,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Result<DType, UnknownDType> {
        DType::from_code(self.dtype)
    }

    /// The op.
    pub fn op(&self) -> Result<Op, UnknownOp> {
        Op::from_code(self.op)
    }

    /// Source `i`, if present.
    pub fn src(&self, i: usize) -> Option<usize> {
        let s = *self.src.get(i)?;
        (s >= 0).then_some(s as usize)
    }

    /// The tensor whose memory this one aliases, if any.
    pub fn view_source(&self) -> Option<usize> {
        (self.view_src >= 0).then_some(self.view_src as usize)
    }

    /// Parameter `i` read as an i32.
    pub fn param_i32(&self, i: usize) -> i32 {
        self.op_params[i]
    }

    /// Parameter `i` read as an f32 (bit pattern).
    pub fn param_f32(&self, i: usize) -> f32 {
        f32::from_bits(self.op_params[i] as u32)
    }

    /// Stores an f32 parameter by bit pattern.
    pub fn set_param_f32(&mut self, i: usize, v: f32) {
        self.op_params[i] = v.to_bits() as i32;
    }

    /// Total element count.
    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }

    /// Number of rows (product of dims 1..4).
    pub fn nrows(&self) -> i64 {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes spanned from the first to one past the last element, as
    /// `ggml_nbytes` computes it (0 for an empty tensor, `u64::MAX` when
    /// the shape and strides overflow 64 bits).
    pub fn nbytes(&self) -> u64 {
        self.checked_nbytes().unwrap_or(u64::MAX)
    }

    /// [`nbytes`](Self::nbytes), or `None` when a shape and strides from
    /// outside (a hostile graph) overflow 64-bit byte counts.
    pub fn checked_nbytes(&self) -> Option<u64> {
        if self.ne.iter().any(|&n| n <= 0) {
            return Some(0);
        }
        let Ok(t) = self.dtype() else { return Some(0) };
        let bs = t.block_size() as u64;
        let mut n = if bs == 1 {
            (self.ne[0] as u64 - 1)
                .checked_mul(self.nb[0])?
                .checked_add(t.type_size() as u64)?
        } else {
            (self.ne[0] as u64).checked_mul(self.nb[0])? / bs
        };
        for i in 1..MAX_DIMS {
            n = n.checked_add((self.ne[i] as u64 - 1).checked_mul(self.nb[i])?)?;
        }
        Some(n)
    }

    /// Contiguous from dim `n + 1` on, as `ggml_is_contiguous_n`: dims up to
    /// `n` may have any stride; dims of size 1 never matter.
    pub fn is_contiguous_n(&self, n: usize) -> bool {
        let Ok(t) = self.dtype() else { return false };
        let mut next = t.type_size() as u64;
        if self.ne[0] != t.block_size() as i64 && self.nb[0] != next {
            return false;
        }
        next *= self.ne[0] as u64 / t.block_size() as u64;
        for i in 1..MAX_DIMS {
            if self.ne[i] != 1 {
                if i > n {
                    if self.nb[i] != next {
                        return false;
                    }
                    next *= self.ne[i] as u64;
                } else {
                    next = self.ne[i] as u64 * self.nb[i];
                }
            }
        }
        true
    }

    /// Elements are laid out densely in row-major order (`ggml_is_contiguous`).
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_n(0)
    }

    /// Each row is dense, rows may be strided (`ggml_is_contiguous_rows`).
    pub fn is_contiguous_rows(&self) -> bool {
        let Ok(t) = self.dtype() else { return false };
        self.ne[0] == t.block_size() as i64 || self.nb[0] == t.type_size() as u64
    }

    /// Strides are not increasing with the dim (`ggml_is_permuted`).
    pub fn is_permuted(&self) -> bool {
        self.nb[0] > self.nb[1] || self.nb[1] > self.nb[2] || self.nb[2] > self.nb[3]
    }

    /// Dims 0 and 1 are swapped (`ggml_is_transposed`).
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }

    /// Same shape as `other`.
    pub fn same_shape(&self, other: &TensorDesc) -> bool {
        self.ne == other.ne
    }

    /// Flag test.
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
}

/// Row-major byte strides of a dense tensor.
pub fn contiguous_strides(dtype: DType, ne: [i64; MAX_DIMS]) -> [u64; MAX_DIMS] {
    let ts = dtype.type_size() as u64;
    let bs = dtype.block_size() as u64;
    let nb0 = ts;
    let nb1 = nb0 * (ne[0].max(0) as u64 / bs);
    let nb2 = nb1 * ne[1].max(0) as u64;
    let nb3 = nb2 * ne[2].max(0) as u64;
    [nb0, nb1, nb2, nb3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_tensor_reports_contiguous() {
        let t = TensorDesc::new(DType::F32, [5, 3, 2, 1]);
        assert_eq!(t.nb, [4, 20, 60, 120]);
        assert!(t.is_contiguous());
        assert_eq!(t.nbytes(), 120);
        let q = TensorDesc::new(DType::Q4_0, [64, 2, 1, 1]);
        assert_eq!(q.nb, [18, 36, 72, 72]);
        assert_eq!(q.nbytes(), 72);
    }

    #[test]
    fn transposed_view_is_permuted_and_not_contiguous() {
        let mut t = TensorDesc::new(DType::F32, [5, 3, 1, 1]);
        t.ne.swap(0, 1);
        t.nb.swap(0, 1);
        assert!(t.is_transposed());
        assert!(t.is_permuted());
        assert!(!t.is_contiguous());
        assert!(!t.is_contiguous_rows());
        assert_eq!(t.nbytes(), 60);
    }
}
