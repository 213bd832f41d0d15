//! SOFT_MAX with scale, mask, ALiBi slopes and sinks. Row sums accumulate
//! in f64.

use backplane_abi::{DType, MAX_SRC, TensorDesc};

use super::tensor::{Tensor, expect_type, par_range, src_type};
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// Whether the softmax kernel accepts these operands: f32 with an f32 or
/// f16 mask and dense result rows (the op contract has checked the shapes,
/// the mask's cover and the sinks).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, &[DType::F32])?;
    if src[1].is_some() {
        expect_type("mask", src_type(src, 1)?, &[DType::F32, DType::F16])?;
    }
    if !dst.is_contiguous_rows() {
        return Err("dst rows must be dense".into());
    }
    Ok(())
}

/// ALiBi slope of head `h` of `n_head`, as ggml computes it.
pub fn alibi_slope(max_bias: f32, h: usize, n_head: usize) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1usize << (n_head as f32).log2().floor() as u32;
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    if h < n_head_log2 {
        m0.powf((h + 1) as f32)
    } else {
        m1.powf((2 * (h - n_head_log2) + 1) as f32)
    }
}

/// Runs one SOFT_MAX node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let mask = Tensor::opt_src(ctx, 1)?;
    let sinks = Tensor::opt_src(ctx, 2)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = a.ne(0);
    let scale = ctx.dst.param_f32(0);
    let max_bias = ctx.dst.param_f32(1);
    let n_head = a.ne(2);
    par_range(ctx, a.nrows(), ne0 * 6, |rows| {
        let mut buf = Vec::new();
        let mut mbuf = vec![0f32; if mask.is_some() { ne0 } else { 0 }];
        for r in rows {
            let [i1, i2, i3] = a.row_index(r);
            let slope = alibi_slope(max_bias, i2, n_head);
            // SAFETY: in-bounds rows (the mask covers every row, checked in
            // supports); dst is fresh and each worker writes its own rows.
            unsafe {
                let x = a.row_f32(a.row_offset(i1, i2, i3), &mut buf);
                let out = d.slice_mut::<f32>(d.row_offset(i1, i2, i3), ne0);
                if let Some(m) = &mask {
                    m.load_f32(
                        m.row_offset(i1, i2 % m.ne(2), i3 % m.ne(3)),
                        m.nb(0),
                        &mut mbuf,
                    );
                    for ((o, &v), &mv) in out.iter_mut().zip(x).zip(&mbuf) {
                        *o = v * scale + slope * mv;
                    }
                } else {
                    for (o, &v) in out.iter_mut().zip(x) {
                        *o = v * scale;
                    }
                }
                let mut max = out.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sink = sinks.as_ref().map(|s| s.get_f32(i2 * s.nb(0)));
                if let Some(s) = sink {
                    max = max.max(s);
                }
                let mut sum = 0f64;
                for o in out.iter_mut() {
                    let e = (*o - max).exp();
                    *o = e;
                    sum += e as f64;
                }
                if let Some(s) = sink {
                    sum += (s - max).exp() as f64;
                }
                let inv = (1.0 / sum) as f32;
                out.iter_mut().for_each(|o| *o *= inv);
            }
        }
        Ok(())
    })
}
