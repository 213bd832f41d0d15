/*
 * norm-ops.c: RMS_NORM (x / sqrt(mean(x^2) + eps)) and SOFT_MAX
 * (softmax(x * scale + slope * mask) with optional per-head sinks and ALiBi
 * slopes), one row at a time in VTCM, as ggml defines them.
 */
#include <math.h>
#include <string.h>

#include "htp-rows.h"
#include "hvx-utils.h"

static void rms_norm_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    float eps;
    memcpy(&eps, &o->req->params[0], 4);
    uint32_t ne0 = d->ne[0];
    float * row = (float *) (j->slab + ith * j->slice);
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        htp_load_f32(row, htp_row(o->src[0], a, i1, i2, i3), ne0, a->type, a->nb[0]);
        float mean = hvx_sum_sq_f32(row, ne0) / (float) ne0;
        float s = 1.0f / sqrtf(mean + eps);
        hvx_scale_bias_f32(row, ne0, s, 0.0f);
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), row, ne0, d->type, d->nb[0]);
    }
}

void htp_op_rms_norm(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    if (o->src[0] == NULL || a->type != HTP_TYPE_F32 || d->type != HTP_TYPE_F32 ||
        memcmp(a->ne, d->ne, sizeof(a->ne)) != 0) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "rms_norm needs an f32 source of the result's shape");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, rms_norm_rows, &j);
    }
}

/* ALiBi slope of head h of n_head (1 without max_bias), as ggml. */
static double alibi_slope(float max_bias, uint32_t h, uint32_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0;
    }
    uint32_t n_head_log2 = 1u << (uint32_t) floor(log2((double) n_head));
    double m0 = pow(2.0, -(double) max_bias / n_head_log2);
    double m1 = pow(2.0, -((double) max_bias / 2.0) / n_head_log2);
    return h < n_head_log2 ? pow(m0, (double) (h + 1)) : pow(m1, (double) (2 * (h - n_head_log2) + 1));
}

static void softmax_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *m = &o->req->src[1], *sk = &o->req->src[2], *d = &o->req->dst;
    float scale, max_bias;
    memcpy(&scale, &o->req->params[0], 4);
    memcpy(&max_bias, &o->req->params[1], 4);
    uint32_t ne0 = d->ne[0];
    float * w = (float *) (j->slab + ith * j->slice);
    float * mrow = w + htp_vtcm_round((uint64_t) ne0 * 4) / 4;
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        htp_load_f32(w, htp_row(o->src[0], a, i1, i2, i3), ne0, a->type, a->nb[0]);
        hvx_scale_bias_f32(w, ne0, scale, 0.0f);
        if (o->src[1] != NULL) {
            float slope = (float) alibi_slope(max_bias, i2, d->ne[2]);
            htp_load_f32(mrow, htp_row(o->src[1], m, i1, i2 % m->ne[2], i3 % m->ne[3]), ne0, m->type, m->nb[0]);
            for (uint32_t i = 0; i < ne0; i++) {
                w[i] += slope * mrow[i];
            }
        }
        float max = hvx_max_f32(w, ne0);
        float sink = 0.0f;
        if (o->src[2] != NULL) {
            memcpy(&sink, o->src[2] + (size_t) i2 * sk->nb[0], 4);
            max = sink > max ? sink : max;
        }
        float lanes[HTP_VLEN_F32] = { 0 };
        for (uint32_t i = 0; i < ne0; i++) {
            w[i] = expf(w[i] - max);
            lanes[i % HTP_VLEN_F32] += w[i];
        }
        float sum = 0.0f;
        for (uint32_t l = 0; l < HTP_VLEN_F32; l++) {
            sum += lanes[l];
        }
        if (o->src[2] != NULL) {
            sum += expf(sink - max);
        }
        hvx_scale_bias_f32(w, ne0, 1.0f / sum, 0.0f);
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), w, ne0, d->type, d->nb[0]);
    }
}

void htp_op_softmax(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *m = &o->req->src[1], *sk = &o->req->src[2], *d = &o->req->dst;
    int ok = o->src[0] != NULL && a->type == HTP_TYPE_F32 && d->type == HTP_TYPE_F32 &&
             memcmp(a->ne, d->ne, sizeof(a->ne)) == 0;
    if (ok && o->src[1] != NULL) {
        ok = (m->type == HTP_TYPE_F32 || m->type == HTP_TYPE_F16) && m->ne[0] == a->ne[0] && m->ne[1] >= a->ne[1] &&
             m->ne[2] != 0 && m->ne[3] != 0 && a->ne[2] % m->ne[2] == 0 && a->ne[3] % m->ne[3] == 0;
    }
    if (ok && o->src[2] != NULL) {
        ok = sk->type == HTP_TYPE_F32 && sk->ne[0] >= a->ne[2];
    }
    if (!ok) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "soft_max shapes or types do not fit");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, softmax_rows, &j);
    }
}
