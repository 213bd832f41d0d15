/*
 * cdsprpc-double.h: what the files of the libcdsprpc.so test double share
 * (see cdsprpc-double.c). Internal to the double; nothing here is exported.
 */
#ifndef CDSPRPC_DOUBLE_H
#define CDSPRPC_DOUBLE_H

#include <stddef.h>
#include <stdint.h>

#include "htp-ctx.h"
#include "htp-msg.h"
#include "htp-sdk.h"

/* Exported from the library (everything else is hidden). */
#define API __attribute__((visibility("default")))

#define CDSP_DOMAIN_ID 3
#define RPCMEM_HEAP_ID_SYSTEM 25
#define FASTRPC_MAP_FD 2
#define DSPRPC_CONTROL_UNSIGNED_MODULE 2
#define AEE_ECONNREFUSED 72
#define AEE_ENOSUCHMOD 0x80000405 /* what FastRPC answers for a missing skel */
#define MAX_SESSIONS 16
#define MAX_MEM 4096

/* The simulated DSP behind one FastRPC handle, with its fault switches. */
struct dbl_session {
    int used;
    uint64_t dsp_handle;
    uint32_t n_hvx;
    uint32_t vtcm_bytes;
    int fault_hmx, fault_queue_full, fault_stall, fault_dsp_error;
    uint32_t fault_after; /* queue_full and stall start after this many requests */
};

/* The session whose skel method runs on this thread (NULL on DSP threads). */
extern __thread struct dbl_session * g_current;

/* Applies the session's queue faults to exported queue `queue_id` (before start imports it). */
void dbl_apply_queue_faults(uint64_t queue_id, const struct dbl_session * s);

/* The skel methods (htp/htp-dsp.c). */
int htp_iface_open(const char * uri, uint64_t * handle);
int htp_iface_close(uint64_t handle);
int htp_iface_power(uint64_t handle, const struct htp_hmx_clock * req);
int htp_iface_info(uint64_t handle, struct htp_dsp_info * info);
int htp_iface_start(uint64_t handle, uint32_t session_id, uint64_t queue_id, uint32_t n_hvx);
int htp_iface_stop(uint64_t handle);

#endif /* CDSPRPC_DOUBLE_H */
