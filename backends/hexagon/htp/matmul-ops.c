/*
 * matmul-ops.c: MUL_MAT, out-stationary over 32x32 tiles as the HMX runs it.
 *
 * dst[m, n] = sum_k a[k, m] * b[k, n] per batch (a broadcast over dims 2, 3
 * by division, as ggml). The f32/f16 activations are converted to f16 once
 * per column panel (up to 128 columns) into VTCM; each thread then takes
 * 32-row panels of the weights (f32, f16, Q4_0 or Q8_0), dequantizes one
 * panel to f16 in its VTCM, and for every 32-column tile of the panel
 * accumulates the K tiles into an f32 accumulator tile before storing it:
 * each output tile is written once (out-stationary). The tile product is
 * what one HMX multiply does; here it is portable C over f32 staging tiles.
 */
#include <string.h>

#include "htp-ctx.h"
#include "hvx-utils.h"

#define TILE 32

struct mm_job {
    struct htp_op_ctx * o;
    const struct htp_tensor *a, *b, *d;
    const uint8_t *pa, *pb;
    uint8_t * pd;
    struct htp_mm_plan plan;
    uint16_t * act;                       /* f16 [n_block][k_pad] */
    uint8_t * per_thread[HTP_MAX_THREADS]; /* weight panel, then tiles */
    uint32_t i2, i3;                      /* dst batch */
    uint32_t n0, ncols;                   /* column panel */
};

/* One weight row of K elements as f16, zero-padded to k_pad. */
static void weight_row_f16(uint16_t * out, const uint8_t * row, uint32_t k, uint32_t k_pad, uint32_t type) {
    switch (type) {
        case HTP_TYPE_F32:
            if (((uintptr_t) row & 3) == 0) {
                htp_row_f32_to_f16(out, (const float *) row, k);
                break;
            }
            for (uint32_t i = 0; i < k; i++) {
                float v;
                memcpy(&v, row + 4 * (size_t) i, 4);
                out[i] = htp_f32_to_f16(v);
            }
            break;
        case HTP_TYPE_F16:
            memcpy(out, row, (size_t) k * 2);
            break;
        case HTP_TYPE_Q4_0:
            for (uint32_t blk = 0; blk < k / 32; blk++) {
                htp_block_q4_0_to_f16(out + blk * 32, row + (size_t) blk * 18);
            }
            break;
        default: /* HTP_TYPE_Q8_0 */
            for (uint32_t blk = 0; blk < k / 32; blk++) {
                htp_block_q8_0_to_f16(out + blk * 32, row + (size_t) blk * 34);
            }
            break;
    }
    for (uint32_t i = k; i < k_pad; i++) {
        out[i] = 0;
    }
}

/* Converts this thread's share of the activation panel to f16. */
static void convert_activations(void * data, uint32_t ith, uint32_t nth) {
    struct mm_job * j = (struct mm_job *) data;
    const struct htp_tensor * b = j->b;
    uint32_t k = b->ne[0];
    uint32_t cols = (j->ncols + TILE - 1) / TILE * TILE;
    uint32_t c0, c1;
    htp_split(cols, ith, nth, &c0, &c1);
    float row[TILE];
    uint32_t k0_done;
    for (uint32_t c = c0; c < c1; c++) {
        uint16_t * out = j->act + (size_t) c * j->plan.k_pad;
        if (c >= j->ncols) {
            memset(out, 0, (size_t) j->plan.k_pad * 2);
            continue;
        }
        const uint8_t * src = j->pb + (size_t) (j->n0 + c) * b->nb[1] + (size_t) j->i2 * b->nb[2] + (size_t) j->i3 * b->nb[3];
        if (b->type == HTP_TYPE_F32 && b->nb[0] == 4 && ((uintptr_t) src & 3) == 0) {
            htp_row_f32_to_f16(out, (const float *) src, k); /* the whole row at once (HVX when built for it) */
            k0_done = k;
        } else {
            k0_done = 0;
        }
        for (uint32_t k0 = k0_done; k0 < k; k0 += TILE) {
            uint32_t n = k - k0 < TILE ? k - k0 : TILE;
            htp_load_f32(row, src + (size_t) k0 * b->nb[0], n, b->type, b->nb[0]);
            for (uint32_t i = 0; i < n; i++) {
                out[k0 + i] = htp_f32_to_f16(row[i]);
            }
        }
        for (uint32_t i = k; i < j->plan.k_pad; i++) {
            out[i] = 0;
        }
    }
}

