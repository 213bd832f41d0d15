/*
 * cdsprpc-double-sdk.c: host stand-ins for the Hexagon SDK functions the
 * DSP platform layer (htp/htp-dsp.c) calls, for the libcdsprpc.so test
 * double: QuRT threads and semaphores on pthreads, HVX contexts counted,
 * HAP_power_set checking the HMX vote, HAP_compute_res handing out VTCM
 * from the heap, HAP_perf time. The simulated DSP's size (HVX contexts,
 * VTCM) and faults come from the session whose skel method is running.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdsprpc-double.h"

#define MAX_THREADS 256
#define MAX_VTCM 64

/* ---- QuRT threads -------------------------------------------------------------- */

struct dbl_thread {
    pthread_t t;
    int used;
    void (*entry)(void *);
    void * arg;
};

static pthread_mutex_t g_tmu = PTHREAD_MUTEX_INITIALIZER;
static struct dbl_thread g_threads[MAX_THREADS]; /* qurt_thread_t = index + 1 */
static __thread int g_hvx_locked;

void qurt_thread_attr_init(qurt_thread_attr_t * attr) {
    memset(attr, 0, sizeof(*attr));
    attr->priority = 255;
}

void qurt_thread_attr_set_name(qurt_thread_attr_t * attr, const char * name) {
    strncpy(attr->name, name, sizeof(attr->name) - 1);
}

void qurt_thread_attr_set_stack_addr(qurt_thread_attr_t * attr, void * stack_addr) {
    attr->stack_addr = stack_addr;
}

void qurt_thread_attr_set_stack_size(qurt_thread_attr_t * attr, unsigned int stack_size) {
    attr->stack_size = stack_size;
}

void qurt_thread_attr_set_priority(qurt_thread_attr_t * attr, unsigned short priority) {
    attr->priority = priority;
}

static void * trampoline(void * arg) {
    struct dbl_thread * t = (struct dbl_thread *) arg;
    t->entry(t->arg);
    return NULL;
}

int qurt_thread_create(qurt_thread_t * thread_id, qurt_thread_attr_t * attr, void (*entrypoint)(void *), void * arg) {
    /* QuRT takes the caller's stack; a host thread needs none, but the attr must be complete. */
    if (attr == NULL || attr->stack_addr == NULL || attr->stack_size < 4096 || entrypoint == NULL) {
        return AEE_EBADPARM;
    }
    pthread_mutex_lock(&g_tmu);
    struct dbl_thread * t = NULL;
    for (int i = 0; i < MAX_THREADS && t == NULL; i++) {
        if (!g_threads[i].used) {
            t = &g_threads[i];
            t->used = 1;
            *thread_id = (qurt_thread_t) i + 1;
        }
    }
    pthread_mutex_unlock(&g_tmu);
    if (t == NULL) {
        return AEE_ENOMEMORY;
    }
    t->entry = entrypoint;
    t->arg = arg;
    if (pthread_create(&t->t, NULL, trampoline, t) != 0) {
        t->used = 0;
        return AEE_EFAILED;
    }
    return AEE_SUCCESS;
}

int qurt_thread_join(unsigned int tid, int * status) {
    if (tid == 0 || tid > MAX_THREADS || !g_threads[tid - 1].used) {
        return AEE_EBADPARM;
    }
    pthread_join(g_threads[tid - 1].t, NULL);
    pthread_mutex_lock(&g_tmu);
    g_threads[tid - 1].used = 0;
    pthread_mutex_unlock(&g_tmu);
    if (status != NULL) {
        *status = 0;
    }
    return AEE_SUCCESS;
}

void qurt_thread_exit(int status) {
    (void) status;
    if (g_hvx_locked) {
        abort(); /* a thread must give its HVX context back before it ends */
    }
    pthread_exit(NULL);
}

int qurt_thread_get_priority(qurt_thread_t threadid) {
    (void) threadid;
    return 100;
}

qurt_thread_t qurt_thread_get_id(void) {
    return 0;
}

int qurt_hvx_lock(qurt_hvx_mode_t lock_mode) {
    if (lock_mode != QURT_HVX_MODE_128B || g_hvx_locked) {
        return AEE_EFAILED;
    }
    g_hvx_locked = 1;
    return 0;
}

int qurt_hvx_unlock(void) {
    if (!g_hvx_locked) {
        return AEE_EFAILED;
    }
    g_hvx_locked = 0;
    return 0;
}

int qurt_hvx_get_units(void) {
    uint32_t n = g_current ? g_current->n_hvx : 0;
    return (int) ((n & 0xffu) << 8);
}

/* ---- QuRT semaphores: the 8-byte qurt_sem_t holds a pointer to a host one ------- */

struct dbl_sem {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned int val;
};

static struct dbl_sem * sem_of(qurt_sem_t * sem) {
    struct dbl_sem * s;
    memcpy(&s, sem, sizeof(s));
    return s;
}

