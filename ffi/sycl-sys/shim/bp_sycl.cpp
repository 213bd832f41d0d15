// backplane's C shim over the SYCL runtime; see bp_sycl.h for the contract.
// Built by build.rs with plain g++ against the headers of Intel's
// intel-sycl-rt wheel into libbackplane_sycl_shim.so, which the plugin loads
// with dlopen.

#include "bp_sycl.h"

#include <sycl/sycl.hpp>

#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace syclex = sycl::ext::oneapi::experimental;

struct bp_queue {
    sycl::queue queue;
};

struct bp_bundle {
    sycl::kernel_bundle<sycl::bundle_state::executable> bundle;
};

struct bp_kernel {
    sycl::kernel kernel;
};

struct bp_event {
    sycl::event event;
};

namespace {

thread_local std::string last_error;

int fail(const std::string &msg) {
    last_error = msg;
    return 1;
}

// Runs `f`, turning every exception into an error code and message.
template <typename F> int guarded(const char *what, F &&f) {
    try {
        f();
        return 0;
    } catch (const sycl::exception &e) {
        return fail(std::string(what) + ": " + e.what());
    } catch (const std::exception &e) {
        return fail(std::string(what) + ": " + e.what());
    } catch (...) {
        return fail(std::string(what) + ": unknown exception");
    }
}

std::vector<sycl::device> &devices() {
    static std::vector<sycl::device> all;
    static std::once_flag once;
    std::call_once(once, [] {
        for (const auto &p : sycl::platform::get_platforms()) {
            for (const auto &d : p.get_devices()) {
                all.push_back(d);
            }
        }
    });
    return all;
}

void copy_str(char *dst, size_t cap, const std::string &src) {
    size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
    std::memcpy(dst, src.data(), n);
    dst[n] = 0;
}

const char *arch_name(syclex::architecture a) {
    switch (a) {
#define __SYCL_ARCHITECTURE(NAME, VAL)                                                                                 \
    case syclex::architecture::NAME:                                                                                   \
        return #NAME;
#define __SYCL_ARCHITECTURE_ALIAS(NAME, VAL)
#include <sycl/ext/oneapi/experimental/device_architecture.def>
#undef __SYCL_ARCHITECTURE
#undef __SYCL_ARCHITECTURE_ALIAS
    default:
        return "unknown";
    }
}

const char *backend_name(sycl::backend b) {
    switch (b) {
    case sycl::backend::opencl:
        return "opencl";
    case sycl::backend::ext_oneapi_level_zero:
        return "level_zero";
    case sycl::backend::ext_oneapi_cuda:
        return "cuda";
    case sycl::backend::ext_oneapi_hip:
        return "hip";
    case sycl::backend::ext_oneapi_native_cpu:
        return "native_cpu";
    default:
        return "other";
    }
}

template <size_t N> struct Bytes {
    unsigned char b[N];
};

template <size_t N> void set_bytes(sycl::handler &h, int i, const void *v) {
    Bytes<N> blob;
    std::memcpy(blob.b, v, N);
    h.set_arg(i, blob);
}

void set_arg(sycl::handler &h, int i, const bp_arg &a) {
    if (a.kind == BP_ARG_POINTER) {
        void *p = *static_cast<void *const *>(a.value);
        h.set_arg(i, p);
        return;
    }
    switch (a.size) {
    case 4: return set_bytes<4>(h, i, a.value);
    case 8: return set_bytes<8>(h, i, a.value);
    case 16: return set_bytes<16>(h, i, a.value);
    case 32: return set_bytes<32>(h, i, a.value);
    case 64: return set_bytes<64>(h, i, a.value);
    case 128: return set_bytes<128>(h, i, a.value);
    case 256: return set_bytes<256>(h, i, a.value);
    case 512: return set_bytes<512>(h, i, a.value);
    default: throw std::runtime_error("argument " + std::to_string(i) + " has unsupported size " + std::to_string(a.size));
    }
}

template <int D> sycl::nd_range<D> make_range(const size_t *g, const size_t *l) {
    if constexpr (D == 1) {
        return sycl::nd_range<1>(sycl::range<1>(g[0]), sycl::range<1>(l[0]));
    } else if constexpr (D == 2) {
        return sycl::nd_range<2>(sycl::range<2>(g[0], g[1]), sycl::range<2>(l[0], l[1]));
    } else {
        return sycl::nd_range<3>(sycl::range<3>(g[0], g[1], g[2]), sycl::range<3>(l[0], l[1], l[2]));
    }
}

} // namespace

