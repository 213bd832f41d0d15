// FLASH_ATTN_EXT: softmax(scale * q.k (softcapped) + slope * mask) v with
// optional sinks, one work-group per (query row, head, batch); the items
// split the head dimensions, reduce each score across the group and keep
// an online softmax. K/V any type load_row reads (f32, f16, bf16, q4_0,
// q8_0). Result [Dv, heads, n_q, batch].
#include "common.hpp"

#define FA_WG 32
#define FA_MAX_PER_ITEM 8 // head dims up to FA_WG * 8 = 256

static inline float group_sum(float v) { return sycl::reduce_over_group(item().get_group(), v, sycl::plus<float>()); }

static inline float alibi_slope(float max_bias, long h, long n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    long n_head_log2 = 1L << (long)sycl::floor(sycl::log2((float)n_head));
    float m0 = sycl::pow(2.0f, -max_bias / (float)n_head_log2);
    float m1 = sycl::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    return h < n_head_log2 ? sycl::pown(m0, (int)(h + 1)) : sycl::pown(m1, (int)(2 * (h - n_head_log2) + 1));
}

// s0 q, s1 k, s2 v, s3 mask (x[0] = 1 when present); sinks pointer in the
// dst slot's neighbour: x[1] = 1 when present and `sinks` holds them.
// op[0] scale, op[1] max_bias, op[2] softcap.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void k_flash_attn(char *dst, const char *s0, const char *s1, const char *s2, const char *s3, const char *sinks, Args a) {
    auto it = item();
    const Tensor &d = a.t[0], &tq = a.t[1], &tk = a.t[2], &tv = a.t[3], &tm = a.t[4];
    long heads = tq.ne[2], n_q = tq.ne[1];
    long g = (long)it.get_group(1);
    long h = g % heads, iq = (g / heads) % n_q, i3 = g / (heads * n_q);
    long lid = (long)it.get_local_id(2);
    long D = tq.ne[0], Dv = tv.ne[0], n_kv = tk.ne[1];
    long ik2 = h / (heads / tk.ne[2]), ik3 = i3 / (tq.ne[3] / tk.ne[3]);
    float scale = op_f32(a, 0), softcap = op_f32(a, 2), slope = alibi_slope(op_f32(a, 1), h, heads);
    float q[FA_MAX_PER_ITEM], acc[FA_MAX_PER_ITEM];
    for (int j = 0; j < FA_MAX_PER_ITEM; j++) {
        long e = lid + j * FA_WG;
        q[j] = e < D ? load(s0 + offset(tq, e, iq, h, i3), a.type[1]) : 0.0f;
        acc[j] = 0.0f;
    }
    const char *mrow = a.x[0] ? s3 + offset(tm, 0, iq, h % tm.ne[2], i3 % tm.ne[3]) : nullptr;
    float M = -std::numeric_limits<float>::infinity(), S = 0.0f;
    for (long j = 0; j < n_kv; j++) {
        float mv = mrow ? slope * load(mrow + j * tm.nb[0], a.type[4]) : 0.0f;
        if (mv == -std::numeric_limits<float>::infinity()) continue;
        const char *krow = s1 + j * tk.nb[1] + ik2 * tk.nb[2] + ik3 * tk.nb[3];
        float part = 0.0f;
        for (int e = 0; e < FA_MAX_PER_ITEM; e++) {
            long i = lid + e * FA_WG;
            if (i < D) part += q[e] * load_row(krow, i, a.type[2], tk.nb[0]);
        }
        float sc = group_sum(part) * scale;
        if (softcap != 0.0f) sc = softcap * sycl::tanh(sc / softcap);
        float l = sc + mv;
        float Mn = sycl::fmax(M, l), ms = sycl::exp(M - Mn), vs = sycl::exp(l - Mn);
        S = S * ms + vs;
        const char *vrow = s2 + j * tv.nb[1] + ik2 * tv.nb[2] + ik3 * tv.nb[3];
        for (int e = 0; e < FA_MAX_PER_ITEM; e++) {
            long i = lid + e * FA_WG;
            acc[e] = acc[e] * ms + (i < Dv ? vs * load_row(vrow, i, a.type[3], tv.nb[0]) : 0.0f);
        }
        M = Mn;
    }
    if (a.x[1]) {
        float sink = *(const float *)(sinks + h * 4);
        float Mn = sycl::fmax(M, sink), ms = sycl::exp(M - Mn);
        S = S * ms + sycl::exp(sink - Mn);
        for (int e = 0; e < FA_MAX_PER_ITEM; e++) acc[e] *= ms;
    }
    float inv = S > 0.0f ? 1.0f / S : 0.0f;
    for (int e = 0; e < FA_MAX_PER_ITEM; e++) {
        long i = lid + e * FA_WG;
        if (i < Dv) store(dst + offset(d, i, h, iq, i3), a.type[0], acc[e] * inv);
    }
}
