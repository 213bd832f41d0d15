/*
 * mini-libc.c: just enough C library for the htp C as a freestanding,
 * static Hexagon Linux binary run under qemu-hexagon (there is no Hexagon
 * libc in Debian): _start, write/exit through `trap0(#1)` Linux syscalls,
 * mem and str functions, a small vsnprintf, a bump allocator, and the compiler's
 * helpers the Hexagon ISA leaves to software (integer division, and
 * correctly rounded f32/f64 division), which compiler-rt would supply.
 *
 * Built only for the qemu test (xtask hexagon-qemu); never for a DSP.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "stdio.h"
#include "stdlib.h"
#include "string.h"

int main(void);

/* ---- syscalls: r6 = number, r0.. = arguments (the Linux ABI of qemu-hexagon) ---- */

static long sys3(long nr, long a, long b, long c) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

#define SYS_WRITE 64
#define SYS_EXIT_GROUP 94

void exit(int status) {
    sys3(SYS_EXIT_GROUP, status, 0, 0);
    for (;;) {
    }
}

void abort(void) {
    exit(134);
}

static uint64_t g_stack[64 * 1024] __attribute__((aligned(8)));

void _start(void) __attribute__((noreturn, used));
void _start(void) {
    __asm__ volatile("r29 = %0" : : "r"(&g_stack[64 * 1024 - 2]) : "r29");
    exit(main());
}

/* ---- memory and strings ---------------------------------------------------------- */

void * memcpy(void * dst, const void * src, size_t n) {
    uint8_t * d = (uint8_t *) dst;
    const uint8_t * s = (const uint8_t *) src;
    while (n--) {
        *d++ = *s++;
    }
    return dst;
}

/* What the Hexagon backend calls for large aligned copies (struct assignment). */
void * __hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void * dst, const void * src, size_t n) {
    return memcpy(dst, src, n);
}

void * memmove(void * dst, const void * src, size_t n) {
    uint8_t * d = (uint8_t *) dst;
    const uint8_t * s = (const uint8_t *) src;
    if (d < s) {
        while (n--) {
            *d++ = *s++;
        }
    } else {
        while (n--) {
            d[n] = s[n];
        }
    }
    return dst;
}

void * memset(void * dst, int c, size_t n) {
    uint8_t * d = (uint8_t *) dst;
    while (n--) {
        *d++ = (uint8_t) c;
    }
    return dst;
}

int memcmp(const void * a, const void * b, size_t n) {
    const uint8_t *x = (const uint8_t *) a, *y = (const uint8_t *) b;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

size_t strlen(const char * s) {
    size_t n = 0;
    while (s[n]) {
        n++;
    }
    return n;
}

int strncmp(const char * a, const char * b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i] || a[i] == '\0') {
            return (unsigned char) a[i] - (unsigned char) b[i];
        }
    }
    return 0;
}

int strcmp(const char * a, const char * b) {
    return strncmp(a, b, (size_t) -1);
}

char * strchr(const char * s, int c) {
    for (;; s++) {
        if (*s == (char) c) {
            return (char *) s;
        }
        if (*s == '\0') {
            return NULL;
        }
    }
}

/* ---- a bump allocator ---------------------------------------------------------------- */

static uint8_t g_heap[48u << 20] __attribute__((aligned(4096)));
static size_t g_heap_used;

void * malloc(size_t n) {
    size_t start = (g_heap_used + 4095u) & ~(size_t) 4095u; /* page-aligned, as rpcmem and VTCM are */
    if (n > sizeof(g_heap) - start) {
        return NULL;
    }
    g_heap_used = start + n;
    return g_heap + start;
}

void * calloc(size_t n, size_t size) {
    void * p = malloc(n * size);
    if (p != NULL) {
        memset(p, 0, n * size);
    }
    return p;
}

void free(void * p) {
    (void) p; /* the test binary is short-lived */
}

/* ---- formatting ------------------------------------------------------------------------ */

struct out {
    char * buf;
    size_t cap, len;
};

static void put(struct out * o, char c) {
    if (o->len + 1 < o->cap) {
        o->buf[o->len] = c;
    }
    o->len++;
}

static void put_u64(struct out * o, uint64_t v, unsigned base) {
    char digits[24];
    int n = 0;
    do {
        uint64_t q = v / base;
        digits[n++] = "0123456789abcdef"[v - q * base];
        v = q;
    } while (v != 0);
    while (n > 0) {
        put(o, digits[--n]);
    }
}