void qurt_sem_init_val(qurt_sem_t * sem, unsigned short val) {
    struct dbl_sem * s = (struct dbl_sem *) calloc(1, sizeof(*s));
    if (s == NULL) {
        abort();
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->val = val;
    memset(sem, 0, sizeof(*sem));
    memcpy(sem, &s, sizeof(s));
}

int qurt_sem_down(qurt_sem_t * sem) {
    struct dbl_sem * s = sem_of(sem);
    pthread_mutex_lock(&s->mu);
    while (s->val == 0) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    s->val--;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int qurt_sem_up(qurt_sem_t * sem) {
    struct dbl_sem * s = sem_of(sem);
    pthread_mutex_lock(&s->mu);
    s->val++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void qurt_sem_destroy(qurt_sem_t * sem) {
    struct dbl_sem * s = sem_of(sem);
    if (s != NULL) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
    }
    memset(sem, 0, sizeof(*sem));
}

/* ---- HAP_power_set ------------------------------------------------------------------ */

int HAP_power_set(void * context, HAP_power_request_t * request) {
    if (context == NULL || request == NULL || g_current == NULL) {
        return AEE_EBADPARM;
    }
    switch (request->type) {
        case HAP_power_set_HVX:
            return request->hvx.power_up ? AEE_SUCCESS : AEE_EBADPARM;
        case HAP_power_set_HMX_v2: {
            if (g_current->fault_hmx) {
                return AEE_EFAILED;
            }
            const HAP_power_hmx_payload_v2 * p = &request->hmx_v2;
            int corners_ok = p->min_corner <= HAP_DCVS_EXP_VCORNER_MAX && p->max_corner <= HAP_DCVS_EXP_VCORNER_MAX &&
                             p->min_corner <= p->target_corner && p->target_corner <= p->max_corner;
            return p->set_clock && corners_ok && p->perf_mode <= 2 ? AEE_SUCCESS : AEE_EBADPARM;
        }
        default:
            return AEE_EUNSUPPORTED;
    }
}

/* ---- HAP_compute_res (VTCM) ------------------------------------------------------- */

/* attributes[0] = size, [1] = single page, [2] = the VTCM address once acquired. */
static pthread_mutex_t g_vmu = PTHREAD_MUTEX_INITIALIZER;
static void * g_vtcm[MAX_VTCM]; /* context id = index + 1 */

int HAP_compute_res_attr_init(compute_res_attr_t * attr) {
    memset(attr, 0, sizeof(*attr));
    return AEE_SUCCESS;
}

int HAP_compute_res_attr_set_vtcm_param(compute_res_attr_t * attr, unsigned int vtcm_size, unsigned char b_single_page) {
    attr->attributes[0] = vtcm_size;
    attr->attributes[1] = b_single_page;
    return AEE_SUCCESS;
}

void * HAP_compute_res_attr_get_vtcm_ptr(compute_res_attr_t * attr) {
    return (void *) (uintptr_t) attr->attributes[2];
}

unsigned int HAP_compute_res_acquire(compute_res_attr_t * attr, unsigned int timeout_us) {
    (void) timeout_us;
    uint64_t size = attr->attributes[0];
    void * p = NULL;
    if (g_current == NULL || size == 0 || size > g_current->vtcm_bytes || posix_memalign(&p, 2048, size) != 0) {
        return 0;
    }
    pthread_mutex_lock(&g_vmu);
    for (int i = 0; i < MAX_VTCM; i++) {
        if (g_vtcm[i] == NULL) {
            g_vtcm[i] = p;
            attr->attributes[2] = (uint64_t) (uintptr_t) p;
            pthread_mutex_unlock(&g_vmu);
            return (unsigned int) i + 1;
        }
    }
    pthread_mutex_unlock(&g_vmu);
    free(p);
    return 0;
}

int HAP_compute_res_release(unsigned int context_id) {
    if (context_id == 0 || context_id > MAX_VTCM) {
        return AEE_EBADPARM;
    }
    pthread_mutex_lock(&g_vmu);
    void * p = g_vtcm[context_id - 1];
    g_vtcm[context_id - 1] = NULL;
    pthread_mutex_unlock(&g_vmu);
    free(p);
    return p != NULL ? AEE_SUCCESS : AEE_EBADPARM;
}

int HAP_compute_res_query_VTCM(unsigned int application_id, unsigned int * total_block_size,
                               compute_res_vtcm_page_t * total_block_layout, unsigned int * avail_block_size,
                               compute_res_vtcm_page_t * avail_block_layout) {
    (void) application_id;
    if (g_current == NULL) {
        return AEE_EBADSTATE;
    }
    unsigned int bytes = g_current->vtcm_bytes;
    compute_res_vtcm_page_t layout;
    memset(&layout, 0, sizeof(layout));
    layout.block_size = bytes;
    layout.page_list_len = 1;
    layout.page_list[0].page_size = bytes;
    layout.page_list[0].num_pages = 1;
    if (total_block_size) {
        *total_block_size = bytes;
    }
    if (avail_block_size) {
        *avail_block_size = bytes;
    }
    if (total_block_layout) {
        *total_block_layout = layout;
    }
    if (avail_block_layout) {
        *avail_block_layout = layout;
    }
    return AEE_SUCCESS;
}

uint64_t HAP_perf_get_time_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}
