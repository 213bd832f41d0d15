//! Converting the activations (`src1`) to the weights' vec-dot type, once
//! per node, into the backend's scratch buffer.

use std::sync::atomic::{AtomicBool, Ordering};

use backplane_abi::{DType, TensorDesc};
use backplane_quant::{bf16, f16};

use crate::error::CpuError;
use crate::ops::{NodeCtx, SharedPtr};

/// Alignment of every region carved out of the scratch buffer.
const ALIGN: usize = 64;

/// Activation rows in the vec-dot type: row `(i1, i2, i3)` starts at
/// `base + i1 * s[0] + i2 * s[1] + i3 * s[2]`.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    /// First row.
    pub base: SharedPtr,
    /// Byte strides of dims 1, 2, 3.
    pub s: [usize; 3],
    /// Extra scratch bytes the caller asked for (64-byte aligned).
    pub extra: *mut u8,
}

impl Rows {
    /// Row `(i1, i2, i3)`.
    #[inline]
    pub fn row(&self, i1: usize, i2: usize, i3: usize) -> *const u8 {
        self.base
            .0
            .wrapping_add(i1 * self.s[0] + i2 * self.s[1] + i3 * self.s[2])
    }
}

fn round_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Makes every row of `b` (type `tb`) available in type `vt`: directly when
/// it already is (with dense rows), otherwise converted into `scratch`,
/// which grows as needed and also gets `extra_bytes` for the caller.
///
/// # Safety
/// `ctx.src_ptr[1]` must cover `b`. The returned pointers stay valid while
/// `scratch` is neither dropped nor resized.
pub unsafe fn activations(
    ctx: &NodeCtx<'_>,
    b: &TensorDesc,
    tb: DType,
    vt: DType,
    extra_bytes: usize,
    scratch: &mut Vec<u8>,
) -> Result<Rows, CpuError> {
    let k = b.ne[0] as usize;
    let (n1, n2, n3) = (b.ne[1] as usize, b.ne[2] as usize, b.ne[3] as usize);
    let n_rows = n1 * n2 * n3;
    let direct = tb == vt && b.nb[0] == tb.type_size() as u64;
    let row_bytes = vt
        .row_size(k)
        .ok_or_else(|| ctx.malformed(format!("{k} values is not whole {vt} blocks")))?;
    let conv_bytes = if direct {
        0
    } else {
        round_up(row_bytes) * n_rows
    };
    // A per-thread f32 row unless the source rows can be read in place.
    let need_tmp = !direct && vt != DType::F32;
    let dense_f32 = tb == DType::F32 && b.nb[0] == 4;
    let tmp_bytes = if need_tmp {
        round_up(k * 4) * ctx.n_threads
    } else {
        0
    };
    let total = ALIGN + conv_bytes + tmp_bytes + round_up(extra_bytes);
    if scratch.len() < total {
        scratch.resize(total, 0);
    }
    let base = scratch.as_mut_ptr();
    let base = base.wrapping_add(base.align_offset(ALIGN));
    let conv = base;
    let tmp = base.wrapping_add(conv_bytes);
    let extra = tmp.wrapping_add(tmp_bytes);
    if direct {
        let s = [b.nb[1] as usize, b.nb[2] as usize, b.nb[3] as usize];
        return Ok(Rows {
            base: ctx.src_ptr[1],
            s,
            extra,
        });
    }
    let stride = round_up(row_bytes);
    let rows = Rows {
        base: SharedPtr(conv),
        s: [stride, stride * n1, stride * n1 * n2],
        extra,
    };
    let failed = AtomicBool::new(false);
    let (conv, tmp, src) = (SharedPtr(conv), SharedPtr(tmp), ctx.src_ptr[1]);
    let convert = |thread: usize, r: usize| {
        let (i1, i2, i3) = (r % n1, r / n1 % n2, r / (n1 * n2));
        let src_row = raw(src)
            .wrapping_add(i1 * b.nb[1] as usize + i2 * b.nb[2] as usize + i3 * b.nb[3] as usize);
        // SAFETY: row r of the converted region holds `row_bytes` bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(raw(conv).add(r * stride), row_bytes) };
        let ok = if vt == DType::F32 {
            // SAFETY: an f32 row of k values is exactly `out`.
            let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<f32>(), k) };
            // SAFETY: src covers b.
            unsafe { gather(src_row, b, tb, out) };
            true
        } else if dense_f32 && (src_row as usize).is_multiple_of(4) {
            // SAFETY: a dense f32 row of k values; scratch rows are 64-byte aligned.
            let x = unsafe { std::slice::from_raw_parts(src_row.cast::<f32>(), k) };
            crate::simd::convert_row(vt, x, out)
        } else {
            // SAFETY: each thread owns its `round_up(k * 4)` bytes of tmp.
            let x = unsafe {
                std::slice::from_raw_parts_mut(
                    raw(tmp).add(thread * round_up(k * 4)).cast::<f32>(),
                    k,
                )
            };
            // SAFETY: src covers b.
            unsafe { gather(src_row, b, tb, x) };
            crate::simd::convert_row(vt, x, out)
        };
        if !ok {
            failed.store(true, Ordering::Relaxed);
        }
    };
    if n_rows < 4 {
        (0..n_rows).for_each(|r| convert(0, r));
    } else {
        ctx.pool.for_each_item(n_rows, &convert);
    }
    if failed.load(Ordering::Relaxed) {
        return Err(ctx.malformed(format!("converting src1 rows to {vt} failed")));
    }
    Ok(rows)
}

/// Reads the `out.len()` elements of a row of `b` (type `tb`, element
/// stride `b.nb[0]`) as f32.
///
/// # Safety
/// `row` must cover the row.
unsafe fn gather(row: *const u8, b: &TensorDesc, tb: DType, out: &mut [f32]) {
    let nb0 = b.nb[0] as usize;
    for (i, o) in out.iter_mut().enumerate() {
        let p = row.wrapping_add(i * nb0);
        // SAFETY: element i lies within the row.
        *o = unsafe {
            match tb {
                DType::F16 => p.cast::<f16>().read_unaligned().to_f32(),
                DType::BF16 => p.cast::<bf16>().read_unaligned().to_f32(),
                _ => p.cast::<f32>().read_unaligned(),
            }
        };
    }
}

/// The pointer of a [`SharedPtr`] (a function, so closures capture the
/// whole `Sync` wrapper rather than its raw field).
#[inline(always)]
pub fn raw(p: SharedPtr) -> *mut u8 {
    p.0
}
