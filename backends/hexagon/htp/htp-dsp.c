/*
 * htp-dsp.c: the DSP platform layer and the FastRPC skel implementation of
 * htp_iface.idl, for a real compute DSP.
 *
 * - htp_iface_open/close: a session record per FastRPC handle.
 * - htp_iface_power: HAP_power_set, HVX powered up, then the HMX vote the
 *   host sends (HAP_power_set_HMX_v2: target, min and max corner at the max,
 *   perf mode high); an error fails the host's open.
 * - htp_iface_info: the Hexagon version, the 128-byte HVX contexts
 *   (qurt_hvx_get_units) and the VTCM the session can get
 *   (HAP_compute_res_query_VTCM).
 * - htp_iface_start: acquires that VTCM through HAP_compute_res, imports the
 *   host's dspqueue, starts n_hvx-1 QuRT worker threads and the message loop
 *   thread (main.c's htp_main_loop); every thread holds a 128-byte HVX
 *   context while it runs.
 * - htp_iface_stop: stops the loop (it polls the queue with a short timeout
 *   and watches a stop flag), joins the threads, closes the queue and
 *   releases the VTCM.
 *
 * Shared buffers reach the DSP through the host's fastrpc_mmap; the loop's
 * map_fd is HAP_mmap_get on that fd.
 *
 * Built only for Hexagon (`__hexagon__`), and on the host into the test
 * double of libcdsprpc.so (HTP_DSP_HOST_DOUBLE), which implements the SDK
 * functions of htp-sdk.h over pthreads so this file runs in the tests. The
 * host emulation (emu/htp-emu.c) does not use it.
 */
#if defined(__hexagon__) || defined(HTP_DSP_HOST_DOUBLE)

#include <stdlib.h>
#include <string.h>

#include "htp-ctx.h"
#include "htp-msg.h"
#include "htp-sdk.h"

void htp_main_loop(struct htp_context * ctx);

/* Queue poll period: how long stop waits for the loop at most. */
#define HTP_DSP_POLL_US 10000u
/* Stack of each QuRT thread. */
#define HTP_DSP_STACK_BYTES (64u * 1024u)
/* How long start waits for the VTCM. */
#define HTP_DSP_VTCM_TIMEOUT_US 100000u

#if defined(__HEXAGON_ARCH__)
#define HTP_DSP_ARCH __HEXAGON_ARCH__
#else
#define HTP_DSP_ARCH 75 /* the host double plays a v75 */
#endif

struct htp_dsp_session;

/* One HVX worker thread of the pool. */
struct htp_dsp_worker {
    struct htp_dsp_session * s;
    uint32_t ith;
    qurt_thread_t tid;
    qurt_sem_t go;
    void * stack;
};

struct htp_dsp_session {
    struct htp_context ctx;
    struct htp_platform plat;
    dspqueue_t queue;
    unsigned int vtcm_ctx; /* compute-resource context (0 = none) */
    volatile int stop;
    int running;
    int power_client; /* its address is this session's HAP power client id */
    /* the message loop thread */
    qurt_thread_t loop_tid;
    void * loop_stack;
    /* the worker pool: threads 1..n_threads-1; share 0 runs on the loop thread */
    struct htp_dsp_worker workers[HTP_MAX_THREADS];
    uint32_t n_workers;
    volatile int workers_quit;
    qurt_sem_t done;
    htp_job_fn job;
    void * job_data;
    uint32_t job_nth;
};

/* ---- the platform interface of main.c -------------------------------------- */

static int dsp_read_req(void * c, struct htp_req * req) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) c;
    for (;;) {
        uint32_t flags = 0, n_bufs = 0, len = 0;
        memset(req, 0, sizeof(*req));
        int rc = dspqueue_read(s->queue, &flags, 0, &n_bufs, NULL, (uint32_t) sizeof(*req), &len, (uint8_t *) req,
                               HTP_DSP_POLL_US);
        if (rc == AEE_SUCCESS) {
            return 0;
        }
        if (rc != AEE_EEXPIRED || s->stop) {
            return 1;
        }
    }
}

