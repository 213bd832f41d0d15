/*
 * htp-rows.h: the row-wise ops' common frame: per-thread VTCM slices for
 * staging rows (sized by htp_rows_plan) and row-index helpers.
 */
#ifndef HTP_ROWS_H
#define HTP_ROWS_H

#include "htp-ctx.h"

/* A row-wise op's shared state; slices are `slice` bytes per thread. */
struct rows_job {
    struct htp_op_ctx * o;
    uint8_t * slab;     /* n_threads slices of `slice` bytes */
    uint64_t slice;
};

static inline int rows_begin(struct htp_op_ctx * o, struct rows_job * j) {
    j->o = o;
    j->slice = htp_rows_plan(o->req);
    j->slab = (uint8_t *) htp_vtcm_alloc(&o->vtcm, j->slice * o->n_threads);
    if (j->slab == NULL) {
        htp_op_fail(o, HTP_STATUS_VTCM_TOO_SMALL, "row staging does not fit in VTCM");
        return 0;
    }
    return 1;
}

/* Row index r of a tensor with ne1 x ne2 x ne3 rows -> (i1, i2, i3). */
static inline void unravel_row(const struct htp_tensor * t, uint32_t r, uint32_t * i1, uint32_t * i2, uint32_t * i3) {
    *i1 = r % t->ne[1];
    *i2 = (r / t->ne[1]) % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

#endif /* HTP_ROWS_H */
