/*
 * htp-msg.h: the message protocol between the host (backends/hexagon/src)
 * and the DSP side (this directory).
 *
 * Every request is one `struct htp_req` written to the request queue; the
 * DSP answers each with one `struct htp_rsp`, in order. Tensors name their
 * memory as (buffer id, byte offset); a buffer id is bound to shared memory
 * by an HTP_MSG_MAP request before use. The Rust mirror of these structs is
 * backends/hexagon/src/msg.rs; a unit test checks that sizes agree.
 *
 * Plain C11, no platform headers: this file is compiled for Hexagon and for
 * the host emulation alike.
 */
#ifndef HTP_MSG_H
#define HTP_MSG_H

#include <stdint.h>

#define HTP_MAX_SRC 4
#define HTP_MAX_PARAMS 16
#define HTP_RSP_DETAIL 96

/* What a request asks for. */
enum htp_msg_kind {
    HTP_MSG_OP = 1,    /* run one op */
    HTP_MSG_MAP = 2,   /* bind dst.buf to the shared memory fd params[0], size dst.offset */
    HTP_MSG_UNMAP = 3, /* forget buffer dst.buf */
    HTP_MSG_SYNC = 4,  /* no-op, answered when everything before it is done */
};

/* Ops the DSP runs (our own codes). */
enum htp_op {
    HTP_OP_MUL_MAT = 0,
    HTP_OP_ADD = 1,
    HTP_OP_SUB = 2,
    HTP_OP_MUL = 3,
    HTP_OP_DIV = 4,
    HTP_OP_SCALE = 5,
    HTP_OP_RMS_NORM = 6,
    HTP_OP_SOFTMAX = 7,
    HTP_OP_ROPE = 8,
    HTP_OP_GLU_SWIGLU = 9,
    HTP_OP_GET_ROWS = 10,
    HTP_OP_CPY = 11,
    HTP_OP_COUNT = 12,
};

/* Element types: ggml's codes. */
enum htp_type {
    HTP_TYPE_F32 = 0,
    HTP_TYPE_F16 = 1,
    HTP_TYPE_Q4_0 = 2,
    HTP_TYPE_Q8_0 = 8,
    HTP_TYPE_I32 = 26,
    HTP_TYPE_BF16 = 30,
};

/* Status of a response (0 = success). */
enum htp_status {
    HTP_STATUS_OK = 0,
    HTP_STATUS_INTERNAL = 1,
    HTP_STATUS_NO_SUPPORT = 2,
    HTP_STATUS_INVAL_PARAMS = 3,
    HTP_STATUS_VTCM_TOO_SMALL = 4,
    HTP_STATUS_BAD_BUFFER = 5,
    HTP_STATUS_BAD_INDEX = 6,
};

/* One tensor: where it lives and its shape, ggml's ne/nb (nb in bytes). */
struct htp_tensor {
    uint64_t buf;    /* buffer id bound by HTP_MSG_MAP (0 = absent) */
    uint64_t offset; /* byte offset of the first element in that buffer */
    uint32_t type;   /* enum htp_type */
    uint32_t reserved;
    uint32_t ne[4];
    uint32_t nb[4];
};

/* One request. */
struct htp_req {
    uint32_t kind;  /* enum htp_msg_kind */
    uint32_t op;    /* enum htp_op (HTP_MSG_OP) */
    uint32_t seq;   /* echoed in the response */
    uint32_t n_src; /* sources used in src[] */
    int32_t params[HTP_MAX_PARAMS]; /* ggml's op_params for the op */
    struct htp_tensor src[HTP_MAX_SRC];
    struct htp_tensor dst;
};

/* One response. */
struct htp_rsp {
    uint32_t seq;    /* the request's seq */
    uint32_t status; /* enum htp_status */
    uint32_t op;     /* the request's op */
    uint32_t usecs;  /* time the DSP spent (0 when not measured) */
    char detail[HTP_RSP_DETAIL]; /* NUL-terminated reason when status != OK */
};

/*
 * The HMX clock vote the host asks for right after opening a session, the
 * fields of HAP_power.h's HAP_power_hmx_payload_v2 in its order (enums as
 * uint32_t). The host sets target, min and max corner to
 * HTP_VCORNER_MAX and perf_mode to HTP_CLK_PERF_HIGH; a failure fails the
 * open.
 */
struct htp_hmx_clock {
    uint8_t set_power;
    uint8_t power_up;
    uint8_t set_clock;
    uint8_t pick_default;
    uint32_t target_corner;
    uint32_t min_corner;
    uint32_t max_corner;
    uint32_t perf_mode;
    uint32_t freq_mhz;
    uint32_t floor_freq_mhz;
    uint32_t param1;
    uint32_t param2;
    uint32_t param3;
};

#define HTP_VCORNER_MAX 0xFFFFu   /* HAP_DCVS_EXP_VCORNER_MAX */
#define HTP_CLK_PERF_HIGH 0u      /* HAP_CLK_PERF_HIGH */

/* What the DSP reports about itself (htp_iface_info). */
struct htp_dsp_info {
    uint32_t arch;       /* Hexagon version, e.g. 75 */
    uint32_t n_hvx;      /* HVX contexts */
    uint64_t vtcm_bytes; /* VTCM this session may use */
};

/* Bytes of VTCM the op of `req` needs when run on `n_threads` HVX threads
 * (vtcm-plan.c); the host calls it in supports_op. */
uint64_t htp_op_vtcm_need(const struct htp_req * req, uint32_t n_threads);

#endif /* HTP_MSG_H */
