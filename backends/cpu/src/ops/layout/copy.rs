//! CPY and CONT: copy src0's elements in row-major order into dst's
//! row-major order (shapes may differ, element counts match), converting
//! between float types, quantizing, dequantizing, and i32 <-> f32.
//!
//! Float to integer conversion truncates toward zero and saturates, as
//! ggml's `(int32_t)` cast does (Rust's `as`).

use backplane_abi::{MAX_SRC, TensorDesc};

use crate::error::CpuError;
use crate::ops::NodeCtx;
use crate::ops::tensor::{Tensor, copy_strided, par_range, src_type};

/// Whether the copy kernels accept these operands: the conversions of the
/// op contract, with block-typed operands either contiguous or in matching
/// dense rows (the contract has checked counts and conversions).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    let ta = src_type(src, 0)?;
    let td = dst.dtype().map_err(|e| e.to_string())?;
    let a = src[0].ok_or("missing src0")?;
    if ta.is_quantized() || td.is_quantized() {
        let rows_match = a.ne[0] == dst.ne[0] && a.is_contiguous_rows() && dst.is_contiguous_rows();
        if ta.is_quantized() && !(a.is_contiguous() || rows_match) {
            return Err(format!("quantized source {ta} must be contiguous"));
        }
        if td.is_quantized() && !(dst.is_contiguous() || rows_match) {
            return Err(format!("quantized destination {td} must be contiguous"));
        }
        if ta == td && !rows_match && !(a.is_contiguous() && dst.is_contiguous()) {
            return Err(format!(
                "{ta} copy needs matching dense rows or contiguous tensors"
            ));
        }
    }
    Ok(())
}

/// Runs one CPY or CONT node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let same_rows = a.ne(0) == d.ne(0);
    // SAFETY: forwarded contract; each path writes disjoint dst rows per worker.
    unsafe {
        if a.dtype == d.dtype && a.desc.is_contiguous() && d.desc.is_contiguous() {
            return copy_contiguous(ctx, &a, &d);
        }
        if a.dtype.is_quantized() && !same_rows {
            return dequantize_scatter(ctx, &a, &d);
        }
        if d.dtype.is_quantized() && !same_rows {
            return gather_quantize(ctx, &a, &d);
        }
        if same_rows {
            return copy_rows(ctx, &a, &d);
        }
        gather(ctx, &a, &d)
    }
}

/// Byte copy of two contiguous tensors of one type, split in large chunks.
unsafe fn copy_contiguous(
    ctx: &NodeCtx<'_>,
    a: &Tensor<'_>,
    d: &Tensor<'_>,
) -> Result<(), CpuError> {
    const CHUNK: usize = 1 << 16;
    let n = d.desc.nbytes() as usize;
    if a.addr(0) == d.addr(0) {
        return Ok(());
    }
    par_range(ctx, n.div_ceil(CHUNK), CHUNK / 4, |chunks| {
        let start = chunks.start * CHUNK;
        let end = (chunks.end * CHUNK).min(n);
        // SAFETY: the byte range lies in both tensors; chunks are disjoint.
        unsafe { d.copy_from(start, a, start, end - start) };
        Ok(())
    })
}

/// Row for row: src0 row r goes to dst row r (same ne0).
unsafe fn copy_rows(ctx: &NodeCtx<'_>, a: &Tensor<'_>, d: &Tensor<'_>) -> Result<(), CpuError> {
    let ne0 = d.ne(0);
    // A strided source (a transposed view) is walked in tiles of rows x
    // columns so that each cache line it loads serves a whole tile.
    let tiled = a.nb(0) != a.type_size() && !a.dtype.is_quantized() && !d.dtype.is_quantized();
    par_range(ctx, d.nrows(), ne0, |rows| {
        let mut buf = Vec::new();
        if !tiled {
            for r in rows {
                // SAFETY: in-bounds rows; each worker writes its own dst rows.
                unsafe {
                    copy_segment(a, a.row_offset_of(r), d, d.row_offset_of(r), ne0, &mut buf)
                };
            }
            return Ok(());
        }
        for g0 in rows.clone().step_by(TILE_ROWS) {
            for c0 in (0..ne0).step_by(TILE_COLS) {
                let n = TILE_COLS.min(ne0 - c0);
                for r in g0..(g0 + TILE_ROWS).min(rows.end) {
                    let aoff = a.row_offset_of(r) + c0 * a.nb(0);
                    let doff = d.row_offset_of(r) + c0 * d.nb(0);
                    // SAFETY: a segment of an in-bounds row; each worker
                    // writes its own dst rows.
                    unsafe { copy_segment(a, aoff, d, doff, n, &mut buf) };
                }
            }
        }
        Ok(())
    })
}

