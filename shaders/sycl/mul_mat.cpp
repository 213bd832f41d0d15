// MUL_MAT kernels: dst[m, n, i2, i3] = sum_k src0[k, m, i2/r2, i3/r3] *
// src1[k, n, i2, i3]. The path is chosen on the host (policy.rs):
// dequantize-mat-vec (k_dmmv), q8_1 activations + integer dot products
// (k_quantize_q8_1 + k_mmvq), the same over weights reordered to
// struct-of-arrays (k_reorder + k_mmvq_reordered), and a tiled GEMM
// (k_gemm, quantized weights first expanded by k_dequantize).
#include "common.hpp"

static inline float group_sum(float v) { return sycl::reduce_over_group(item().get_group(), v, sycl::plus<float>()); }

// Sum over one weight block `ib` of row `w` times plain column `y`.
static inline float block_dot_f32(const char *w, long ib, int type, const char *y, long nb10, int ty) {
    float s = 0.0f;
    long bs = block_size(type), k0 = ib * bs;
    if (type == T_Q4_0) {
        const char *b = w + ib * 18;
        float d = h2f(*(const unsigned short *)b);
        for (int j = 0; j < 16; j++) {
            unsigned char q = (unsigned char)b[2 + j];
            s += (float)((q & 0xF) - 8) * load(y + (k0 + j) * nb10, ty) + (float)((q >> 4) - 8) * load(y + (k0 + j + 16) * nb10, ty);
        }
        return s * d;
    }
    if (type == T_Q8_0) {
        const char *b = w + ib * 34;
        for (int j = 0; j < 32; j++) s += (float)(signed char)b[2 + j] * load(y + (k0 + j) * nb10, ty);
        return s * h2f(*(const unsigned short *)b);
    }
    if (type == T_Q4_K) {
        const unsigned char *b = (const unsigned char *)(w + ib * 144);
        float d = h2f(*(const unsigned short *)b), dmin = h2f(*(const unsigned short *)(b + 2));
        for (int c = 0; c < 4; c++) {
            int sc0, m0, sc1, m1;
            q4k_scale_min(2 * c, b + 4, sc0, m0);
            q4k_scale_min(2 * c + 1, b + 4, sc1, m1);
            float lo = 0.0f, hi = 0.0f, ylo = 0.0f, yhi = 0.0f;
            for (int l = 0; l < 32; l++) {
                unsigned char q = b[16 + 32 * c + l];
                float y0 = load(y + (k0 + 64 * c + l) * nb10, ty), y1 = load(y + (k0 + 64 * c + 32 + l) * nb10, ty);
                lo += (float)(q & 0xF) * y0;
                hi += (float)(q >> 4) * y1;
                ylo += y0;
                yhi += y1;
            }
            s += d * ((float)sc0 * lo + (float)sc1 * hi) - dmin * ((float)m0 * ylo + (float)m1 * yhi);
        }
        return s;
    }
    // f16 (and any plain type): bs == 1.
    return load(w + ib * type_size(type), type) * load(y + k0 * nb10, ty);
}

// Batch coordinates of group dim 0 (i2 fastest) and the src0 slice.
struct Batch {
    long i2, i3;
    const char *w;
};
static inline Batch batch(const Args &a, const char *s0, long b) {
    const Tensor &t0 = a.t[1], &t1 = a.t[2];
    Batch r;
    r.i2 = b % t1.ne[2];
    r.i3 = b / t1.ne[2];
    long r2 = t1.ne[2] / t0.ne[2], r3 = t1.ne[3] / t0.ne[3];
    r.w = s0 + (r.i2 / r2) * t0.nb[2] + (r.i3 / r3) * t0.nb[3];
    return r;
}

// One work-group per (batch, m); the work-items share the blocks of the row.
KERNEL k_dmmv(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    Batch bt = batch(a, s0, (long)it.get_group(0));
    long m = (long)it.get_group(1), lid = (long)it.get_local_id(2), wg = (long)it.get_local_range(2);
    const char *w = bt.w + m * t0.nb[1];
    long nblocks = t0.ne[0] / block_size(a.type[1]);
    for (long n = 0; n < t1.ne[1]; n++) {
        const char *y = s1 + n * t1.nb[1] + bt.i2 * t1.nb[2] + bt.i3 * t1.nb[3];
        float s = 0.0f;
        for (long ib = lid; ib < nblocks; ib += wg) s += block_dot_f32(w, ib, a.type[1], y, t1.nb[0], a.type[2]);
        s = group_sum(s);
        if (lid == 0) store(dst + offset(d, m, n, bt.i2, bt.i3), a.type[0], s);
    }
}

