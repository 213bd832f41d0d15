/*
 * hvx-convert.h: whole-row f16 <-> f32 conversion, the step every f16 row
 * op and the mat-mul's activation and weight panels go through, and the
 * Q4_0 / Q8_0 block dequantization to f16 of the mat-mul's weight panels.
 *
 * The portable loops (htp_f16_to_f32 / htp_f32_to_f16 of hvx-utils.h per
 * element) are the reference. Built with HVX (`__HVX__`, 128-byte vectors)
 * the rows go 64 elements at a time through HVX integer instructions that
 * produce the same bits, subnormals, infinities, NaNs and round-to-nearest-
 * even included: no float HVX is needed, so this runs on every HVX version
 * (and under qemu-hexagon, which emulates v67 HVX; see qemu/kernel-tests.c).
 * The dequantization computes d * q exactly in integers (an f16 scale times
 * an 8-bit quant has at most 18 significant bits, exact in f32, as the
 * portable d * (float) q is) and rounds it to f16 the same way.
 */
#ifndef HVX_CONVERT_H
#define HVX_CONVERT_H

#include <stdint.h>
#include <string.h>

#if defined(__HVX__)
#if __HVX_LENGTH__ != 128
#error "the HVX paths are written for 128-byte vectors (-mhvx-length=128b)"
#endif
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

/* An HVX vector at any address (vmemu). */
typedef HVX_Vector __attribute__((aligned(1))) htp_uvec;

/* 32 f16 bit patterns (zero-extended in 32-bit lanes) -> f32 bit patterns. */
static inline HVX_Vector hvx_f16w_to_f32w(HVX_Vector h) {
    HVX_Vector sign = Q6_Vw_vasl_VwR(Q6_V_vand_VV(h, Q6_V_vsplat_R(0x8000)), 16);
    HVX_Vector mag = Q6_V_vand_VV(h, Q6_V_vsplat_R(0x7fff));
    HVX_Vector exp = Q6_Vuw_vlsr_VuwR(mag, 10);
    HVX_Vector man = Q6_V_vand_VV(h, Q6_V_vsplat_R(0x3ff));
    HVX_Vector shifted = Q6_Vw_vasl_VwR(mag, 13);
    /* normal: rebias the exponent by 127 - 15; inf/NaN: exponent 31 -> 255 */
    HVX_Vector normal = Q6_Vw_vadd_VwVw(shifted, Q6_V_vsplat_R(112 << 23));
    HVX_Vector special = Q6_Vw_vadd_VwVw(shifted, Q6_V_vsplat_R(224 << 23));
    /* subnormal: man * 2^-24, normalised with a leading-zero count (lz >= 22) */
    HVX_Vector lz = Q6_Vuw_vcl0_Vuw(man);
    HVX_Vector sub_exp = Q6_Vw_vasl_VwR(Q6_Vw_vsub_VwVw(Q6_V_vsplat_R(134), lz), 23);
    HVX_Vector sub_man = Q6_V_vand_VV(Q6_Vw_vasl_VwVw(man, Q6_Vw_vsub_VwVw(lz, Q6_V_vsplat_R(8))),
                                      Q6_V_vsplat_R(0x7fffff));
    HVX_Vector sub = Q6_V_vor_VV(sub_exp, sub_man);
    HVX_Vector zero = Q6_V_vzero();
    HVX_Vector out = Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(exp, Q6_V_vsplat_R(31)), special, normal);
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(exp, zero), sub, out);
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(mag, zero), zero, out);
    return Q6_V_vor_VV(out, sign);
}

