/*
 * htp-sdk.h: the few Hexagon SDK functions and types the DSP platform layer
 * (htp-dsp.c) uses, declared here so the DSP side compiles without the SDK.
 *
 * Names, argument lists and layouts follow the SDK's public headers:
 * qurt_thread.h, qurt_hvx.h, qurt_sem.h (QuRT), HAP_power.h, HAP_compute_res.h,
 * HAP_mem.h, HAP_perf.h, dspqueue.h and AEEStdErr.h. With the real SDK
 * (HTP_HAVE_HEXAGON_SDK defined by its build) the SDK's own headers are used
 * instead and nothing below is declared.
 *
 * The structs the SDK fills in or reads whole are declared at least as
 * large as the SDK's (opaque storage where their inside is not ours to
 * touch): `compute_res_attr_t` (8 x u64), `qurt_sem_t` (8 bytes, 8-aligned),
 * `qurt_thread_attr_t` (the SDK's fields, padded), and `HAP_power_request_t`
 * (type, then a union padded past every payload the SDK knows).
 *
 * On the host the test double of libcdsprpc.so (emu/cdsprpc-double.c)
 * implements these functions over pthreads and malloc, which is how the
 * platform layer is tested without a DSP.
 */
#ifndef HTP_SDK_H
#define HTP_SDK_H

#if defined(HTP_HAVE_HEXAGON_SDK)

#include <AEEStdErr.h>
#include <HAP_compute_res.h>
#include <HAP_mem.h>
#include <HAP_perf.h>
#include <HAP_power.h>
#include <dspqueue.h>
#include <qurt.h>

#else

#include <stdint.h>

/* ---- AEEStdErr.h ---------------------------------------------------------- */
#define AEE_SUCCESS 0
#define AEE_EFAILED 1
#define AEE_ENOMEMORY 2
#define AEE_EEXPIRED 12
#define AEE_EBADPARM 14
#define AEE_EUNSUPPORTED 20
#define AEE_EBADSTATE 31 /* AEE_EBADSTATE: wrong state for the call */

/* ---- qurt_thread.h, qurt_hvx.h, qurt_sem.h ---------------------------------- */
typedef unsigned int qurt_thread_t;

/* qurt_thread_attr_t: the SDK's fields (name[16] first), padded. */
typedef struct {
    char name[16];
    unsigned char tcb_partition;
    unsigned char stid;
    unsigned short priority;
    unsigned char autostack_group_reserved;
    unsigned char bus_priority;
    unsigned short timetest_id;
    unsigned int stack_size;
    void * stack_addr;
    unsigned short detach_state;
    unsigned char reserved_pad[30];
} qurt_thread_attr_t;

/* qurt_sem_t: 8 bytes, 8-aligned (a union over raw[2] in the SDK). */
typedef union {
    unsigned int raw[2] __attribute__((aligned(8)));
    uint64_t opaque;
} qurt_sem_t;

typedef enum {
    QURT_HVX_MODE_64B = 0,
    QURT_HVX_MODE_128B = 1,
} qurt_hvx_mode_t;

void qurt_thread_attr_init(qurt_thread_attr_t * attr);
void qurt_thread_attr_set_name(qurt_thread_attr_t * attr, const char * name);
void qurt_thread_attr_set_stack_addr(qurt_thread_attr_t * attr, void * stack_addr);
void qurt_thread_attr_set_stack_size(qurt_thread_attr_t * attr, unsigned int stack_size);
void qurt_thread_attr_set_priority(qurt_thread_attr_t * attr, unsigned short priority);
int qurt_thread_create(qurt_thread_t * thread_id, qurt_thread_attr_t * attr, void (*entrypoint)(void *), void * arg);
int qurt_thread_join(unsigned int tid, int * status);
void qurt_thread_exit(int status);
int qurt_thread_get_priority(qurt_thread_t threadid);
qurt_thread_t qurt_thread_get_id(void);
int qurt_hvx_lock(qurt_hvx_mode_t lock_mode);
int qurt_hvx_unlock(void);
/* Bits 0-7: 64-byte HVX units; bits 8-15: 128-byte units. */
int qurt_hvx_get_units(void);
void qurt_sem_init_val(qurt_sem_t * sem, unsigned short val);
int qurt_sem_down(qurt_sem_t * sem);
int qurt_sem_up(qurt_sem_t * sem);
void qurt_sem_destroy(qurt_sem_t * sem);

