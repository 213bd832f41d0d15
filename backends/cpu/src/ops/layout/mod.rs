//! Ops that move data: REPEAT, CONCAT, PAD, GET_ROWS, SET_ROWS here, CPY
//! and CONT in [`copy`].

pub mod copy;

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;
use crate::ops::NodeCtx;
use crate::ops::tensor::{Tensor, copy_strided, expect_type, par_range, src_type};

/// Whether the data-movement kernels accept these operands: the types they
/// implement and the layouts they index (the op contract has checked the
/// shapes and parameters).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    let ta = src_type(src, 0)?;
    let td = dst.dtype().map_err(|e| e.to_string())?;
    let a = src[0].ok_or("missing src0")?;
    match op {
        Op::Repeat => expect_type(
            "src0",
            ta,
            &[DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16],
        )?,
        Op::Concat => expect_type(
            "src0",
            ta,
            &[DType::F32, DType::F16, DType::BF16, DType::I32],
        )?,
        Op::Pad => expect_type("src0", ta, &[DType::F32])?,
        Op::GetRows => {
            if ta.is_integer() && ta != DType::I32 {
                expect_type("src0", ta, &[DType::I32])?;
            }
            if !a.is_contiguous_rows() {
                return Err("src0 rows must be dense".into());
            }
        }
        Op::SetRows => {
            if !dst.is_contiguous_rows() {
                return Err(format!("destination {td} rows must be dense"));
            }
        }
        _ => return Err(format!("{op} is not a data-movement op")),
    }
    Ok(())
}

/// Runs one data-movement node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    // SAFETY: forwarded contract.
    unsafe {
        match ctx.op {
            Op::Repeat => repeat(ctx),
            Op::Concat => concat(ctx),
            Op::Pad => pad(ctx),
            Op::GetRows => get_rows(ctx),
            Op::SetRows => set_rows(ctx),
            op => Err(ctx.unsupported(format!("{op} is not a data-movement op"))),
        }
    }
}

/// Copies `n` elements, strided on both sides (dst's element type).
///
/// # Safety
/// Both ranges lie in their tensors; nobody else writes the destination.
#[inline]
unsafe fn copy_elems(d: &Tensor<'_>, doff: usize, a: &Tensor<'_>, aoff: usize, n: usize) {
    // SAFETY: forwarded contract.
    unsafe { copy_strided(d, doff, d.nb(0), a, aoff, a.nb(0), n, d.type_size()) }
}

unsafe fn repeat(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let (ne0, ne00) = (d.ne(0), a.ne(0));
    par_range(ctx, d.nrows(), ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            let doff = d.row_offset(i1, i2, i3);
            let aoff = a.row_offset(i1 % a.ne(1), i2 % a.ne(2), i3 % a.ne(3));
            for k in 0..ne0 / ne00 {
                // SAFETY: in-bounds rows; each worker writes its own dst rows.
                unsafe { copy_elems(&d, doff + k * ne00 * d.nb(0), &a, aoff, ne00) };
            }
        }
        Ok(())
    })
}

unsafe fn concat(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let b = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let dim = ctx.dst.param_i32(0) as usize;
    par_range(ctx, d.nrows(), d.ne(0), |rows| {
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            let doff = d.row_offset(i1, i2, i3);
            // SAFETY: in-bounds rows; each worker writes its own dst rows.
            unsafe {
                if dim == 0 {
                    copy_elems(&d, doff, &a, a.row_offset(i1, i2, i3), a.ne(0));
                    copy_elems(
                        &d,
                        doff + a.ne(0) * d.nb(0),
                        &b,
                        b.row_offset(i1, i2, i3),
                        b.ne(0),
                    );
                } else {
                    let mut idx = [i1, i2, i3];
                    let from_a = idx[dim - 1] < a.ne(dim);
                    if !from_a {
                        idx[dim - 1] -= a.ne(dim);
                    }
                    let (s, off) = if from_a {
                        (&a, a.row_offset(idx[0], idx[1], idx[2]))
                    } else {
                        (&b, b.row_offset(idx[0], idx[1], idx[2]))
                    };
                    copy_elems(&d, doff, s, off, d.ne(0));
                }
            }
        }
        Ok(())
    })
}

