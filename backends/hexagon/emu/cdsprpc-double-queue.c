/*
 * cdsprpc-double-queue.c: dspqueue for the libcdsprpc.so test double, both
 * sides: the host creates, exports, writes requests and reads responses;
 * the DSP (htp-dsp.c) imports, reads requests and writes responses. A
 * handle knows its side; both point at one shared queue.
 *
 * Capacity is in bytes as dspqueue's is: each packet costs an 8-byte header
 * plus its message rounded up to 8 bytes. The session's faults (set when
 * the host starts the DSP with the queue) stall the DSP's reading
 * (queue_full, with room for two packets only), swallow its responses
 * (stall), or damage op requests in transit (dsp_error).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdsprpc-double.h"

#define MAX_QUEUES 64
#define PKT_HEADER 8u

struct dbl_ring {
    uint8_t ** msgs;
    uint32_t * lens;
    uint32_t max_pkts, head, count;
    uint32_t cap_bytes, used_bytes;
};

struct dbl_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct dbl_ring req, rsp;
    int refs;       /* host handle + DSP handle */
    int host_closed;
    uint64_t id;
    int fault_reader_stalled, fault_swallow_rsp, fault_damage_ops;
    uint32_t fault_after; /* requests the DSP takes before a stall strikes */
    uint32_t dsp_reads;   /* requests the DSP has taken */
};

/* A handle: one side's view of a queue. */
struct dspqueue {
    struct dbl_queue * q;
    int dsp_side;
};

static pthread_mutex_t g_qmu = PTHREAD_MUTEX_INITIALIZER;
static struct dbl_queue * g_queues[MAX_QUEUES]; /* exported id = index + 1 */

static uint32_t pkt_cost(uint32_t len) {
    return PKT_HEADER + ((len + 7u) & ~7u);
}

static int ring_init(struct dbl_ring * r, uint32_t cap_bytes) {
    r->cap_bytes = cap_bytes;
    r->max_pkts = cap_bytes / PKT_HEADER + 1;
    r->msgs = (uint8_t **) calloc(r->max_pkts, sizeof(uint8_t *));
    r->lens = (uint32_t *) calloc(r->max_pkts, sizeof(uint32_t));
    return r->msgs != NULL && r->lens != NULL;
}

static void ring_free(struct dbl_ring * r) {
    for (uint32_t i = 0; i < r->count; i++) {
        free(r->msgs[(r->head + i) % r->max_pkts]);
    }
    free(r->msgs);
    free(r->lens);
}

static int ring_has_room(const struct dbl_ring * r, uint32_t len) {
    return r->count < r->max_pkts && r->used_bytes + pkt_cost(len) <= r->cap_bytes;
}

static void queue_unref(struct dbl_queue * q) {
    pthread_mutex_lock(&q->mu);
    int last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (last) {
        ring_free(&q->req);
        ring_free(&q->rsp);
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q);
    }
}

/* Waits on the queue until `deadline` (NULL: forever); 0 or ETIMEDOUT. */
static int wait_until(struct dbl_queue * q, const struct timespec * deadline) {
    return deadline ? pthread_cond_timedwait(&q->cv, &q->mu, deadline) : pthread_cond_wait(&q->cv, &q->mu);
}

static const struct timespec * deadline_in(uint32_t timeout_us, struct timespec * ts) {
    if (timeout_us == DSPQUEUE_TIMEOUT_NONE) {
        return NULL;
    }
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t ns = (uint64_t) ts->tv_nsec + (uint64_t) timeout_us * 1000u;
    ts->tv_sec += (time_t) (ns / 1000000000u);
    ts->tv_nsec = (long) (ns % 1000000000u);
    return ts;
}