/* ---- HAP_power.h ------------------------------------------------------------ */
typedef enum {
    HAP_power_set_HVX = 2,
    HAP_power_set_HMX = 13,
    HAP_power_set_HMX_v2 = 14,
} HAP_Power_request_type;

#define HAP_DCVS_EXP_VCORNER_MAX 0xFFFFu
#define HAP_CLK_PERF_HIGH 0u

typedef struct {
    unsigned char power_up;
} HAP_power_hvx_payload;

typedef HAP_power_hvx_payload HAP_power_hmx_payload;

/* HAP_power_hmx_payload_v2 (enums as 32-bit). */
typedef struct {
    unsigned char set_power;
    unsigned char power_up;
    unsigned char set_clock;
    unsigned char pick_default;
    uint32_t target_corner;
    uint32_t min_corner;
    uint32_t max_corner;
    uint32_t perf_mode;
    uint32_t freq_mhz;
    uint32_t floor_freq_mhz;
    uint32_t param1;
    uint32_t param2;
    uint32_t param3;
} HAP_power_hmx_payload_v2;

typedef struct {
    HAP_Power_request_type type;
    union {
        HAP_power_hvx_payload hvx;
        HAP_power_hmx_payload hmx;
        HAP_power_hmx_payload_v2 hmx_v2;
        uint64_t align;
        unsigned char pad[248]; /* past the largest SDK payload */
    };
} HAP_power_request_t;

int HAP_power_set(void * context, HAP_power_request_t * request);

/* ---- HAP_compute_res.h ---------------------------------------------------- */
typedef struct {
    unsigned long long attributes[8];
} compute_res_attr_t;

typedef struct {
    unsigned int page_size;
    unsigned int num_pages;
} compute_res_vtcm_page_def_t;

typedef struct {
    unsigned int block_size;
    unsigned int page_list_len;
    compute_res_vtcm_page_def_t page_list[8];
} compute_res_vtcm_page_t;

int HAP_compute_res_attr_init(compute_res_attr_t * attr);
int HAP_compute_res_attr_set_vtcm_param(compute_res_attr_t * attr, unsigned int vtcm_size, unsigned char b_single_page);
void * HAP_compute_res_attr_get_vtcm_ptr(compute_res_attr_t * attr);
unsigned int HAP_compute_res_acquire(compute_res_attr_t * attr, unsigned int timeout_us);
int HAP_compute_res_release(unsigned int context_id);
int HAP_compute_res_query_VTCM(unsigned int application_id, unsigned int * total_block_size,
                               compute_res_vtcm_page_t * total_block_layout, unsigned int * avail_block_size,
                               compute_res_vtcm_page_t * avail_block_layout);

/* ---- HAP_mem.h, HAP_perf.h -------------------------------------------------- */
/* The DSP address of shared memory `fd` mapped by the host's fastrpc_mmap (takes a reference). */
int HAP_mmap_get(int fd, void ** vaddr, uint64_t * paddr);
/* Drops the reference HAP_mmap_get took. */
int HAP_mmap_put(int fd);
uint64_t HAP_perf_get_time_us(void);

/* ---- dspqueue.h (the DSP side) -------------------------------------------- */
#define DSPQUEUE_TIMEOUT_NONE 0xffffffffu

typedef struct dspqueue * dspqueue_t;

struct dspqueue_buffer {
    uint32_t fd;
    uint32_t size;
    uint32_t offset;
    uint32_t flags;
    union {
        void * ptr;
        uint64_t address;
    };
};

typedef void (*dspqueue_callback_t)(dspqueue_t queue, int error, void * context);

int dspqueue_import(uint64_t queue_id, dspqueue_callback_t packet_callback, dspqueue_callback_t error_callback,
                    void * callback_context, dspqueue_t * queue);
int dspqueue_close(dspqueue_t queue);
int dspqueue_read(dspqueue_t queue, uint32_t * flags, uint32_t max_buffers, uint32_t * num_buffers,
                  struct dspqueue_buffer * buffers, uint32_t max_message_length, uint32_t * message_length,
                  uint8_t * message, uint32_t timeout_us);
int dspqueue_write(dspqueue_t queue, uint32_t flags, uint32_t num_buffers, struct dspqueue_buffer * buffers,
                   uint32_t message_length, const uint8_t * message, uint32_t timeout_us);

#endif /* HTP_HAVE_HEXAGON_SDK */

#endif /* HTP_SDK_H */