unsafe fn pad(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let p = ctx.dst.op_params;
    let (ne0, ne00, lp0) = (d.ne(0), a.ne(0), p[0] as usize);
    par_range(ctx, d.nrows(), ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            let doff = d.row_offset(i1, i2, i3);
            let src_idx = |i: usize, dim: usize| {
                i.checked_sub(p[2 * dim] as usize)
                    .filter(|&j| j < a.ne(dim))
            };
            // SAFETY: in-bounds rows; dst is fresh and dense (f32); each
            // worker writes its own rows.
            unsafe {
                let out = d.slice_mut::<f32>(doff, ne0);
                out.fill(0.0);
                if let (Some(j1), Some(j2), Some(j3)) =
                    (src_idx(i1, 1), src_idx(i2, 2), src_idx(i3, 3))
                {
                    a.load_f32(a.row_offset(j1, j2, j3), a.nb(0), &mut out[lp0..lp0 + ne00]);
                }
            }
        }
        Ok(())
    })
}

/// Reads an index element (i32 or i64) at byte `off`.
///
/// # Safety
/// The element lies in `t`.
unsafe fn read_index(t: &Tensor<'_>, off: usize) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        if t.dtype == DType::I64 {
            t.read::<i64>(off)
        } else {
            t.read::<i32>(off) as i64
        }
    }
}

unsafe fn get_rows(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let rows_t = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = d.ne(0);
    // Rows of a repacked weight (a tied embedding) are read back into
    // ggml's layout one at a time.
    let repacked = if ctx.src_repacked[0] {
        let desc = ctx.src(0)?;
        let r = crate::repack::Repack::for_tensor(desc).map_err(|e| ctx.unsupported(e))?;
        // SAFETY: the caller guarantees src0 covers its tensor.
        let bytes = unsafe { std::slice::from_raw_parts(ctx.src_ptr[0].0, desc.nbytes() as usize) };
        Some((r, bytes))
    } else {
        None
    };
    let n_src = a.ne(1) as i64;
    par_range(ctx, d.nrows(), ne0, |rows| {
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            // SAFETY: (i1, i2, i3) indexes the rows tensor, whose shape is
            // dst's dims 1..4.
            let idx = unsafe {
                read_index(
                    &rows_t,
                    i1 * rows_t.nb(0) + i2 * rows_t.nb(1) + i3 * rows_t.nb(2),
                )
            };
            if idx < 0 || idx >= n_src {
                return Err(
                    ctx.bad_input(format!("row index {idx} out of range 0..{n_src} in src1"))
                );
            }
            let aoff = a.row_offset(idx as usize, i2, i3);
            let doff = d.row_offset(i1, i2, i3);
            // SAFETY: idx was checked; dst is fresh and each worker writes
            // its own rows.
            unsafe {
                if let Some((r, bytes)) = repacked {
                    let mut row = vec![0u8; r.row_bytes()];
                    r.read(bytes, aoff, &mut row);
                    let out = d.slice_mut::<f32>(doff, ne0);
                    // Whole blocks by construction (checked in supports).
                    let _ = backplane_quant::dequantize_row(r.dtype, &row, out);
                } else if a.dtype == DType::I32 {
                    copy_elems(&d, doff, &a, aoff, ne0);
                } else {
                    a.load_f32(aoff, a.nb(0), d.slice_mut::<f32>(doff, ne0));
                }
            }
        }
        Ok(())
    })
}

unsafe fn set_rows(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let rows_t = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let (ne00, ne01, ne02) = (a.ne(0), a.ne(1), a.ne(2));
    let n_dst = d.ne(1) as i64;
    // Work items are (i02, i03) planes: every destination row written by a
    // plane lies in that plane, so duplicate indices never race.
    par_range(ctx, ne02 * a.ne(3), ne00 * ne01, |planes| {
        let mut buf = Vec::new();
        for p in planes {
            let (i02, i03) = (p % ne02, p / ne02);
            for i in 0..ne01 {
                let ioff = i * rows_t.nb(0)
                    + (i02 % rows_t.ne(1)) * rows_t.nb(1)
                    + (i03 % rows_t.ne(2)) * rows_t.nb(2);
                // SAFETY: the index element lies in the rows tensor.
                let idx = unsafe { read_index(&rows_t, ioff) };
                if idx < 0 || idx >= n_dst {
                    return Err(
                        ctx.bad_input(format!("row index {idx} out of range 0..{n_dst} in src1"))
                    );
                }
                // SAFETY: idx was checked; this worker owns plane (i02, i03).
                unsafe {
                    let x = a.row_f32(a.row_offset(i, i02, i03), &mut buf);
                    d.store_f32(d.row_offset(idx as usize, i02, i03), d.nb(0), x);
                }
            }
        }
        Ok(())
    })
}