// src1 (any strides) to q8_1 blocks {half d, half sum, int8 q[32]} (36
// bytes), columns contiguous in (n, i2, i3) order; one work-item per block.
KERNEL k_quantize_q8_1(KARGS) {
    long idx = gid();
    const Tensor &t1 = a.t[2];
    long nb = t1.ne[0] / 32;
    if (idx >= nb * t1.ne[1] * t1.ne[2] * t1.ne[3]) return;
    long ib = idx % nb, col = idx / nb;
    long n = col % t1.ne[1], i2 = (col / t1.ne[1]) % t1.ne[2], i3 = col / (t1.ne[1] * t1.ne[2]);
    const char *y = s1 + n * t1.nb[1] + i2 * t1.nb[2] + i3 * t1.nb[3] + ib * 32 * t1.nb[0];
    float v[32], amax = 0.0f, sum = 0.0f;
    for (int j = 0; j < 32; j++) {
        v[j] = load(y + j * t1.nb[0], a.type[2]);
        amax = sycl::fmax(amax, sycl::fabs(v[j]));
        sum += v[j];
    }
    float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
    char *q = dst + idx * 36;
    *(unsigned short *)q = f2h(dd);
    *(unsigned short *)(q + 2) = f2h(sum);
    for (int j = 0; j < 32; j++) q[4 + j] = (signed char)sycl::round(v[j] * id);
}

// Dot of weight block ib with q8_1 blocks starting at `y` (one per 32).
static inline float block_dot_q8_1(const char *w, long ib, int type, const char *y) {
    if (type == T_Q4_0) {
        const char *b = w + ib * 18, *q8 = y + ib * 36;
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            unsigned char q = (unsigned char)b[2 + j];
            sumi += ((q & 0xF) - 8) * (int)(signed char)q8[4 + j] + ((q >> 4) - 8) * (int)(signed char)q8[20 + j];
        }
        return h2f(*(const unsigned short *)b) * h2f(*(const unsigned short *)q8) * (float)sumi;
    }
    if (type == T_Q8_0) {
        const char *b = w + ib * 34, *q8 = y + ib * 36;
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += (int)(signed char)b[2 + j] * (int)(signed char)q8[4 + j];
        return h2f(*(const unsigned short *)b) * h2f(*(const unsigned short *)q8) * (float)sumi;
    }
    // Q4_K: 8 sub-blocks of 32, each against one q8_1 block.
    const unsigned char *b = (const unsigned char *)(w + ib * 144);
    float d = h2f(*(const unsigned short *)b), dmin = h2f(*(const unsigned short *)(b + 2));
    float s = 0.0f;
    for (int j = 0; j < 8; j++) {
        const char *q8 = y + (ib * 8 + j) * 36;
        int sc, m, sumi = 0, sumq = 0;
        q4k_scale_min(j, b + 4, sc, m);
        const unsigned char *qs = b + 16 + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            int nib = (j & 1) ? (qs[l] >> 4) : (qs[l] & 0xF);
            int yq = (int)(signed char)q8[4 + l];
            sumi += nib * yq;
            sumq += yq;
        }
        float d8 = h2f(*(const unsigned short *)q8);
        s += d8 * (d * (float)sc * (float)sumi - dmin * (float)m * (float)sumq);
    }
    return s;
}

// One work-group per (batch, m); src2 = q8_1 activations of k_quantize_q8_1.
KERNEL k_mmvq(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    long b = (long)it.get_group(0);
    Batch bt = batch(a, s0, b);
    long m = (long)it.get_group(1), lid = (long)it.get_local_id(2), wg = (long)it.get_local_range(2);
    const char *w = bt.w + m * t0.nb[1];
    long nblocks = t0.ne[0] / block_size(a.type[1]);
    long col_bytes = t1.ne[0] / 32 * 36;
    for (long n = 0; n < t1.ne[1]; n++) {
        const char *y = s2 + (b * t1.ne[1] + n) * col_bytes;
        float s = 0.0f;
        for (long ib = lid; ib < nblocks; ib += wg) s += block_dot_q8_1(w, ib, a.type[1], y);
        s = group_sum(s);
        if (lid == 0) store(dst + offset(d, m, n, bt.i2, bt.i3), a.type[0], s);
    }
}

