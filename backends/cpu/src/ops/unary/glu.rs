//! GLU: `act(x) * g`, where x and g are the two halves of each src0 row
//! (swapped when op_params[1] is set) or rows of src0 and src1.

use backplane_abi::{DType, GluOp, MAX_SRC, TensorDesc};

use super::{gelu, gelu_erf, gelu_quick, relu, silu};
use crate::error::CpuError;
use crate::ops::NodeCtx;
use crate::ops::tensor::{Tensor, expect_type, par_range, src_type};

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// Whether the GLU kernels accept these operands: the float types (the op
/// contract has checked the shapes and the variant).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, FLOATS)?;
    if src[1].is_some() {
        expect_type("src1", src_type(src, 1)?, FLOATS)?;
    }
    expect_type("dst", dst.dtype().map_err(|e| e.to_string())?, FLOATS)
}

/// Runs one GLU node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let op =
        GluOp::from_code(ctx.dst.param_i32(0) as u32).map_err(|e| ctx.malformed(e.to_string()))?;
    let (alpha, limit) = (ctx.dst.param_f32(2), ctx.dst.param_f32(3));
    // SAFETY: forwarded contract.
    unsafe {
        match op {
            GluOp::Reglu => gated(ctx, |x, g| relu(x) * g),
            GluOp::Geglu => gated(ctx, |x, g| gelu(x) * g),
            GluOp::Swiglu => gated(ctx, |x, g| silu(x) * g),
            GluOp::GegluErf => gated(ctx, |x, g| gelu_erf(x) * g),
            GluOp::GegluQuick => gated(ctx, |x, g| gelu_quick(x) * g),
            GluOp::SwigluOai => gated(ctx, move |x, g| {
                let x = x.min(limit);
                let g = g.clamp(-limit, limit);
                x / (1.0 + (alpha * -x).exp()) * (g + 1.0)
            }),
        }
    }
}

unsafe fn gated<F: Fn(f32, f32) -> f32 + Sync>(ctx: &NodeCtx<'_>, f: F) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let b = Tensor::opt_src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let nc = d.ne(0);
    let swapped = ctx.dst.param_i32(1) != 0;
    par_range(ctx, d.nrows(), nc * 8, |rows| {
        let mut buf = vec![0f32; 2 * nc];
        for r in rows {
            let [i1, i2, i3] = d.row_index(r);
            let (x, g) = buf.split_at_mut(nc);
            let aoff = a.row_offset(i1, i2, i3);
            // SAFETY: rows are in bounds; dst is a fresh tensor and each
            // worker writes only its own rows.
            unsafe {
                match b {
                    Some(b) => {
                        a.load_f32(aoff, a.nb(0), x);
                        b.load_f32(b.row_offset(i1, i2, i3), b.nb(0), g);
                    }
                    None => {
                        let half = nc * a.nb(0);
                        let (xo, go) = if swapped {
                            (aoff + half, aoff)
                        } else {
                            (aoff, aoff + half)
                        };
                        a.load_f32(xo, a.nb(0), x);
                        a.load_f32(go, a.nb(0), g);
                    }
                }
                for (x, &g) in x.iter_mut().zip(g.iter()) {
                    *x = f(*x, g);
                }
                d.store_f32(d.row_offset(i1, i2, i3), d.nb(0), x);
            }
        }
        Ok(())
    })
}