extern "C" {

int bp_shim_version(void) { return BP_SYCL_SHIM_VERSION; }

const char *bp_last_error(void) { return last_error.c_str(); }

int bp_device_count(int32_t *out) {
    return guarded("enumerate devices", [&] { *out = static_cast<int32_t>(devices().size()); });
}

int bp_device_get_info(int32_t index, bp_device_info *out) {
    return guarded("device info", [&] {
        auto &all = devices();
        if (index < 0 || static_cast<size_t>(index) >= all.size()) {
            throw std::runtime_error("no device " + std::to_string(index));
        }
        sycl::device d = all[index];
        std::memset(out, 0, sizeof *out);
        copy_str(out->name, sizeof out->name, d.get_info<sycl::info::device::name>());
        copy_str(out->vendor, sizeof out->vendor, d.get_info<sycl::info::device::vendor>());
        copy_str(out->driver_version, sizeof out->driver_version, d.get_info<sycl::info::device::driver_version>());
        copy_str(out->backend, sizeof out->backend, backend_name(d.get_backend()));
        copy_str(out->platform, sizeof out->platform, d.get_platform().get_info<sycl::info::platform::name>());
        syclex::architecture arch = syclex::architecture::unknown;
        try {
            arch = d.get_info<syclex::info::device::architecture>();
        } catch (...) {
        }
        copy_str(out->architecture, sizeof out->architecture, arch_name(arch));
        out->architecture_raw = static_cast<uint64_t>(arch);
        out->kind = d.is_cpu() ? BP_DEVICE_CPU : d.is_gpu() ? BP_DEVICE_GPU : d.is_accelerator() ? BP_DEVICE_ACCEL : BP_DEVICE_OTHER;
        if (d.has(sycl::aspect::ext_intel_device_id)) {
            out->device_id = d.get_info<sycl::ext::intel::info::device::device_id>();
        }
        out->compute_units = d.get_info<sycl::info::device::max_compute_units>();
        auto sg = d.get_info<sycl::info::device::sub_group_sizes>();
        for (size_t i = 0; i < sg.size() && i < 8; i++) {
            out->sub_group_sizes[i] = static_cast<uint32_t>(sg[i]);
            out->n_sub_group_sizes = static_cast<uint32_t>(i + 1);
        }
        out->max_work_group_size = d.get_info<sycl::info::device::max_work_group_size>();
        out->global_mem_bytes = d.get_info<sycl::info::device::global_mem_size>();
        out->local_mem_bytes = d.get_info<sycl::info::device::local_mem_size>();
        out->max_alloc_bytes = d.get_info<sycl::info::device::max_mem_alloc_size>();
        if (d.has(sycl::aspect::ext_intel_free_memory)) {
            out->free_mem_bytes = d.get_info<sycl::ext::intel::info::device::free_memory>();
        }
        out->has_fp16 = d.has(sycl::aspect::fp16);
        out->has_fp64 = d.has(sycl::aspect::fp64);
        out->can_compile_sycl = d.ext_oneapi_can_compile(syclex::source_language::sycl);
    });
}

int bp_queue_create(int32_t index, bp_queue **out) {
    *out = nullptr;
    return guarded("create queue", [&] {
        auto &all = devices();
        if (index < 0 || static_cast<size_t>(index) >= all.size()) {
            throw std::runtime_error("no device " + std::to_string(index));
        }
        sycl::context ctx(all[index]);
        *out = new bp_queue{sycl::queue(ctx, all[index], sycl::property::queue::in_order())};
    });
}

void bp_queue_destroy(bp_queue *q) {
    if (q) {
        try {
            q->queue.wait();
        } catch (...) {
        }
        delete q;
    }
}

int bp_queue_wait(bp_queue *q) {
    return guarded("queue wait", [&] { q->queue.wait_and_throw(); });
}

int bp_malloc_device(bp_queue *q, size_t bytes, size_t align, void **out) {
    *out = nullptr;
    return guarded("malloc_device", [&] {
        void *p = sycl::aligned_alloc_device(align, bytes == 0 ? align : bytes, q->queue);
        if (!p) {
            throw std::runtime_error("out of device memory allocating " + std::to_string(bytes) + " bytes");
        }
        *out = p;
    });
}

int bp_free(bp_queue *q, void *ptr) {
    return guarded("free", [&] { sycl::free(ptr, q->queue); });
}

int bp_memcpy(bp_queue *q, void *dst, const void *src, size_t bytes, int32_t wait) {
    return guarded("memcpy", [&] {
        if (bytes == 0) {
            return;
        }
        sycl::event e = q->queue.memcpy(dst, src, bytes);
        if (wait) {
            e.wait_and_throw();
        }
    });
}

int bp_memset(bp_queue *q, void *dst, int32_t value, size_t bytes, int32_t wait) {
    return guarded("memset", [&] {
        if (bytes == 0) {
            return;
        }
        sycl::event e = q->queue.memset(dst, value, bytes);
        if (wait) {
            e.wait_and_throw();
        }
    });
}

int bp_bundle_build(bp_queue *q, const char *source, const char *const *include_names,
                    const char *const *include_sources, int32_t n_includes, const char *const *options,
                    int32_t n_options, bp_bundle **out) {
    *out = nullptr;
    std::string log;
    int rc = guarded("build kernel bundle", [&] {
        syclex::include_files incs;
        for (int32_t i = 0; i < n_includes; i++) {
            incs.add(include_names[i], include_sources[i]);
        }
        std::vector<std::string> opts;
        for (int32_t i = 0; i < n_options; i++) {
            opts.emplace_back(options[i]);
        }
        auto src = syclex::create_kernel_bundle_from_source(q->queue.get_context(), syclex::source_language::sycl,
                                                            std::string(source), syclex::properties{incs});
        auto exe = syclex::build(src, std::vector<sycl::device>{q->queue.get_device()},
                                 syclex::properties{syclex::build_options{opts}, syclex::save_log{&log}});
        *out = new bp_bundle{exe};
    });
    if (rc != 0 && !log.empty()) {
        last_error += "\n" + log;
    }
    return rc;
}

void bp_bundle_destroy(bp_bundle *b) { delete b; }

int bp_bundle_get_kernel(bp_bundle *b, const char *name, bp_kernel **out) {
    *out = nullptr;
    return guarded("get kernel", [&] { *out = new bp_kernel{b->bundle.ext_oneapi_get_kernel(name)}; });
}

void bp_kernel_destroy(bp_kernel *k) { delete k; }

int bp_kernel_max_work_group(bp_kernel *k, bp_queue *q, size_t *out) {
    return guarded("kernel work-group size", [&] {
        *out = k->kernel.get_info<sycl::info::kernel_device_specific::work_group_size>(q->queue.get_device());
    });
}

int bp_launch(bp_queue *q, bp_kernel *k, int32_t dims, const size_t *global, const size_t *local, const bp_arg *args,
              int32_t n_args) {
    return guarded("launch", [&] {
        q->queue.submit([&](sycl::handler &h) {
            for (int32_t i = 0; i < n_args; i++) {
                set_arg(h, i, args[i]);
            }
            switch (dims) {
            case 1: h.parallel_for(make_range<1>(global, local), k->kernel); break;
            case 2: h.parallel_for(make_range<2>(global, local), k->kernel); break;
            case 3: h.parallel_for(make_range<3>(global, local), k->kernel); break;
            default: throw std::runtime_error("dims must be 1, 2 or 3");
            }
        });
    });
}

int bp_event_record(bp_queue *q, bp_event **out) {
    *out = nullptr;
    return guarded("record event", [&] { *out = new bp_event{q->queue.ext_oneapi_submit_barrier()}; });
}

int bp_event_wait(bp_event *e) {
    return guarded("event wait", [&] { e->event.wait_and_throw(); });
}

int bp_queue_wait_event(bp_queue *q, bp_event *e) {
    return guarded("queue wait event", [&] { q->queue.ext_oneapi_submit_barrier({e->event}); });
}

void bp_event_destroy(bp_event *e) { delete e; }

} // extern "C"
