/*
 * mini-math.c: the libm functions the htp C calls, for the qemu kernel
 * tests. Built into both the Hexagon binary and its host twin (instead of
 * each platform's libm), so the two runs compute identical results from
 * IEEE + - * / alone and any difference in their outputs comes from the
 * kernels or the compiler, never from two libms. Accurate to a few ulp of
 * f32 over the ranges the kernels use; not a general libm.
 */
#include <stdint.h>
#include <string.h>

#include "math.h"

static const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
static const double PIO2_HI = 1.57079632673412561417e+00, PIO2_LO = 6.07710050650619224932e-11;

double fabs(double x) {
    return x < 0 ? -x : x;
}

float fabsf(float x) {
    return x < 0 ? -x : x;
}

double floor(double x) {
    if (!(fabs(x) < 4503599627370496.0)) { /* |x| >= 2^52, inf or NaN: already integral */
        return x;
    }
    double t = (double) (int64_t) x;
    return t > x ? t - 1.0 : t;
}

float floorf(float x) {
    return (float) floor((double) x);
}

float ceilf(float x) {
    return (float) -floor(-(double) x);
}

/* 2^k for an integer k in the normal range. */
static double pow2i(int k) {
    uint64_t bits = (uint64_t) (k + 1023) << 52;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

double exp(double x) {
    if (x != x) {
        return x;
    }
    if (x > 709.0) {
        return INFINITY;
    }
    if (x < -745.0) {
        return 0.0;
    }
    double kd = floor(x * 1.4426950408889634 + 0.5);
    int k = (int) kd;
    double r = (x - kd * LN2_HI) - kd * LN2_LO; /* |r| <= ln2 / 2 */
    double term = 1.0, sum = 1.0;
    for (int i = 1; i <= 13; i++) {
        term *= r / i;
        sum += term;
    }
    if (k < -1021) { /* scale in two steps through the subnormal range */
        return sum * pow2i(k + 60) * pow2i(-60);
    }
    return sum * pow2i(k);
}

double log(double x) {
    if (x != x || x < 0) {
        return NAN;
    }
    if (x == 0) {
        return -INFINITY;
    }
    if (x == INFINITY) {
        return x;
    }
    uint64_t bits;
    memcpy(&bits, &x, 8);
    int e = (int) ((bits >> 52) & 0x7ff);
    if (e == 0) { /* subnormal: scale up first */
        return log(x * pow2i(60)) - 60 * (LN2_HI + LN2_LO);
    }
    e -= 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &bits, 8); /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, term = s, sum = 0.0;
    for (int i = 1; i <= 27; i += 2) {
        sum += term / i;
        term *= s2;
    }
    return 2.0 * sum + e * LN2_LO + e * LN2_HI;
}

double log2(double x) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    if (x > 0 && x != INFINITY && (bits & 0x000fffffffffffffull) == 0 && (bits >> 52) != 0) {
        return (double) ((int) (bits >> 52) - 1023); /* exact for powers of two */
    }
    return log(x) * 1.4426950408889634;
}

double pow(double x, double y) {
    if (y == 0) {
        return 1.0;
    }
    if (x == 0) {
        return y > 0 ? 0.0 : INFINITY;
    }
    if (x < 0) {
        double yi = floor(y);
        if (yi != y) {
            return NAN;
        }
        double r = exp(y * log(-x));
        return ((int64_t) yi & 1) ? -r : r;
    }
    return exp(y * log(x));
}

/* sin (odd) or cos of r, |r| <= pi/4. */
static double sin_poly(double r) {
    double r2 = r * r, term = r, sum = r;
    for (int i = 1; i <= 9; i++) {
        term *= -r2 / ((2 * i) * (2 * i + 1));
        sum += term;
    }
    return sum;
}

static double cos_poly(double r) {
    double r2 = r * r, term = 1.0, sum = 1.0;
    for (int i = 1; i <= 9; i++) {
        term *= -r2 / ((2 * i - 1) * (2 * i));
        sum += term;
    }
    return sum;
}

/* Reduces x by multiples of pi/2; returns the quadrant and r. */
static int reduce(double x, double * r) {
    double kd = floor(x * 0.6366197723675814 + 0.5);
    *r = (x - kd * PIO2_HI) - kd * PIO2_LO;
    return (int) ((int64_t) kd & 3);
}

double sin(double x) {
    if (x != x || fabs(x) == INFINITY) {
        return NAN;
    }
    double r;
    switch (reduce(x, &r)) {
        case 0:
            return sin_poly(r);
        case 1:
            return cos_poly(r);
        case 2:
            return -sin_poly(r);
        default:
            return -cos_poly(r);
    }
}

double cos(double x) {
    if (x != x || fabs(x) == INFINITY) {
        return NAN;
    }
    double r;
    switch (reduce(x, &r)) {
        case 0:
            return cos_poly(r);
        case 1:
            return -sin_poly(r);
        case 2:
            return -cos_poly(r);
        default:
            return sin_poly(r);
    }
}

float expf(float x) {
    return (float) exp((double) x);
}

float logf(float x) {
    return (float) log((double) x);
}

float powf(float x, float y) {
    return (float) pow((double) x, (double) y);
}

/* Newton's iteration in f64, then one rounding to f32. */
float sqrtf(float x) {
    if (x != x || x < 0) {
        return NAN;
    }
    if (x == 0 || x == INFINITY) {
        return x;
    }
    double d = (double) x, g = d > 1.0 ? d : 1.0;
    for (int i = 0; i < 200 && g * g - d > 1e-15 * d; i++) {
        g = 0.5 * (g + d / g);
    }
    for (int i = 0; i < 3; i++) {
        g = 0.5 * (g + d / g);
    }
    return (float) g;
}
