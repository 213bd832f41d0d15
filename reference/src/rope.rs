//! ROPE: normal, NeoX, multi-section (MROPE, IMROPE) and vision modes, with
//! YaRN extrapolation mixing and optional frequency factors, as ggml's
//! `ggml_compute_forward_rope_flt`.

use backplane_abi::rope_mode;

use super::Node;
use backplane_runtime::ComputeError;

/// ggml_rope_yarn_corr_dims: the dims where YaRN's ramp starts and ends.
fn yarn_corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let corr_dim = |n_rot: f32| -> f32 {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
            / (2.0 * freq_base.ln())
    };
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    [start.max(0.0), end.min(n_dims as f32 - 1.0)]
}

/// Scalars shared by every angle of one ROPE node.
struct Yarn {
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    corr_dims: [f32; 2],
}

impl Yarn {
    /// cos and sin (times the magnitude scale) for the pair starting at
    /// `i0` whose unscaled angle is `theta_extrap` (ggml's rope_yarn).
    fn cos_sin(&self, theta_extrap: f32, i0: i64) -> (f64, f64) {
        let theta_interp = self.freq_scale * theta_extrap;
        let mut theta = theta_interp;
        let mut mscale = self.attn_factor as f64;
        if self.ext_factor != 0.0 {
            let [low, high] = self.corr_dims;
            let y = ((i0 / 2) as f32 - low) / (high - low).max(0.001);
            let ramp = 1.0 - y.clamp(0.0, 1.0);
            let ramp_mix = ramp * self.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * (1.0 / self.freq_scale as f64).ln();
        }
        let t = theta as f64;
        (t.cos() * mscale, t.sin() * mscale)
    }
}

/// Rotates each row of a `[ne0, heads, tokens, batch]` tensor by its token's
/// position(s); the dims past `n_dims` pass through (except in vision mode,
/// which rotates the whole row in two halves).
pub(crate) fn rope(n: &Node) -> Result<(), ComputeError> {
    let (a, pos) = (n.src(0)?, n.src(1)?);
    let ff = n.opt(2);
    let n_dims = n.p_i32(1);
    let mode = n.p_i32(2);
    let n_ctx_orig = n.p_i32(4);
    let [
        freq_base,
        freq_scale,
        ext_factor,
        attn_factor,
        beta_fast,
        beta_slow,
    ] = [5, 6, 7, 8, 9, 10].map(|i| n.p_f32(i));
    let sections = [11, 12, 13, 14].map(|i| n.p_i32(i));
    let [ne0, ne1, ne2, ne3] = a.ne();

    let multi = mode & rope_mode::MROPE != 0;
    let is_vision = mode == rope_mode::VISION;
    let is_imrope = mode == rope_mode::IMROPE;
    let sect_dims: i32 = sections.iter().sum();
    let factor = |i: i64| -> f32 {
        match &ff {
            Some(f) if i < f.ne()[0] => f.get(i, 0, 0, 0) as f32,
            // Past n_dims / 2 (outside vision mode) the angle is never used.
            _ => 1.0,
        }
    };

    let yarn = Yarn {
        freq_scale,
        ext_factor,
        attn_factor,
        corr_dims: yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow),
    };
    let theta_scale = freq_base.powf(-2.0 / n_dims as f32);
    let sec_w = sections[0] + sections[1];
    let sec_e = sec_w + sections[2];

    let mut out = Vec::with_capacity(a.nelements() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            // The angle cache: (cos, sin) for every pair start i0 in 0..ne0.
            let mut cache = Vec::with_capacity((ne0 / 2 + 1) as usize);
            if !multi {
                let mut theta = pos.int_at([i2, 0, 0, 0]) as f32;
                for i0 in (0..ne0).step_by(2) {
                    cache.push(yarn.cos_sin(theta / factor(i0 / 2), i0));
                    theta *= theta_scale;
                }
            } else {
                let base = [0, 1, 2, 3].map(|k| pos.int_at([i2 + k * ne2, 0, 0, 0]) as f32);
                let [mut t_t, mut t_h, mut t_w, mut t_e] = base;
                for i0 in (0..ne0).step_by(2) {
                    let sector = ((i0 / 2) % sect_dims as i64) as i32;
                    if is_vision {
                        // Each section restarts its angle.
                        if sector == 0 {
                            t_t = base[0];
                        } else if sector == sections[0] {
                            t_h = base[1];
                        } else if sector == sec_w {
                            t_w = base[2];
                        } else if sector == sec_e {
                            t_e = base[3];
                        }
                    }
                    let theta = if is_imrope {
                        if sector % 3 == 1 && sector < 3 * sections[1] {
                            t_h
                        } else if sector % 3 == 2 && sector < 3 * sections[2] {
                            t_w
                        } else if sector % 3 == 0 && sector < 3 * sections[0] {
                            t_t
                        } else {
                            t_e
                        }
                    } else if sector >= sections[0] && sector < sec_w {
                        t_h
                    } else if sector >= sec_w && sector < sec_e {
                        t_w
                    } else if sector >= sec_e {
                        t_e
                    } else {
                        t_t
                    };
                    cache.push(yarn.cos_sin(theta / factor(i0 / 2), i0));
                    t_t *= theta_scale;
                    t_w *= theta_scale;
                    t_h *= theta_scale;
                    t_e *= theta_scale;
                }
            }
            for i1 in 0..ne1 {
                let x = a.row(i1, i2, i3);
                let mut y = x.clone();
                // (number of pairs, distance between a pair's two elements,
                // element index of pair k's first element)
                let (pairs, offset, first): (i64, i64, fn(i64) -> i64) = match mode {
                    rope_mode::NORMAL => (n_dims as i64 / 2, 1, |k| 2 * k),
                    rope_mode::VISION => (ne0 / 2, n_dims as i64, |k| k),
                    _ => (n_dims as i64 / 2, n_dims as i64 / 2, |k| k),
                };
                for k in 0..pairs {
                    let (c, s) = cache[k as usize];
                    let j = first(k) as usize;
                    let (x0, x1) = (x[j], x[j + offset as usize]);
                    y[j] = x0 * c - x1 * s;
                    y[j + offset as usize] = x0 * s + x1 * c;
                }
                out.extend(y);
            }
        }
    }
    n.store(&out)
}
