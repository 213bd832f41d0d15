/*
 * soft-div.h: IEEE binary64 division, correctly rounded to nearest even,
 * in integer arithmetic. Hexagon has no divide instruction; compiler-rt's
 * __hexagon_divdf3 would supply this. Included by mini-libc.c for the
 * Hexagon build and by kernel-tests.c on the host, where it is checked
 * against the host's own division.
 */
#ifndef HTP_SOFT_DIV_H
#define HTP_SOFT_DIV_H

#include <stdint.h>
#include <string.h>

static inline double htp_soft_div(double a, double b) {
    const uint64_t sign_bit = (uint64_t) 1 << 63, implicit = (uint64_t) 1 << 52, frac = implicit - 1;
    uint64_t ua, ub, out;
    memcpy(&ua, &a, 8);
    memcpy(&ub, &b, 8);
    uint64_t sign = (ua ^ ub) & sign_bit;
    int ea = (int) ((ua >> 52) & 0x7ff), eb = (int) ((ub >> 52) & 0x7ff);
    uint64_t ma = ua & frac, mb = ub & frac;
    const uint64_t qnan = 0x7ff8000000000000ull, inf = 0x7ff0000000000000ull;
    if (ea == 0x7ff && ma) {
        out = ua | ((uint64_t) 1 << 51);
    } else if (eb == 0x7ff && mb) {
        out = ub | ((uint64_t) 1 << 51);
    } else if (ea == 0x7ff) {
        out = eb == 0x7ff ? qnan : sign | inf;
    } else if (eb == 0x7ff) {
        out = sign;
    } else if (eb == 0 && mb == 0) {
        out = (ea == 0 && ma == 0) ? qnan : sign | inf;
    } else if (ea == 0 && ma == 0) {
        out = sign;
    } else {
        if (ea == 0) {
            while (!(ma & implicit)) {
                ma <<= 1;
                ea--;
            }
            ea++;
        } else {
            ma |= implicit;
        }
        if (eb == 0) {
            while (!(mb & implicit)) {
                mb <<= 1;
                eb--;
            }
            eb++;
        } else {
            mb |= implicit;
        }
        int e = ea - eb + 1023;
        if (ma < mb) {
            ma <<= 1;
            e--;
        }
        /* 55 quotient bits: 1.(52 bits) and two more; the rest is sticky. */
        uint64_t q = 0, r = ma;
        for (int i = 0; i < 55; i++) {
            q <<= 1;
            if (r >= mb) {
                r -= mb;
                q |= 1;
            }
            r <<= 1;
        }
        int sticky = r != 0;
        if (e >= 0x7ff) {
            out = sign | inf;
        } else {
            int shift = e >= 1 ? 2 : 2 + (1 - e);
            uint64_t mant, rem, half;
            if (shift > 60) {
                mant = 0;
                rem = 0;
                half = 1;
                sticky = 1;
            } else {
                mant = q >> shift;
                rem = q & (((uint64_t) 1 << shift) - 1);
                half = (uint64_t) 1 << (shift - 1);
            }
            if (rem > half || (rem == half && (sticky || (mant & 1)))) {
                mant++;
            }
            out = e >= 1 ? ((uint64_t) (e - 1) << 52) + mant : mant;
            if (out >= inf) {
                out = inf;
            }
            out |= sign;
        }
    }
    double d;
    memcpy(&d, &out, 8);
    return d;
}

#endif /* HTP_SOFT_DIV_H */
