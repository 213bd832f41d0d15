// Element-wise kernels: binary ops with broadcast (ADD SUB MUL DIV), the
// UNARY functions, the simple maps (SQR SQRT LOG SIN COS SCALE CLAMP FILL)
// and GLU. One work-item per destination element over a 1-D launch.
#include "common.hpp"

// x[0]: 0 add, 1 sub, 2 mul, 3 div. dst has src0's shape; src1 broadcasts.
KERNEL k_binary(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    if (idx >= nelements(d)) return;
    long i0, i1, i2, i3;
    unravel(idx, d.ne, i0, i1, i2, i3);
    float x = load(s0 + offset(t0, i0, i1, i2, i3), a.type[1]);
    float y = load(s1 + offset(t1, i0 % t1.ne[0], i1 % t1.ne[1], i2 % t1.ne[2], i3 % t1.ne[3]), a.type[2]);
    float r;
    switch (a.x[0]) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    default: r = x / y; break;
    }
    store(dst + offset(d, i0, i1, i2, i3), a.type[0], r);
}

static inline float gelu(float x) {
    const float c = 0.7978845608028654f;
    return 0.5f * x * (1.0f + sycl::tanh(c * x * (1.0f + 0.044715f * x * x)));
}
static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + sycl::erf(x * 0.70710678118654752f)); }
static inline float gelu_quick(float x) { return x * (1.0f / (1.0f + sycl::exp(-1.702f * x))); }
static inline float silu(float x) { return x / (1.0f + sycl::exp(-x)); }

// ggml's unary functions by UnaryOp code (0..21), and the simple maps
// (100 sqr, 101 sqrt, 102 log, 103 sin, 104 cos, 105 scale, 106 clamp,
// 107 fill) with their f32 parameters from op_params.
static inline float apply(int f, float x, const Args &a) {
    switch (f) {
    case 0: return sycl::fabs(x);
    case 1: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case 2: return -x;
    case 3: return x > 0.0f ? 1.0f : 0.0f;
    case 4: return sycl::tanh(x);
    case 5: return x > 0.0f ? x : sycl::expm1(x);
    case 6: return x > 0.0f ? x : 0.0f;
    case 7: return 1.0f / (1.0f + sycl::exp(-x));
    case 8: return gelu(x);
    case 9: return gelu_quick(x);
    case 10: return silu(x);
    case 11: return x * sycl::fmin(1.0f, sycl::fmax(0.0f, (x + 3.0f) / 6.0f));
    case 12: return sycl::fmin(1.0f, sycl::fmax(0.0f, (x + 3.0f) / 6.0f));
    case 13: return sycl::exp(x);
    case 14: return sycl::expm1(x);
    case 15: return x > 20.0f ? x : sycl::log1p(sycl::exp(x));
    case 16: return gelu_erf(x);
    case 17: {
        float alpha_n = op_f32(a, 1), alpha_p = op_f32(a, 2), beta = op_f32(a, 3), eps = op_f32(a, 4);
        return x > 0.0f ? alpha_p * x * x + beta * x : (sycl::expm1(sycl::fmin(x, eps)) - x) * alpha_n + beta * x;
    }
    case 18: return sycl::floor(x);
    case 19: return sycl::ceil(x);
    case 20: return sycl::round(x);
    case 21: return sycl::trunc(x);
    case 100: return x * x;
    case 101: return sycl::sqrt(x);
    case 102: return sycl::log(x);
    case 103: return sycl::sin(x);
    case 104: return sycl::cos(x);
    case 105: return x * op_f32(a, 0) + op_f32(a, 1);
    case 106: {
        float m = x < op_f32(a, 1) ? x : op_f32(a, 1);
        return m > op_f32(a, 0) ? m : op_f32(a, 0);
    }
    case 107: return op_f32(a, 0);
    default: return x;
    }
}

// x[0]: the function code of `apply`. dst and src0 have one shape.
KERNEL k_unary(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    if (idx >= nelements(d)) return;
    long i0, i1, i2, i3;
    unravel(idx, d.ne, i0, i1, i2, i3);
    float x = load(s0 + offset(t0, i0, i1, i2, i3), a.type[1]);
    store(dst + offset(d, i0, i1, i2, i3), a.type[0], apply((int)a.x[0], x, a));
}

// GLU: op[0] variant, op[1] swapped, op[2] alpha, op[3] limit; x[1] = 1 when
// src1 is absent (both halves come from each row of src0).
KERNEL k_glu(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    if (idx >= nelements(d)) return;
    long i0, i1, i2, i3;
    unravel(idx, d.ne, i0, i1, i2, i3);
    float x, g;
    if (a.x[1]) {
        long nc = d.ne[0];
        long xo = a.op[1] ? nc : 0, go = a.op[1] ? 0 : nc;
        x = load(s0 + offset(t0, i0 + xo, i1, i2, i3), a.type[1]);
        g = load(s0 + offset(t0, i0 + go, i1, i2, i3), a.type[1]);
    } else {
        x = load(s0 + offset(t0, i0, i1, i2, i3), a.type[1]);
        g = load(s1 + offset(t1, i0, i1, i2, i3), a.type[2]);
    }
    float r;
    switch (a.op[0]) {
    case 0: r = (x > 0.0f ? x : 0.0f) * g; break;
    case 1: r = gelu(x) * g; break;
    case 2: r = silu(x) * g; break;
    case 3: {
        float alpha = op_f32(a, 2), limit = op_f32(a, 3);
        float xc = sycl::fmin(x, limit);
        float gc = g < -limit ? -limit : (limit < g ? limit : g);
        r = xc / (1.0f + sycl::exp(-alpha * xc)) * (gc + 1.0f);
        break;
    }
    case 4: r = gelu_erf(x) * g; break;
    default: r = gelu_quick(x) * g; break;
    }
    store(dst + offset(d, i0, i1, i2, i3), a.type[0], r);
}
