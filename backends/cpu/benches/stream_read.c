// Plain streaming-read bandwidth: each thread sums its own 512 MiB buffer
// with AVX2 loads six times; prints the total GB/s (the ceiling of the
// memory-bound mat-vec cases).
// Build: gcc -O2 -mavx2 -pthread stream_read.c -o stream_read
// Run: ./stream_read THREADS
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#define SZ (512UL<<20)
static char *buf[2];
static double res[2];
static void *run(void *arg){
  long t=(long)arg; char *b=buf[t];
  __m256i acc0=_mm256_setzero_si256(),acc1=acc0,acc2=acc0,acc3=acc0;
  struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0);
  for(int rep=0;rep<6;rep++)
  for(size_t i=0;i<SZ;i+=128){
    acc0=_mm256_add_epi32(acc0,_mm256_load_si256((__m256i*)(b+i)));
    acc1=_mm256_add_epi32(acc1,_mm256_load_si256((__m256i*)(b+i+32)));
    acc2=_mm256_add_epi32(acc2,_mm256_load_si256((__m256i*)(b+i+64)));
    acc3=_mm256_add_epi32(acc3,_mm256_load_si256((__m256i*)(b+i+96)));
  }
  clock_gettime(CLOCK_MONOTONIC,&t1);
  double s=(t1.tv_sec-t0.tv_sec)+(t1.tv_nsec-t0.tv_nsec)*1e-9;
  acc0=_mm256_add_epi32(_mm256_add_epi32(acc0,acc1),_mm256_add_epi32(acc2,acc3));
  res[t]=6.0*SZ/s/1e9; if(_mm256_extract_epi32(acc0,0)==12345) printf("x");
  return NULL;
}
int main(int argc,char**argv){
  int nt=atoi(argv[1]);
  for(int t=0;t<nt;t++){buf[t]=aligned_alloc(64,SZ); memset(buf[t],1,SZ);}
  pthread_t th[2];
  for(long t=0;t<nt;t++) pthread_create(&th[t],0,run,(void*)t);
  double tot=0; for(int t=0;t<nt;t++){pthread_join(th[t],0); tot+=res[t];}
  printf("%d threads: %.1f GB/s total\n",nt,tot);
}
