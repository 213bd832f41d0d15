// Element-wise functions of one tensor: every UNARY function, SQR, SQRT,
// LOG, SIN, COS, SCALE (x * p0 + p1), CLAMP (to [p0, p1]) and FILL (p0),
// selected by OP_<NAME>. One invocation per element; strides and offsets
// are in elements, math is in f32. INPLACE: the destination is src0.

#include "common/index"
#include "common/activations"

struct Params {
    n: u32,
    ne0: u32, ne1: u32, ne2: u32,
    off0: u32, s00: u32, s01: u32, s02: u32, s03: u32,
    offd: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    p0: f32, p1: f32, p2: f32, p3: f32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
#ifdef INPLACE
@group(0) @binding(1) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

// Round half away from zero (C roundf); WGSL's round() is half to even.
fn round_away(x: f32) -> f32 {
    let t = trunc(x);
    return select(t, t + sign(x), abs(x - t) >= 0.5);
}

fn apply(x: f32) -> f32 {
#ifdef OP_ABS
    return abs(x);
#elif defined(OP_SGN)
    return select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0);
#elif defined(OP_NEG)
    return -x;
#elif defined(OP_STEP)
    return select(0.0, 1.0, x > 0.0);
#elif defined(OP_TANH)
    return tanh_safe(x);
#elif defined(OP_ELU)
    return select(expm1_f32(x), x, x > 0.0);
#elif defined(OP_RELU)
    return select(0.0, x, x > 0.0);
#elif defined(OP_SIGMOID)
    return sigmoid_f32(x);
#elif defined(OP_GELU)
    return gelu_f32(x);
#elif defined(OP_GELU_QUICK)
    return gelu_quick_f32(x);
#elif defined(OP_SILU)
    return silu_f32(x);
#elif defined(OP_HARDSWISH)
    return x * min(1.0, max(0.0, (x + 3.0) / 6.0));
#elif defined(OP_HARDSIGMOID)
    return min(1.0, max(0.0, (x + 3.0) / 6.0));
#elif defined(OP_EXP)
    return exp(x);
#elif defined(OP_EXPM1)
    return expm1_f32(x);
#elif defined(OP_SOFTPLUS)
    return softplus_f32(x);
#elif defined(OP_GELU_ERF)
    return gelu_erf_f32(x);
#elif defined(OP_XIELU)
    // p0 = alpha_n, p1 = alpha_p, p2 = beta, p3 = eps (as ggml_xielu stores them).
    if (x > 0.0) {
        return p.p1 * x * x + p.p2 * x;
    }
    return (expm1_f32(min(x, p.p3)) - x) * p.p0 + p.p2 * x;
#elif defined(OP_FLOOR)
    return floor(x);
#elif defined(OP_CEIL)
    return ceil(x);
#elif defined(OP_ROUND)
    return round_away(x);
#elif defined(OP_TRUNC)
    return trunc(x);
#elif defined(OP_SQR)
    return x * x;
#elif defined(OP_SQRT)
    return sqrt(x);
#elif defined(OP_LOG)
    return log(x);
#elif defined(OP_SIN)
    return sin(x);
#elif defined(OP_COS)
    return cos(x);
#elif defined(OP_SCALE)
    return x * p.p0 + p.p1;
#elif defined(OP_CLAMP)
    // ggml: MAX(MIN(x, max), min), so a NaN input becomes max.
    let m = select(p.p1, x, x < p.p1);
    return select(p.p0, m, m > p.p0);
#elif defined(OP_FILL)
    return p.p0;
#else
#error unary.wgsl: no OP_ variant defined
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    let i_a = p.off0 + c.x * p.s00 + c.y * p.s01 + c.z * p.s02 + c.w * p.s03;
#ifdef OP_FILL
    let v = apply(0.0);
#else
    let v = apply(f32(src0[i_a]));
#endif
#ifdef INPLACE
    src0[i_a] = SRC0_TYPE(v);
#else
    dst[p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3] = DST_TYPE(v);
#endif
}
