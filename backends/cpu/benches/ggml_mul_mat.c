// ggml's CPU MUL_MAT timed the way `mul_mat.rs` times ours with
// MUL_MAT_CPUTIME=1 (same shapes, 16 distinct weight rows repeated, wall
// and process-CPU-time GFLOPS), for paired runs on a shared machine.
// test-backend-ops runs hardware_concurrency / 2 threads (one on a 2-core
// machine); this takes the thread count. With OpenMP, waiting threads spin,
// so the CPU-time figure is a lower bound for ggml.
//
// Build against a llama.cpp tree L with build/bin holding the ggml libraries:
//   gcc -O2 ggml_mul_mat.c -I$L/ggml/include -L$L/build/bin \
//       -lggml -lggml-base -lggml-cpu -Wl,-rpath,$L/build/bin -o ggml_mul_mat
// Run: ./ggml_mul_mat TYPE N THREADS [SECONDS], e.g. ./ggml_mul_mat f16 512 2
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(clockid_t c){struct timespec t; clock_gettime(c,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char **argv){
  const char *tn = argv[1]; int n = atoi(argv[2]); int th = atoi(argv[3]); double secs = argc>4?atof(argv[4]):3.0;
  int m=4096,k=14336;
  enum ggml_type ta = GGML_TYPE_COUNT;
  for (int t=0;t<GGML_TYPE_COUNT;t++){ const char*nm=ggml_type_name(t); if(nm && !strcmp(nm,tn)) ta=t; }
  struct ggml_init_params ip = { 3*ggml_tensor_overhead()+ggml_graph_overhead(), NULL, true };
  struct ggml_context *ctx = ggml_init(ip);
  struct ggml_tensor *a = ggml_new_tensor_2d(ctx, ta, k, m);
  struct ggml_tensor *b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
  struct ggml_tensor *d = ggml_mul_mat(ctx, a, b);
  struct ggml_cgraph *g = ggml_new_graph(ctx); ggml_build_forward_expand(g, d);
  ggml_backend_t be = ggml_backend_cpu_init(); ggml_backend_cpu_set_n_threads(be, th);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
  // weights: 16 distinct quantized rows repeated
  float *row = malloc(sizeof(float)*k*16); unsigned s=12345;
  for (long i=0;i<(long)k*16;i++){ s=s*1664525u+1013904223u; row[i]=(s>>8)/(float)(1<<24)*2-1; }
  size_t rs = ggml_row_size(ta,k); char *q = malloc(rs*16);
  ggml_quantize_chunk(ta, row, q, 0, 16, k, NULL);
  char *ad = malloc(rs*(size_t)m); for(int r=0;r<m;r++) memcpy(ad+rs*r, q+rs*(r%16), rs);
  ggml_backend_tensor_set(a, ad, 0, rs*(size_t)m);
  float *bd = malloc(sizeof(float)*(size_t)k*n); for(long i=0;i<(long)k*n;i++){ s=s*1664525u+1013904223u; bd[i]=(s>>8)/(float)(1<<24)*2-1; }
  ggml_backend_tensor_set(b, bd, 0, sizeof(float)*(size_t)k*n);
  ggml_backend_graph_compute(be, g);
  double w0=now(CLOCK_MONOTONIC), c0=now(CLOCK_PROCESS_CPUTIME_ID); int it=0;
  while (now(CLOCK_MONOTONIC)-w0 < secs) { ggml_backend_graph_compute(be, g); it++; }
  double w=now(CLOCK_MONOTONIC)-w0, c=now(CLOCK_PROCESS_CPUTIME_ID)-c0;
  double gf = 2.0*m*n*(double)k*it/1e9;
  printf("ggml %5s n=%-4d %8.2f GFLOPS wall, %8.2f GFLOPS per %d dedicated threads (%d iters)\n", tn, n, gf/w, gf/c*th, th, it);
  return 0;
}
