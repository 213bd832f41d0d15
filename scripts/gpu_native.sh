#!/bin/bash
# The native Vulkan kernels (docs/webgpu.md, "Native Vulkan kernels") on an
# NVIDIA GPU machine with the Vulkan loader installed (see
# scripts/gpu_side_by_side.sh). $1: a folder holding backplane,
# backplane-conformance and libbackplane_webgpu.so built with
# `--features native-vulkan`. Results in $OUT: native-devices.txt,
# native-conformance.txt, native-perf.txt (an estimated 4-6 minutes in all).
#
# 1. Conformance of the whole MUL_MAT catalogue with native=on and the
#    default configurations; each line says which kernels ran.
# 2. Speed at m=4096 k=14336: WGSL (native=off) first and last, between
#    them native=on for each GEMM configuration (f16/q4_0/q8_0 n=512; the
#    cm2 ones f16 only) and each mat-vec configuration (q4_0/q8_0 n=1).
# 3. Conformance (sampled tier) of the wide products (n >= 64) under
#    every other GEMM configuration (BACKPLANE_WEBGPU_NATIVE_GEMM) and of
#    the q4_0/q8_0 cases under every other mat-vec configuration
#    (BACKPLANE_WEBGPU_NATIVE_MATVEC). Results are appended as they come,
#    so a run cut short keeps what it finished.
set -x
. "$(dirname "$0")/gpu_native_env.sh" "$1"
GEMMS="128x128k32 128x128k32db 128x128k64 128x128k32w16 128x256k32 256x128k32 128x128k32h 256x128k32h"
CM2S="cm2_128x128k32 cm2_128x256k32 cm2_128x256k64 cm2_128x128k32h cm2_128x256k32h cm2_128x256k64h"
MATVECS="r2w128u32 r2w128 r1w128 r4w128 r2w64 r4w64 r1w128u32"
WIDE='n=(6[4-9]|[7-9][0-9]|[1-9][0-9][0-9]+),'
$N/backplane devices 2>&1 | grep -A1 "backend webgpu" | tee $OUT/native-devices.txt
BACKPLANE_WEBGPU_MATMUL_TRACE=1 $N/backplane devices 2>&1 | grep -m1 "native Vulkan" | tee -a $OUT/native-devices.txt

# conf LABEL COMMAND...: the summary, the native kernels that ran, failures.
mm_conf() { conf native-conformance.txt 'mul_mat_[a-z0-9_]*' "$@"; }
mm_conf "native=on, default configurations, whole catalogue" \
  env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op MUL_MAT

# $1: label; $2: case regex; the rest: environment words.
perf() {
  local label=$1 cases=$2; shift 2
  echo "== $label" | tee -a $OUT/native-perf.txt
  env "$@" BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout 60 $C perf --backend webgpu --op MUL_MAT \
    --min-time-ms 300 --case "$cases" > /tmp/perf.txt 2>&1
  grep -o "MUL_MAT node [0-9]*: native mul_mat_[a-z0-9_]*\|WGSL path: [^:]*\|K split [0-9]* ways of [0-9]*" /tmp/perf.txt | sort -u | head -6 | tee -a $OUT/native-perf.txt
  grep "MUL_MAT(" /tmp/perf.txt | tee -a $OUT/native-perf.txt
}
ALL='type_a=(q4_0|q8_0|f16),type_b=f32,m=4096,n=(1|512),'
WIDE512='type_a=(q4_0|q8_0|f16),type_b=f32,m=4096,n=512,'
ONE='type_a=(q4_0|q8_0),type_b=f32,m=4096,n=1,'
perf "WGSL (native=off)" "$ALL" BACKPLANE_WEBGPU_NATIVE=off
for g in $GEMMS; do
  perf "native GEMM $g" "$WIDE512" BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g
done
# 128 x 128 tiles make 128 workgroups at n=512 (one per multiprocessor,
# no split by default): K split in two gives two per multiprocessor.
for g in 128x128k32 128x128k32db 128x128k64 128x128k32h; do
  perf "native GEMM $g, K split 2" "$WIDE512" BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g \
    BACKPLANE_WEBGPU_MATMUL=splitk=2
done
for g in $CM2S; do
  perf "native GEMM $g (f16 only)" 'type_a=f16,type_b=f32,m=4096,n=512,' \
    BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g
done
for v in $MATVECS; do
  perf "native mat-vec $v" "$ONE" BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_MATVEC=$v
done
perf "WGSL (native=off) again" "$ALL" BACKPLANE_WEBGPU_NATIVE=off

# Last (a time limit cuts these first): the other configurations' conformance.
for g in $GEMMS $CM2S; do
  [ $g = 128x128k32 ] && continue
  mm_conf "GEMM $g, n >= 64" env BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g \
    $C test --backend webgpu --op MUL_MAT --tier sampled --case "$WIDE"
done
for v in $MATVECS; do
  [ $v = r2w128u32 ] && continue
  mm_conf "mat-vec $v, q4_0/q8_0" env BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_MATVEC=$v \
    $C test --backend webgpu --op MUL_MAT --tier sampled --case 'type_a=q[48]_0,'
done
