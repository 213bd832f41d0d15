// Cross-check harness for backplane-quant's `matches_ggml_bit_for_bit` test.
//
// Runs ggml's reference quantizers (`quantize_row_*_ref`), dequantizers and
// generic dot products (`ggml_vec_dot_*_generic`) on an input file of f32
// values and writes the results next to it. Build it against the ggml
// sources of a llama.cpp checkout, without FMA contraction (ggml builds
// ggml-quants.c in ggml-base with no -march flags, so x86-64 has no FMA):
//
//   G=path/to/llama.cpp/ggml
//   CF="-O2 -ffp-contract=off -mf16c -DNDEBUG -I$G/include -I$G/src -I$G/src/ggml-cpu"
//   cc $CF ggml_harness.c $G/src/ggml-quants.c $G/src/ggml-cpu/quants.c -lm -o ggml_harness
//   BACKPLANE_GGML_HARNESS=$PWD/ggml_harness cargo test -p backplane-quant -- --ignored
//
// Usage: ggml_harness in.f32 n_per_row outdir
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-quants.h"
#include "ggml-cpu/quants.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <immintrin.h>

typedef void (*qfn)(const float *, void *, int64_t);
typedef void (*dqfn)(const void *, float *, int64_t);
typedef void (*dotfn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

struct ty { const char *name; size_t bs, ts; qfn q; dqfn dq; dotfn dot; qfn vq; size_t vts; };

static void wr(const char *dir, const char *pre, const char *name, const void *p, size_t n) {
    char path[512]; snprintf(path, sizeof path, "%s/%s_%s.bin", dir, pre, name);
    FILE *f = fopen(path, "wb"); fwrite(p, 1, n, f); fclose(f);
}


// The few ggml symbols these two files reference but the harness never needs,
// plus the f16 table ggml-cpu normally fills in ggml_cpu_init().
void ggml_abort(const char *file, int line, const char *fmt, ...) { fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt); abort(); }
size_t ggml_row_size(enum ggml_type t, int64_t n) { (void)t; (void)n; abort(); }
const char *ggml_type_name(enum ggml_type t) { (void)t; abort(); }
size_t ggml_type_size(enum ggml_type t) { (void)t; abort(); }
float ggml_table_f32_f16[1 << 16];
__attribute__((constructor)) static void init_table(void) {
    for (int i = 0; i < (1 << 16); i++) ggml_table_f32_f16[i] = _cvtsh_ss((unsigned short)i);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: harness in.f32 n_per_row outdir\n"); return 2; }
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);
    size_t total = sz / 4; float *x = malloc(sz); fread(x, 4, total, f); fclose(f);
    int n = atoi(argv[2]); const char *dir = argv[3];
    struct ty T[] = {
#define L(nm, vt, VT) { #nm, 32, sizeof(block_##nm), (qfn)quantize_row_##nm##_ref, (dqfn)dequantize_row_##nm, ggml_vec_dot_##nm##_##vt##_generic, (qfn)quantize_row_##vt##_ref, sizeof(block_##vt) }
        L(q4_0, q8_0, Q8_0), L(q4_1, q8_1, Q8_1), L(q5_0, q8_0, Q8_0), L(q5_1, q8_1, Q8_1), L(q8_0, q8_0, Q8_0),
        { "q8_1", 32, sizeof(block_q8_1), (qfn)quantize_row_q8_1_ref, NULL, NULL, NULL, 0 },
#define K(nm) { #nm, 256, sizeof(block_##nm), (qfn)quantize_row_##nm##_ref, (dqfn)dequantize_row_##nm, ggml_vec_dot_##nm##_q8_K_generic, (qfn)quantize_row_q8_K_ref, sizeof(block_q8_K) }
        K(q2_K), K(q3_K), K(q4_K), K(q5_K), K(q6_K),
        { "q8_K", 256, sizeof(block_q8_K), (qfn)quantize_row_q8_K_ref, (dqfn)dequantize_row_q8_K, NULL, NULL, 0 },
    };
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        size_t nb = total / T[t].bs, bytes = nb * T[t].ts;
        unsigned char *q = calloc(bytes, 1); float *y = malloc(sz);
        T[t].q(x, q, total); wr(dir, "q", T[t].name, q, bytes);
        if (T[t].dq) { T[t].dq(q, y, total); wr(dir, "dq", T[t].name, y, sz); }
        if (T[t].dot) {
            size_t rows = total / n, rb = n / T[t].bs * T[t].ts, vb = n / T[t].bs * T[t].vts;
            float *res = malloc(rows / 2 * 4); unsigned char *vq = calloc(vb, 1);
            for (size_t r = 0; r + 1 < rows; r += 2) {
                T[t].vq(x + (r + 1) * n, vq, n);
                T[t].dot(n, &res[r / 2], 0, q + r * rb, 0, vq, 0, 1);
            }
            wr(dir, "dot", T[t].name, res, rows / 2 * 4); free(res); free(vq);
        }
        free(q); free(y);
    }
    return 0;
}
