/*
 * htp-emu.c: the emulated DSP. It runs the DSP-side message loop of htp/
 * (main.c and the kernels, unchanged) on a host thread per session, behind
 * the same entry points as the real DSP library, with a pthread ring buffer
 * standing in for dspqueue, malloc for rpcmem and VTCM, and a HAP power
 * stand-in that validates the HMX clock vote. Host-only: the one file of the
 * backend that includes POSIX headers.
 */
#define _POSIX_C_SOURCE 200809L

#include "htp-emu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "htp-ctx.h"

void htp_main_loop(struct htp_context * ctx);

/* ---- rpcmem ------------------------------------------------------------ */

#define EMU_MAX_MEM 4096

struct emu_mem {
    void * ptr;
    uint64_t size;
};

static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_mem g_mem[EMU_MAX_MEM]; /* fd = index + 1 */

void * htp_emu_rpcmem_alloc(uint64_t size, int32_t * fd) {
    void * p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < EMU_MAX_MEM; i++) {
        if (g_mem[i].ptr == NULL) {
            g_mem[i].ptr = p;
            g_mem[i].size = size;
            *fd = i + 1;
            pthread_mutex_unlock(&g_mem_mu);
            return p;
        }
    }
    pthread_mutex_unlock(&g_mem_mu);
    free(p);
    return NULL;
}

void htp_emu_rpcmem_free(void * ptr) {
    if (ptr == NULL) {
        return;
    }
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < EMU_MAX_MEM; i++) {
        if (g_mem[i].ptr == ptr) {
            g_mem[i].ptr = NULL;
            g_mem[i].size = 0;
        }
    }
    pthread_mutex_unlock(&g_mem_mu);
    free(ptr);
}

/* ---- dspqueue ------------------------------------------------------------ */

struct emu_ring {
    uint8_t * slots;
    uint32_t slot_size, depth, head, count;
};

struct emu_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct emu_ring req, rsp;
    int closed;
    int stalled; /* fault: the DSP never reads requests */
};

static int ring_init(struct emu_ring * r, uint32_t depth, uint32_t slot_size) {
    r->slots = (uint8_t *) calloc(depth, slot_size);
    r->slot_size = slot_size;
    r->depth = depth;
    r->head = 0;
    r->count = 0;
    return r->slots != NULL;
}

static void ring_push(struct emu_ring * r, const void * msg, uint32_t len) {
    uint8_t * slot = r->slots + (size_t) ((r->head + r->count) % r->depth) * r->slot_size;
    memset(slot, 0, r->slot_size);
    memcpy(slot, msg, len < r->slot_size ? len : r->slot_size);
    r->count++;
}

static void ring_pop(struct emu_ring * r, void * out, uint32_t len) {
    memcpy(out, r->slots + (size_t) r->head * r->slot_size, len < r->slot_size ? len : r->slot_size);
    r->head = (r->head + 1) % r->depth;
    r->count--;
}

/* Absolute deadline `us` from now. */
static struct timespec deadline(uint32_t us) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t) ts.tv_nsec + (uint64_t) us * 1000u;
    ts.tv_sec += (time_t) (ns / 1000000000u);
    ts.tv_nsec = (long) (ns % 1000000000u);
    return ts;
}

int htp_emu_queue_create(uint32_t depth, uint64_t * queue_id) {
    if (depth == 0 || queue_id == NULL) {
        return HTP_EMU_EBADPARM;
    }
    struct emu_queue * q = (struct emu_queue *) calloc(1, sizeof(*q));
    if (q == NULL) {
        return HTP_EMU_ENOMEMORY;
    }
    if (!ring_init(&q->req, depth, sizeof(struct htp_req)) || !ring_init(&q->rsp, depth, sizeof(struct htp_rsp))) {
        free(q->req.slots);
        free(q->rsp.slots);
        free(q);
        return HTP_EMU_ENOMEMORY;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    *queue_id = (uint64_t) (uintptr_t) q;
    return HTP_EMU_OK;
}

/* Marks the queue closed and wakes everyone; the memory stays until _close. */
static void queue_shutdown(struct emu_queue * q) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int htp_emu_queue_close(uint64_t queue_id) {
    struct emu_queue * q = (struct emu_queue *) (uintptr_t) queue_id;
    if (q == NULL) {
        return HTP_EMU_EBADPARM;
    }
    queue_shutdown(q);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->req.slots);
    free(q->rsp.slots);
    free(q);
    return HTP_EMU_OK;
}