static int dsp_write_rsp(void * c, const struct htp_rsp * rsp) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) c;
    for (;;) {
        int rc = dspqueue_write(s->queue, 0, 0, NULL, (uint32_t) sizeof(*rsp), (const uint8_t *) rsp, HTP_DSP_POLL_US);
        if (rc == AEE_SUCCESS) {
            return 0;
        }
        if (rc != AEE_EEXPIRED || s->stop) {
            return 1;
        }
    }
}

static void * dsp_map_fd(void * c, int32_t fd, uint64_t size) {
    (void) c;
    (void) size; /* the host mapped the whole allocation with fastrpc_mmap */
    void * va = NULL;
    uint64_t pa = 0;
    if (HAP_mmap_get(fd, &va, &pa) != AEE_SUCCESS) {
        return NULL;
    }
    return va;
}

static void dsp_unmap_fd(void * c, int32_t fd, void * addr, uint64_t size) {
    (void) c;
    (void) addr;
    (void) size;
    HAP_mmap_put(fd);
}

static void dsp_run_jobs(void * c, htp_job_fn job, void * data, uint32_t nth) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) c;
    if (nth > s->n_workers + 1) {
        nth = s->n_workers + 1;
    }
    if (nth <= 1) {
        job(data, 0, 1);
        return;
    }
    s->job = job;
    s->job_data = data;
    s->job_nth = nth;
    for (uint32_t i = 1; i < nth; i++) {
        qurt_sem_up(&s->workers[i - 1].go);
    }
    job(data, 0, nth);
    for (uint32_t i = 1; i < nth; i++) {
        qurt_sem_down(&s->done);
    }
}

static uint64_t dsp_now_us(void * c) {
    (void) c;
    return HAP_perf_get_time_us();
}

/* ---- threads ------------------------------------------------------------------ */

static void worker_main(void * arg) {
    struct htp_dsp_worker * w = (struct htp_dsp_worker *) arg;
    struct htp_dsp_session * s = w->s;
    int hvx = qurt_hvx_lock(QURT_HVX_MODE_128B);
    for (;;) {
        qurt_sem_down(&w->go);
        if (s->workers_quit) {
            break;
        }
        s->job(s->job_data, w->ith, s->job_nth);
        qurt_sem_up(&s->done);
    }
    if (hvx == 0) {
        qurt_hvx_unlock();
    }
    qurt_thread_exit(0);
}

static void loop_main(void * arg) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) arg;
    int hvx = qurt_hvx_lock(QURT_HVX_MODE_128B);
    htp_main_loop(&s->ctx);
    if (hvx == 0) {
        qurt_hvx_unlock();
    }
    qurt_thread_exit(0);
}

/* Starts entry(arg) on a QuRT thread with its own stack; 0 = started. */
static int spawn(qurt_thread_t * tid, void ** stack, const char * name, void (*entry)(void *), void * arg) {
    *stack = malloc(HTP_DSP_STACK_BYTES);
    if (*stack == NULL) {
        return AEE_ENOMEMORY;
    }
    qurt_thread_attr_t attr;
    qurt_thread_attr_init(&attr);
    qurt_thread_attr_set_name(&attr, name);
    qurt_thread_attr_set_stack_addr(&attr, *stack);
    qurt_thread_attr_set_stack_size(&attr, HTP_DSP_STACK_BYTES);
    /* One step above the FastRPC thread that starts us, as ggml's HTP does. */
    int prio = qurt_thread_get_priority(qurt_thread_get_id()) - 1;
    qurt_thread_attr_set_priority(&attr, (unsigned short) (prio > 1 ? prio : 1));
    if (qurt_thread_create(tid, &attr, entry, arg) != 0) {
        free(*stack);
        *stack = NULL;
        return AEE_EFAILED;
    }
    return AEE_SUCCESS;
}

