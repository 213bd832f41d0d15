//! Element access for the reference kernels: every read and write goes
//! through a tensor's byte strides, converting to and from f64.

use backplane_abi::{DType, TensorDesc};
use half::{bf16, f16};

/// A tensor as the kernels see it: its descriptor, decoded element type and
/// the address of its first element.
#[derive(Clone, Copy)]
pub(crate) struct Tensor<'a> {
    /// Shape, strides and op parameters.
    pub(crate) d: &'a TensorDesc,
    /// Element type.
    pub(crate) dt: DType,
    ptr: *mut u8,
}

/// Raw bytes of one plain element (at most 8).
#[derive(Clone, Copy)]
pub(crate) struct Elem {
    bytes: [u8; 8],
    len: usize,
}

impl<'a> Tensor<'a> {
    /// Wraps a descriptor and its data pointer.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `d.nbytes()` bytes while
    /// the value is used, and `dt` must be `d`'s type.
    pub(crate) unsafe fn new(d: &'a TensorDesc, dt: DType, ptr: *mut u8) -> Tensor<'a> {
        Tensor { d, dt, ptr }
    }

    /// Elements per dim.
    pub(crate) fn ne(&self) -> [i64; 4] {
        self.d.ne
    }

    /// Total element count.
    pub(crate) fn nelements(&self) -> i64 {
        self.d.nelements()
    }

    /// Byte offset of element (or, for block types, of the block holding
    /// element) `i`.
    fn offset(&self, i: [i64; 4]) -> usize {
        debug_assert!(
            (0..4).all(|k| i[k] >= 0 && i[k] < self.d.ne[k]),
            "index {i:?} outside {:?}",
            self.d.ne
        );
        let i0 = i[0] / self.dt.block_size() as i64;
        let off = i0 as u64 * self.d.nb[0]
            + i[1] as u64 * self.d.nb[1]
            + i[2] as u64 * self.d.nb[2]
            + i[3] as u64 * self.d.nb[3];
        off as usize
    }

    fn read<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut b = [0u8; N];
        // SAFETY: callers pass offsets of in-bounds elements, which lie within
        // the `nbytes()` bytes `new`'s contract makes readable.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), b.as_mut_ptr(), N) };
        b
    }

    fn write(&self, off: usize, bytes: &[u8]) {
        // SAFETY: as in `read`; raw copies never form references, so the
        // destination may alias any source.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(off), bytes.len()) };
    }

    /// The block of a block type holding element `i0` of row (i1, i2, i3),
    /// dequantized.
    fn block_values(&self, i: [i64; 4]) -> Vec<f32> {
        let bytes = self.block_bytes(i);
        let mut out = vec![0f32; self.dt.block_size()];
        if backplane_quant::dequantize_row(self.dt, &bytes, &mut out).is_err() {
            out.fill(f32::NAN);
        }
        out
    }

    /// Raw bytes of the block holding element `i` (block types) or of the
    /// element itself (plain types).
    pub(crate) fn block_bytes(&self, i: [i64; 4]) -> Vec<u8> {
        let off = self.offset(i);
        let mut b = vec![0u8; self.dt.type_size()];
        // SAFETY: the whole block (type_size bytes) lies within the tensor.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), b.as_mut_ptr(), b.len()) };
        b
    }

