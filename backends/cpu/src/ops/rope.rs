//! ROPE: rotary position embedding in every ggml mode (normal, neox,
//! multi-section, interleaved multi-section, vision) with YaRN scaling and
//! optional frequency factors, on f32 and f16 rows.
//!
//! Angles follow ggml's CPU kernel step for step (theta multiplied by
//! `theta_scale` per pair, in f32), so results match it closely.

use std::f32::consts::PI;

use backplane_abi::{DType, MAX_SRC, TensorDesc, rope_mode};

use super::tensor::{Tensor, expect_type, par_range, src_type};
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// Whether the rope kernel accepts these operands: f32/f16 (the op contract
/// has checked the shapes, positions, mode and sections).
pub fn supports(src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("src0", src_type(src, 0)?, &[DType::F32, DType::F16])
}

/// The YaRN parameters shared by every row.
#[derive(Clone, Copy)]
struct Yarn {
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    corr_dims: [f32; 2],
    theta_scale: f32,
}

impl Yarn {
    /// cos and sin of the angle for pair `i0`, scaled by the magnitude factor.
    #[inline]
    fn cos_sin(&self, theta_extrap: f32, i0: usize) -> (f32, f32) {
        let theta_interp = self.freq_scale * theta_extrap;
        let mut theta = theta_interp;
        let mut mscale = self.attn_factor;
        if self.ext_factor != 0.0 {
            let [low, high] = self.corr_dims;
            let y = ((i0 / 2) as f32 - low) / (high - low).max(0.001);
            let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * (1.0 / self.freq_scale).ln();
        }
        (theta.cos() * mscale, theta.sin() * mscale)
    }
}

/// ggml's `ggml_rope_yarn_corr_dims`.
fn corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * PI)).ln() / (2.0 * freq_base.ln())
    };
    let start = dim(beta_fast).floor();
    let end = dim(beta_slow).ceil();
    [
        if start > 0.0 { start } else { 0.0 },
        if end < (n_dims - 1) as f32 {
            end
        } else {
            (n_dims - 1) as f32
        },
    ]
}

/// Runs one ROPE node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let pos = Tensor::src(ctx, 1)?;
    let ff = Tensor::opt_src(ctx, 2)?;
    let d = Tensor::dst(ctx)?;
    let p = ctx.dst;
    let n_dims = p.param_i32(1) as usize;
    let mode = p.param_i32(2);
    let freq_base = p.param_f32(5);
    let yarn = Yarn {
        freq_scale: p.param_f32(6),
        ext_factor: p.param_f32(7),
        attn_factor: p.param_f32(8),
        corr_dims: corr_dims(
            n_dims as i32,
            p.param_i32(4),
            freq_base,
            p.param_f32(9),
            p.param_f32(10),
        ),
        theta_scale: freq_base.powf(-2.0 / n_dims as f32),
    };
    let sections: [i32; 4] = p.op_params[11..15].try_into().unwrap_or([0; 4]);
    let multi = mode & rope_mode::MROPE != 0;
    let vision = mode == rope_mode::VISION;
    let ne0 = a.ne(0);
    let ne2 = a.ne(2);
    let n_cache = if vision { ne0 } else { n_dims };
    // SAFETY: positions lie in pos (its length was checked in supports).
    let position = |i: usize| unsafe { pos.read::<i32>(i * pos.nb(0)) } as f32;
    let factor = |i: usize| match &ff {
        // SAFETY: factors lie in freq_factors (length checked in supports).
        Some(f) => unsafe { f.read::<f32>(i * f.nb(0)) },
        None => 1.0,
    };
    par_range(ctx, a.nrows(), ne0 * 4, |rows| {
        let mut cache = vec![0f32; n_cache];
        let mut x = vec![0f32; ne0];
        let mut y = vec![0f32; ne0];
        let mut last_i2 = usize::MAX;
        for r in rows {
            let [i1, i2, i3] = a.row_index(r);
            if i2 != last_i2 {
                if multi {
                    let bases = [
                        position(i2),
                        position(i2 + ne2),
                        position(i2 + 2 * ne2),
                        position(i2 + 3 * ne2),
                    ];
                    mrope_cache(
                        &mut cache,
                        bases,
                        sections,
                        mode == rope_mode::IMROPE,
                        vision,
                        &yarn,
                        &factor,
                    );
                } else {
                    let mut theta = position(i2);
                    for i0 in (0..n_cache).step_by(2) {
                        let (c, s) = yarn.cos_sin(theta / factor(i0 / 2), i0);
                        cache[i0] = c;
                        cache[i0 + 1] = s;
                        theta *= yarn.theta_scale;
                    }
                }
                last_i2 = i2;
            }
            // SAFETY: in-bounds rows; dst is fresh and each worker writes its
            // own rows.
            unsafe { a.load_f32(a.row_offset(i1, i2, i3), a.nb(0), &mut x) };
            y.copy_from_slice(&x);
            let (n, offset, pairs_adjacent) = match mode {
                rope_mode::NORMAL => (n_dims, 1, true),
                rope_mode::VISION => (ne0, n_dims, false),
                _ => (n_dims, n_dims / 2, false),
            };
            for i0 in (0..n).step_by(2) {
                let ic = if pairs_adjacent { i0 } else { i0 / 2 };
                let (c, s) = (cache[i0], cache[i0 + 1]);
                let (x0, x1) = (x[ic], x[ic + offset]);
                y[ic] = x0 * c - x1 * s;
                y[ic + offset] = x0 * s + x1 * c;
            }
            // SAFETY: as above.
            unsafe { d.store_f32(d.row_offset(i1, i2, i3), d.nb(0), &y) };
        }
        Ok(())
    })
}

/// Fills the cos/sin cache of the multi-section modes (ggml's
/// `ggml_mrope_cache_init`): each pair takes its angle from the time,
/// height, width or extra position by section.
fn mrope_cache(
    cache: &mut [f32],
    bases: [f32; 4],
    sections: [i32; 4],
    interleaved: bool,
    independent: bool,
    yarn: &Yarn,
    factor: &dyn Fn(usize) -> f32,
) {
    let [s0, s1, s2, s3] = sections.map(|s| s.max(0) as usize);
    let sect_dims = (s0 + s1 + s2 + s3).max(1);
    let sec_w = s0 + s1;
    let sec_e = sec_w + s2;
    let mut theta = bases;
    for i0 in (0..cache.len()).step_by(2) {
        let sector = (i0 / 2) % sect_dims;
        if independent {
            if sector == 0 {
                theta[0] = bases[0];
            } else if sector == s0 {
                theta[1] = bases[1];
            } else if sector == sec_w {
                theta[2] = bases[2];
            } else if sector == sec_e {
                theta[3] = bases[3];
            }
        }
        let which = if interleaved {
            if sector % 3 == 1 && sector < 3 * s1 {
                1
            } else if sector % 3 == 2 && sector < 3 * s2 {
                2
            } else if sector % 3 == 0 && sector < 3 * s0 {
                0
            } else {
                3
            }
        } else if sector >= s0 && sector < sec_w {
            1
        } else if sector >= sec_w && sector < sec_w + s2 {
            2
        } else if sector >= sec_w + s2 {
            3
        } else {
            0
        };
        let (c, s) = yarn.cos_sin(theta[which] / factor(i0 / 2), i0);
        cache[i0] = c;
        cache[i0 + 1] = s;
        for t in theta.iter_mut() {
            *t *= yarn.theta_scale;
        }
    }
}
