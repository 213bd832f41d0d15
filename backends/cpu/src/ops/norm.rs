//! Row normalisation (NORM, RMS_NORM, L2_NORM) and SOFT_MAX with mask,
//! ALiBi and sinks. Row sums accumulate in f64.

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use super::tensor::{Tensor, expect_type, par_range, src_type, sum_f64};
use crate::error::CpuError;
use crate::exec::NodeCtx;

/// Whether the normalisation kernels accept these operands: f32 with dense
/// result rows (the op contract has checked the shapes, mask and sinks).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, &[DType::F32])?;
    if op == Op::SoftMax && src[1].is_some() {
        expect_type("mask", src_type(src, 1)?, &[DType::F32, DType::F16])?;
    }
    if !dst.is_contiguous_rows() {
        return Err("dst rows must be dense".into());
    }
    Ok(())
}

/// Runs one normalisation or softmax node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    if ctx.op == Op::SoftMax {
        // SAFETY: forwarded contract.
        return unsafe { soft_max(ctx) };
    }
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

unsafe fn soft_max(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
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