/* 32 f32 bit patterns -> f16 bit patterns (in the low half of 32-bit lanes), round to nearest even. */
static inline HVX_Vector hvx_f32w_to_f16w(HVX_Vector x) {
    HVX_Vector sign = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(x, 16), Q6_V_vsplat_R(0x8000));
    HVX_Vector ax = Q6_V_vand_VV(x, Q6_V_vsplat_R(0x7fffffff));
    HVX_Vector one = Q6_V_vsplat_R(1);
    /* normal: drop 13 mantissa bits, rebias, round to nearest even */
    HVX_Vector h = Q6_Vw_vsub_VwVw(Q6_Vuw_vlsr_VuwR(ax, 13), Q6_V_vsplat_R(112 << 10));
    HVX_Vector rem = Q6_V_vand_VV(ax, Q6_V_vsplat_R(0x1fff));
    HVX_Vector up = Q6_Vw_vadd_VwVw(Q6_Vw_vadd_VwVw(rem, Q6_V_vsplat_R(0xfff)), Q6_V_vand_VV(h, one));
    HVX_Vector normal = Q6_Vw_vadd_VwVw(h, Q6_Vuw_vlsr_VuwR(up, 13));
    /* subnormal result: shift the full mantissa by 126 - e (14..24), same rounding */
    HVX_Vector e = Q6_Vuw_vlsr_VuwR(ax, 23);
    HVX_Vector m = Q6_V_vor_VV(Q6_V_vand_VV(ax, Q6_V_vsplat_R(0x7fffff)), Q6_V_vsplat_R(0x800000));
    HVX_Vector shift = Q6_Vw_vsub_VwVw(Q6_V_vsplat_R(126), e);
    HVX_Vector half = Q6_Vw_vlsr_VwVw(m, shift);
    HVX_Vector srem = Q6_Vw_vsub_VwVw(m, Q6_Vw_vasl_VwVw(half, shift));
    HVX_Vector mid_m1 = Q6_Vw_vsub_VwVw(Q6_Vw_vasl_VwVw(one, Q6_Vw_vsub_VwVw(shift, one)), one);
    HVX_Vector sup = Q6_Vw_vadd_VwVw(Q6_Vw_vadd_VwVw(srem, mid_m1), Q6_V_vand_VV(half, one));
    HVX_Vector sub = Q6_Vw_vadd_VwVw(half, Q6_Vw_vlsr_VwVw(sup, shift));
    /* NaN keeps a quiet payload bit; inf and overflow give inf */
    HVX_Vector inf = Q6_V_vsplat_R(0x7c00);
    HVX_Vector nan = Q6_V_vsplat_R(0x7e00);
    HVX_Vector out = normal;
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(Q6_V_vsplat_R(0x38800000), ax), sub, out);
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(Q6_V_vsplat_R(0x33000000), ax), Q6_V_vzero(), out);
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(ax, Q6_V_vsplat_R(0x477fefff)), inf, out);
    out = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(ax, Q6_V_vsplat_R(0x7f800000)), nan, out);
    return Q6_V_vor_VV(out, sign);
}
/* 32 signed quants (32-bit lanes) times the f16 scale dh -> 32 f16 (low halves), exactly as
 * htp_f32_to_f16(htp_f16_to_f32(dh) * (float) q). dh must be finite. */
static inline HVX_Vector hvx_scale_quants_f16w(HVX_Vector q, uint16_t dh) {
    uint32_t e = (dh >> 10) & 0x1fu;
    uint32_t md = e == 0 ? (dh & 0x3ffu) : ((dh & 0x3ffu) | 0x400u); /* d = md * 2^E */
    int32_t E = e == 0 ? -24 : (int32_t) e - 25;
    HVX_Vector zero = Q6_V_vzero();
    HVX_Vector neg = Q6_V_vand_VV(q, Q6_V_vsplat_R((int32_t) 0x80000000));
    HVX_Vector sign = Q6_V_vxor_VV(neg, Q6_V_vsplat_R((int32_t) ((uint32_t) (dh & 0x8000u) << 16)));
    HVX_Vector mag = Q6_Vw_vmpyie_VwVuh(Q6_Vw_vabs_Vw(q), Q6_V_vsplat_R((int32_t) md)); /* < 2^18 */
    HVX_Vector lz = Q6_Vuw_vcl0_Vuw(mag);
    HVX_Vector expo = Q6_Vw_vasl_VwR(Q6_Vw_vsub_VwVw(Q6_V_vsplat_R(158 + E), lz), 23);
    HVX_Vector man = Q6_Vuw_vlsr_VuwR(Q6_V_vand_VV(Q6_Vw_vasl_VwVw(mag, lz), Q6_V_vsplat_R(0x7fffffff)), 8);
    HVX_Vector bits = Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(mag, zero), zero, Q6_V_vor_VV(expo, man));
    return hvx_f32w_to_f16w(Q6_V_vor_VV(bits, sign));
}

/* Stores the low halves of 32 words as 32 f16 at any address. */
static inline void hvx_store_f16w(uint16_t * out, HVX_Vector w) {
    HVX_Vector packed = Q6_Vh_vpacke_VwVw(Q6_V_vzero(), w);
    uint8_t tmp[128] __attribute__((aligned(128)));
    *(HVX_Vector *) tmp = packed;
    memcpy(out, tmp, 64);
}
#endif /* __HVX__ */