/* acc[i][j] += sum_k w[i][k] * x[j][k] over one 32x32x32 tile (one HMX op). */
static void tile_mma(float * acc, const float * w, const float * x) {
    for (uint32_t i = 0; i < TILE; i++) {
        for (uint32_t jj = 0; jj < TILE; jj++) {
            float s = 0.0f;
            for (uint32_t kk = 0; kk < TILE; kk++) {
                s += w[i * TILE + kk] * x[jj * TILE + kk];
            }
            acc[i * TILE + jj] += s;
        }
    }
}

/* Loads a 32x32 f16 tile at column k0 of a [rows][k_pad] panel as f32. */
static void load_tile(float * t, const uint16_t * panel, uint32_t k_pad, uint32_t k0) {
#if defined(__HVX__)
    /* two tile rows (64 halfs) per HVX conversion: adjacent in t, gathered from the panel */
    uint16_t pair[2 * TILE] __attribute__((aligned(128)));
    for (uint32_t r = 0; r < TILE; r += 2) {
        memcpy(pair, panel + (size_t) r * k_pad + k0, TILE * 2);
        memcpy(pair + TILE, panel + (size_t) (r + 1) * k_pad + k0, TILE * 2);
        htp_row_f16_to_f32(t + r * TILE, pair, 2 * TILE);
    }
#else
    for (uint32_t r = 0; r < TILE; r++) {
        const uint16_t * p = panel + (size_t) r * k_pad + k0;
        for (uint32_t c = 0; c < TILE; c++) {
            t[r * TILE + c] = htp_f16_to_f32(p[c]);
        }
    }
#endif
}

/* This thread's 32-row weight panels against the whole activation panel. */
static void multiply_panels(void * data, uint32_t ith, uint32_t nth) {
    struct mm_job * j = (struct mm_job *) data;
    const struct htp_tensor *a = j->a, *d = j->d;
    uint32_t k = a->ne[0], m = a->ne[1];
    uint32_t k_pad = j->plan.k_pad;
    uint32_t i02 = j->i2 / (j->b->ne[2] / a->ne[2]);
    uint32_t i03 = j->i3 / (j->b->ne[3] / a->ne[3]);
    uint16_t * wpanel = (uint16_t *) j->per_thread[ith];
    float * acc = (float *) (j->per_thread[ith] + htp_vtcm_round(j->plan.wt_bytes));
    float * wt = acc + TILE * TILE;
    float * xt = wt + TILE * TILE;
    uint32_t n_row_tiles = (m + TILE - 1) / TILE;
    uint32_t n_col_tiles = (j->ncols + TILE - 1) / TILE;
    uint32_t t0, t1;
    htp_split(n_row_tiles, ith, nth, &t0, &t1);
    for (uint32_t rt = t0; rt < t1; rt++) {
        uint32_t m0 = rt * TILE;
        for (uint32_t r = 0; r < TILE; r++) {
            uint16_t * out = wpanel + (size_t) r * k_pad;
            if (m0 + r < m) {
                const uint8_t * row = j->pa + (size_t) (m0 + r) * a->nb[1] + (size_t) i02 * a->nb[2] + (size_t) i03 * a->nb[3];
                weight_row_f16(out, row, k, k_pad, a->type);
            } else {
                memset(out, 0, (size_t) k_pad * 2);
            }
        }
        for (uint32_t ct = 0; ct < n_col_tiles; ct++) {
            memset(acc, 0, sizeof(float) * TILE * TILE);
            const uint16_t * xpanel = j->act + (size_t) ct * TILE * k_pad;
            for (uint32_t k0 = 0; k0 < k_pad; k0 += TILE) {
                load_tile(wt, wpanel, k_pad, k0);
                load_tile(xt, xpanel, k_pad, k0);
                tile_mma(acc, wt, xt);
            }
            for (uint32_t c = 0; c < TILE; c++) {
                uint32_t n = j->n0 + ct * TILE + c;
                if (ct * TILE + c >= j->ncols) {
                    break;
                }
                uint8_t * col = j->pd + (size_t) n * d->nb[1] + (size_t) j->i2 * d->nb[2] + (size_t) j->i3 * d->nb[3];
                for (uint32_t r = 0; r < TILE && m0 + r < m; r++) {
                    memcpy(col + (size_t) (m0 + r) * d->nb[0], &acc[r * TILE + c], 4);
                }
            }
        }
    }
}

