// MUL_MAT kernels: dst[m, n, i2, i3] = sum_k src0[k, m, i2/r2, i3/r3] *
// src1[k, n, i2, i3]. The path is chosen on the host (policy.rs):
// dequantize-mat-vec (k_dmmv), q8_1 activations + integer dot products
// (k_quantize_q8_1 + k_mmvq), the same over weights reordered to
// struct-of-arrays (k_reorder + k_mmvq_reordered; k_unreorder for weights
// stored reordered that another path reads), and a GEMM tiled in
// local memory (k_gemm, k_gemm_narrow; quantized weights are dequantized
// tile by tile as they are loaded).
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

// The inverse of k_reorder: reordered weights (src0, one [K, M] matrix as
// a `<device>_reorder` buffer stores them) back to ggml's blocks in dst.
// One work-item per block.
KERNEL k_unreorder(KARGS) {
    long idx = gid();
    const Tensor &t0 = a.t[1];
    long total = t0.ne[0] / 32 * t0.ne[1];
    if (idx >= total) return;
    long qb = a.type[1] == T_Q4_0 ? 16 : 32;
    char *b = dst + idx * (qb + 2);
    for (long j = 0; j < qb; j++) b[2 + j] = s0[idx * qb + j];
    *(unsigned short *)b = *(const unsigned short *)(s0 + total * qb + idx * 2);
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

// Tiled GEMM. A work-group covers a BM x BN tile of dst with G = GMS * GNS
// sub-blocks of TM x TN outputs; each sub-block is computed by SG lanes
// (local dim 2, the dimension the CPU compiler vectorizes) that split K
// between them, so every load is a run of consecutive floats, and are
// summed at the end. Per KC-slice of K the group first stages its weight
// rows in local memory, dequantized once for the whole tile (load_row:
// plain types with any strides, dense quantized rows), then every lane
// reads activations straight from global memory (any plain type and
// strides) while its slice of the weights is hot in cache. Groups are laid
// out (batch, M tiles, N tiles): consecutive groups share weight rows.
#define SG 8
#define KC 128

template <int TM, int TN, int GMS, int GNS>
static inline void gemm_tiled(char *dst, const char *s0, const char *s1, const Args &a, float *As, float *Red) {
    constexpr int BM = GMS * TM, BN = GNS * TN, G = GMS * GNS, NI = G * SG;
    auto it = item();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    Batch bt = batch(a, s0, (long)it.get_group(0));
    const long M = t0.ne[1], N = t1.ne[1], K = t0.ne[0];
    const long mt = (long)it.get_group(1) * BM, nt = (long)it.get_group(2) * BN;
    const int lane = (int)it.get_local_id(2), g = (int)it.get_local_id(1), lid = g * SG + lane;
    const int gm = g % GMS, gn = g / GMS;
    const int tw = a.type[1], ty = a.type[2];
    const long nb00 = t0.nb[0], nb10 = t1.nb[0];
    const bool wf32 = tw == T_F32 && nb00 == 4, yf32 = ty == T_F32 && nb10 == 4;
    const char *yc[TN];
    for (int j = 0; j < TN; j++)
        yc[j] = s1 + sycl::min(nt + gn * TN + j, N - 1) * t1.nb[1] + bt.i2 * t1.nb[2] + bt.i3 * t1.nb[3];
    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    auto grp = it.get_group();
    for (long k0 = 0; k0 < K; k0 += KC) {
        const long kn = sycl::min((long)KC, K - k0);
        for (int e = lid; e < BM * KC; e += NI) {
            int r = e / KC, kk = e % KC;
            const char *row = bt.w + sycl::min(mt + r, M - 1) * t0.nb[1];
            float v = 0.0f;
            if (kk < kn) v = wf32 ? ((const float *)row)[k0 + kk] : load_row(row, k0 + kk, tw, nb00);
            As[e] = v;
        }
        sycl::group_barrier(grp);
        const float *xa = As + gm * TM * KC;
        for (int kk = lane; kk < kn; kk += SG) {
            float x[TM], y[TN];
            for (int i = 0; i < TM; i++) x[i] = xa[i * KC + kk];
            for (int j = 0; j < TN; j++) y[j] = yf32 ? ((const float *)yc[j])[k0 + kk] : load(yc[j] + (k0 + kk) * nb10, ty);
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++) acc[i][j] = sycl::fma(x[i], y[j], acc[i][j]);
        }
        sycl::group_barrier(grp);
    }
    // Sum the lanes of each sub-block through local memory.
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++) Red[((g * TM + i) * TN + j) * SG + lane] = acc[i][j];
    sycl::group_barrier(grp);
    for (int o = lane; o < TM * TN; o += SG) {
        int i = o / TN, j = o % TN;
        long m = mt + gm * TM + i, n = nt + gn * TN + j;
        const float *p = Red + (g * TM * TN + o) * SG;
        float v = 0.0f;
        for (int l = 0; l < SG; l++) v += p[l];
        if (m < M && n < N) store(dst + offset(d, m, n, bt.i2, bt.i3), a.type[0], v);
    }
}

// Tile shapes; the host side (ops/matmul.rs) mirrors them.
#define GEMM_TM 4
#define GEMM_TN 2
#define GEMM_GMS 4
#define GEMM_GNS 8

// The tiled GEMM for any N: 16 x 16 tiles of 32 sub-blocks of 4 x 2.
KERNEL k_gemm(KARGS) {
    constexpr int BM = GEMM_GMS * GEMM_TM, G = GEMM_GMS * GEMM_GNS;
    static syclexp::work_group_static<float[BM * KC]> As;
    static syclexp::work_group_static<float[G * GEMM_TM * GEMM_TN * SG]> Red;
    gemm_tiled<GEMM_TM, GEMM_TN, GEMM_GMS, GEMM_GNS>(dst, s0, s1, a, *&As, *&Red);
}

// For a few columns: 64 x 1 tiles of 16 sub-blocks of 4 x 1.
KERNEL k_gemm_narrow(KARGS) {
    static syclexp::work_group_static<float[64 * KC]> As;
    static syclexp::work_group_static<float[16 * 4 * SG]> Red;
    gemm_tiled<4, 1, 16, 1>(dst, s0, s1, a, *&As, *&Red);
}
