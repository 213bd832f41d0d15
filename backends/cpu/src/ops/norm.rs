//! Row normalisation: NORM, RMS_NORM, L2_NORM. Row sums accumulate in f64.

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use super::tensor::{Tensor, expect_type, par_range, src_type, sum_f64};
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// The ALiBi slope lives with SOFT_MAX; FLASH_ATTN_EXT's kernel imports it
/// from here.
pub use super::softmax::alibi_slope;

/// Whether the normalisation kernels accept these operands: f32 with dense
/// result rows (the op contract has checked the shapes).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, &[DType::F32])?;
    if !dst.is_contiguous_rows() {
        return Err("dst rows must be dense".into());
    }
    Ok(())
}

/// Runs one normalisation node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = a.ne(0);
    let eps = ctx.dst.param_f32(0);
    let op = ctx.op;
    par_range(ctx, a.nrows(), ne0 * 3, |rows| {
        let mut buf = Vec::new();
        for r in rows {
            // SAFETY: in-bounds rows; each worker writes its own dst rows
            // (dst is a fresh tensor, so it does not alias src0).
            unsafe {
                let x = a.row_f32(a.row_offset_of(r), &mut buf);
                let out = d.slice_mut::<f32>(d.row_offset_of(r), ne0);
                match op {
                    Op::Norm => {
                        let mean = (sum_f64(x) / ne0 as f64) as f32;
                        let mut var = 0f64;
                        for (o, &v) in out.iter_mut().zip(x) {
                            let y = v - mean;
                            *o = y;
                            var += (y * y) as f64;
                        }
                        let scale = (1.0 / (var / ne0 as f64 + eps as f64).sqrt()) as f32;
                        out.iter_mut().for_each(|o| *o *= scale);
                    }
                    Op::RmsNorm => {
                        let sq = sum_sq(x);
                        let scale = (1.0 / (sq / ne0 as f64 + eps as f64).sqrt()) as f32;
                        for (o, &v) in out.iter_mut().zip(x) {
                            *o = v * scale;
                        }
                    }
                    _ => {
                        let norm = sum_sq(x).sqrt() as f32;
                        let scale = 1.0 / norm.max(eps);
                        for (o, &v) in out.iter_mut().zip(x) {
                            *o = v * scale;
                        }
                    }
                }
            }
        }
        Ok(())
    })
}

/// Sum of squares in f64.
fn sum_sq(x: &[f32]) -> f64 {
    let mut acc = [0f64; 4];
    let mut c = x.chunks_exact(4);
    for v in &mut c {
        for k in 0..4 {
            acc[k] += (v[k] as f64) * (v[k] as f64);
        }
    }
    acc.iter().sum::<f64>()
        + c.remainder()
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum::<f64>()
}
