/*
 * cdsprpc-double.c: a test double of Qualcomm's libcdsprpc.so, built by
 * build.rs into OUT_DIR for tests only (never shipped, never a plugin).
 *
 * It exports the entry points backplane-hexagon-sys resolves (FastRPC
 * remote_handle64_open/invoke/close and remote_session_control, rpcmem,
 * fastrpc_mmap/munmap, the host side of dspqueue) and runs the DSP side in
 * process: the skel methods of htp/htp-dsp.c (the real DSP platform layer)
 * over host stand-ins of the SDK functions it calls (QuRT threads and
 * semaphores on pthreads, HAP_power_set, HAP_compute_res for VTCM,
 * HAP_mmap_get, the DSP side of dspqueue), with htp/main.c and the kernels
 * behind them. remote_handle64_invoke unmarshals arguments the way qaic's
 * skel does (method id and buffer counts from the scalars word, primitive
 * inputs packed into one buffer, outputs into another), so the host's hand
 * marshalling in src/transport/fastrpc.rs is checked against it.
 *
 * Switches ride in the session URI's query string, as the emulated DSP's
 * do (BACKPLANE_HEXAGON_URI_OPTIONS appends them):
 *   emu_hvx=N, emu_vtcm_kib=N   the DSP's HVX contexts and VTCM (4, 8192)
 *   emu_fault=open              remote_handle64_open fails
 *   emu_fault=hmx               HAP_power_set refuses the HMX clock vote
 *   emu_fault=queue_full        the DSP stops reading its request queue,
 *                               which holds only two packets
 *   emu_fault=stall             the DSP takes requests but its responses
 *                               never get through (the host times out)
 *   emu_fault=dsp_error         every op request is damaged in transit
 *                               (op code 0x7fff): the DSP answers each with
 *                               its invalid-parameters error code
 *   emu_fault_after=N           queue_full and stall strike once the DSP
 *                               has taken N requests (default 0)
 * and, process-wide, in BACKPLANE_CDSPRPC_DOUBLE_FAULT (read at each call,
 * for what comes before or outside a session):
 *   unsigned_pd                 remote_session_control refuses the unsigned PD
 *   rpcmem                      rpcmem_alloc returns NULL
 *   mmap                        fastrpc_mmap fails
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdsprpc-double.h"

/* The session whose skel method runs on this thread (FastRPC calls are synchronous). */
__thread struct dbl_session * g_current;
static struct dbl_session g_sessions[MAX_SESSIONS]; /* FastRPC handle = index + 1 */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static const char * uri_opt(const char * uri, const char * key) {
    size_t n = strlen(key);
    for (const char * p = strchr(uri, '?'); p != NULL; p = strchr(p + 1, '&')) {
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

/* ---- FastRPC ------------------------------------------------------------------------- */

/* Whether BACKPLANE_CDSPRPC_DOUBLE_FAULT names `what`. */
static int global_fault(const char * what) {
    const char * f = getenv("BACKPLANE_CDSPRPC_DOUBLE_FAULT");
    return f != NULL && strcmp(f, what) == 0;
}

API int remote_session_control(uint32_t req, void * data, uint32_t datalen) {
    if (global_fault("unsigned_pd")) {
        return AEE_EUNSUPPORTED;
    }
    if (req != DSPRPC_CONTROL_UNSIGNED_MODULE || data == NULL || datalen != 2 * sizeof(int)) {
        return AEE_EBADPARM;
    }
    const int * ctrl = (const int *) data;
    return ctrl[0] == CDSP_DOMAIN_ID && ctrl[1] == 1 ? AEE_SUCCESS : AEE_EBADPARM;
}

API int remote_handle64_open(const char * name, uint64_t * ph) {
    static const char skel[] = "file:///libbackplane_htp_skel.so?htp_iface_skel_handle_invoke";
    if (name == NULL || ph == NULL) {
        return AEE_EBADPARM;
    }
    if (strncmp(name, skel, sizeof(skel) - 1) != 0) {
        return (int) AEE_ENOSUCHMOD;
    }
    if (!opt_is(uri_opt(name, "_dom"), "cdsp") || uri_opt(name, "_session") == NULL) {
        return AEE_EBADPARM;
    }
    const char * fault = uri_opt(name, "emu_fault");
    if (opt_is(fault, "open")) {
        return AEE_ECONNREFUSED;
    }
    pthread_mutex_lock(&g_mu);
    struct dbl_session * s = NULL;
    for (int i = 0; i < MAX_SESSIONS && s == NULL; i++) {
        if (!g_sessions[i].used) {
            s = &g_sessions[i];
            memset(s, 0, sizeof(*s));
            s->used = 1;
            *ph = (uint64_t) i + 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (s == NULL) {
        return AEE_ENOMEMORY;
    }
    const char * hvx = uri_opt(name, "emu_hvx");
    const char * vtcm = uri_opt(name, "emu_vtcm_kib");
    s->n_hvx = hvx ? (uint32_t) strtoul(hvx, NULL, 10) : 4;
    s->vtcm_bytes = (uint32_t) ((vtcm ? strtoul(vtcm, NULL, 10) : 8192) * 1024);
    s->fault_hmx = opt_is(fault, "hmx");
    s->fault_queue_full = opt_is(fault, "queue_full");
    s->fault_stall = opt_is(fault, "stall");
    s->fault_dsp_error = opt_is(fault, "dsp_error");
    const char * after = uri_opt(name, "emu_fault_after");
    s->fault_after = after ? (uint32_t) strtoul(after, NULL, 10) : 0;
    g_current = s;
    int rc = htp_iface_open(name, &s->dsp_handle);
    g_current = NULL;
    if (rc != AEE_SUCCESS) {
        s->used = 0;
    }
    return rc;
}

static struct dbl_session * session_of(uint64_t h) {
    if (h == 0 || h > MAX_SESSIONS || !g_sessions[h - 1].used) {
        return NULL;
    }
    return &g_sessions[h - 1];
}

API int remote_handle64_close(uint64_t h) {
    struct dbl_session * s = session_of(h);
    if (s == NULL) {
        return AEE_EBADPARM;
    }
    g_current = s;
    int rc = htp_iface_close(s->dsp_handle);
    g_current = NULL;
    s->used = 0;
    return rc;
}

/* remote_arg: a buffer (pointer, length) or a handle. */
typedef union {
    struct {
        void * pv;
        size_t n_len;
    } buf;
    uint64_t h64;
} remote_arg;

API int remote_handle64_invoke(uint64_t h, uint32_t scalars, remote_arg * pra) {
    struct dbl_session * s = session_of(h);
    if (s == NULL) {
        return AEE_EBADPARM;
    }
    uint32_t method = (scalars >> 24) & 0x1f;
    uint32_t n_in = (scalars >> 16) & 0xff;
    uint32_t n_out = (scalars >> 8) & 0xff;
    const uint8_t * in = n_in ? (const uint8_t *) pra[0].buf.pv : NULL;
    size_t in_len = n_in ? pra[0].buf.n_len : 0;
    uint8_t * out = n_out ? (uint8_t *) pra[n_in].buf.pv : NULL;
    size_t out_len = n_out ? pra[n_in].buf.n_len : 0;
    int rc = AEE_EBADPARM;
    g_current = s;
    switch (method) {
        case 2: /* start(in uint32 session_id, in uint64 queue_id, in uint32 n_hvx): packed 4 + pad 4 + 8 + 4 */
            if (n_in == 1 && n_out == 0 && in_len >= 20) {
                uint32_t session_id, n_hvx;
                uint64_t queue_id;
                memcpy(&session_id, in, 4);
                memcpy(&queue_id, in + 8, 8);
                memcpy(&n_hvx, in + 16, 4);
                dbl_apply_queue_faults(queue_id, s);
                rc = n_hvx <= s->n_hvx ? htp_iface_start(s->dsp_handle, session_id, queue_id, n_hvx) : AEE_EBADPARM;
            }
            break;
        case 3: /* stop() */
            if (n_in == 0 && n_out == 0) {
                rc = htp_iface_stop(s->dsp_handle);
            }
            break;
        case 4: /* power(in htp_hmx_clock req) */
            if (n_in == 1 && n_out == 0 && in_len == sizeof(struct htp_hmx_clock)) {
                struct htp_hmx_clock req;
                memcpy(&req, in, sizeof(req));
                rc = htp_iface_power(s->dsp_handle, &req);
            }
            break;
        case 5: /* info(rout htp_dsp_info info) */
            if (n_in == 0 && n_out == 1 && out_len == sizeof(struct htp_dsp_info)) {
                struct htp_dsp_info info;
                rc = htp_iface_info(s->dsp_handle, &info);
                if (rc == AEE_SUCCESS) {
                    memcpy(out, &info, sizeof(info));
                }
            }
            break;
        default:
            break;
    }
    g_current = NULL;
    return rc;
}

/* ---- rpcmem and fastrpc_mmap ------------------------------------------------------- */

struct dbl_mem {
    void * ptr;
    size_t size;
    int mapped;   /* fastrpc_mmap'ed into the DSP process */
    int dsp_refs; /* HAP_mmap_get references */
};

static struct dbl_mem g_mem[MAX_MEM]; /* fd = index + 1 */

API void * rpcmem_alloc(int heapid, uint32_t flags, int size) {
    (void) flags;
    void * p = NULL;
    if (global_fault("rpcmem") || heapid != RPCMEM_HEAP_ID_SYSTEM || size <= 0 || posix_memalign(&p, 4096, (size_t) size) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_MEM; i++) {
        if (g_mem[i].ptr == NULL) {
            g_mem[i] = (struct dbl_mem) { p, (size_t) size, 0, 0 };
            pthread_mutex_unlock(&g_mu);
            return p;
        }
    }
    pthread_mutex_unlock(&g_mu);
    free(p);
    return NULL;
}

API void rpcmem_free(void * po) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_MEM; i++) {
        if (po != NULL && g_mem[i].ptr == po) {
            memset(&g_mem[i], 0, sizeof(g_mem[i]));
            free(po);
        }
    }
    pthread_mutex_unlock(&g_mu);
}

API int rpcmem_to_fd(void * po) {
    int fd = -1;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_MEM; i++) {
        if (po != NULL && g_mem[i].ptr == po) {
            fd = i + 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return fd;
}

static struct dbl_mem * mem_of(int fd) {
    return fd >= 1 && fd <= MAX_MEM && g_mem[fd - 1].ptr != NULL ? &g_mem[fd - 1] : NULL;
}

API int fastrpc_mmap(int domain, int fd, void * addr, int offset, size_t length, int flags) {
    if (global_fault("mmap")) {
        return AEE_ENOMEMORY;
    }
    pthread_mutex_lock(&g_mu);
    struct dbl_mem * m = mem_of(fd);
    int ok = domain == CDSP_DOMAIN_ID && flags == FASTRPC_MAP_FD && m != NULL && !m->mapped && addr == m->ptr &&
             offset == 0 && length <= m->size;
    if (ok) {
        m->mapped = 1;
    }
    pthread_mutex_unlock(&g_mu);
    return ok ? AEE_SUCCESS : AEE_EBADPARM;
}

API int fastrpc_munmap(int domain, int fd, void * addr, size_t length) {
    (void) length;
    pthread_mutex_lock(&g_mu);
    struct dbl_mem * m = mem_of(fd);
    int ok = domain == CDSP_DOMAIN_ID && m != NULL && m->mapped && addr == m->ptr && m->dsp_refs == 0;
    if (ok) {
        m->mapped = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return ok ? AEE_SUCCESS : AEE_EBADPARM;
}

int HAP_mmap_get(int fd, void ** vaddr, uint64_t * paddr) {
    pthread_mutex_lock(&g_mu);
    struct dbl_mem * m = mem_of(fd);
    int ok = m != NULL && m->mapped;
    if (ok) {
        m->dsp_refs++;
        *vaddr = m->ptr;
        *paddr = (uint64_t) (uintptr_t) m->ptr;
    }
    pthread_mutex_unlock(&g_mu);
    return ok ? AEE_SUCCESS : AEE_EBADPARM;
}

int HAP_mmap_put(int fd) {
    pthread_mutex_lock(&g_mu);
    struct dbl_mem * m = mem_of(fd);
    int ok = m != NULL && m->dsp_refs > 0;
    if (ok) {
        m->dsp_refs--;
    }
    pthread_mutex_unlock(&g_mu);
    return ok ? AEE_SUCCESS : AEE_EBADPARM;
}
