/*
 * rope-ops.c: ROPE in ggml's normal and NeoX modes with YaRN mixing and
 * optional frequency factors. Angles are built in f32 exactly as ggml's
 * rope cache does (theta *= theta_scale), their cos and sin taken in
 * double; the dims past n_dims pass through.
 */
#include <math.h>
#include <string.h>

#include "htp-rows.h"
#include "hvx-utils.h"

#define ROPE_NORMAL 0
#define ROPE_NEOX 2
#define HTP_PI_F 3.14159265358979323846f

struct rope_params {
    int32_t n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    float corr_low, corr_high, theta_scale;
};

static float corr_dim(int32_t n_dims, int32_t n_ctx_orig, float n_rot, float base) {
    return (float) n_dims * logf((float) n_ctx_orig / (n_rot * 2.0f * HTP_PI_F)) / (2.0f * logf(base));
}

static void rope_params_read(const struct htp_req * req, struct rope_params * p) {
    p->n_dims = req->params[1];
    p->mode = req->params[2];
    p->n_ctx_orig = req->params[4];
    memcpy(&p->freq_base, &req->params[5], 4);
    memcpy(&p->freq_scale, &req->params[6], 4);
    memcpy(&p->ext_factor, &req->params[7], 4);
    memcpy(&p->attn_factor, &req->params[8], 4);
    memcpy(&p->beta_fast, &req->params[9], 4);
    memcpy(&p->beta_slow, &req->params[10], 4);
    float lo = floorf(corr_dim(p->n_dims, p->n_ctx_orig, p->beta_fast, p->freq_base));
    float hi = ceilf(corr_dim(p->n_dims, p->n_ctx_orig, p->beta_slow, p->freq_base));
    p->corr_low = lo > 0.0f ? lo : 0.0f;
    p->corr_high = hi < (float) (p->n_dims - 1) ? hi : (float) (p->n_dims - 1);
    p->theta_scale = powf(p->freq_base, -2.0f / (float) p->n_dims);
}

/* cos and sin (times the magnitude scale) of pair i0's angle, ggml's rope_yarn. */
static void rope_yarn(const struct rope_params * p, float theta_extrap, uint32_t i0, double * c, double * s) {
    float theta_interp = p->freq_scale * theta_extrap;
    float theta = theta_interp;
    double mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) {
        float denom = p->corr_high - p->corr_low;
        float y = ((float) (i0 / 2) - p->corr_low) / (denom > 0.001f ? denom : 0.001f);
        float ramp = 1.0f - (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
        float ramp_mix = ramp * p->ext_factor;
        theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * log(1.0 / (double) p->freq_scale);
    }
    *c = cos((double) theta) * mscale;
    *s = sin((double) theta) * mscale;
}

struct rope_job {
    struct rows_job rows;
    struct rope_params p;
};

static void rope_rows(void * data, uint32_t ith, uint32_t nth) {
    struct rope_job * j = (struct rope_job *) data;
    struct htp_op_ctx * o = j->rows.o;
    const struct rope_params * p = &j->p;
    const struct htp_tensor *a = &o->req->src[0], *pos = &o->req->src[1], *ff = &o->req->src[2], *d = &o->req->dst;
    uint32_t ne0 = d->ne[0];
    uint32_t half = (uint32_t) p->n_dims / 2;
    float * row = (float *) (j->rows.slab + ith * j->rows.slice);
    double * cache = (double *) (row + htp_vtcm_round((uint64_t) ne0 * 4) / 4);
    uint32_t cached_i2 = UINT32_MAX;
    uint32_t r0, r1;
    htp_split(d->ne[1] * d->ne[2] * d->ne[3], ith, nth, &r0, &r1);
    for (uint32_t r = r0; r < r1; r++) {
        uint32_t i1, i2, i3;
        unravel_row(d, r, &i1, &i2, &i3);
        if (i2 != cached_i2) {
            int32_t ipos;
            memcpy(&ipos, o->src[1] + (size_t) i2 * pos->nb[0], 4);
            float theta = (float) ipos;
            for (uint32_t k = 0; k < half; k++) {
                float factor = 1.0f;
                if (o->src[2] != NULL && k < ff->ne[0]) {
                    memcpy(&factor, o->src[2] + (size_t) k * ff->nb[0], 4);
                }
                rope_yarn(p, theta / factor, 2 * k, &cache[2 * k], &cache[2 * k + 1]);
                theta *= p->theta_scale;
            }
            cached_i2 = i2;
        }
        htp_load_f32(row, htp_row(o->src[0], a, i1, i2, i3), ne0, a->type, a->nb[0]);
        uint32_t offset = p->mode == ROPE_NEOX ? half : 1;
        for (uint32_t k = 0; k < half; k++) {
            uint32_t i = p->mode == ROPE_NEOX ? k : 2 * k;
            double c = cache[2 * k], s = cache[2 * k + 1];
            double x0 = row[i], x1 = row[i + offset];
            row[i] = (float) (x0 * c - x1 * s);
            row[i + offset] = (float) (x0 * s + x1 * c);
        }
        htp_store_f32(htp_row(o->dst, d, i1, i2, i3), row, ne0, d->type, d->nb[0]);
    }
}

void htp_op_rope(struct htp_op_ctx * o) {
    const struct htp_tensor *a = &o->req->src[0], *pos = &o->req->src[1], *ff = &o->req->src[2], *d = &o->req->dst;
    struct rope_job j;
    rope_params_read(o->req, &j.p);
    int ok = o->src[0] != NULL && o->src[1] != NULL && (a->type == HTP_TYPE_F32 || a->type == HTP_TYPE_F16) &&
             d->type == a->type && memcmp(a->ne, d->ne, sizeof(a->ne)) == 0 && pos->type == HTP_TYPE_I32 &&
             pos->ne[0] >= a->ne[2] && j.p.n_dims > 0 && j.p.n_dims % 2 == 0 && (uint32_t) j.p.n_dims <= a->ne[0] &&
             (o->src[2] == NULL || ff->type == HTP_TYPE_F32);
    if (!ok) {
        htp_op_fail(o, HTP_STATUS_INVAL_PARAMS, "rope shapes, types or n_dims do not fit");
        return;
    }
    if (j.p.mode != ROPE_NORMAL && j.p.mode != ROPE_NEOX) {
        htp_op_fail(o, HTP_STATUS_NO_SUPPORT, "rope mode %d", (int) j.p.mode);
        return;
    }
    if (rows_begin(o, &j.rows)) {
        htp_op_run(o, rope_rows, &j);
    }
}
