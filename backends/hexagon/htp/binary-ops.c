/*
 * binary-ops.c: ADD, SUB, MUL, DIV (b broadcast over a by modulo, as ggml),
 * SCALE (a * s + b) and GLU SWIGLU (silu(x) * g, split or two tensors).
 *
 * Each thread takes a share of the destination rows; a row is staged as f32
 * in the thread's VTCM slice (sources of any float type and stride), computed
 * a vector at a time, and written back in the destination type.
 */
#include <string.h>

#include "htp-ctx.h"
#include "htp-rows.h"
#include "hvx-utils.h"

static void binary_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *b = &o->req->src[1], *d = &o->req->dst;
    uint32_t ne0 = d->ne[0];
    float * ra = (float *) (j->slab + ith * j->slice);
    float * rb = ra + htp_vtcm_round((uint64_t) ne0 * 4) / 4;
    float * out = rb + htp_vtcm_round((uint64_t) ne0 * 4) / 4;
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        htp_load_f32(ra, htp_row(o->src[0], a, i1, i2, i3), ne0, a->type, a->nb[0]);
        htp_load_f32(rb, htp_row(o->src[1], b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]), b->ne[0], b->type, b->nb[0]);
        uint32_t nb0 = b->ne[0];
        switch (o->req->op) {
            case HTP_OP_ADD:
                for (uint32_t i = 0; i < ne0; i++) {
                    out[i] = ra[i] + rb[i % nb0];
                }
                break;
            case HTP_OP_SUB:
                for (uint32_t i = 0; i < ne0; i++) {
                    out[i] = ra[i] - rb[i % nb0];
                }
                break;
            case HTP_OP_MUL:
                for (uint32_t i = 0; i < ne0; i++) {
                    out[i] = ra[i] * rb[i % nb0];
                }
                break;
            default:
                for (uint32_t i = 0; i < ne0; i++) {
                    out[i] = ra[i] / rb[i % nb0];
                }
                break;
        }
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), out, ne0, d->type, d->nb[0]);
    }
}

void htp_op_binary(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *b = &o->req->src[1], *d = &o->req->dst;
    if (o->src[0] == NULL || o->src[1] == NULL || !htp_is_float(a->type) || !htp_is_float(b->type) ||
        !htp_is_float(d->type)) {
        htp_op_fail(o, HTP_STATUS_NO_SUPPORT, "binary op types %u, %u -> %u", a->type, b->type, d->type);
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (a->ne[i] != d->ne[i] || b->ne[i] == 0 || a->ne[i] % b->ne[i] != 0) {
            htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "b does not broadcast over a in dim %d", i);
            return;
        }
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, binary_rows, &j);
    }
}

static void scale_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    float s, bias;
    memcpy(&s, &o->req->params[0], 4);
    memcpy(&bias, &o->req->params[1], 4);
    float * row = (float *) (j->slab + ith * j->slice);
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        htp_load_f32(row, htp_row(o->src[0], a, i1, i2, i3), d->ne[0], a->type, a->nb[0]);
        hvx_scale_bias_f32(row, d->ne[0], s, bias);
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), row, d->ne[0], d->type, d->nb[0]);
    }
}

void htp_op_scale(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    if (o->src[0] == NULL || !htp_is_float(a->type) || !htp_is_float(d->type) ||
        memcmp(a->ne, d->ne, sizeof(a->ne)) != 0) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "scale needs a float source of the result's shape");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, scale_rows, &j);
    }
}

static void glu_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *g = &o->req->src[1], *d = &o->req->dst;
    uint32_t nc = d->ne[0];
    int split = o->src[1] == NULL;
    int swapped = o->req->params[1] != 0;
    uint32_t xo = split && swapped ? nc : 0;
    uint32_t go = split && !swapped ? nc : 0;
    float * x = (float *) (j->slab + ith * j->slice);
    float * y = x + htp_vtcm_round((uint64_t) nc * 4) / 4;
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        const uint8_t * arow = htp_row(o->src[0], a, i1, i2, i3);
        htp_load_f32(x, arow + (size_t) xo * a->nb[0], nc, a->type, a->nb[0]);
        if (split) {
            htp_load_f32(y, arow + (size_t) go * a->nb[0], nc, a->type, a->nb[0]);
        } else {
            htp_load_f32(y, htp_row(o->src[1], g, i1, i2, i3), nc, g->type, g->nb[0]);
        }
        for (uint32_t i = 0; i < nc; i++) {
            y[i] = x[i] / (1.0f + expf(-x[i])) * y[i];
        }
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), y, nc, d->type, d->nb[0]);
    }
}

void htp_op_glu(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *g = &o->req->src[1], *d = &o->req->dst;
    int ok = o->src[0] != NULL && htp_is_float(a->type) && htp_is_float(d->type) && a->ne[1] == d->ne[1] &&
             a->ne[2] == d->ne[2] && a->ne[3] == d->ne[3];
    if (o->src[1] == NULL) {
        ok = ok && a->ne[0] == 2 * d->ne[0];
    } else {
        ok = ok && htp_is_float(g->type) && memcmp(g->ne, d->ne, sizeof(g->ne)) == 0 && a->ne[0] == d->ne[0];
    }
    if (!ok) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "swiglu shapes or types do not fit");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, glu_rows, &j);
    }
}