/// Rows per tile of a strided copy.
const TILE_ROWS: usize = 16;
/// Columns per tile of a strided copy.
const TILE_COLS: usize = 64;

/// Copies `n` elements of a row segment, converting when the types differ
/// (block types only as whole rows).
///
/// # Safety
/// Both segments lie in their tensors; nobody else writes the destination.
unsafe fn copy_segment(
    a: &Tensor<'_>,
    aoff: usize,
    d: &Tensor<'_>,
    doff: usize,
    n: usize,
    buf: &mut Vec<f32>,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if a.dtype == d.dtype {
            if d.dtype.is_quantized() {
                d.copy_from(doff, a, aoff, d.dtype.row_size(n).unwrap_or(0));
            } else {
                copy_strided(d, doff, d.nb(0), a, aoff, a.nb(0), n, d.type_size());
            }
        } else {
            buf.resize(n, 0.0);
            a.load_f32(aoff, a.nb(0), buf);
            d.store_f32(doff, d.nb(0), buf);
        }
    }
}

/// Element positions of a plain-typed tensor in row-major order.
struct Cursor {
    idx: [usize; 4],
    ne: [usize; 4],
    nb: [usize; 4],
    off: usize,
}

impl Cursor {
    /// Positioned at flat element `flat`.
    fn new(t: &Tensor<'_>, flat: usize) -> Cursor {
        let ne = [t.ne(0), t.ne(1), t.ne(2), t.ne(3)];
        let nb = [t.nb(0), t.nb(1), t.nb(2), t.nb(3)];
        let mut idx = [0; 4];
        let mut rest = flat;
        for i in 0..4 {
            idx[i] = rest % ne[i];
            rest /= ne[i];
        }
        let off = (0..4).map(|i| idx[i] * nb[i]).sum();
        Cursor { idx, ne, nb, off }
    }

    /// Moves to the next element.
    #[inline]
    fn advance(&mut self) {
        for i in 0..4 {
            self.idx[i] += 1;
            self.off += self.nb[i];
            if self.idx[i] < self.ne[i] || i == 3 {
                return;
            }
            self.off -= self.ne[i] * self.nb[i];
            self.idx[i] = 0;
        }
    }
}

/// Element by element with independent row-major walks of both shapes.
unsafe fn gather(ctx: &NodeCtx<'_>, a: &Tensor<'_>, d: &Tensor<'_>) -> Result<(), CpuError> {
    let ne0 = d.ne(0);
    let ts = d.type_size();
    par_range(ctx, d.nrows(), ne0, |rows| {
        let mut cur = Cursor::new(a, rows.start * ne0);
        for r in rows {
            let doff = d.row_offset_of(r);
            for i in 0..ne0 {
                // SAFETY: the cursor stays within src0's elements (equal
                // counts); each worker writes its own dst rows.
                unsafe {
                    if a.dtype == d.dtype {
                        copy_strided(d, doff + i * d.nb(0), ts, a, cur.off, ts, 1, ts);
                    } else {
                        d.set_f32(doff + i * d.nb(0), a.get_f32(cur.off));
                    }
                }
                cur.advance();
            }
        }
        Ok(())
    })
}

/// Quantized src0 (contiguous) into f32 dst of another shape.
unsafe fn dequantize_scatter(
    ctx: &NodeCtx<'_>,
    a: &Tensor<'_>,
    d: &Tensor<'_>,
) -> Result<(), CpuError> {
    let ne00 = a.ne(0);
    par_range(ctx, a.nrows(), ne00, |rows| {
        let mut buf = Vec::new();
        // Workers own disjoint flat ranges of dst.
        let mut cur = Cursor::new(d, rows.start * ne00);
        for r in rows {
            // SAFETY: row r lies in src0; the cursor's elements lie in dst
            // and belong to this worker's flat range.
            unsafe {
                let x = a.row_f32(a.row_offset_of(r), &mut buf);
                for &v in x {
                    d.set_f32(cur.off, v);
                    cur.advance();
                }
            }
        }
        Ok(())
    })
}

/// Float src0 of another shape quantized into contiguous dst rows.
unsafe fn gather_quantize(
    ctx: &NodeCtx<'_>,
    a: &Tensor<'_>,
    d: &Tensor<'_>,
) -> Result<(), CpuError> {
    let ne0 = d.ne(0);
    par_range(ctx, d.nrows(), ne0 * 4, |rows| {
        let mut buf = vec![0f32; ne0];
        let mut cur = Cursor::new(a, rows.start * ne0);
        for r in rows {
            // SAFETY: the cursor stays within src0; dst row r belongs to
            // this worker.
            unsafe {
                for v in buf.iter_mut() {
                    *v = a.get_f32(cur.off);
                    cur.advance();
                }
                d.store_f32(d.row_offset_of(r), d.nb(0), &buf);
            }
        }
        Ok(())
    })
}