// Weights (one [K, M] matrix, dense rows) to struct-of-arrays in dst: all
// quants (16 or 32 bytes per block), then all f16 scales. One work-item per
// block, blocks in row-major order.
KERNEL k_reorder(KARGS) {
    long idx = gid();
    const Tensor &t0 = a.t[1];
    long nbr = t0.ne[0] / 32, total = nbr * t0.ne[1];
    if (idx >= total) return;
    const char *b = s0 + (idx / nbr) * t0.nb[1] + (idx % nbr) * type_size(a.type[1]);
    long qb = a.type[1] == T_Q4_0 ? 16 : 32;
    for (long j = 0; j < qb; j++) dst[idx * qb + j] = b[2 + j];
    *(unsigned short *)(dst + total * qb + idx * 2) = *(const unsigned short *)b;
}

// MMVQ over reordered weights (src3) for a single column: one work-group
// per m.
KERNEL k_mmvq_reordered(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    long m = (long)it.get_group(1), lid = (long)it.get_local_id(2), wg = (long)it.get_local_range(2);
    long nbr = t0.ne[0] / 32, total = nbr * t0.ne[1];
    bool q4 = a.type[1] == T_Q4_0;
    long qb = q4 ? 16 : 32;
    const char *qs = s3 + m * nbr * qb;
    const unsigned short *ds = (const unsigned short *)(s3 + total * qb) + m * nbr;
    float s = 0.0f;
    for (long ib = lid; ib < nbr; ib += wg) {
        const char *q8 = s2 + ib * 36;
        const char *q = qs + ib * qb;
        int sumi = 0;
        if (q4) {
            for (int j = 0; j < 16; j++) {
                unsigned char v = (unsigned char)q[j];
                sumi += ((v & 0xF) - 8) * (int)(signed char)q8[4 + j] + ((v >> 4) - 8) * (int)(signed char)q8[20 + j];
            }
        } else {
            for (int j = 0; j < 32; j++) sumi += (int)(signed char)q[j] * (int)(signed char)q8[4 + j];
        }
        s += h2f(ds[ib]) * h2f(*(const unsigned short *)q8) * (float)sumi;
    }
    s = group_sum(s);
    if (lid == 0) store(dst + offset(d, m, 0, 0, 0), a.type[0], s);
}

// src0 expanded to dense f32 [K, M, ne02, ne03] in dst; one work-item per element.
KERNEL k_dequantize(KARGS) {
    long idx = gid();
    const Tensor &t0 = a.t[1];
    if (idx >= nelements(t0)) return;
    long k, m, i2, i3;
    unravel(idx, t0.ne, k, m, i2, i3);
    const char *row = s0 + m * t0.nb[1] + i2 * t0.nb[2] + i3 * t0.nb[3];
    *(float *)(dst + idx * 4) = load_row(row, k, a.type[1], t0.nb[0]);
}

#define TM 4
#define TN 4

// Tiled GEMM: each work-item computes a TM x TN block of dst; range
// (batch, ceil(N / TN), ceil(M / TM)) rounded up to the work-group. src0 is
// plain (f32 or f16, any strides; quantized weights come dequantized).
KERNEL k_gemm(KARGS) {
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    Batch bt = batch(a, s0, (long)it.get_global_id(0));
    long n0 = (long)it.get_global_id(1) * TN, m0 = (long)it.get_global_id(2) * TM;
    long M = t0.ne[1], N = t1.ne[1], K = t0.ne[0];
    if (m0 >= M || n0 >= N) return;
    float acc[TM][TN] = {};
    const char *wr[TM];
    const char *yc[TN];
    for (int i = 0; i < TM; i++) wr[i] = bt.w + sycl::min(m0 + i, M - 1) * t0.nb[1];
    for (int j = 0; j < TN; j++) yc[j] = s1 + sycl::min(n0 + j, N - 1) * t1.nb[1] + bt.i2 * t1.nb[2] + bt.i3 * t1.nb[3];
    int tw = a.type[1], ty = a.type[2];
    if (tw == T_F32 && ty == T_F32 && t0.nb[0] == 4 && t1.nb[0] == 4) {
        for (long k = 0; k < K; k++) {
            float x[TM], y[TN];
            for (int i = 0; i < TM; i++) x[i] = ((const float *)wr[i])[k];
            for (int j = 0; j < TN; j++) y[j] = ((const float *)yc[j])[k];
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++) acc[i][j] += x[i] * y[j];
        }
    } else {
        for (long k = 0; k < K; k++) {
            float x[TM], y[TN];
            for (int i = 0; i < TM; i++) x[i] = load(wr[i] + k * t0.nb[0], tw);
            for (int j = 0; j < TN; j++) y[j] = load(yc[j] + k * t1.nb[0], ty);
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++) acc[i][j] += x[i] * y[j];
        }
    }
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++)
            if (m0 + i < M && n0 + j < N) store(dst + offset(d, m0 + i, n0 + j, bt.i2, bt.i3), a.type[0], acc[i][j]);
}
