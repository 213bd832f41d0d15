// The angle of a rotated pair, as ggml_compute_forward_rope_flt computes
// it, shared by rope.wgsl and the mat-vec that rotates its own rows
// (mul_mat_vec.wgsl with EPILOGUE_ROPE). The includer's uniform `p`
// holds theta_scale, freq_scale, ext_factor, mscale, corr_low, corr_high
// and, with HAS_FF, off_ff, sff and n_ff; HAS_FF: it declares `ff`
// (array<f32>, the frequency factors).

// `base * theta_scale^steps`, one multiplication at a time as the reference.
fn powered(base: f32, steps: u32) -> f32 {
    var t = base;
    for (var j = 0u; j < steps; j++) {
        t *= p.theta_scale;
    }
    return t;
}

// x reduced to [-pi, pi] (Cody-Waite with a 3-part 2*pi), so that cos and
// sin of large angles keep their accuracy.
fn reduce_angle(x: f32) -> f32 {
    let n = round(x * 0.15915494309189535);
    return ((x - n * 6.28125) - n * 1.9353071693331003e-3) - n * 1.0253131677018246e-11;
}

// cos and sin (times mscale) of pair k whose unscaled angle is
// theta_extrap: divided by the pair's frequency factor, then YaRN's mix
// of interpolation and extrapolation.
fn rope_cos_sin(theta_extrap_in: f32, k: u32) -> vec2<f32> {
    var theta_extrap = theta_extrap_in;
#ifdef HAS_FF
    if (k < p.n_ff) {
        theta_extrap = theta_extrap / ff[p.off_ff + k * p.sff];
    }
#endif
    let theta_interp = p.freq_scale * theta_extrap;
    var theta = theta_interp;
    if (p.ext_factor != 0.0) {
        let y = (f32(k) - p.corr_low) / max(p.corr_high - p.corr_low, 0.001);
        let ramp_mix = (1.0 - clamp(y, 0.0, 1.0)) * p.ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
    }
    let t = reduce_angle(theta);
    return vec2<f32>(cos(t) * p.mscale, sin(t) * p.mscale);
}
