//! Convolutions: CONV_2D and IM2COL.

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use super::tensor::{Tensor, expect_type, par_range, src_type};
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// Whether the convolution kernels accept these operands: the types they
/// implement and the layouts they index (the op contract has checked the
/// shapes and parameters).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    match op {
        Op::Conv2d => {
            expect_type("kernel", src_type(src, 0)?, &[DType::F32, DType::F16])?;
        }
        Op::Im2col => {
            if !dst.is_contiguous() {
                return Err("dst must be contiguous".into());
            }
        }
        _ => return Err(format!("{op} is not a convolution op")),
    }
    Ok(())
}

/// Runs one convolution node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    // SAFETY: forwarded contract.
    unsafe {
        match ctx.op {
            Op::Conv2d => conv_2d(ctx),
            Op::Im2col => im2col(ctx),
            op => Err(ctx.unsupported(format!("{op} is not a convolution op"))),
        }
    }
}

/// Input coordinate for output `o`, kernel tap `k`, or None if in padding.
#[inline]
fn tap(
    o: usize,
    k: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
    size: usize,
) -> Option<usize> {
    (o * stride + k * dilation)
        .checked_sub(pad)
        .filter(|&i| i < size)
}

unsafe fn conv_2d(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let k = Tensor::src(ctx, 0)?;
    let x = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let p = ctx.dst.op_params.map(|v| v as usize);
    let (s0, s1, p0, p1, d0, d1) = (p[0], p[1], p[2], p[3], p[4], p[5]);
    let (kw, kh, cin, cout) = (k.ne(0), k.ne(1), k.ne(2), k.ne(3));
    let (w, h) = (x.ne(0), x.ne(1));
    let ow = d.ne(0);
    // The kernel as dense f32 [cout][cin][kh][kw], converted once.
    let mut kern = vec![0f32; kw * kh * cin * cout];
    for (r, row) in kern.chunks_exact_mut(kw).enumerate() {
        // SAFETY: r enumerates the kernel's rows.
        unsafe { k.load_f32(k.row_offset_of(r), k.nb(0), row) };
    }
    let kern = &kern;
    par_range(ctx, d.nrows(), ow * cin * kh * kw, |rows| {
        let mut acc = vec![0f32; ow];
        let mut xrow = vec![0f32; w];
        for r in rows {
            let [ioh, ioc, n] = d.row_index(r);
            acc.fill(0.0);
            for ic in 0..cin {
                for ky in 0..kh {
                    let Some(iy) = tap(ioh, ky, s1, d1, p1, h) else {
                        continue;
                    };
                    // SAFETY: (iy, ic, n) is a row of the input.
                    unsafe { x.load_f32(x.row_offset(iy, ic, n), x.nb(0), &mut xrow) };
                    let taps = &kern[((ioc * cin + ic) * kh + ky) * kw..][..kw];
                    for (kx, &wv) in taps.iter().enumerate() {
                        for (o, a) in acc.iter_mut().enumerate() {
                            if let Some(ix) = tap(o, kx, s0, d0, p0, w) {
                                *a += wv * xrow[ix];
                            }
                        }
                    }
                }
            }
            // SAFETY: row r of dst, written only by this worker.
            unsafe { d.store_f32(d.row_offset(ioh, ioc, n), d.nb(0), &acc) };
        }
        Ok(())
    })
}

unsafe fn im2col(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let k = Tensor::src(ctx, 0)?;
    let x = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let p = ctx.dst.op_params.map(|v| v as usize);
    let (s0, s1, p0, p1, d0, d1) = (p[0], p[1], p[2], p[3], p[4], p[5]);
    let is_2d = p[6] == 1;
    let (ic_n, ih) = if is_2d {
        (x.ne(2), x.ne(1))
    } else {
        (x.ne(1), 1)
    };
    let iw = x.ne(0);
    let (kh, kw) = (if is_2d { k.ne(1) } else { 1 }, k.ne(0));
    let (ofs_n, ofs_c, ofs_h) = if is_2d {
        (x.nb(3), x.nb(2), x.nb(1))
    } else {
        (x.nb(2), x.nb(1), 0)
    };
    let row_len = ic_n * kh * kw;
    if row_len != d.ne(0) {
        return Err(ctx.bad_input(format!("dst ne0 {} is not C*KH*KW = {row_len}", d.ne(0))));
    }
    par_range(ctx, d.nrows(), row_len, |rows| {
        let mut out = vec![0f32; row_len];
        for r in rows {
            // dst rows are (ow, oh, n) for 2-D and (ow, n, 1) for 1-D.
            let [iow, j2, j3] = d.row_index(r);
            let (ioh, n) = if is_2d { (j2, j3) } else { (0, j2) };
            for c in 0..ic_n {
                for ky in 0..kh {
                    let iy = tap(ioh, ky, s1, d1, p1, ih);
                    for kx in 0..kw {
                        let v = match (iy, tap(iow, kx, s0, d0, p0, iw)) {
                            // SAFETY: coordinates checked against the input's shape.
                            (Some(iy), Some(ix)) => unsafe {
                                x.get_f32(n * ofs_n + c * ofs_c + iy * ofs_h + ix * x.nb(0))
                            },
                            _ => 0.0,
                        };
                        out[(c * kh + ky) * kw + kx] = v;
                    }
                }
            }
            // SAFETY: row r of the contiguous dst, written only by this worker.
            unsafe { d.store_f32(d.row_offset_of(r), d.nb(0), &out) };
        }
        Ok(())
    })
}
