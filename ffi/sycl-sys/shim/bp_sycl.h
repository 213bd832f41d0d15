/*
 * backplane's C shim over the SYCL runtime (libsycl): devices and their
 * info, in-order queues, USM memory and copies, kernel bundles built at run
 * time from SYCL source (sycl_ext_oneapi_kernel_compiler), kernel launch and
 * events. Plain C so that bindgen can read it and so that the plugin can
 * load the shim with dlopen: nothing here names a SYCL type.
 *
 * Errors: functions returning int give 0 on success and nonzero on failure;
 * bp_last_error() then holds the message (per thread). No C++ exception
 * leaves the shim.
 */
#ifndef BP_SYCL_H
#define BP_SYCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this interface; the Rust side refuses another. */
#define BP_SYCL_SHIM_VERSION 1

/* Device kinds of bp_device_info::kind. */
#define BP_DEVICE_CPU 0
#define BP_DEVICE_GPU 1
#define BP_DEVICE_ACCEL 2
#define BP_DEVICE_OTHER 3

/* Argument kinds of bp_arg::kind. */
#define BP_ARG_POINTER 0 /* value points at a USM pointer (void *) */
#define BP_ARG_BYTES 1   /* value points at `size` bytes (4, 8, 16, ... 512, a power of two) */

/* An in-order queue on one device, with its own context. */
typedef struct bp_queue bp_queue;
/* An executable kernel bundle built from source. */
typedef struct bp_bundle bp_bundle;
/* One kernel of a bundle. */
typedef struct bp_kernel bp_kernel;
/* A point in a queue. */
typedef struct bp_event bp_event;

/* What the runtime says of a device. Strings are NUL-terminated, truncated. */
typedef struct bp_device_info {
    char name[256];
    char vendor[128];
    char driver_version[128];
    /* Backend and platform, e.g. "opencl" / "Intel(R) OpenCL". */
    char backend[32];
    char platform[128];
    /* Canonical architecture name (info::device::architecture), e.g.
       "intel_gpu_acm_g10", "intel_cpu_spr", "x86_64", or "unknown". */
    char architecture[64];
    /* The raw architecture enum value. */
    uint64_t architecture_raw;
    int32_t kind;
    /* PCI device id (ext::intel::info::device::device_id), 0 if unknown. */
    uint32_t device_id;
    uint32_t compute_units;
    uint32_t n_sub_group_sizes;
    uint32_t sub_group_sizes[8];
    uint64_t max_work_group_size;
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;
    uint64_t max_alloc_bytes;
    /* Free memory if the runtime tells (ext_intel_free_memory), else 0. */
    uint64_t free_mem_bytes;
    int32_t has_fp16;
    int32_t has_fp64;
    /* The device can build SYCL source at run time (libsycl-jit). */
    int32_t can_compile_sycl;
} bp_device_info;

/* One kernel argument. */
typedef struct bp_arg {
    uint32_t kind;
    uint32_t size;
    const void *value;
} bp_arg;

/* BP_SYCL_SHIM_VERSION of the built shim. */
int bp_shim_version(void);
/* Message of the last failure on this thread ("" if none). */
const char *bp_last_error(void);

/* Number of devices over all platforms (enumerates once). */
int bp_device_count(int32_t *out);
/* Info of device `index`. */
int bp_device_get_info(int32_t index, bp_device_info *out);

/* An in-order queue on device `index`. */
int bp_queue_create(int32_t index, bp_queue **out);
void bp_queue_destroy(bp_queue *q);
/* Waits for all work of the queue; reports asynchronous errors. */
int bp_queue_wait(bp_queue *q);

/* Device USM of `bytes` (aligned to `align`); *out NULL and nonzero on failure. */
int bp_malloc_device(bp_queue *q, size_t bytes, size_t align, void **out);
int bp_free(bp_queue *q, void *ptr);
/* Queued copy between any host and USM pointers; blocking when `wait`. */
int bp_memcpy(bp_queue *q, void *dst, const void *src, size_t bytes, int32_t wait);
/* Queued byte fill; blocking when `wait`. */
int bp_memset(bp_queue *q, void *dst, int32_t value, size_t bytes, int32_t wait);

/* Builds `source` (SYCL, free-function kernels) for the queue's device.
   `include_names`/`include_sources` give `n_includes` virtual headers,
   `options` `n_options` build options. On failure the build log is in
   bp_last_error(). */
int bp_bundle_build(bp_queue *q, const char *source, const char *const *include_names,
                    const char *const *include_sources, int32_t n_includes,
                    const char *const *options, int32_t n_options, bp_bundle **out);
void bp_bundle_destroy(bp_bundle *b);
/* The kernel `name` (an extern "C" free function) of a bundle. */
int bp_bundle_get_kernel(bp_bundle *b, const char *name, bp_kernel **out);
void bp_kernel_destroy(bp_kernel *k);
/* Largest work-group size the kernel can run with on the queue's device. */
int bp_kernel_max_work_group(bp_kernel *k, bp_queue *q, size_t *out);

/* Queues `k` over an nd-range of `dims` (1..3) dimensions, `global` and
   `local` sizes in SYCL order (last = fastest), with `n_args` arguments. */
int bp_launch(bp_queue *q, bp_kernel *k, int32_t dims, const size_t *global, const size_t *local,
              const bp_arg *args, int32_t n_args);

/* An event at the current end of the queue. */
int bp_event_record(bp_queue *q, bp_event **out);
/* Blocks until the event completes. */
int bp_event_wait(bp_event *e);
/* Makes later work of `q` wait for `e`. */
int bp_queue_wait_event(bp_queue *q, bp_event *e);
void bp_event_destroy(bp_event *e);

#ifdef __cplusplus
}
#endif

#endif /* BP_SYCL_H */
