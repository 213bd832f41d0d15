/* Minimal <math.h> of the freestanding Hexagon test build (qemu/mini-math.c). */
#ifndef HTP_QEMU_MATH_H
#define HTP_QEMU_MATH_H
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
float expf(float x);
float logf(float x);
float sqrtf(float x);
float powf(float x, float y);
float floorf(float x);
float ceilf(float x);
float fabsf(float x);
double exp(double x);
double log(double x);
double log2(double x);
double pow(double x, double y);
double floor(double x);
double sin(double x);
double cos(double x);
double fabs(double x);
#endif