void htp_op_mul_mat(struct htp_op_ctx * o) {
    const struct htp_req * req = o->req;
    struct mm_job j;
    memset(&j, 0, sizeof(j));
    j.o = o;
    j.a = &req->src[0];
    j.b = &req->src[1];
    j.d = &req->dst;
    j.pa = o->src[0];
    j.pb = o->src[1];
    j.pd = o->dst;
    const struct htp_tensor *a = j.a, *b = j.b, *d = j.d;
    if (j.pa == NULL || j.pb == NULL) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "mul_mat needs two sources");
        return;
    }
    int wt_ok = a->type == HTP_TYPE_F32 || a->type == HTP_TYPE_F16 || a->type == HTP_TYPE_Q4_0 || a->type == HTP_TYPE_Q8_0;
    if (!wt_ok || !(b->type == HTP_TYPE_F32 || b->type == HTP_TYPE_F16) || d->type != HTP_TYPE_F32) {
        htp_op_fail(o, HTP_STATUS_NO_SUPPORT, "mul_mat types %u x %u -> %u", a->type, b->type, d->type);
        return;
    }
    if (a->ne[0] != b->ne[0] || a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0 ||
        d->ne[0] != a->ne[1] || d->ne[1] != b->ne[1] || d->ne[2] != b->ne[2] || d->ne[3] != b->ne[3] ||
        ((a->type == HTP_TYPE_Q4_0 || a->type == HTP_TYPE_Q8_0) && a->ne[0] % 32 != 0) || o->n_threads > HTP_MAX_THREADS) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "mul_mat shapes do not fit");
        return;
    }
    htp_mm_plan(req, &j.plan);
    j.act = (uint16_t *) htp_vtcm_alloc(&o->vtcm, j.plan.act_bytes);
    for (uint32_t t = 0; t < o->n_threads; t++) {
        j.per_thread[t] = (uint8_t *) htp_vtcm_alloc(&o->vtcm, htp_vtcm_round(j.plan.wt_bytes) + j.plan.tile_bytes);
        if (j.per_thread[t] == NULL) {
            j.act = NULL;
        }
    }
    if (j.act == NULL) {
        htp_op_fail(o, HTP_STATUS_VTCM_TOO_SMALL, "mul_mat: VTCM plan does not fit");
        return;
    }
    for (j.i3 = 0; j.i3 < d->ne[3]; j.i3++) {
        for (j.i2 = 0; j.i2 < d->ne[2]; j.i2++) {
            for (j.n0 = 0; j.n0 < b->ne[1]; j.n0 += j.plan.n_block) {
                j.ncols = b->ne[1] - j.n0 < j.plan.n_block ? b->ne[1] - j.n0 : j.plan.n_block;
                htp_op_run(o, convert_activations, &j);
                htp_op_run(o, multiply_panels, &j);
            }
        }
    }
}
