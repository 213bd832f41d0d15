//! NORM / RMS_NORM / L2_NORM, SOFT_MAX and ROPE; kernels in
//! `kernels/norm.cpp`.

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc, rope_mode};

use super::{Exec, FLOATS, refused, want_type};
use crate::kernels::Source;

type Srcs<'a> = [Option<&'a TensorDesc>; MAX_SRC];

/// Work-group size of the row kernels.
const ROW_WG: usize = 64;

/// NORM, RMS_NORM, L2_NORM: the float types (the op contract has checked
/// the shapes).
pub(super) fn supports_norm(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let a = src[0].ok_or("norm needs a source")?;
    want_type("a", a, &FLOATS)?;
    want_type("result", d, &FLOATS)?;
    Ok(())
}

/// SOFT_MAX: as NORM, with an f32/f16 mask (the op contract has checked
/// its cover and the sinks).
pub(super) fn supports_soft_max(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    supports_norm(d, src)?;
    if let Some(m) = src[1] {
        want_type("mask", m, &[DType::F32, DType::F16])?;
    }
    Ok(())
}

pub(super) fn supports_rope(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let a = src[0].ok_or("ROPE needs a source")?;
    want_type("a", a, &[DType::F32, DType::F16])?;
    want_type("result", d, &[DType::F32, DType::F16])?;
    want_type(
        "positions",
        src[1].ok_or("ROPE needs positions")?,
        &[DType::I32],
    )?;
    if let Some(f) = src[2] {
        want_type("freq_factors", f, &[DType::F32])?;
    }
    match d.op_params[2] {
        rope_mode::NORMAL | rope_mode::NEOX => Ok(()),
        rope_mode::MROPE => Err(refused("ROPE mode mrope")),
        rope_mode::IMROPE => Err(refused("ROPE mode imrope")),
        rope_mode::VISION => Err(refused("ROPE mode vision")),
        m => Err(format!("unknown ROPE mode {m}")),
    }
}

fn rows(t: &TensorDesc) -> usize {
    (t.ne[1] * t.ne[2] * t.ne[3]).max(0) as usize
}

fn launch_rows(
    x: &Exec<'_>,
    i: usize,
    name: &'static str,
    args: &crate::kernels::Args,
) -> Result<(), String> {
    let n = rows(&x.graph[i]);
    if n == 0 {
        return Ok(());
    }
    x.launch(
        Source::Norm,
        name,
        [1, n, ROW_WG],
        [1, 1, ROW_WG],
        x.node_ptrs(i)?,
        args,
    )
}

pub(super) fn norm(x: &Exec<'_>, i: usize, op: Op) -> Result<(), String> {
    let mut args = x.args(i);
    args.x[0] = match op {
        Op::Norm => 0,
        Op::RmsNorm => 1,
        _ => 2,
    };
    launch_rows(x, i, "k_norm", &args)
}

pub(super) fn soft_max(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let mut args = x.args(i);
    args.x[0] = i64::from(x.src(i, 1).is_some());
    args.x[1] = i64::from(x.src(i, 2).is_some());
    launch_rows(x, i, "k_soft_max", &args)
}

/// ggml_rope_yarn_corr_dims.
fn yarn_corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let corr_dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
            / (2.0 * freq_base.ln())
    };
    [
        corr_dim(beta_fast).floor().max(0.0),
        corr_dim(beta_slow).ceil().min(n_dims as f32 - 1.0),
    ]
}

pub(super) fn rope(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let mut args = x.args(i);
    args.x[0] = i64::from(x.src(i, 2).is_some());
    let [low, high] = yarn_corr_dims(
        d.op_params[1],
        d.op_params[4],
        d.param_f32(5),
        d.param_f32(9),
        d.param_f32(10),
    );
    args.x[1] = i64::from(low.to_bits() as i32);
    args.x[2] = i64::from(high.to_bits() as i32);
    let n = rows(d) * ((d.ne[0] + 1) / 2) as usize;
    x.launch_1d(Source::Norm, "k_rope", i, n, &args)
}
