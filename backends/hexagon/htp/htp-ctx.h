/*
 * htp-ctx.h: the DSP-side context shared by the message loop (main.c) and
 * the op kernels (*-ops.c), and the platform interface that the Hexagon
 * build (QuRT threads, dspqueue, HAP) and the host emulation (emu/htp-emu.c,
 * pthreads) each implement.
 */
#ifndef HTP_CTX_H
#define HTP_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "htp-msg.h"

#define HTP_MAX_MAPS 256
#define HTP_MAX_THREADS 8
#define HTP_VTCM_ALIGN 128 /* one HVX vector */

/* A job: one share (ith of nth) of an op's work. */
typedef void (*htp_job_fn)(void * data, uint32_t ith, uint32_t nth);

/* What the message loop needs from the platform. */
struct htp_platform {
    void * ctx;
    /* Blocks for the next request; 0 = got one, 1 = the queue closed (stop). */
    int (*read_req)(void * ctx, struct htp_req * req);
    /* Queues a response; 0 = ok. */
    int (*write_rsp)(void * ctx, const struct htp_rsp * rsp);
    /* The DSP address of shared memory `fd` of `size` bytes, or NULL. */
    void * (*map_fd)(void * ctx, int32_t fd, uint64_t size);
    /* Releases a mapping made by map_fd. */
    void (*unmap_fd)(void * ctx, int32_t fd, void * addr, uint64_t size);
    /* Runs job(data, i, nth) for i in 0..nth (on HVX threads) and returns when all are done. */
    void (*run_jobs)(void * ctx, htp_job_fn job, void * data, uint32_t nth);
    /* Microseconds since an arbitrary start (profiling). */
    uint64_t (*now_us)(void * ctx);
};

/* A buffer id bound to DSP memory. */
struct htp_map {
    uint64_t id;
    int32_t fd;
    uint8_t * base;
    uint64_t size;
};

/* One DSP session. */
struct htp_context {
    const struct htp_platform * plat;
    struct htp_map maps[HTP_MAX_MAPS];
    uint8_t * vtcm;        /* the session's VTCM */
    uint64_t vtcm_bytes;
    uint32_t n_threads;    /* HVX threads ops are split over */
};

/* A bump allocator over VTCM, reset for every op. */
struct htp_vtcm {
    uint8_t * base;
    uint64_t size;
    uint64_t used;
};

/* Rounds n up to the VTCM alignment. */
static inline uint64_t htp_vtcm_round(uint64_t n) {
    return (n + HTP_VTCM_ALIGN - 1) & ~(uint64_t) (HTP_VTCM_ALIGN - 1);
}

/* Takes `bytes` of VTCM, or NULL when the budget is spent. */
static inline void * htp_vtcm_alloc(struct htp_vtcm * v, uint64_t bytes) {
    uint64_t n = htp_vtcm_round(bytes);
    if (v->used + n > v->size) {
        return NULL;
    }
    void * p = v->base + v->used;
    v->used += n;
    return p;
}

/* One op being run: its request with every tensor resolved to an address. */
struct htp_op_ctx {
    struct htp_context * ctx;
    const struct htp_req * req;
    uint8_t * src[HTP_MAX_SRC]; /* NULL for absent sources */
    uint8_t * dst;
    struct htp_vtcm vtcm;
    uint32_t n_threads;
    int status;                 /* set by a kernel on failure (HTP_STATUS_*) */
    char detail[HTP_RSP_DETAIL];
};

/* Records a failure of the op (first one wins). */
void htp_op_fail(struct htp_op_ctx * o, int status, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Runs job over the op's threads. */
static inline void htp_op_run(struct htp_op_ctx * o, htp_job_fn job, void * data) {
    o->ctx->plat->run_jobs(o->ctx->plat->ctx, job, data, o->n_threads);
}

/* The share [*start, *end) of `n` items for thread ith of nth. */
static inline void htp_split(uint32_t n, uint32_t ith, uint32_t nth, uint32_t * start, uint32_t * end) {
    uint32_t per = (n + nth - 1) / nth;
    uint32_t s = ith * per;
    uint32_t e = s + per;
    *start = s < n ? s : n;
    *end = e < n ? e : n;
}

/* Kernels: each returns when done; failures go through htp_op_fail. */
void htp_op_mul_mat(struct htp_op_ctx * o);
void htp_op_binary(struct htp_op_ctx * o);
void htp_op_scale(struct htp_op_ctx * o);
void htp_op_rms_norm(struct htp_op_ctx * o);
void htp_op_softmax(struct htp_op_ctx * o);
void htp_op_glu(struct htp_op_ctx * o);
void htp_op_rope(struct htp_op_ctx * o);
void htp_op_get_rows(struct htp_op_ctx * o);
void htp_op_cpy(struct htp_op_ctx * o);

/* VTCM plans (vtcm-plan.c), shared by the kernels and htp_op_vtcm_need. */
struct htp_mm_plan {
    uint32_t k_pad;      /* K rounded up to the 32-wide tile */
    uint32_t n_block;    /* activation columns per panel (multiple of 32) */
    uint64_t act_bytes;  /* f16 activation panel, n_block x k_pad */
    uint64_t wt_bytes;   /* per thread: f16 weight panel, 32 x k_pad */
    uint64_t tile_bytes; /* per thread: f32 accumulator + two f32 staging tiles */
};
void htp_mm_plan(const struct htp_req * req, struct htp_mm_plan * p);
/* Bytes of f32 rows staged per thread by the row-wise ops. */
uint64_t htp_rows_plan(const struct htp_req * req);

#endif /* HTP_CTX_H */
