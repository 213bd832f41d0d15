// Row-wise kernels: NORM / RMS_NORM / L2_NORM, SOFT_MAX (scale, mask,
// ALiBi, sinks), and ROPE (normal, NeoX, YaRN, frequency factors).
// Norms and softmax run one work-group per row over a (1, rows, wg) range.
#include "common.hpp"

static inline float group_sum(float v) { return sycl::reduce_over_group(item().get_group(), v, sycl::plus<float>()); }
static inline float group_max(float v) { return sycl::reduce_over_group(item().get_group(), v, sycl::maximum<float>()); }

// x[0]: 0 NORM, 1 RMS_NORM, 2 L2_NORM; op[0] eps.
KERNEL k_norm(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    long row = (long)it.get_group(1);
    long i1 = row % t0.ne[1], i2 = (row / t0.ne[1]) % t0.ne[2], i3 = row / (t0.ne[1] * t0.ne[2]);
    const char *src = s0 + offset(t0, 0, i1, i2, i3);
    char *out = dst + offset(d, 0, i1, i2, i3);
    long n = t0.ne[0], lid = (long)it.get_local_id(2), wg = (long)it.get_local_range(2);
    float eps = op_f32(a, 0);
    float mean = 0.0f;
    if (a.x[0] == 0) {
        float s = 0.0f;
        for (long i = lid; i < n; i += wg) s += load(src + i * t0.nb[0], a.type[1]);
        mean = group_sum(s) / (float)n;
    }
    float sq = 0.0f;
    for (long i = lid; i < n; i += wg) {
        float v = load(src + i * t0.nb[0], a.type[1]) - mean;
        sq += v * v;
    }
    sq = group_sum(sq);
    float scale;
    if (a.x[0] == 2) {
        scale = 1.0f / sycl::fmax(sycl::sqrt(sq), eps);
    } else {
        scale = 1.0f / sycl::sqrt(sq / (float)n + eps);
    }
    for (long i = lid; i < n; i += wg) {
        store(out + i * d.nb[0], a.type[0], (load(src + i * t0.nb[0], a.type[1]) - mean) * scale);
    }
}

static inline float alibi_slope(float max_bias, long h, long n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    long n_head_log2 = 1L << (long)sycl::floor(sycl::log2((float)n_head));
    float m0 = sycl::pow(2.0f, -max_bias / (float)n_head_log2);
    float m1 = sycl::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return h < n_head_log2 ? sycl::pown(m0, (int)(h + 1)) : sycl::pown(m1, (int)(2 * (h - n_head_log2) + 1));
}

// op[0] scale, op[1] max_bias; src1 mask (optional, x[0] = 1 when present),
// src2 sinks (optional, x[1] = 1 when present).
KERNEL k_soft_max(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1], &tm = a.t[2], &ts = a.t[3];
    long row = (long)it.get_group(1);
    long i1 = row % t0.ne[1], i2 = (row / t0.ne[1]) % t0.ne[2], i3 = row / (t0.ne[1] * t0.ne[2]);
    const char *src = s0 + offset(t0, 0, i1, i2, i3);
    const char *mrow = a.x[0] ? s1 + offset(tm, 0, i1, i2 % tm.ne[2], i3 % tm.ne[3]) : nullptr;
    char *out = dst + offset(d, 0, i1, i2, i3);
    long n = t0.ne[0], lid = (long)it.get_local_id(2), wg = (long)it.get_local_range(2);
    float scale = op_f32(a, 0), slope = alibi_slope(op_f32(a, 1), i2, t0.ne[2]);
    auto logit = [&](long i) {
        float v = load(src + i * t0.nb[0], a.type[1]) * scale;
        if (mrow) v += slope * load(mrow + i * tm.nb[0], a.type[2]);
        return v;
    };
    float sink = a.x[1] ? load(s2 + i2 * ts.nb[0], T_F32) : -std::numeric_limits<float>::infinity();
    float m = -std::numeric_limits<float>::infinity();
    for (long i = lid; i < n; i += wg) m = sycl::fmax(m, logit(i));
    m = sycl::fmax(group_max(m), sink);
    float s = 0.0f;
    for (long i = lid; i < n; i += wg) s += sycl::exp(logit(i) - m);
    s = group_sum(s);
    if (a.x[1]) s += sycl::exp(sink - m);
    float inv = 1.0f / s;
    for (long i = lid; i < n; i += wg) store(out + i * d.nb[0], a.type[0], sycl::exp(logit(i) - m) * inv);
}

// ROPE, normal (op[2] = 0) or NeoX (2): one work-item per pair k of each
// row, over (rows, ceil(ne0 / 2)) laid out 1-D. op[1] n_dims, op[5..11]
// freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
// x[0] = 1 with frequency factors (src2); x[1..3] YaRN corr dims as f32 bits.
KERNEL k_rope(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &tp = a.t[2], &tf = a.t[3];
    long half = (t0.ne[0] + 1) / 2;
    long rows = t0.ne[1] * t0.ne[2] * t0.ne[3];
    if (idx >= rows * half) return;
    long k = idx % half, row = idx / half;
    long i1 = row % t0.ne[1], i2 = (row / t0.ne[1]) % t0.ne[2], i3 = row / (t0.ne[1] * t0.ne[2]);
    const char *src = s0 + offset(t0, 0, i1, i2, i3);
    char *out = dst + offset(d, 0, i1, i2, i3);
    long n_dims = a.op[1];
    if (2 * k >= n_dims) {
        for (long e = 2 * k; e < 2 * k + 2 && e < t0.ne[0]; e++) {
            store(out + e * d.nb[0], a.type[0], load(src + e * t0.nb[0], a.type[1]));
        }
        return;
    }
    float freq_base = op_f32(a, 5), freq_scale = op_f32(a, 6), ext_factor = op_f32(a, 7), attn_factor = op_f32(a, 8);
    float low = sycl::bit_cast<float>((int)a.x[1]), high = sycl::bit_cast<float>((int)a.x[2]);
    float pos = (float)*(const int *)(s1 + i2 * tp.nb[0]);
    float theta_scale = sycl::pow(freq_base, -2.0f / (float)n_dims);
    float theta_extrap = pos * sycl::pow(theta_scale, (float)k);
    if (a.x[0] && k < tf.ne[0]) theta_extrap /= load(s2 + k * tf.nb[0], T_F32);
    float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp, mscale = attn_factor;
    if (ext_factor != 0.0f) {
        float y = ((float)k - low) / sycl::fmax(0.001f, high - low);
        float ramp_mix = (1.0f - sycl::clamp(y, 0.0f, 1.0f)) * ext_factor;
        theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * sycl::log(1.0f / freq_scale);
    }
    float c = sycl::cos(theta) * mscale, s = sycl::sin(theta) * mscale;
    long j0 = a.op[2] == 2 ? k : 2 * k;
    long j1 = a.op[2] == 2 ? k + n_dims / 2 : 2 * k + 1;
    float x0 = load(src + j0 * t0.nb[0], a.type[1]), x1 = load(src + j1 * t0.nb[0], a.type[1]);
    store(out + j0 * d.nb[0], a.type[0], x0 * c - x1 * s);
    store(out + j1 * d.nb[0], a.type[0], x0 * s + x1 * c);
}
