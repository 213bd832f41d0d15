//! ADD, SUB, MUL, DIV: element-wise with src1 broadcast over src0, any mix
//! of f32/f16/bf16, any strides, in place when the result aliases src0.

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use super::tensor::{Tensor, expect_type, par_range, src_type};
use crate::error::CpuError;
use crate::ops::NodeCtx;

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// Whether the binary kernels accept these operands: any mix of the float
/// types and any strides (the op contract has checked the broadcast).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, FLOATS)?;
    expect_type("src1", src_type(src, 1)?, FLOATS)?;
    expect_type("dst", dst.dtype().map_err(|e| e.to_string())?, FLOATS)
}

/// Runs one binary node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    // SAFETY: forwarded contract.
    unsafe {
        match ctx.op {
            Op::Add => apply(ctx, |x, y| x + y),
            Op::Sub => apply(ctx, |x, y| x - y),
            Op::Mul => apply(ctx, |x, y| x * y),
            Op::Div => apply(ctx, |x, y| x / y),
            op => Err(ctx.unsupported(format!("{op} is not a binary op"))),
        }
    }
}

unsafe fn apply<F: Fn(f32, f32) -> f32 + Sync>(ctx: &NodeCtx<'_>, f: F) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let b = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = d.ne(0);
    let ne10 = b.ne(0);
    let all_f32 = a.dtype == DType::F32 && b.dtype == DType::F32 && d.dtype == DType::F32;
    let fast = all_f32 && a.nb(0) == 4 && b.nb(0) == 4 && d.nb(0) == 4;
    par_range(ctx, d.nrows(), ne0, |rows| {
        let mut buf = if fast {
            Vec::new()
        } else {
            vec![0f32; ne0 + ne10]
        };
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            let doff = d.row_offset(i1, i2, i3);
            let aoff = a.row_offset(i1, i2, i3);
            let boff = b.row_offset(i1 % b.ne(1), i2 % b.ne(2), i3 % b.ne(3));
            // SAFETY: rows are in bounds; each worker writes only its own dst
            // rows; an in-place dst row is the same memory as its src0 row,
            // which is then only accessed through the mutable slice.
            unsafe {
                if fast {
                    let y = b.slice::<f32>(boff, ne10);
                    let out = d.slice_mut::<f32>(doff, ne0);
                    if d.addr(doff) == a.addr(aoff) {
                        combine_inplace(out, y, &f);
                    } else {
                        combine(out, a.slice::<f32>(aoff, ne0), y, &f);
                    }
                } else {
                    let (x, y) = buf.split_at_mut(ne0);
                    a.load_f32(aoff, a.nb(0), x);
                    b.load_f32(boff, b.nb(0), y);
                    combine_inplace(x, y, &f);
                    d.store_f32(doff, d.nb(0), x);
                }
            }
        }
        Ok(())
    })
}

/// `out = f(x, y)` with y repeated along the row.
#[inline]
fn combine<F: Fn(f32, f32) -> f32>(out: &mut [f32], x: &[f32], y: &[f32], f: &F) {
    if y.len() == 1 {
        let y = y[0];
        for (o, &x) in out.iter_mut().zip(x) {
            *o = f(x, y);
        }
        return;
    }
    for (oc, xc) in out.chunks_exact_mut(y.len()).zip(x.chunks_exact(y.len())) {
        for ((o, &x), &y) in oc.iter_mut().zip(xc).zip(y) {
            *o = f(x, y);
        }
    }
}

/// `out = f(out, y)` with y repeated along the row.
#[inline]
fn combine_inplace<F: Fn(f32, f32) -> f32>(out: &mut [f32], y: &[f32], f: &F) {
    if y.len() == 1 {
        let y = y[0];
        for o in out.iter_mut() {
            *o = f(*o, y);
        }
        return;
    }
    for oc in out.chunks_exact_mut(y.len()) {
        for (o, &y) in oc.iter_mut().zip(y) {
            *o = f(*o, y);
        }
    }
}
