//! Element-wise maps: SQR SQRT LOG SIN COS, SCALE, CLAMP, FILL and every
//! UNARY function, on f32/f16/bf16 with any strides, in place or not; the
//! gated linear units (GLU) in [`glu`].

pub mod glu;

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc, UnaryOp};

use crate::error::CpuError;
use crate::ops::NodeCtx;
use crate::ops::tensor::{Tensor, expect_type, par_range, src_type};

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// `sqrt(2 / pi)`, the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// Cubic coefficient of the GELU tanh approximation.
const GELU_COEF_A: f32 = 0.044_715;
/// Slope of GELU_QUICK's sigmoid.
const GELU_QUICK_COEF: f32 = -1.702;

/// GELU, tanh approximation (ggml's `ggml_gelu_f32`, without its f16 table).
#[inline]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

/// GELU with the exact error function.
#[inline]
pub fn gelu_erf(x: f32) -> f32 {
    (0.5 * x as f64 * (1.0 + erf(x as f64 * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

/// `x * sigmoid(1.702 x)`.
#[inline]
pub fn gelu_quick(x: f32) -> f32 {
    x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))
}

/// `x * sigmoid(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `max(x, 0)`.
#[inline]
pub fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}

/// `ln(1 + e^x)`, x itself above 20 (ggml's cut-off).
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { (1.0 + x.exp()).ln() }
}

/// The error function, to about 1e-7 relative (Chebyshev fit of erfc,
/// Numerical Recipes' `erfcc`), evaluated in f64.
pub fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
}

/// Whether the element-wise kernels accept these operands: the float types
/// (the op contract has checked the shapes and the function code).
pub fn supports(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, FLOATS)?;
    expect_type("dst", dst.dtype().map_err(|e| e.to_string())?, FLOATS)
}

/// Runs one element-wise map node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let p = |i| ctx.dst.param_f32(i);
    // SAFETY: forwarded contract.
    unsafe {
        match ctx.op {
            Op::Sqr => map(ctx, |x| x * x),
            Op::Sqrt => map(ctx, |x| x.sqrt()),
            Op::Log => map(ctx, |x| x.ln()),
            Op::Sin => map(ctx, |x| x.sin()),
            Op::Cos => map(ctx, |x| x.cos()),
            Op::Scale => {
                let (s, b) = (p(0), p(1));
                if b == 0.0 {
                    map(ctx, move |x| x * s)
                } else {
                    map(ctx, move |x| x * s + b)
                }
            }
            Op::Clamp => {
                let (lo, hi) = (p(0), p(1));
                map(ctx, move |x| {
                    let v = if x < hi { x } else { hi };
                    if v > lo { v } else { lo }
                })
            }
            Op::Fill => {
                let v = p(0);
                map(ctx, move |_| v)
            }
            Op::Unary => {
                let f = UnaryOp::from_code(ctx.dst.param_i32(0) as u32)
                    .map_err(|e| ctx.malformed(e.to_string()))?;
                run_unary(ctx, f)
            }
            op => Err(ctx.unsupported(format!("{op} is not an element-wise map"))),
        }
    }
}

unsafe fn run_unary(ctx: &NodeCtx<'_>, f: UnaryOp) -> Result<(), CpuError> {
    use UnaryOp as U;
    // SAFETY: forwarded contract.
    unsafe {
        match f {
            U::Abs => map(ctx, |x| x.abs()),
            U::Sgn => map(ctx, |x| {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }),
            U::Neg => map(ctx, |x| -x),
            U::Step => map(ctx, |x| if x > 0.0 { 1.0 } else { 0.0 }),
            U::Tanh => map(ctx, |x| x.tanh()),
            U::Elu => map(ctx, |x| if x > 0.0 { x } else { x.exp_m1() }),
            U::Relu => map(ctx, relu),
            U::Sigmoid => map(ctx, |x| 1.0 / (1.0 + (-x).exp())),
            U::Gelu => map(ctx, gelu),
            U::GeluQuick => map(ctx, gelu_quick),
            U::Silu => map(ctx, silu),
            U::Hardswish => map(ctx, |x| x * ((x + 3.0) / 6.0).clamp(0.0, 1.0)),
            U::Hardsigmoid => map(ctx, |x| ((x + 3.0) / 6.0).clamp(0.0, 1.0)),
            U::Exp => map(ctx, |x| x.exp()),
            U::Expm1 => map(ctx, |x| x.exp_m1()),
            U::Softplus => map(ctx, softplus),
            U::GeluErf => map(ctx, gelu_erf),
            U::Xielu => {
                let p = |i| ctx.dst.param_f32(i);
                let (alpha_n, alpha_p, beta, eps) = (p(1), p(2), p(3), p(4));
                map(ctx, move |x| {
                    if x > 0.0 {
                        alpha_p * x * x + beta * x
                    } else {
                        (x.min(eps).exp_m1() - x) * alpha_n + beta * x
                    }
                })
            }
            U::Floor => map(ctx, |x| x.floor()),
            U::Ceil => map(ctx, |x| x.ceil()),
            U::Round => map(ctx, |x| x.round()),
            U::Trunc => map(ctx, |x| x.trunc()),
        }
    }
}

/// Applies `f` to every element of src0 into dst (row for row in
/// row-major order; dst may alias src0).
unsafe fn map<F: Fn(f32) -> f32 + Sync>(ctx: &NodeCtx<'_>, f: F) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = d.ne(0);
    let fill = ctx.op == Op::Fill;
    let fast = a.dtype == DType::F32 && d.dtype == DType::F32 && a.nb(0) == 4 && d.nb(0) == 4;
    par_range(ctx, d.nrows(), ne0, |rows| {
        let mut buf = if fast { Vec::new() } else { vec![0f32; ne0] };
        for r in rows {
            let doff = d.row_offset_of(r);
            let aoff = a.row_offset_of(r);
            // SAFETY: rows are in bounds and each worker writes only its own
            // dst rows; when dst aliases src0 the row is only accessed
            // through the mutable slice.
            unsafe {
                if fast {
                    let out = d.slice_mut::<f32>(doff, ne0);
                    if fill || d.addr(doff) == a.addr(aoff) {
                        for o in out.iter_mut() {
                            *o = f(*o);
                        }
                    } else {
                        for (o, &x) in out.iter_mut().zip(a.slice::<f32>(aoff, ne0)) {
                            *o = f(x);
                        }
                    }
                } else {
                    if !fill {
                        a.load_f32(aoff, a.nb(0), &mut buf);
                    }
                    for v in buf.iter_mut() {
                        *v = f(*v);
                    }
                    d.store_f32(doff, d.nb(0), &buf);
                }
            }
        }
        Ok(())
    })
}
