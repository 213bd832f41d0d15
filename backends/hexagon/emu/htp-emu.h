/*
 * htp-emu.h: the emulated DSP's host-side entry points. The same names as
 * the FastRPC interface of the real DSP library (htp_iface_*), plus the
 * stand-ins for rpcmem and dspqueue that the emulation provides. The Rust
 * declarations are in backends/hexagon/src/transport/emulated.rs.
 *
 * Options ride in the session URI's query string, as FastRPC URIs carry
 * theirs: emu_fault=open|hmx|stall (fail the open, fail the HMX clock vote,
 * never read the request queue), emu_vtcm_kib=N, emu_hvx=N.
 */
#ifndef HTP_EMU_H
#define HTP_EMU_H

#include <stdint.h>

#include "htp-msg.h"

/* Error codes, AEEStdErr.h's values. */
#define HTP_EMU_OK 0
#define HTP_EMU_EFAILED 1
#define HTP_EMU_ENOMEMORY 2
#define HTP_EMU_EBADPARM 14
#define HTP_EMU_EUNSUPPORTED 20
#define HTP_EMU_ECONNREFUSED 0x72
#define HTP_EMU_EEXPIRED 12

int htp_iface_open(const char * uri, uint64_t * handle);
int htp_iface_close(uint64_t handle);
int htp_iface_power(uint64_t handle, const struct htp_hmx_clock * req);
int htp_iface_info(uint64_t handle, struct htp_dsp_info * info);
int htp_iface_start(uint64_t handle, uint32_t session_id, uint64_t queue_id, uint32_t n_hvx);
int htp_iface_stop(uint64_t handle);

void * htp_emu_rpcmem_alloc(uint64_t size, int32_t * fd);
void htp_emu_rpcmem_free(void * ptr);

int htp_emu_queue_create(uint32_t depth, uint64_t * queue_id);
int htp_emu_queue_close(uint64_t queue_id);
int htp_emu_queue_write(uint64_t queue_id, const void * msg, uint32_t len, uint32_t timeout_us);
int htp_emu_queue_read(uint64_t queue_id, void * msg, uint32_t max_len, uint32_t * len, uint32_t timeout_us);

/* sizeof of the protocol structs as this C compiler lays them out. */
void htp_emu_struct_sizes(uint32_t * req, uint32_t * rsp, uint32_t * hmx, uint32_t * info);

#endif /* HTP_EMU_H */