static void stop_workers(struct htp_dsp_session * s) {
    s->workers_quit = 1;
    for (uint32_t i = 0; i < s->n_workers; i++) {
        qurt_sem_up(&s->workers[i].go);
    }
    for (uint32_t i = 0; i < s->n_workers; i++) {
        int status = 0;
        qurt_thread_join(s->workers[i].tid, &status);
        qurt_sem_destroy(&s->workers[i].go);
        free(s->workers[i].stack);
        s->workers[i].stack = NULL;
    }
    s->n_workers = 0;
    qurt_sem_destroy(&s->done);
}

/* ---- VTCM ------------------------------------------------------------------------ */

static unsigned int vtcm_available(void) {
    unsigned int total = 0, avail = 0;
    compute_res_vtcm_page_t total_layout, avail_layout;
    if (HAP_compute_res_query_VTCM(0, &total, &total_layout, &avail, &avail_layout) != AEE_SUCCESS) {
        return 0;
    }
    return avail;
}

static int vtcm_acquire(struct htp_dsp_session * s, unsigned int bytes) {
    compute_res_attr_t attr;
    HAP_compute_res_attr_init(&attr);
    HAP_compute_res_attr_set_vtcm_param(&attr, bytes, 1);
    s->vtcm_ctx = HAP_compute_res_acquire(&attr, HTP_DSP_VTCM_TIMEOUT_US);
    if (s->vtcm_ctx == 0) {
        return AEE_ENOMEMORY;
    }
    s->ctx.vtcm = (uint8_t *) HAP_compute_res_attr_get_vtcm_ptr(&attr);
    if (s->ctx.vtcm == NULL) {
        HAP_compute_res_release(s->vtcm_ctx);
        s->vtcm_ctx = 0;
        return AEE_ENOMEMORY;
    }
    s->ctx.vtcm_bytes = bytes;
    return AEE_SUCCESS;
}

static void vtcm_release(struct htp_dsp_session * s) {
    if (s->vtcm_ctx != 0) {
        HAP_compute_res_release(s->vtcm_ctx);
    }
    s->vtcm_ctx = 0;
    s->ctx.vtcm = NULL;
    s->ctx.vtcm_bytes = 0;
}

/* ---- the skel methods (htp_iface.idl) -------------------------------------------- */

static void queue_event(dspqueue_t queue, int error, void * context) {
    /* The loop polls the queue; packets and errors need no callback work. */
    (void) queue;
    (void) error;
    (void) context;
}

int htp_iface_open(const char * uri, uint64_t * handle) {
    (void) uri;
    if (handle == NULL) {
        return AEE_EBADPARM;
    }
    struct htp_dsp_session * s = (struct htp_dsp_session *) calloc(1, sizeof(*s));
    if (s == NULL) {
        return AEE_ENOMEMORY;
    }
    *handle = (uint64_t) (uintptr_t) s;
    return AEE_SUCCESS;
}

int htp_iface_stop(uint64_t handle) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) (uintptr_t) handle;
    if (s == NULL || !s->running) {
        return AEE_EBADSTATE;
    }
    s->stop = 1;
    int status = 0;
    qurt_thread_join(s->loop_tid, &status);
    free(s->loop_stack);
    s->loop_stack = NULL;
    stop_workers(s);
    dspqueue_close(s->queue);
    s->queue = NULL;
    vtcm_release(s);
    s->running = 0;
    return AEE_SUCCESS;
}

int htp_iface_close(uint64_t handle) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) (uintptr_t) handle;
    if (s == NULL) {
        return AEE_EBADPARM;
    }
    if (s->running) {
        htp_iface_stop(handle);
    }
    free(s);
    return AEE_SUCCESS;
}

int htp_iface_power(uint64_t handle, const struct htp_hmx_clock * req) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) (uintptr_t) handle;
    if (s == NULL || req == NULL) {
        return AEE_EBADPARM;
    }
    HAP_power_request_t r;
    memset(&r, 0, sizeof(r));
    r.type = HAP_power_set_HVX;
    r.hvx.power_up = 1;
    int rc = HAP_power_set(&s->power_client, &r);
    if (rc != AEE_SUCCESS) {
        return rc;
    }
    memset(&r, 0, sizeof(r));
