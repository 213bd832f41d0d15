//! Typed access to tensor memory, row conversion to and from f32, and the
//! work-splitting helper every kernel uses.

use std::ops::Range;

use backplane_abi::{DType, TensorDesc};
use half::{bf16, f16, slice::HalfFloatSliceExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::CpuError;
use crate::ops::{NodeCtx, SharedPtr};

/// Below this many element operations a kernel runs on the calling thread:
/// waking the pool costs more than it saves.
pub const PAR_MIN_WORK: usize = 1 << 15;

/// A tensor's descriptor, decoded type and data pointer.
///
/// Offsets are byte offsets from the first element. The unsafe accessors
/// trust the caller that an offset lies inside the tensor and that no other
/// worker writes the same bytes at the same time.
#[derive(Clone, Copy)]
pub struct Tensor<'a> {
    /// The descriptor.
    pub desc: &'a TensorDesc,
    /// The element type.
    pub dtype: DType,
    ptr: SharedPtr,
}

impl<'a> Tensor<'a> {
    /// Source `i` of the node.
    pub fn src(ctx: &NodeCtx<'a>, i: usize) -> Result<Tensor<'a>, CpuError> {
        let desc = ctx.src(i)?;
        let dtype = ctx.src_type(i)?;
        let t = Tensor {
            desc,
            dtype,
            ptr: ctx.src_ptr[i],
        };
        t.check_aligned()
            .map_err(|e| ctx.bad_input(format!("src{i}: {e}")))?;
        Ok(t)
    }

    /// Source `i` of the node if present.
    pub fn opt_src(ctx: &NodeCtx<'a>, i: usize) -> Result<Option<Tensor<'a>>, CpuError> {
        if ctx.src[i].is_some() {
            Tensor::src(ctx, i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The node's result.
    pub fn dst(ctx: &NodeCtx<'a>) -> Result<Tensor<'a>, CpuError> {
        let t = Tensor {
            desc: ctx.dst,
            dtype: ctx.dst_type()?,
            ptr: ctx.dst_ptr,
        };
        t.check_aligned()
            .map_err(|e| ctx.bad_input(format!("dst: {e}")))?;
        Ok(t)
    }

    /// Plain element types need their natural alignment for typed slices.
    fn check_aligned(&self) -> Result<(), String> {
        if self.dtype.is_quantized() || self.ptr.0.is_null() {
            return Ok(());
        }
        let align = self.dtype.type_size().min(8);
        let misaligned = !(self.ptr.0 as usize).is_multiple_of(align)
            || self
                .desc
                .nb
                .iter()
                .any(|&s| !(s as usize).is_multiple_of(align));
        if misaligned {
            return Err(format!(
                "data or strides not aligned to {align} bytes for {}",
                self.dtype
            ));
        }
        Ok(())
    }

    /// Elements along dim `i`.
    #[inline]
    pub fn ne(&self, i: usize) -> usize {
        self.desc.ne[i] as usize
    }

    /// Byte stride of dim `i`.
    #[inline]
    pub fn nb(&self, i: usize) -> usize {
        self.desc.nb[i] as usize
    }

    /// Rows (product of dims 1..4).
    #[inline]
    pub fn nrows(&self) -> usize {
        self.ne(1) * self.ne(2) * self.ne(3)
    }

    /// Total elements.
    #[inline]
    pub fn nelements(&self) -> usize {
        self.ne(0) * self.nrows()
    }

    /// Bytes of one element (plain types).
    #[inline]
    pub fn type_size(&self) -> usize {
        self.dtype.type_size()
    }

    /// Dim 0 is dense (`nb0` equals the element or block size).
    #[inline]
    pub fn dense_rows(&self) -> bool {
        self.desc.is_contiguous_rows()
    }

    /// Indices along dims 1, 2, 3 of row `r` in row-major order.
    #[inline]
    pub fn row_index(&self, r: usize) -> [usize; 3] {
        let (n1, n2) = (self.ne(1), self.ne(2));
        [r % n1, (r / n1) % n2, r / (n1 * n2)]
    }

    /// Byte offset of the row at indices (i1, i2, i3).
    #[inline]
    pub fn row_offset(&self, i1: usize, i2: usize, i3: usize) -> usize {
        i1 * self.nb(1) + i2 * self.nb(2) + i3 * self.nb(3)
    }

    /// Byte offset of row `r` in row-major order.
    #[inline]
    pub fn row_offset_of(&self, r: usize) -> usize {
        let [i1, i2, i3] = self.row_index(r);
        self.row_offset(i1, i2, i3)
    }

    /// Address of the byte at `off`.
    #[inline]
    pub fn addr(&self, off: usize) -> usize {
        self.ptr.0 as usize + off
    }

    /// `n` values of `T` starting at byte `off`.
    ///
    /// # Safety
    /// The range lies in the tensor, is aligned for `T`, and nobody writes
    /// it while the slice lives.
    #[inline]
    pub unsafe fn slice<T>(&self, off: usize, n: usize) -> &'a [T] {
        // SAFETY: forwarded contract.
        unsafe { std::slice::from_raw_parts(self.ptr.0.add(off).cast::<T>(), n) }
    }

    /// `n` values of `T` starting at byte `off`, writable.
    ///
    /// # Safety
    /// As [`Tensor::slice`], and nobody else reads or writes the range while
    /// the slice lives.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut<T>(&self, off: usize, n: usize) -> &'a mut [T] {
        // SAFETY: forwarded contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.0.add(off).cast::<T>(), n) }
    }

    /// Reads one `T` at byte `off`.
    ///
    /// # Safety
    /// The value lies in the tensor and is aligned for `T`.
    #[inline]
    pub unsafe fn read<T: Copy>(&self, off: usize) -> T {
        // SAFETY: forwarded contract.
        unsafe { self.ptr.0.add(off).cast::<T>().read() }
    }

    /// Writes one `T` at byte `off`.
    ///
    /// # Safety
    /// The value lies in the tensor, is aligned for `T` and no other worker
    /// touches it.
    #[inline]
    pub unsafe fn write<T>(&self, off: usize, v: T) {
        // SAFETY: forwarded contract.
        unsafe { self.ptr.0.add(off).cast::<T>().write(v) }
    }

    /// Copies `n` bytes from `src` at byte `soff` to this tensor at `off`.
    ///
    /// # Safety
    /// Both ranges lie in their tensors and no other worker touches the
    /// destination range meanwhile.
    #[inline]
    pub unsafe fn copy_from(&self, off: usize, src: &Tensor<'_>, soff: usize, n: usize) {
        // SAFETY: forwarded contract; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src.ptr.0.add(soff).cast_const(), self.ptr.0.add(off), n) }
    }

    /// Reads one element of a plain type at byte `off` as f32.
    ///
    /// # Safety
    /// As [`Tensor::read`].
    #[inline]
    pub unsafe fn get_f32(&self, off: usize) -> f32 {
        // SAFETY: forwarded contract; the type decides the width read.
        unsafe {
            match self.dtype {
                DType::F32 => self.read::<f32>(off),
                DType::F16 => self.read::<f16>(off).to_f32(),
                DType::BF16 => backplane_quant::bf16_to_f32(self.read::<bf16>(off)),
                DType::I32 => self.read::<i32>(off) as f32,
                DType::I16 => self.read::<i16>(off) as f32,
                DType::I8 => self.read::<i8>(off) as f32,
                DType::I64 => self.read::<i64>(off) as f32,
                _ => f32::NAN,
            }
        }
    }

    /// Writes one f32 as an element of a float type at byte `off`.
    ///
    /// # Safety
    /// As [`Tensor::write`].
    #[inline]
    pub unsafe fn set_f32(&self, off: usize, v: f32) {
        // SAFETY: forwarded contract; the type decides the width written.
        unsafe {
            match self.dtype {
                DType::F32 => self.write(off, v),
                DType::F16 => self.write(off, f16::from_f32(v)),
                DType::BF16 => self.write(off, backplane_quant::f32_to_bf16(v)),
                DType::I32 => self.write(off, v as i32),
                DType::I16 => self.write(off, v as i16),
                DType::I8 => self.write(off, v as i8),
                DType::I64 => self.write(off, v as i64),
                _ => {}
            }
        }
    }

    /// Reads `out.len()` elements starting at byte `off`, `stride` bytes
    /// apart, as f32. Block types need `stride` equal to the block size and
    /// a whole number of blocks.
    ///
    /// # Safety
    /// The elements lie in the tensor and nobody writes them meanwhile.
    pub unsafe fn load_f32(&self, off: usize, stride: usize, out: &mut [f32]) {
        let n = out.len();
        let ts = self.type_size();
        // SAFETY: forwarded contract for every access below.
        unsafe {
            if stride == ts || n == 1 {
                match self.dtype {
                    DType::F32 => return out.copy_from_slice(self.slice::<f32>(off, n)),
                    // half's slice conversion: F16C eight at a time (one
                    // feature check per row, not per element).
                    DType::F16 => return self.slice::<f16>(off, n).convert_to_f32_slice(out),
                    DType::BF16 => {
                        for (o, h) in out.iter_mut().zip(self.slice::<u16>(off, n)) {
                            *o = f32::from_bits((*h as u32) << 16);
                        }
                        return;
                    }
                    t if t.is_quantized() => {
                        let bytes = self.slice::<u8>(off, n / t.block_size() * ts);
                        // Lengths are whole blocks by construction (checked in supports).
                        let _ = backplane_quant::dequantize_row(t, bytes, out);
                        return;
                    }
                    _ => {}
                }
            }
            for (k, o) in out.iter_mut().enumerate() {
                *o = self.get_f32(off + k * stride);
            }
        }
    }

    /// The dim-0 row at byte `off` as f32: borrowed when it already is a
    /// dense f32 row, else converted into `buf`.
    ///
    /// # Safety
    /// As [`Tensor::load_f32`], for the whole row.
    pub unsafe fn row_f32<'b>(&self, off: usize, buf: &'b mut Vec<f32>) -> &'b [f32] {
        let ne0 = self.ne(0);
        if self.dtype == DType::F32 && self.nb(0) == 4 {
            // SAFETY: forwarded contract.
            unsafe { std::slice::from_raw_parts(self.ptr.0.add(off).cast::<f32>(), ne0) }
        } else {
            buf.resize(ne0, 0.0);
            // SAFETY: forwarded contract.
            unsafe { self.load_f32(off, self.nb(0), buf) };
            buf
        }
    }

    /// Writes `src` as elements starting at byte `off`, `stride` bytes apart,
    /// converting (and quantizing block types, which need dense rows).
    ///
    /// # Safety
    /// The elements lie in the tensor and nobody else touches them meanwhile.
    pub unsafe fn store_f32(&self, off: usize, stride: usize, src: &[f32]) {
        let n = src.len();
        let ts = self.type_size();
        // SAFETY: forwarded contract for every access below.
        unsafe {
            if stride == ts || n == 1 {
                match self.dtype {
                    DType::F32 => return self.slice_mut::<f32>(off, n).copy_from_slice(src),
                    DType::F16 => {
                        for (o, &v) in self.slice_mut::<f16>(off, n).iter_mut().zip(src) {
                            *o = f16::from_f32(v);
                        }
                        return;
                    }
                    DType::BF16 => {
                        for (o, &v) in self.slice_mut::<bf16>(off, n).iter_mut().zip(src) {
                            *o = backplane_quant::f32_to_bf16(v);
                        }
                        return;
                    }
                    t if t.is_quantized() => {
                        let bytes = self.slice_mut::<u8>(off, n / t.block_size() * ts);
                        let _ = backplane_quant::quantize_row(t, src, bytes);
                        return;
                    }
                    _ => {}
                }
            }
            for (k, &v) in src.iter().enumerate() {
                self.set_f32(off + k * stride, v);
            }
        }
    }
}

/// Copies `n` elements of `ts` bytes from `a` (starting at `aoff`, `astride`
/// bytes apart) to `d` (at `doff`, `dstride` apart), as one block copy when
/// both sides are dense and with typed loads otherwise.
///
/// # Safety
/// Both ranges lie in their tensors, are aligned for their element size,
/// and nobody else touches the destination meanwhile.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_strided(
    d: &Tensor<'_>,
    doff: usize,
    dstride: usize,
    a: &Tensor<'_>,
    aoff: usize,
    astride: usize,
    n: usize,
    ts: usize,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if dstride == ts && astride == ts {
            return d.copy_from(doff, a, aoff, n * ts);
        }
        macro_rules! typed {
            ($t:ty) => {
                for i in 0..n {
                    d.write::<$t>(doff + i * dstride, a.read::<$t>(aoff + i * astride));
                }
            };
        }
        match ts {
            1 => typed!(u8),
            2 => typed!(u16),
            4 => typed!(u32),
            8 => typed!(u64),
            _ => {
                for i in 0..n {
                    d.copy_from(doff + i * dstride, a, aoff + i * astride, ts);
                }
            }
        }
    }
}

