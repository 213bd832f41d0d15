// Data movement: CPY/CONT (type conversion in logical order), raw block
// copies of one quantized type, GET_ROWS and SET_ROWS. Row indices are
// validated on the host before these run.
#include "common.hpp"

// Element k of src0 (logical order) to element k of dst, plain types.
KERNEL k_cpy(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    if (idx >= nelements(d)) return;
    long i0, i1, i2, i3, j0, j1, j2, j3;
    unravel(idx, t0.ne, i0, i1, i2, i3);
    unravel(idx, d.ne, j0, j1, j2, j3);
    const char *p = s0 + offset(t0, i0, i1, i2, i3);
    char *q = dst + offset(d, j0, j1, j2, j3);
    int ts = a.type[1], td = a.type[0];
    if (ts == td) {
        for (long b = 0; b < type_size(ts); b++) q[b] = p[b];
    } else if (ts == T_I32 && td == T_I32) {
        *(int *)q = *(const int *)p;
    } else {
        store(q, td, load(p, ts));
    }
}

// Block k of src0 to block k of dst, both of quantized type type[0];
// x[0] = elements per block, x[1] = bytes per block.
KERNEL k_cpy_blocks(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    long bs = a.x[0];
    long sb[4] = {t0.ne[0] / bs, t0.ne[1], t0.ne[2], t0.ne[3]};
    long db[4] = {d.ne[0] / bs, d.ne[1], d.ne[2], d.ne[3]};
    if (idx >= db[0] * db[1] * db[2] * db[3]) return;
    long i0, i1, i2, i3, j0, j1, j2, j3;
    unravel(idx, sb, i0, i1, i2, i3);
    unravel(idx, db, j0, j1, j2, j3);
    const char *p = s0 + offset(t0, i0, i1, i2, i3);
    char *q = dst + offset(d, j0, j1, j2, j3);
    // x[1]: bytes per block, from the host (type_size knows only the types
    // the other kernels compute with).
    for (long b = 0; b < a.x[1]; b++) q[b] = p[b];
}

// f32 src0 quantized into dst blocks of type[0] (Q8_0 or Q4_0), one
// work-item per destination block, in logical order.
KERNEL k_cpy_quantize(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1];
    long db[4] = {d.ne[0] / 32, d.ne[1], d.ne[2], d.ne[3]};
    if (idx >= db[0] * db[1] * db[2] * db[3]) return;
    long j0, j1, j2, j3;
    unravel(idx, db, j0, j1, j2, j3);
    float v[32];
    for (int e = 0; e < 32; e++) {
        long i0, i1, i2, i3;
        unravel(idx * 32 + e, t0.ne, i0, i1, i2, i3);
        v[e] = load(s0 + offset(t0, i0, i1, i2, i3), a.type[1]);
    }
    char *q = dst + offset(d, j0, j1, j2, j3);
    if (a.type[0] == T_Q8_0) {
        float amax = 0.0f;
        for (int e = 0; e < 32; e++) amax = sycl::fmax(amax, sycl::fabs(v[e]));
        float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
        *(unsigned short *)q = f2h(dd);
        for (int e = 0; e < 32; e++) q[2 + e] = (signed char)sycl::round(v[e] * id);
    } else {
        float amax = 0.0f, vmax = 0.0f;
        for (int e = 0; e < 32; e++) {
            if (amax < sycl::fabs(v[e])) {
                amax = sycl::fabs(v[e]);
                vmax = v[e];
            }
        }
        float dd = vmax / -8.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
        *(unsigned short *)q = f2h(dd);
        for (int e = 0; e < 16; e++) {
            int x0 = (int)(signed char)(v[e] * id + 8.5f), x1 = (int)(signed char)(v[e + 16] * id + 8.5f);
            x0 = x0 < 15 ? x0 : 15;
            x1 = x1 < 15 ? x1 : 15;
            q[2 + e] = (char)(x0 | (x1 << 4));
        }
    }
}

static inline long index_at(const char *p, int type) {
    return type == T_I64 ? *(const long *)p : (long)*(const int *)p;
}

// dst[:, r, i11, i12] = src0[:, rows[r, i11, i12], i11, i12] as f32 (or i32
// for an i32 source); one work-item per destination element.
KERNEL k_get_rows(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    if (idx >= nelements(d)) return;
    long i0, i10, i11, i12;
    unravel(idx, d.ne, i0, i10, i11, i12);
    long r = index_at(s1 + offset(t1, i10, i11, i12, 0), a.type[2]);
    const char *row = s0 + r * t0.nb[1] + i11 * t0.nb[2] + i12 * t0.nb[3];
    char *q = dst + offset(d, i0, i10, i11, i12);
    if (a.type[1] == T_I32 && a.type[0] == T_I32) {
        *(int *)q = *(const int *)(row + i0 * t0.nb[0]);
    } else {
        store(q, a.type[0], load_row(row, i0, a.type[1], t0.nb[0]));
    }
}

// GET_ROWS from q4_0 / q8_0 weights stored reordered (one [K, M] matrix:
// every block's quants, then every block's f16 scale; see
// backends/sycl/src/reorder.rs) to f32 or f16; one work-item per element.
KERNEL k_get_rows_reordered(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    if (idx >= nelements(d)) return;
    long i0, i10, i11, i12;
    unravel(idx, d.ne, i0, i10, i11, i12);
    long r = index_at(s1 + offset(t1, i10, i11, i12, 0), a.type[2]);
    long nbr = t0.ne[0] / 32, total = nbr * t0.ne[1], ib = r * nbr + i0 / 32, j = i0 % 32;
    float dq = h2f(*(const unsigned short *)(s0 + total * (a.type[1] == T_Q4_0 ? 16 : 32) + ib * 2));
    float v;
    if (a.type[1] == T_Q4_0) {
        unsigned char q = (unsigned char)s0[ib * 16 + (j % 16)];
        v = (float)((j < 16 ? (q & 0xF) : (q >> 4)) - 8) * dq;
    } else {
        v = (float)(signed char)s0[ib * 32 + j] * dq;
    }
    store(dst + offset(d, i0, i10, i11, i12), a.type[0], v);
}

// dst[:, rows[i, i2 % b2, i3 % b3], i2, i3] = src0[:, i, i2, i3] for plain
// destination types; one work-item per source element.
KERNEL k_set_rows(KARGS) {
    long idx = gid();
    const Tensor &d = a.t[0], &t0 = a.t[1], &t1 = a.t[2];
    if (idx >= nelements(t0)) return;
    long i0, i, i2, i3;
    unravel(idx, t0.ne, i0, i, i2, i3);
    long r = index_at(s1 + offset(t1, i, i2 % t1.ne[1], i3 % t1.ne[2], 0), a.type[2]);
    float v = load(s0 + offset(t0, i0, i, i2, i3), a.type[1]);
    store(dst + offset(d, i0, r, i2, i3), a.type[0], v);
}