/* One Q8_0 block (f16 scale, 32 int8) -> 32 f16. */
static inline void htp_block_q8_0_to_f16(uint16_t * out, const uint8_t * blk) {
    uint16_t dh;
    memcpy(&dh, blk, 2);
#if defined(__HVX__)
    if (((dh >> 10) & 0x1fu) != 0x1fu) {
        uint8_t tmp[128] __attribute__((aligned(128)));
        memcpy(tmp, blk + 2, 32);
        HVX_Vector h = Q6_V_lo_W(Q6_Wh_vunpack_Vb(*(const HVX_Vector *) tmp));
        HVX_Vector q = Q6_V_lo_W(Q6_Ww_vunpack_Vh(h));
        hvx_store_f16w(out, hvx_scale_quants_f16w(q, dh));
        return;
    }
#endif
    float d = htp_f16_to_f32(dh);
    for (uint32_t j = 0; j < 32; j++) {
        out[j] = htp_f32_to_f16(d * (float) (int8_t) blk[2 + j]);
    }
}

/* One Q4_0 block (f16 scale, 16 bytes of nibble pairs) -> 32 f16: low nibbles first, minus 8. */
static inline void htp_block_q4_0_to_f16(uint16_t * out, const uint8_t * blk) {
    uint16_t dh;
    memcpy(&dh, blk, 2);
#if defined(__HVX__)
    if (((dh >> 10) & 0x1fu) != 0x1fu) {
        /* both halves see the 16 bytes; lanes 16..31 take the high nibble */
        uint8_t tmp[128] __attribute__((aligned(128)));
        memcpy(tmp, blk + 2, 16);
        memcpy(tmp + 16, blk + 2, 16);
        HVX_Vector h = Q6_V_lo_W(Q6_Wuh_vunpack_Vub(*(const HVX_Vector *) tmp));
        HVX_Vector w = Q6_V_lo_W(Q6_Wuw_vunpack_Vuh(h));
        HVX_Vector shift = Q6_V_vmux_QVV(Q6_Q_vsetq_R(64), Q6_V_vzero(), Q6_V_vsplat_R(4));
        HVX_Vector nib = Q6_V_vand_VV(Q6_Vw_vlsr_VwVw(w, shift), Q6_V_vsplat_R(0xf));
        HVX_Vector q = Q6_Vw_vsub_VwVw(nib, Q6_V_vsplat_R(8));
        hvx_store_f16w(out, hvx_scale_quants_f16w(q, dh));
        return;
    }
#endif
    float d = htp_f16_to_f32(dh);
    for (uint32_t j = 0; j < 16; j++) {
        out[j] = htp_f32_to_f16(d * (float) ((blk[2 + j] & 0x0f) - 8));
        out[j + 16] = htp_f32_to_f16(d * (float) ((blk[2 + j] >> 4) - 8));
    }
}

/* out[i] = f32 of the f16 in[i], i < n. */
static inline void htp_row_f16_to_f32(float * out, const uint16_t * in, uint32_t n) {
    uint32_t i = 0;
#if defined(__HVX__)
    for (; i + 64 <= n; i += 64) {
        HVX_VectorPair w = Q6_Wuw_vunpack_Vuh(*(const htp_uvec *) (in + i));
        *(htp_uvec *) (out + i) = hvx_f16w_to_f32w(Q6_V_lo_W(w));
        *(htp_uvec *) (out + i + 32) = hvx_f16w_to_f32w(Q6_V_hi_W(w));
    }
#endif
    for (; i < n; i++) {
        out[i] = htp_f16_to_f32(in[i]);
    }
}

/* out[i] = f16 of the f32 in[i] (round to nearest even), i < n. */
static inline void htp_row_f32_to_f16(uint16_t * out, const float * in, uint32_t n) {
    uint32_t i = 0;
#if defined(__HVX__)
    for (; i + 64 <= n; i += 64) {
        HVX_Vector lo = hvx_f32w_to_f16w(*(const htp_uvec *) (in + i));
        HVX_Vector hi = hvx_f32w_to_f16w(*(const htp_uvec *) (in + i + 32));
        *(htp_uvec *) (out + i) = Q6_Vh_vpacke_VwVw(hi, lo);
    }
#endif
    for (; i < n; i++) {
        out[i] = htp_f32_to_f16(in[i]);
    }
}

#endif /* HVX_CONVERT_H */