#if !defined(__HVX_ARCH__) || __HVX_ARCH__ >= 75
    r.type = HAP_power_set_HMX_v2;
    r.hmx_v2.set_power = req->set_power;
    r.hmx_v2.power_up = req->power_up;
    r.hmx_v2.set_clock = req->set_clock;
    r.hmx_v2.pick_default = req->pick_default;
    r.hmx_v2.target_corner = req->target_corner;
    r.hmx_v2.min_corner = req->min_corner;
    r.hmx_v2.max_corner = req->max_corner;
    r.hmx_v2.perf_mode = req->perf_mode;
    r.hmx_v2.freq_mhz = req->freq_mhz;
    r.hmx_v2.floor_freq_mhz = req->floor_freq_mhz;
#else
    /* Before v75 the HMX has no clock of its own: power it up only. */
    r.type = HAP_power_set_HMX;
    r.hmx.power_up = req->power_up;
#endif
    return HAP_power_set(&s->power_client, &r);
}

int htp_iface_info(uint64_t handle, struct htp_dsp_info * info) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) (uintptr_t) handle;
    if (s == NULL || info == NULL) {
        return AEE_EBADPARM;
    }
    uint32_t n_hvx = ((uint32_t) qurt_hvx_get_units() >> 8) & 0xffu;
    info->arch = HTP_DSP_ARCH;
    info->n_hvx = n_hvx < HTP_MAX_THREADS ? n_hvx : HTP_MAX_THREADS;
    info->vtcm_bytes = vtcm_available();
    return AEE_SUCCESS;
}

int htp_iface_start(uint64_t handle, uint32_t session_id, uint64_t queue_id, uint32_t n_hvx) {
    struct htp_dsp_session * s = (struct htp_dsp_session *) (uintptr_t) handle;
    (void) session_id;
    if (s == NULL || queue_id == 0 || n_hvx == 0 || n_hvx > HTP_MAX_THREADS) {
        return AEE_EBADPARM;
    }
    if (s->running) {
        return AEE_EBADSTATE;
    }
    int rc = vtcm_acquire(s, vtcm_available());
    if (rc != AEE_SUCCESS) {
        return rc;
    }
    rc = dspqueue_import(queue_id, queue_event, queue_event, s, &s->queue);
    if (rc != AEE_SUCCESS) {
        vtcm_release(s);
        return rc;
    }
    s->stop = 0;
    s->workers_quit = 0;
    s->ctx.n_threads = n_hvx;
    s->plat.ctx = s;
    s->plat.read_req = dsp_read_req;
    s->plat.write_rsp = dsp_write_rsp;
    s->plat.map_fd = dsp_map_fd;
    s->plat.unmap_fd = dsp_unmap_fd;
    s->plat.run_jobs = dsp_run_jobs;
    s->plat.now_us = dsp_now_us;
    s->ctx.plat = &s->plat;
    qurt_sem_init_val(&s->done, 0);
    for (uint32_t i = 0; i + 1 < n_hvx && rc == AEE_SUCCESS; i++) {
        struct htp_dsp_worker * w = &s->workers[i];
        w->s = s;
        w->ith = i + 1;
        qurt_sem_init_val(&w->go, 0);
        rc = spawn(&w->tid, &w->stack, "htp_worker", worker_main, w);
        if (rc == AEE_SUCCESS) {
            s->n_workers++;
        } else {
            qurt_sem_destroy(&w->go);
        }
    }
    if (rc == AEE_SUCCESS) {
        rc = spawn(&s->loop_tid, &s->loop_stack, "htp_loop", loop_main, s);
    }
    if (rc != AEE_SUCCESS) {
        stop_workers(s);
        dspqueue_close(s->queue);
        s->queue = NULL;
        vtcm_release(s);
        return rc;
    }
    s->running = 1;
    return AEE_SUCCESS;
}

#endif /* __hexagon__ || HTP_DSP_HOST_DOUBLE */
