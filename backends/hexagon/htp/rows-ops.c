/*
 * rows-ops.c: GET_ROWS (gather rows of f32/f16/bf16/Q4_0/Q8_0 by i32
 * indices into f32; an index out of range is an error code, never a read
 * out of bounds) and CPY (float type conversion, any strides, same shape).
 */
#include <string.h>

#include "htp-rows.h"
#include "hvx-utils.h"

/* A row of `type` (float or Q4_0/Q8_0, contiguous blocks) as n f32 values. */
static void row_to_f32(float * out, const uint8_t * row, uint32_t n, uint32_t type, uint32_t nb0) {
    if (htp_is_float(type)) {
        htp_load_f32(out, row, n, type, nb0);
        return;
    }
    for (uint32_t blk = 0; blk < n / 32; blk++) {
        const uint8_t * q = row + (size_t) blk * nb0;
        uint16_t dh;
        memcpy(&dh, q, 2);
        float d = htp_f16_to_f32(dh);
        if (type == HTP_TYPE_Q4_0) {
            for (uint32_t j = 0; j < 16; j++) {
                out[blk * 32 + j] = d * (float) ((q[2 + j] & 0x0f) - 8);
                out[blk * 32 + j + 16] = d * (float) ((q[2 + j] >> 4) - 8);
            }
        } else {
            for (uint32_t j = 0; j < 32; j++) {
                out[blk * 32 + j] = d * (float) (int8_t) q[2 + j];
            }
        }
    }
}

static void get_rows_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *idx = &o->req->src[1], *d = &o->req->dst;
    float * row = (float *) (j->slab + ith * j->slice);
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i10, i11, i12;
        unravel_row(d, r, &i10, &i11, &i12);
        int32_t k;
        memcpy(&k, o->src[1] + (size_t) i10 * idx->nb[0] + (size_t) i11 * idx->nb[1] + (size_t) i12 * idx->nb[2], 4);
        if (k < 0 || (uint32_t) k >= a->ne[1]) {
            htp_op_fail(o, HTP_STATUS_BAD_INDEX, "get_rows: index %d at [%u, %u, %u] is outside 0..%u", (int) k, i10,
                        i11, i12, a->ne[1]);
            return;
        }
        row_to_f32(row, htp_row(o->src[0], a, (uint32_t) k, i11, i12), a->ne[0], a->type, a->nb[0]);
        htp_store_f32(htp_row(o->dst, d, i10, i11, i12), row, d->ne[0], d->type, d->nb[0]);
    }
}

void htp_op_get_rows(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *idx = &o->req->src[1], *d = &o->req->dst;
    int quant = a->type == HTP_TYPE_Q4_0 || a->type == HTP_TYPE_Q8_0;
    int ok = o->src[0] != NULL && o->src[1] != NULL && (htp_is_float(a->type) || quant) && idx->type == HTP_TYPE_I32 &&
             d->type == HTP_TYPE_F32 && d->ne[0] == a->ne[0] && d->ne[1] == idx->ne[0] && d->ne[2] == idx->ne[1] &&
             d->ne[3] == idx->ne[2] && idx->ne[1] == a->ne[2] && idx->ne[2] == a->ne[3] && (!quant || a->ne[0] % 32 == 0);
    if (!ok) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "get_rows shapes or types do not fit");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, get_rows_rows, &j);
    }
}

static void cpy_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rows_job * j = (struct rows_job *) data;
    struct htp_op_ctx * o = j->o;
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    float * row = (float *) (j->slab + ith * j->slice);
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        htp_load_f32(row, htp_row(o->src[0], a, i1, i2, i3), d->ne[0], a->type, a->nb[0]);
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), row, d->ne[0], d->type, d->nb[0]);
    }
}

void htp_op_cpy(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *d = &o->req->dst;
    if (o->src[0] == NULL || !htp_is_float(a->type) || !htp_is_float(d->type) ||
        memcmp(a->ne, d->ne, sizeof(a->ne)) != 0) {
        htp_op_fail(o, HTP_STATUS_NO_SUPPORT, "cpy needs float types and one shape");
        return;
    }
    struct rows_job j;
    if (rows_begin(o, &j)) {
        htp_op_run(o, cpy_rows, &j);
    }
}