/// Runs `f` over `0..n` split into ranges on the node's pool, or on the
/// calling thread when `n * cost` (element operations) is small. Stops at
/// the first error.
pub fn par_range<F>(ctx: &NodeCtx<'_>, n: usize, cost: usize, f: F) -> Result<(), CpuError>
where
    F: Fn(Range<usize>) -> Result<(), CpuError> + Sync,
{
    let work = n.saturating_mul(cost.max(1));
    if ctx.n_threads <= 1 || n <= 1 || work < PAR_MIN_WORK {
        return f(0..n);
    }
    // A few chunks per worker for balance, but none below a quarter of the
    // threshold so tiny chunks do not pay scheduling.
    let by_work = (work / (PAR_MIN_WORK / 4)).max(2);
    let chunks = (ctx.n_threads * 4).min(n).min(by_work);
    let size = n.div_ceil(chunks);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<CpuError>> = Mutex::new(None);
    ctx.pool.for_each_item(n.div_ceil(size), &|_, c| {
        // Chunks after an error are skipped; the first error is kept.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = f(c * size..((c + 1) * size).min(n)) {
            stop.store(true, Ordering::Relaxed);
            failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(e);
        }
    });
    match failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Sum of an f32 slice in f64.
#[inline]
pub fn sum_f64(x: &[f32]) -> f64 {
    let mut acc = [0f64; 4];
    let mut c = x.chunks_exact(4);
    for v in &mut c {
        for k in 0..4 {
            acc[k] += v[k] as f64;
        }
    }
    acc.iter().sum::<f64>() + c.remainder().iter().map(|&v| v as f64).sum::<f64>()
}

/// The element type of `src[i]`, or a reason naming the missing source.
pub fn src_type(src: &[Option<&TensorDesc>], i: usize) -> Result<DType, String> {
    let d = src
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("missing source {i}"))?;
    d.dtype().map_err(|e| e.to_string())
}

/// Refuses unless `t` is one of the `allowed` types a kernel implements,
/// in the op contract's wording.
pub fn expect_type(what: &str, t: DType, allowed: &[DType]) -> Result<(), String> {
    if allowed.contains(&t) {
        Ok(())
    } else {
        Err(backplane_abi::support::implemented_types(what, t, allowed))
    }
}
