//! The scale searches of the K-quant quantizers, as ggml's
//! `make_qx_quants`, `make_q3_quants` and `make_qkx2_quants`
//! (ggml-quants.c), with the same floating-point order.

use super::{GROUP_MAX_EPS, nearest_int, signed_absmax};

/// ggml's `make_qx_quants`: symmetric quantization of `x` to the signed range
/// `-nmax..nmax`, stored in `l` offset by `nmax`, returning the scale.
///
/// `rmse_type` 0 takes the plain `max / -nmax` scale; otherwise the scale is
/// refined by least squares with weights `qw` (or, without `qw`, weights
/// chosen by `rmse_type`: 1 → x², 2 → 1, 3 → |x|, else √|x|) over 18 nearby
/// trial scales. A negative `rmse_type` returns after the first refinement.
pub(super) fn make_qx_quants(
    nmax: i32,
    x: &[f32],
    l: &mut [i8],
    mut rmse_type: i32,
    qw: Option<&[f32]>,
) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for (li, &v) in l.iter_mut().zip(x) {
            let q = nearest_int(iscale * v);
            *li = (nmax + q.clamp(-nmax, nmax - 1)) as i8;
        }
        return 1.0 / iscale;
    }
    let return_early = rmse_type < 0;
    if return_early {
        rmse_type = -rmse_type;
    }
    let weight = |i: usize| -> f32 {
        match qw {
            Some(w) => w[i],
            None => match rmse_type {
                1 => x[i] * x[i],
                2 => 1.0,
                3 => x[i].abs(),
                _ => x[i].abs().sqrt(),
            },
        }
    };
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (i, (li, &v)) in l.iter_mut().zip(x).enumerate() {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *li = (q + nmax) as i8;
        let w = weight(i);
        let qf = q as f32;
        sumlx += w * v * qf;
        suml2 += w * qf * qf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 {
            0.5 * (scale + 1.0 / iscale)
        } else {
            1.0 / iscale
        };
    }
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for (i, &v) in x.iter().enumerate() {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = weight(i);
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                let q = nearest_int(iscale * v);
                *li = (nmax + q.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants`: symmetric quantization to `-nmax..nmax`, stored
/// in `l` offset by `nmax`. With `do_rmse` the quants are improved one at a
/// time (up to 5 passes) to minimise the x²-weighted squared error, and the
/// least-squares scale is returned.
pub(super) fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8], do_rmse: bool) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    if do_rmse {
        let mut sumlx = 0.0f32;
        let mut suml2 = 0.0f32;
        for (li, &v) in l.iter_mut().zip(x) {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
            *li = q as i8;
            let w = v * v;
            sumlx += w * v * q as f32;
            suml2 += w * q as f32 * q as f32;
        }
        for _ in 0..5 {
            let mut n_changed = 0;
            for (li, &v) in l.iter_mut().zip(x) {
                let w = v * v;
                let cur = *li as f32;
                let mut slx = sumlx - w * v * cur;
                if slx > 0.0 {
                    let mut sl2 = suml2 - w * cur * cur;
                    let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                    if new_l != *li as i32 {
                        slx += w * v * new_l as f32;
                        sl2 += w * new_l as f32 * new_l as f32;
                        if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                            *li = new_l as i8;
                            sumlx = slx;
                            suml2 = sl2;
                            n_changed += 1;
                        }
                    }
                }
            }
            if n_changed == 0 {
                break;
            }
        }
        for li in l.iter_mut() {
            *li += nmax as i8;
        }
        return if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    }
    for (li, &v) in l.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *li = (q + nmax) as i8;
    }
    1.0 / iscale
}

/// ggml's `make_qkx2_quants`: asymmetric quantization `x ≈ scale * l - min`
/// with `l` in `0..=nmax`, searching `nstep + 1` trial scales
/// `(nmax + rmin + rdelta * is) / (max - min)` for the lowest weighted error
/// (absolute error with `use_mad`, squared otherwise). Returns
/// `(scale, min)` where `min >= 0` is the amount subtracted.
///
/// `laux` is scratch of the same length as `x`.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let mut sum_l = 0.0f32;
        let mut sum_l2 = 0.0f32;
        let mut sum_xl = 0.0f32;
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let qf = q as f32;
            sum_l += w * qf;
            sum_l2 += w * qf * qf;
            sum_xl += w * qf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}