API int dspqueue_create(int domain, uint32_t flags, uint32_t req_queue_size, uint32_t resp_queue_size,
                        dspqueue_callback_t packet_callback, dspqueue_callback_t error_callback, void * callback_context,
                        dspqueue_t * queue) {
    (void) flags;
    (void) error_callback;
    (void) callback_context;
    /* Polling only: the host reads responses itself. */
    if (domain != CDSP_DOMAIN_ID || packet_callback != NULL || queue == NULL || req_queue_size == 0 ||
        resp_queue_size == 0) {
        return AEE_EBADPARM;
    }
    struct dbl_queue * q = (struct dbl_queue *) calloc(1, sizeof(*q));
    struct dspqueue * h = (struct dspqueue *) calloc(1, sizeof(*h));
    if (q == NULL || h == NULL || !ring_init(&q->req, req_queue_size) || !ring_init(&q->rsp, resp_queue_size)) {
        if (q != NULL) {
            free(q->req.msgs);
            free(q->req.lens);
            free(q->rsp.msgs);
            free(q->rsp.lens);
        }
        free(q);
        free(h);
        return AEE_ENOMEMORY;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->refs = 1;
    h->q = q;
    *queue = h;
    return AEE_SUCCESS;
}

API int dspqueue_export(dspqueue_t queue, uint64_t * queue_id) {
    if (queue == NULL || queue->dsp_side || queue_id == NULL) {
        return AEE_EBADPARM;
    }
    struct dbl_queue * q = queue->q;
    int rc = AEE_ENOMEMORY;
    pthread_mutex_lock(&g_qmu);
    if (q->id != 0) {
        *queue_id = q->id;
        rc = AEE_SUCCESS;
    }
    for (int i = 0; i < MAX_QUEUES && rc != AEE_SUCCESS; i++) {
        if (g_queues[i] == NULL) {
            g_queues[i] = q;
            q->id = (uint64_t) i + 1;
            *queue_id = q->id;
            rc = AEE_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_qmu);
    return rc;
}

static struct dbl_queue * exported(uint64_t id) {
    return id >= 1 && id <= MAX_QUEUES ? g_queues[id - 1] : NULL;
}

void dbl_apply_queue_faults(uint64_t queue_id, const struct dbl_session * s) {
    pthread_mutex_lock(&g_qmu);
    struct dbl_queue * q = exported(queue_id);
    if (q != NULL) {
        pthread_mutex_lock(&q->mu);
        q->fault_reader_stalled = s->fault_queue_full;
        q->fault_swallow_rsp = s->fault_stall;
        q->fault_damage_ops = s->fault_dsp_error;
        q->fault_after = s->fault_after;
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_unlock(&g_qmu);
}

int dspqueue_import(uint64_t queue_id, dspqueue_callback_t packet_callback, dspqueue_callback_t error_callback,
                    void * callback_context, dspqueue_t * queue) {
    (void) packet_callback;
    (void) error_callback;
    (void) callback_context;
    struct dspqueue * h = (struct dspqueue *) calloc(1, sizeof(*h));
    if (h == NULL || queue == NULL) {
        free(h);
        return AEE_EBADPARM;
    }
    pthread_mutex_lock(&g_qmu);
    struct dbl_queue * q = exported(queue_id);
    if (q != NULL) {
        pthread_mutex_lock(&q->mu);
        q->refs++;
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_unlock(&g_qmu);
    if (q == NULL) {
        free(h);
        return AEE_EBADPARM;
    }
    h->q = q;
    h->dsp_side = 1;
    *queue = h;
    return AEE_SUCCESS;
}

API int dspqueue_close(dspqueue_t queue) {
    if (queue == NULL) {
        return AEE_EBADPARM;
    }
    struct dbl_queue * q = queue->q;
    if (!queue->dsp_side) {
        pthread_mutex_lock(&g_qmu);
        if (q->id != 0) {
            g_queues[q->id - 1] = NULL;
        }
        pthread_mutex_unlock(&g_qmu);
        pthread_mutex_lock(&q->mu);
        q->host_closed = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    free(queue);
    queue_unref(q);
    return AEE_SUCCESS;
}

API int dspqueue_write(dspqueue_t queue, uint32_t flags, uint32_t num_buffers, struct dspqueue_buffer * buffers,
                       uint32_t message_length, const uint8_t * message, uint32_t timeout_us) {
    (void) flags;
    (void) buffers;
    if (queue == NULL || num_buffers != 0 || message == NULL || message_length == 0) {
        return AEE_EBADPARM;
    }
    struct dbl_queue * q = queue->q;
    struct dbl_ring * r = queue->dsp_side ? &q->rsp : &q->req;
    if (pkt_cost(message_length) > r->cap_bytes) {
        return AEE_EBADPARM;
    }
    uint8_t * copy = (uint8_t *) malloc(message_length);
    if (copy == NULL) {
        return AEE_ENOMEMORY;
    }
    memcpy(copy, message, message_length);
    struct timespec ts;
    const struct timespec * deadline = deadline_in(timeout_us, &ts);
    int rc = AEE_SUCCESS;
    pthread_mutex_lock(&q->mu);
    int swallow = queue->dsp_side && q->fault_swallow_rsp && q->dsp_reads > q->fault_after;
    int small = !queue->dsp_side && q->fault_reader_stalled && r->count >= 2; /* room for two packets only */
    while (!q->host_closed && (swallow || small || !ring_has_room(r, message_length))) {
        if (wait_until(q, deadline) == ETIMEDOUT) {
            rc = AEE_EEXPIRED;
            break;
        }
        small = !queue->dsp_side && q->fault_reader_stalled && r->count >= 2;
    }
    if (q->host_closed) {
        rc = AEE_EBADSTATE;
    }
    if (rc == AEE_SUCCESS) {
        uint32_t slot = (r->head + r->count) % r->max_pkts;
        r->msgs[slot] = copy;
        r->lens[slot] = message_length;
        r->count++;
        r->used_bytes += pkt_cost(message_length);
        copy = NULL;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    free(copy);
    return rc;
}

API int dspqueue_read(dspqueue_t queue, uint32_t * flags, uint32_t max_buffers, uint32_t * num_buffers,
                      struct dspqueue_buffer * buffers, uint32_t max_message_length, uint32_t * message_length,
                      uint8_t * message, uint32_t timeout_us) {
    (void) max_buffers;
    (void) buffers;
    if (queue == NULL || flags == NULL || num_buffers == NULL || message_length == NULL || message == NULL) {
        return AEE_EBADPARM;
    }
    struct dbl_queue * q = queue->q;
    struct dbl_ring * r = queue->dsp_side ? &q->req : &q->rsp;
    struct timespec ts;
    const struct timespec * deadline = deadline_in(timeout_us, &ts);
    int rc = AEE_SUCCESS;
    pthread_mutex_lock(&q->mu);
    int stalled = queue->dsp_side && q->fault_reader_stalled && q->dsp_reads >= q->fault_after;
    while (!(queue->dsp_side && q->host_closed) && (stalled || r->count == 0)) {
        if (wait_until(q, deadline) == ETIMEDOUT) {
            rc = AEE_EEXPIRED;
            break;
        }
    }
    if (queue->dsp_side && q->host_closed) {
        rc = AEE_EBADSTATE;
    }
    if (rc == AEE_SUCCESS && r->lens[r->head] > max_message_length) {
        rc = AEE_EBADPARM; /* dspqueue refuses a read into a short buffer */
    }
    if (rc == AEE_SUCCESS) {
        uint32_t len = r->lens[r->head];
        memcpy(message, r->msgs[r->head], len);
        free(r->msgs[r->head]);
        r->used_bytes -= pkt_cost(len);
        r->head = (r->head + 1) % r->max_pkts;
        r->count--;
        *message_length = len;
        *flags = 1; /* DSPQUEUE_PACKET_FLAG_MESSAGE */
        *num_buffers = 0;
        q->dsp_reads += queue->dsp_side;
        if (queue->dsp_side && q->fault_damage_ops && len >= sizeof(struct htp_req)) {
            struct htp_req * req = (struct htp_req *) message;
            if (req->kind == HTP_MSG_OP) {
                req->op = 0x7fff;
            }
        }
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}
