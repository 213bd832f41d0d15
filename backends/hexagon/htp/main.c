/*
 * main.c: the DSP-side message loop. It reads requests from the session's
 * queue, binds buffer ids to shared memory, resolves every tensor of an op
 * to a DSP address (checking it lies inside its buffer), runs the kernel and
 * answers with a status. The loop never trusts the host: a bad request is
 * answered with an error code, never a crash.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "htp-ctx.h"

/* The loop entry point, called by the platform on the session's thread. */
void htp_main_loop(struct htp_context * ctx);

void htp_op_fail(struct htp_op_ctx * o, int status, const char * fmt, ...) {
    if (o->status != HTP_STATUS_OK) {
        return;
    }
    o->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->detail, sizeof(o->detail), fmt, ap);
    va_end(ap);
}

static struct htp_map * find_map(struct htp_context * ctx, uint64_t id) {
    for (int i = 0; i < HTP_MAX_MAPS; i++) {
        if (ctx->maps[i].base != NULL && ctx->maps[i].id == id) {
            return &ctx->maps[i];
        }
    }
    return NULL;
}

static uint32_t type_size(uint32_t type, uint32_t * block) {
    *block = 1;
    switch (type) {
        case HTP_TYPE_F32:
        case HTP_TYPE_I32:
            return 4;
        case HTP_TYPE_F16:
        case HTP_TYPE_BF16:
            return 2;
        case HTP_TYPE_Q4_0:
            *block = 32;
            return 18;
        case HTP_TYPE_Q8_0:
            *block = 32;
            return 34;
        default:
            return 0;
    }
}

/* Bytes spanned by a tensor, as ggml_nbytes. */
static uint64_t tensor_bytes(const struct htp_tensor * t) {
    uint32_t block;
    uint32_t ts = type_size(t->type, &block);
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] == 0) {
            return 0;
        }
    }
    uint64_t n = block == 1 ? ts + (uint64_t) (t->ne[0] - 1) * t->nb[0] : (uint64_t) t->ne[0] / block * t->nb[0];
    for (int i = 1; i < 4; i++) {
        n += (uint64_t) (t->ne[i] - 1) * t->nb[i];
    }
    return n;
}

/* The DSP address of a tensor, or NULL with the failure recorded. */
static uint8_t * resolve(struct htp_op_ctx * o, const struct htp_tensor * t, const char * what) {
    uint32_t block;
    if (type_size(t->type, &block) == 0) {
        htp_op_fail(o, HTP_STATUS_NO_SUPPORT, "%s: unknown type %u", what, t->type);
        return NULL;
    }
    struct htp_map * m = find_map(o->ctx, t->buf);
    if (m == NULL) {
        htp_op_fail(o, HTP_STATUS_BAD_BUFFER, "%s: buffer %llu is not mapped", what, (unsigned long long) t->buf);
        return NULL;
    }
    uint64_t n = tensor_bytes(t);
    if (t->offset > m->size || n > m->size - t->offset) {
        htp_op_fail(o, HTP_STATUS_BAD_BUFFER, "%s: %llu bytes at offset %llu overrun buffer %llu of %llu bytes", what,
                    (unsigned long long) n, (unsigned long long) t->offset, (unsigned long long) t->buf,
                    (unsigned long long) m->size);
        return NULL;
    }
    return m->base + t->offset;
}

static void run_op(struct htp_context * ctx, const struct htp_req * req, struct htp_rsp * rsp) {
    struct htp_op_ctx o;
    memset(&o, 0, sizeof(o));
    o.ctx = ctx;
    o.req = req;
    o.n_threads = ctx->n_threads;
    o.vtcm.base = ctx->vtcm;
    o.vtcm.size = ctx->vtcm_bytes;
    if (req->n_src > HTP_MAX_SRC || req->op >= HTP_OP_COUNT) {
        htp_op_fail(&o, HTP_STATUS_INVAL_PARAMS, "op %u with %u sources", req->op, req->n_src);
    }
    for (uint32_t i = 0; i < req->n_src && o.status == HTP_STATUS_OK; i++) {
        if (req->src[i].buf != 0) {
            char what[16];
            snprintf(what, sizeof(what), "src%u", i);
            o.src[i] = resolve(&o, &req->src[i], what);
        }
    }
    if (o.status == HTP_STATUS_OK) {
        o.dst = resolve(&o, &req->dst, "dst");
    }
    uint64_t need = o.status == HTP_STATUS_OK ? htp_op_vtcm_need(req, ctx->n_threads) : 0;
    if (o.status == HTP_STATUS_OK && need > ctx->vtcm_bytes) {
        htp_op_fail(&o, HTP_STATUS_VTCM_TOO_SMALL, "needs %llu bytes of VTCM, %llu available",
                    (unsigned long long) need, (unsigned long long) ctx->vtcm_bytes);
    }
    if (o.status == HTP_STATUS_OK) {
        switch (req->op) {
            case HTP_OP_MUL_MAT:
                htp_op_mul_mat(&o);
                break;
            case HTP_OP_ADD:
            case HTP_OP_SUB:
            case HTP_OP_MUL:
            case HTP_OP_DIV:
                htp_op_binary(&o);
                break;
            case HTP_OP_SCALE:
                htp_op_scale(&o);
                break;
            case HTP_OP_RMS_NORM:
                htp_op_rms_norm(&o);
                break;
            case HTP_OP_SOFTMAX:
                htp_op_softmax(&o);
                break;
            case HTP_OP_ROPE:
                htp_op_rope(&o);
                break;
            case HTP_OP_GLU_SWIGLU:
                htp_op_glu(&o);
                break;
            case HTP_OP_GET_ROWS:
                htp_op_get_rows(&o);
                break;
            case HTP_OP_CPY:
                htp_op_cpy(&o);
                break;
            default:
                htp_op_fail(&o, HTP_STATUS_NO_SUPPORT, "op %u", req->op);
                break;
        }
    }
    rsp->status = (uint32_t) o.status;
    memcpy(rsp->detail, o.detail, sizeof(rsp->detail));
}