/* Waits (bounded by timeout_us) until the ring has room (want_room) or a
 * message; 0 = it does, else HTP_EMU_EEXPIRED. Called with q->mu held. */
static int wait_ring(struct emu_queue * q, const struct emu_ring * r, int want_room, uint32_t timeout_us) {
    struct timespec ts = deadline(timeout_us);
    for (;;) {
        int ready = want_room ? r->count < r->depth : r->count > 0;
        if (ready || q->closed) {
            return 0;
        }
        if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) == ETIMEDOUT) {
            ready = want_room ? r->count < r->depth : r->count > 0;
            return ready ? 0 : HTP_EMU_EEXPIRED;
        }
    }
}

int htp_emu_queue_write(uint64_t queue_id, const void * msg, uint32_t len, uint32_t timeout_us) {
    struct emu_queue * q = (struct emu_queue *) (uintptr_t) queue_id;
    if (q == NULL || msg == NULL || len > q->req.slot_size) {
        return HTP_EMU_EBADPARM;
    }
    pthread_mutex_lock(&q->mu);
    int rc = q->req.count < q->req.depth ? 0 : HTP_EMU_EEXPIRED;
    if (rc != 0 && timeout_us > 0) {
        rc = wait_ring(q, &q->req, 1, timeout_us);
    }
    if (q->closed) {
        rc = HTP_EMU_EFAILED;
    }
    if (rc == 0) {
        ring_push(&q->req, msg, len);
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int htp_emu_queue_read(uint64_t queue_id, void * msg, uint32_t max_len, uint32_t * len, uint32_t timeout_us) {
    struct emu_queue * q = (struct emu_queue *) (uintptr_t) queue_id;
    if (q == NULL || msg == NULL || len == NULL) {
        return HTP_EMU_EBADPARM;
    }
    pthread_mutex_lock(&q->mu);
    int rc = q->rsp.count > 0 ? 0 : HTP_EMU_EEXPIRED;
    if (rc != 0 && timeout_us > 0) {
        rc = wait_ring(q, &q->rsp, 0, timeout_us);
    }
    if (rc == 0 && q->rsp.count == 0) {
        rc = HTP_EMU_EFAILED; /* closed */
    }
    if (rc == 0) {
        uint32_t n = max_len < q->rsp.slot_size ? max_len : q->rsp.slot_size;
        ring_pop(&q->rsp, msg, n);
        *len = n;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* ---- the session ----------------------------------------------------------- */

struct emu_session {
    char uri[512];
    int fault_hmx, fault_stall;
    struct htp_dsp_info info;
    int hmx_at_max;
    struct emu_queue * queue;
    pthread_t thread;
    int running;
    struct htp_platform plat;
    struct htp_context ctx;
};

static int dsp_read_req(void * c, struct htp_req * req) {
    struct emu_session * s = (struct emu_session *) c;
    struct emu_queue * q = s->queue;
    pthread_mutex_lock(&q->mu);
    while (!q->closed && (q->stalled || q->req.count == 0)) {
        pthread_cond_wait(&q->cv, &q->mu);
    }
    int rc = 1;
    if (!q->closed) {
        ring_pop(&q->req, req, sizeof(*req));
        pthread_cond_broadcast(&q->cv);
        rc = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static int dsp_write_rsp(void * c, const struct htp_rsp * rsp) {
    struct emu_session * s = (struct emu_session *) c;
    struct emu_queue * q = s->queue;
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->rsp.count == q->rsp.depth) {
        pthread_cond_wait(&q->cv, &q->mu);
    }
    int rc = 1;
    if (!q->closed) {
        ring_push(&q->rsp, rsp, sizeof(*rsp));
        pthread_cond_broadcast(&q->cv);
        rc = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static void * dsp_map_fd(void * c, int32_t fd, uint64_t size) {
    (void) c;
    void * p = NULL;
    pthread_mutex_lock(&g_mem_mu);
    if (fd >= 1 && fd <= EMU_MAX_MEM && g_mem[fd - 1].ptr != NULL && size <= g_mem[fd - 1].size) {
        p = g_mem[fd - 1].ptr;
    }
    pthread_mutex_unlock(&g_mem_mu);
    return p;
}

static void dsp_unmap_fd(void * c, int32_t fd, void * addr, uint64_t size) {
    (void) c;
    (void) fd;
    (void) addr;
    (void) size;
}

/* The emulation runs an op's thread shares one after another: results are
 * deterministic and the split logic is still exercised. */
static void dsp_run_jobs(void * c, htp_job_fn job, void * data, uint32_t nth) {
    (void) c;
    for (uint32_t i = 0; i < nth; i++) {
        job(data, i, nth);
    }
}

static uint64_t dsp_now_us(void * c) {
    (void) c;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void * dsp_thread(void * arg) {
    struct emu_session * s = (struct emu_session *) arg;
    htp_main_loop(&s->ctx);
    return NULL;
}

/* The value of `key=` in the URI's query, or NULL. */
static const char * uri_opt(const char * uri, const char * key) {
    size_t n = strlen(key);
    for (const char * p = strchr(uri, '?'); p != NULL; p = strpbrk(p + 1, "&")) {
        if (strncmp(p + 1, key, n) == 0 && p[1 + n] == '=') {
            return p + 2 + n;
        }
    }
    return NULL;
}

static int opt_is(const char * v, const char * want) {
    size_t n = strlen(want);
    return v != NULL && strncmp(v, want, n) == 0 && (v[n] == '\0' || v[n] == '&');
}

int htp_iface_open(const char * uri, uint64_t * handle) {
    if (uri == NULL || handle == NULL || strlen(uri) >= sizeof(((struct emu_session *) 0)->uri)) {
        return HTP_EMU_EBADPARM;
    }
    const char * dom = uri_opt(uri, "_dom");
    if (!opt_is(dom, "cdsp")) {
        return HTP_EMU_EUNSUPPORTED; /* the emulation is a compute DSP only */
    }
    const char * fault = uri_opt(uri, "emu_fault");
    if (opt_is(fault, "open")) {
        return HTP_EMU_ECONNREFUSED;
    }
    struct emu_session * s = (struct emu_session *) calloc(1, sizeof(*s));
    if (s == NULL) {
        return HTP_EMU_ENOMEMORY;
    }
    strcpy(s->uri, uri);
    s->fault_hmx = opt_is(fault, "hmx");
    s->fault_stall = opt_is(fault, "stall");
    const char * vtcm = uri_opt(uri, "emu_vtcm_kib");
    const char * hvx = uri_opt(uri, "emu_hvx");
    s->info.arch = 75;
    s->info.n_hvx = hvx ? (uint32_t) strtoul(hvx, NULL, 10) : 4;
    s->info.vtcm_bytes = (vtcm ? strtoull(vtcm, NULL, 10) : 8192) * 1024;
    if (s->info.n_hvx == 0 || s->info.n_hvx > HTP_MAX_THREADS) {
        free(s);
        return HTP_EMU_EBADPARM;
    }
    *handle = (uint64_t) (uintptr_t) s;
    return HTP_EMU_OK;
}

/* The HAP_power_set stand-in: accepts a well-formed HMX v2 vote. */
int htp_iface_power(uint64_t handle, const struct htp_hmx_clock * req) {
    struct emu_session * s = (struct emu_session *) (uintptr_t) handle;
    if (s == NULL || req == NULL) {
        return HTP_EMU_EBADPARM;
    }
    if (s->fault_hmx) {
        return HTP_EMU_EFAILED;
    }
    int corners_ok = req->min_corner <= HTP_VCORNER_MAX && req->max_corner <= HTP_VCORNER_MAX &&
                     req->min_corner <= req->target_corner && req->target_corner <= req->max_corner;
    if (!req->set_clock || !corners_ok || req->perf_mode > 2) {
        return HTP_EMU_EBADPARM;
    }
    s->hmx_at_max = req->target_corner == HTP_VCORNER_MAX;
    return HTP_EMU_OK;
}

int htp_iface_info(uint64_t handle, struct htp_dsp_info * info) {
    struct emu_session * s = (struct emu_session *) (uintptr_t) handle;
    if (s == NULL || info == NULL) {
        return HTP_EMU_EBADPARM;
    }
    *info = s->info;
    return HTP_EMU_OK;
}

int htp_iface_start(uint64_t handle, uint32_t session_id, uint64_t queue_id, uint32_t n_hvx) {
    struct emu_session * s = (struct emu_session *) (uintptr_t) handle;
    (void) session_id;
    if (s == NULL || queue_id == 0 || s->running || n_hvx == 0 || n_hvx > s->info.n_hvx) {
        return HTP_EMU_EBADPARM;
    }
    s->queue = (struct emu_queue *) (uintptr_t) queue_id;
    s->queue->stalled = s->fault_stall;
    s->ctx.vtcm = NULL;
    if (posix_memalign((void **) &s->ctx.vtcm, 2048, s->info.vtcm_bytes) != 0) {
        return HTP_EMU_ENOMEMORY;
    }
    s->ctx.vtcm_bytes = s->info.vtcm_bytes;
    s->ctx.n_threads = n_hvx;
    s->plat.ctx = s;
    s->plat.read_req = dsp_read_req;
    s->plat.write_rsp = dsp_write_rsp;
    s->plat.map_fd = dsp_map_fd;
    s->plat.unmap_fd = dsp_unmap_fd;
    s->plat.run_jobs = dsp_run_jobs;
    s->plat.now_us = dsp_now_us;
    s->ctx.plat = &s->plat;
    if (pthread_create(&s->thread, NULL, dsp_thread, s) != 0) {
        free(s->ctx.vtcm);
        s->ctx.vtcm = NULL;
        return HTP_EMU_EFAILED;
    }
    s->running = 1;
    return HTP_EMU_OK;
}

int htp_iface_stop(uint64_t handle) {
    struct emu_session * s = (struct emu_session *) (uintptr_t) handle;
    if (s == NULL || !s->running) {
        return HTP_EMU_EBADPARM;
    }
    queue_shutdown(s->queue);
    pthread_join(s->thread, NULL);
    free(s->ctx.vtcm);
    s->ctx.vtcm = NULL;
    s->running = 0;
    return HTP_EMU_OK;
}

int htp_iface_close(uint64_t handle) {
    struct emu_session * s = (struct emu_session *) (uintptr_t) handle;
    if (s == NULL) {
        return HTP_EMU_EBADPARM;
    }
    if (s->running) {
        htp_iface_stop(handle);
    }
    free(s);
    return HTP_EMU_OK;
}

void htp_emu_struct_sizes(uint32_t * req, uint32_t * rsp, uint32_t * hmx, uint32_t * info) {
    *req = sizeof(struct htp_req);
    *rsp = sizeof(struct htp_rsp);
    *hmx = sizeof(struct htp_hmx_clock);
    *info = sizeof(struct htp_dsp_info);
}
