/*
 * hvx-utils.h: element conversion and the vector helpers the kernels are
 * written in. An HVX vector holds 32 f32 (128 bytes); the helpers work on
 * whole vectors of HTP_VLEN_F32 lanes with a scalar tail, the way HVX code
 * does, in portable C. Whole-row f16 <-> f32 conversion has HVX intrinsics
 * (hvx-convert.h, included below) with these per-element functions as the
 * reference.
 */
#ifndef HVX_UTILS_H
#define HVX_UTILS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "htp-msg.h"

#define HTP_VLEN_F32 32

/* IEEE binary16 -> binary32 (exact). */
static inline float htp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t) (127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* binary32 -> binary16, round to nearest even (overflow to inf, NaN kept). */
static inline uint16_t htp_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { /* inf or NaN */
        return (uint16_t) (sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    }
    if (ax >= 0x477ff000u) { /* rounds to >= 65520: inf */
        return (uint16_t) (sign | 0x7c00u);
    }
    if (ax < 0x38800000u) { /* below the smallest normal f16: subnormal or zero */
        if (ax < 0x33000000u) { /* < 2^-25: rounds to zero */
            return (uint16_t) sign;
        }
        uint32_t e = ax >> 23;
        uint32_t man = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 ... yields the f16 subnormal */
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) {
            half++;
        }
        return (uint16_t) (sign | half);
    }
    uint32_t half = ((ax >> 13) - ((127 - 15) << 10));
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) {
        half++;
    }
    return (uint16_t) (sign | half);
}

/* bfloat16 -> binary32. */
static inline float htp_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t) h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* binary32 -> bfloat16, round to nearest even (NaN kept quiet). */
static inline uint16_t htp_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t) ((x >> 16) | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t) (x >> 16);
}

/* True for the float types the row helpers read and write. */
static inline int htp_is_float(uint32_t type) {
    return type == HTP_TYPE_F32 || type == HTP_TYPE_F16 || type == HTP_TYPE_BF16;
}

#include "hvx-convert.h"

/* Reads n elements of a float type, `stride` bytes apart, into f32 `out`. */
static inline void htp_load_f32(float * out, const uint8_t * p, uint32_t n, uint32_t type, uint32_t stride) {
    switch (type) {
        case HTP_TYPE_F32:
            if (stride == 4) {
                memcpy(out, p, (size_t) n * 4);
            } else {
                for (uint32_t i = 0; i < n; i++) {
                    memcpy(&out[i], p + (size_t) i * stride, 4);
                }
            }
            break;
        case HTP_TYPE_F16:
            if (stride == 2 && ((uintptr_t) p & 1) == 0) {
                htp_row_f16_to_f32(out, (const uint16_t *) p, n);
                break;
            }
            for (uint32_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, p + (size_t) i * stride, 2);
                out[i] = htp_f16_to_f32(h);
            }
            break;
        default: /* HTP_TYPE_BF16 */
            for (uint32_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, p + (size_t) i * stride, 2);
                out[i] = htp_bf16_to_f32(h);
            }
            break;
    }
}

/* Writes n f32 values as a float type, `stride` bytes apart. */
static inline void htp_store_f32(uint8_t * p, const float * in, uint32_t n, uint32_t type, uint32_t stride) {
    switch (type) {
        case HTP_TYPE_F32:
            if (stride == 4) {
                memmove(p, in, (size_t) n * 4);
            } else {
                for (uint32_t i = 0; i < n; i++) {
                    memcpy(p + (size_t) i * stride, &in[i], 4);
                }
            }
            break;
        case HTP_TYPE_F16:
            if (stride == 2 && ((uintptr_t) p & 1) == 0 && (p + (size_t) n * 2 <= (const uint8_t *) in ||
                                                             (const uint8_t *) (in + n) <= p)) {
                htp_row_f32_to_f16((uint16_t *) p, in, n);
                break;
            }
            for (uint32_t i = 0; i < n; i++) {
                uint16_t h = htp_f32_to_f16(in[i]);
                memcpy(p + (size_t) i * stride, &h, 2);
            }
            break;
        default: /* HTP_TYPE_BF16 */
            for (uint32_t i = 0; i < n; i++) {
                uint16_t h = htp_f32_to_bf16(in[i]);
                memcpy(p + (size_t) i * stride, &h, 2);
            }
            break;
    }
}

/* Address of row (i1, i2, i3) of a tensor. */
static inline uint8_t * htp_row(uint8_t * base, const struct htp_tensor * t, uint32_t i1, uint32_t i2, uint32_t i3) {
    return base + (size_t) i1 * t->nb[1] + (size_t) i2 * t->nb[2] + (size_t) i3 * t->nb[3];
}

/* Sum of x[i]^2 in 32 lanes, then across lanes. */
static inline float hvx_sum_sq_f32(const float * x, uint32_t n) {
    float lanes[HTP_VLEN_F32] = { 0 };
    uint32_t i = 0;
    for (; i + HTP_VLEN_F32 <= n; i += HTP_VLEN_F32) {
        for (uint32_t l = 0; l < HTP_VLEN_F32; l++) {
            lanes[l] += x[i + l] * x[i + l];
        }
    }
    for (uint32_t l = 0; i < n; i++, l++) {
        lanes[l] += x[i] * x[i];
    }
    float s = 0.0f;
    for (uint32_t l = 0; l < HTP_VLEN_F32; l++) {
        s += lanes[l];
    }
    return s;
}

/* Largest of x[0..n). */
static inline float hvx_max_f32(const float * x, uint32_t n) {
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

/* y = y * s + b over n lanes. */
static inline void hvx_scale_bias_f32(float * y, uint32_t n, float s, float b) {
    for (uint32_t i = 0; i < n; i++) {
        y[i] = y[i] * s + b;
    }
}

#endif /* HVX_UTILS_H */
