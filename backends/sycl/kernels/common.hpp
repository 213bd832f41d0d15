// Shared by every SYCL kernel source of the backplane SYCL backend: the
// kernel calling convention, element loads and stores by type code, and the
// dequantization of ggml's block formats.
//
// Calling convention: every kernel is an extern "C" free function over a
// 3-D nd-range, taking (dst, src0, src1, src2, src3, Args). Pointers are
// USM pointers to the first byte of each tensor (absent sources repeat
// dst); Args carries shapes, byte strides, type codes and op parameters and
// must match `Args` in backends/sycl/src/kernels.rs byte for byte.
#pragma once

#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

struct Tensor {
    long ne[4];
    long nb[4];
};

struct Args {
    Tensor t[5];   // 0 = dst, 1 + i = src i
    int type[8];   // ggml type codes, same order as t
    int op[16];    // the node's op_params
    long x[12];    // kernel-specific integers
};
static_assert(sizeof(Args) == 512, "Args must be 512 bytes");

#define KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>)) void
#define KARGS char *dst, const char *s0, const char *s1, const char *s2, const char *s3, Args a

// ggml type codes.
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q8_0 8
#define T_Q4_K 12
#define T_I32 26
#define T_I64 27
#define T_BF16 30

static inline sycl::nd_item<3> item() { return syclext::this_work_item::get_nd_item<3>(); }

static inline float op_f32(const Args &a, int i) { return sycl::bit_cast<float>(a.op[i]); }

static inline float h2f(unsigned short h) { return (float)sycl::bit_cast<sycl::half>(h); }

static inline unsigned short f2h(float f) { return sycl::bit_cast<unsigned short>((sycl::half)f); }

static inline float bf2f(unsigned short b) { return sycl::bit_cast<float>((unsigned)b << 16); }

// Round to nearest even, NaN kept quiet (ggml_compute_fp32_to_bf16).
static inline unsigned short f2bf(float f) {
    unsigned u = sycl::bit_cast<unsigned>(f);
    if ((u & 0x7fffffff) > 0x7f800000) {
        return (unsigned short)((u >> 16) | 64);
    }
    return (unsigned short)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// A plain (non-block) element as f32.
static inline float load(const char *p, int type) {
    switch (type) {
    case T_F16: return h2f(*(const unsigned short *)p);
    case T_BF16: return bf2f(*(const unsigned short *)p);
    case T_I32: return (float)*(const int *)p;
    default: return *(const float *)p;
    }
}

static inline void store(char *p, int type, float v) {
    switch (type) {
    case T_F16: *(unsigned short *)p = f2h(v); break;
    case T_BF16: *(unsigned short *)p = f2bf(v); break;
    case T_I32: *(int *)p = (int)v; break;
    default: *(float *)p = v; break;
    }
}

static inline long type_size(int type) {
    switch (type) {
    case T_F16:
    case T_BF16: return 2;
    case T_I64: return 8;
    case T_Q4_0: return 18;
    case T_Q8_0: return 34;
    case T_Q4_K: return 144;
    default: return 4;
    }
}

static inline long block_size(int type) {
    switch (type) {
    case T_Q4_0:
    case T_Q8_0: return 32;
    case T_Q4_K: return 256;
    default: return 1;
    }
}

// Scale and min of sub-block j (0..7) of a Q4_K block (ggml's get_scale_min_k4).
static inline void q4k_scale_min(int j, const unsigned char *q, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Element i of a row stored as `type` (quantized rows are dense blocks).
static inline float load_row(const char *row, long i, int type, long nb0) {
    switch (type) {
    case T_Q4_0: {
        const char *b = row + (i / 32) * 18;
        int j = (int)(i % 32);
        unsigned char q = (unsigned char)b[2 + (j & 15)];
        int v = (j < 16 ? (q & 0xF) : (q >> 4)) - 8;
        return h2f(*(const unsigned short *)b) * (float)v;
    }
    case T_Q8_0: {
        const char *b = row + (i / 32) * 34;
        return h2f(*(const unsigned short *)b) * (float)(signed char)b[2 + i % 32];
    }
    case T_Q4_K: {
        const unsigned char *b = (const unsigned char *)(row + (i / 256) * 144);
        int e = (int)(i % 256);
        int c = e / 64, w = e % 64, hi = w >= 32, l = w % 32;
        int sc, m;
        q4k_scale_min(2 * c + hi, b + 4, sc, m);
        unsigned char q = b[16 + 32 * c + l];
        int nib = hi ? (q >> 4) : (q & 0xF);
        float d = h2f(*(const unsigned short *)b), dmin = h2f(*(const unsigned short *)(b + 2));
        return d * (float)sc * (float)nib - dmin * (float)m;
    }
    default: return load(row + i * nb0, type);
    }
}

// Byte offset of element (i0, i1, i2, i3) of a plain tensor.
static inline long offset(const Tensor &t, long i0, long i1, long i2, long i3) {
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// The index of linear element `idx` in a tensor of shape ne.
static inline void unravel(long idx, const long *ne, long &i0, long &i1, long &i2, long &i3) {
    i0 = idx % ne[0];
    idx /= ne[0];
    i1 = idx % ne[1];
    idx /= ne[1];
    i2 = idx % ne[2];
    i3 = idx / ne[2];
}

static inline long nelements(const Tensor &t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

// Global linear id of a 1-D launch laid out as (1, y, x).
static inline long gid() {
    auto it = item();
    return (long)it.get_global_id(1) * (long)it.get_global_range(2) + (long)it.get_global_id(2);
}