    /// Overwrites the block holding element `i` (block types) or the element.
    pub(crate) fn set_block_bytes(&self, i: [i64; 4], bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.dt.type_size());
        self.write(self.offset(i), bytes);
    }

    /// Element `(i0, i1, i2, i3)` as f64; block types dequantize its block.
    pub(crate) fn get(&self, i0: i64, i1: i64, i2: i64, i3: i64) -> f64 {
        self.at([i0, i1, i2, i3])
    }

    /// Element `i` as f64; block types dequantize its block.
    pub(crate) fn at(&self, i: [i64; 4]) -> f64 {
        if self.dt.is_quantized() {
            let bs = self.dt.block_size() as i64;
            return self.block_values(i)[(i[0] % bs) as usize] as f64;
        }
        let off = self.offset(i);
        match self.dt {
            DType::F32 => f32::from_le_bytes(self.read(off)) as f64,
            DType::F16 => f16::from_le_bytes(self.read(off)).to_f64(),
            DType::BF16 => bf16::from_le_bytes(self.read(off)).to_f64(),
            DType::I8 => i8::from_le_bytes(self.read(off)) as f64,
            DType::I16 => i16::from_le_bytes(self.read(off)) as f64,
            DType::I32 => i32::from_le_bytes(self.read(off)) as f64,
            DType::I64 => i64::from_le_bytes(self.read(off)) as f64,
            _ => f64::NAN,
        }
    }

    /// Element `i` of an integer tensor, exactly (floats are truncated).
    pub(crate) fn int_at(&self, i: [i64; 4]) -> i64 {
        let off = self.offset(i);
        match self.dt {
            DType::I8 => i8::from_le_bytes(self.read(off)) as i64,
            DType::I16 => i16::from_le_bytes(self.read(off)) as i64,
            DType::I32 => i32::from_le_bytes(self.read(off)) as i64,
            DType::I64 => i64::from_le_bytes(self.read(off)),
            _ => self.at(i) as i64,
        }
    }

    /// Row `(i1, i2, i3)` as f64 values, dequantizing whole blocks.
    pub(crate) fn row(&self, i1: i64, i2: i64, i3: i64) -> Vec<f64> {
        let ne0 = self.d.ne[0];
        if self.dt.is_quantized() {
            let bs = self.dt.block_size() as i64;
            let mut out = Vec::with_capacity(ne0 as usize);
            for ib in 0..ne0 / bs {
                out.extend(
                    self.block_values([ib * bs, i1, i2, i3])
                        .iter()
                        .map(|&v| v as f64),
                );
            }
            out
        } else {
            (0..ne0).map(|i0| self.get(i0, i1, i2, i3)).collect()
        }
    }

    /// Raw bytes of plain element `i`.
    pub(crate) fn elem(&self, i: [i64; 4]) -> Elem {
        let len = self.dt.type_size().min(8);
        let mut bytes = [0u8; 8];
        let off = self.offset(i);
        // SAFETY: `len` bytes of an in-bounds element lie within the tensor.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), bytes.as_mut_ptr(), len) };
        Elem { bytes, len }
    }

    /// Writes raw bytes of a plain element of the same type.
    pub(crate) fn set_elem(&self, i: [i64; 4], e: Elem) {
        self.write(self.offset(i), &e.bytes[..e.len]);
    }

    /// Writes `v` to plain element `i`, rounding once to the element type
    /// (integers truncate toward zero and saturate, as a C cast would for
    /// in-range values).
    pub(crate) fn set(&self, i: [i64; 4], v: f64) {
        let off = self.offset(i);
        match self.dt {
            DType::F32 => self.write(off, &(v as f32).to_le_bytes()),
            DType::F16 => self.write(off, &f16::from_f32(round_to_odd_f32(v)).to_le_bytes()),
            DType::BF16 => self.write(off, &bf16::from_f32(round_to_odd_f32(v)).to_le_bytes()),
            DType::I8 => self.write(off, &(v as i8).to_le_bytes()),
            DType::I16 => self.write(off, &(v as i16).to_le_bytes()),
            DType::I32 => self.write(off, &(v as i32).to_le_bytes()),
            DType::I64 => self.write(off, &(v as i64).to_le_bytes()),
            _ => {}
        }
    }

    /// Writes one row `(i1, i2, i3)` of `ne0` values; block types quantize it
    /// with ggml's reference quantizers.
    pub(crate) fn set_row(&self, i1: i64, i2: i64, i3: i64, values: &[f64]) -> Result<(), String> {
        let ne0 = self.d.ne[0];
        if values.len() as i64 != ne0 {
            return Err(format!("row of {} values for ne0 = {ne0}", values.len()));
        }
        if !self.dt.is_quantized() {
            for (i0, &v) in values.iter().enumerate() {
                self.set([i0 as i64, i1, i2, i3], v);
            }
            return Ok(());
        }
        let bs = self.dt.block_size();
        let src: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let mut block = vec![0u8; self.dt.type_size()];
        for (ib, chunk) in src.chunks(bs).enumerate() {
            backplane_quant::quantize_row(self.dt, chunk, &mut block).map_err(|e| e.to_string())?;
            self.set_block_bytes([(ib * bs) as i64, i1, i2, i3], &block);
        }
        Ok(())
    }

    /// Writes `values` (logical row-major order over `ne`) to every element.
    pub(crate) fn store(&self, values: &[f64]) -> Result<(), String> {
        if values.len() as i64 != self.nelements() {
            return Err(format!(
                "{} values for {} elements",
                values.len(),
                self.nelements()
            ));
        }
        let [ne0, ne1, ne2, _] = self.d.ne;
        for (r, row) in values.chunks(ne0.max(1) as usize).enumerate() {
            let r = r as i64;
            self.set_row(r % ne1, r / ne1 % ne2, r / (ne1 * ne2), row)?;
        }
        Ok(())
    }
}

/// Rounds `v` to f32 with round-to-odd, so that a second rounding to a
/// narrower format (f16, bf16) equals one correct rounding of `v`.
pub(crate) fn round_to_odd_f32(v: f64) -> f32 {
    let f = v as f32;
    if v.is_nan() || f as f64 == v {
        return f;
    }
    if f.is_infinite() {
        return f32::MAX.copysign(f);
    }
    if f.to_bits() & 1 == 1 {
        return f;
    }
    // `f` is even and inexact: step one ulp toward `v` (an odd neighbour).
    let toward_zero = (f as f64).abs() > v.abs();
    let bits = f.to_bits();
    f32::from_bits(if toward_zero { bits - 1 } else { bits + 1 })
}

/// Calls `f` for every index of shape `ne` in logical order (dim 0 fastest).
pub(crate) fn for_each_index(ne: [i64; 4], mut f: impl FnMut([i64; 4])) {
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    f([i0, i1, i2, i3]);
                }
            }
        }
    }
}

/// The index of the `flat`-th element of shape `ne` in logical order.
pub(crate) fn unravel(flat: i64, ne: [i64; 4]) -> [i64; 4] {
    let i0 = flat % ne[0];
    let r = flat / ne[0];
    [i0, r % ne[1], r / ne[1] % ne[2], r / (ne[1] * ne[2])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_odd_then_f16_rounds_once() {
        // 1 + 2^-11 is exactly halfway between two f16 values; a hair above
        // it must round up, which a plain f64 -> f32 -> f16 chain would miss.
        let above_tie = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(
            f16::from_f32(round_to_odd_f32(above_tie)).to_f64(),
            1.0 + 2f64.powi(-10)
        );
        let tie = 1.0 + 2f64.powi(-11);
        assert_eq!(f16::from_f32(round_to_odd_f32(tie)).to_f64(), 1.0);
        assert_eq!(round_to_odd_f32(0.5), 0.5);
    }
}