static void map_buffer(struct htp_context * ctx, const struct htp_req * req, struct htp_rsp * rsp) {
    uint64_t id = req->dst.buf;
    uint64_t size = req->dst.offset;
    int32_t fd = req->params[0];
    if (id == 0 || find_map(ctx, id) != NULL) {
        rsp->status = HTP_STATUS_INVAL_PARAMS;
        snprintf(rsp->detail, sizeof(rsp->detail), "buffer id %llu is zero or already mapped", (unsigned long long) id);
        return;
    }
    for (int i = 0; i < HTP_MAX_MAPS; i++) {
        if (ctx->maps[i].base == NULL) {
            void * p = ctx->plat->map_fd(ctx->plat->ctx, fd, size);
            if (p == NULL) {
                rsp->status = HTP_STATUS_BAD_BUFFER;
                snprintf(rsp->detail, sizeof(rsp->detail), "cannot map fd %d (%llu bytes)", (int) fd,
                         (unsigned long long) size);
                return;
            }
            ctx->maps[i].id = id;
            ctx->maps[i].fd = fd;
            ctx->maps[i].base = (uint8_t *) p;
            ctx->maps[i].size = size;
            return;
        }
    }
    rsp->status = HTP_STATUS_INTERNAL;
    snprintf(rsp->detail, sizeof(rsp->detail), "all %d buffer slots in use", HTP_MAX_MAPS);
}

static void unmap_buffer(struct htp_context * ctx, const struct htp_req * req, struct htp_rsp * rsp) {
    struct htp_map * m = find_map(ctx, req->dst.buf);
    if (m == NULL) {
        rsp->status = HTP_STATUS_BAD_BUFFER;
        snprintf(rsp->detail, sizeof(rsp->detail), "buffer %llu is not mapped", (unsigned long long) req->dst.buf);
        return;
    }
    ctx->plat->unmap_fd(ctx->plat->ctx, m->fd, m->base, m->size);
    memset(m, 0, sizeof(*m));
}

void htp_main_loop(struct htp_context * ctx) {
    struct htp_req req;
    while (ctx->plat->read_req(ctx->plat->ctx, &req) == 0) {
        struct htp_rsp rsp;
        memset(&rsp, 0, sizeof(rsp));
        rsp.seq = req.seq;
        rsp.op = req.op;
        uint64_t t0 = ctx->plat->now_us(ctx->plat->ctx);
        switch (req.kind) {
            case HTP_MSG_OP:
                run_op(ctx, &req, &rsp);
                break;
            case HTP_MSG_MAP:
                map_buffer(ctx, &req, &rsp);
                break;
            case HTP_MSG_UNMAP:
                unmap_buffer(ctx, &req, &rsp);
                break;
            case HTP_MSG_SYNC:
                break;
            default:
                rsp.status = HTP_STATUS_INVAL_PARAMS;
                snprintf(rsp.detail, sizeof(rsp.detail), "unknown message kind %u", req.kind);
                break;
        }
        rsp.usecs = (uint32_t) (ctx->plat->now_us(ctx->plat->ctx) - t0);
        if (ctx->plat->write_rsp(ctx->plat->ctx, &rsp) != 0) {
            break;
        }
    }
    for (int i = 0; i < HTP_MAX_MAPS; i++) {
        if (ctx->maps[i].base != NULL) {
            ctx->plat->unmap_fd(ctx->plat->ctx, ctx->maps[i].fd, ctx->maps[i].base, ctx->maps[i].size);
            memset(&ctx->maps[i], 0, sizeof(ctx->maps[i]));
        }
    }
}