int vsnprintf(char * buf, size_t n, const char * fmt, va_list ap) {
    struct out o = { buf, n, 0 };
    for (const char * p = fmt; *p; p++) {
        if (*p != '%') {
            put(&o, *p);
            continue;
        }
        p++;
        int longs = 0;
        while (*p == 'l') {
            longs++;
            p++;
        }
        switch (*p) {
            case 'd': {
                int64_t v = longs >= 2 ? va_arg(ap, long long) : longs ? va_arg(ap, long) : va_arg(ap, int);
                if (v < 0) {
                    put(&o, '-');
                    v = -v;
                }
                put_u64(&o, (uint64_t) v, 10);
                break;
            }
            case 'u':
            case 'x': {
                uint64_t v = longs >= 2 ? va_arg(ap, unsigned long long)
                             : longs    ? va_arg(ap, unsigned long)
                                        : va_arg(ap, unsigned int);
                put_u64(&o, v, *p == 'x' ? 16 : 10);
                break;
            }
            case 's':
                for (const char * s = va_arg(ap, const char *); *s; s++) {
                    put(&o, *s);
                }
                break;
            case '%':
                put(&o, '%');
                break;
            default: /* unsupported: shown as is */
                put(&o, '%');
                put(&o, *p);
                break;
        }
        if (*p == '\0') {
            break;
        }
    }
    if (n > 0) {
        buf[o.len < n ? o.len : n - 1] = '\0';
    }
    return (int) o.len;
}

int snprintf(char * buf, size_t n, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

int printf(const char * fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t len = (size_t) r < sizeof(buf) ? (size_t) r : sizeof(buf) - 1;
    sys3(SYS_WRITE, 1, (long) buf, (long) len);
    return r;
}

/* ---- compiler helpers ---------------------------------------------------------------------- */

static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t * rem) {
    uint64_t q = 0, r = 0;
    for (int i = 63; i >= 0; i--) {
        r = (r << 1) | ((n >> i) & 1u);
        if (r >= d) {
            r -= d;
            q |= (uint64_t) 1 << i;
        }
    }
    *rem = r;
    return q;
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) {
    uint64_t r;
    return (uint32_t) udivmod64(n, d, &r);
}

uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) {
    uint64_t r;
    udivmod64(n, d, &r);
    return (uint32_t) r;
}

int32_t __hexagon_divsi3(int32_t n, int32_t d) {
    uint32_t q = __hexagon_udivsi3(n < 0 ? -(uint32_t) n : (uint32_t) n, d < 0 ? -(uint32_t) d : (uint32_t) d);
    return (n < 0) != (d < 0) ? -(int32_t) q : (int32_t) q;
}

int32_t __hexagon_modsi3(int32_t n, int32_t d) {
    uint32_t r = __hexagon_umodsi3(n < 0 ? -(uint32_t) n : (uint32_t) n, d < 0 ? -(uint32_t) d : (uint32_t) d);
    return n < 0 ? -(int32_t) r : (int32_t) r;
}

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d) {
    uint64_t r;
    return udivmod64(n, d, &r);
}

uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d) {
    uint64_t r;
    udivmod64(n, d, &r);
    return r;
}

int64_t __hexagon_divdi3(int64_t n, int64_t d) {
    uint64_t q = __hexagon_udivdi3(n < 0 ? -(uint64_t) n : (uint64_t) n, d < 0 ? -(uint64_t) d : (uint64_t) d);
    return (n < 0) != (d < 0) ? -(int64_t) q : (int64_t) q;
}

int64_t __hexagon_moddi3(int64_t n, int64_t d) {
    uint64_t r = __hexagon_umoddi3(n < 0 ? -(uint64_t) n : (uint64_t) n, d < 0 ? -(uint64_t) d : (uint64_t) d);
    return n < 0 ? -(int64_t) r : (int64_t) r;
}

#include "soft-div.h"

double __hexagon_divdf3(double a, double b) {
    return htp_soft_div(a, b);
}

/* Correctly rounded: f64 has more than 2 x 24 + 2 bits, so rounding the f64
 * quotient to f32 rounds once in effect. */
float __hexagon_divsf3(float a, float b) {
    return (float) htp_soft_div((double) a, (double) b);
}
