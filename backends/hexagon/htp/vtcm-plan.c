/*
 * vtcm-plan.c: how much VTCM each op takes. The kernels carve their VTCM
 * from these plans, and the host calls htp_op_vtcm_need (built for the host
 * from this same file) in supports_op to refuse work over the budget, so the
 * two cannot disagree.
 */
#include "htp-ctx.h"

/* Activation columns converted to f16 per panel. */
#define MM_N_BLOCK 128
/* The HMX tile edge. */
#define MM_TILE 32

void htp_mm_plan(const struct htp_req * req, struct htp_mm_plan * p) {
    uint32_t k = req->src[0].ne[0];
    uint32_t n = req->src[1].ne[1];
    uint32_t n_pad = (n + MM_TILE - 1) / MM_TILE * MM_TILE;
    p->k_pad = (k + MM_TILE - 1) / MM_TILE * MM_TILE;
    p->n_block = n_pad < MM_N_BLOCK ? n_pad : MM_N_BLOCK;
    p->act_bytes = (uint64_t) p->n_block * p->k_pad * 2;
    p->wt_bytes = (uint64_t) MM_TILE * p->k_pad * 2;
    p->tile_bytes = 3ull * MM_TILE * MM_TILE * 4;
}

uint64_t htp_rows_plan(const struct htp_req * req) {
    uint64_t ne0 = req->dst.ne[0];
    uint64_t rows;
    switch (req->op) {
        case HTP_OP_ADD:
        case HTP_OP_SUB:
        case HTP_OP_MUL:
        case HTP_OP_DIV:
            rows = 3;
            break;
        case HTP_OP_SOFTMAX:
        case HTP_OP_GLU_SWIGLU:
            rows = 2;
            break;
        case HTP_OP_ROPE:
            rows = 3; /* the row, then its (cos, sin) pairs as doubles */
            break;
        case HTP_OP_GET_ROWS:
        case HTP_OP_CPY:
            ne0 = req->src[0].ne[0];
            rows = 1;
            break;
        default:
            rows = 1;
            break;
    }
    return rows * htp_vtcm_round(ne0 * 4);
}

uint64_t htp_op_vtcm_need(const struct htp_req * req, uint32_t n_threads) {
    if (n_threads == 0) {
        n_threads = 1;
    }
    if (req->op == HTP_OP_MUL_MAT) {
        struct htp_mm_plan p;
        htp_mm_plan(req, &p);
        return htp_vtcm_round(p.act_bytes) + n_threads * (htp_vtcm_round(p.wt_bytes) + htp_vtcm_round(p.tile_bytes));
    }
    return (uint64_t) n_threads * htp_rows_plan(req);
}
