#!/bin/bash
# The split weight layout (docs/webgpu.md, "Weights stored split") on an
# NVIDIA GPU machine with the Vulkan loader installed (see
# scripts/gpu_side_by_side.sh). $1: a folder holding backplane-conformance
# and libbackplane_webgpu.so (built with `--features native-vulkan` for
# the native rows; without it they say the kernels are not built).
# Results in $OUT: split-perf.txt, split-conformance.txt (about 4 minutes).
#
# 1. Speed at m=4096 k=14336, q4_0 and q4_K, n=1 and n=512, in two
#    rounds: ggml's layout and split, each with the WGSL kernels
#    (native=off), with the native mat-vec (q4_0, n=1) and with native
#    KHR GEMM configurations (q4_0, n=512; BACKPLANE_WEBGPU_NATIVE_GEMM).
#    Each block names the kernel that ran and says the split weights
#    were read in place.
# 2. Conformance of the whole MUL_MAT catalogue with the weights in the
#    split layout (--weight-layouts), native=off and native=on; then the
#    wide products (sampled) under each GEMM configuration above.
# GEMMS replaces the native GEMM configurations (default
# "256x128k32hp2 256x128k32h 128x128k64").
# SIZE replaces `m=4096` and `k=14336` in the timed cases (e.g.
# SIZE='m=2048,k=2048' for a dry run on lavapipe, with VK_DRIVER_FILES set to
# its manifest).
set -x
. "$(dirname "$0")/gpu_native_env.sh" "$1"
export BACKPLANE_WEBGPU_SPLIT_WEIGHTS=on
mkdir -p "$OUT"

# $1: label; $2: case regex; $3: "" or --weight-layouts; the rest:
# environment words.
perf() {
  local label=$1 cases=$2 layouts=$3; shift 3
  echo "== $label" | tee -a "$OUT/split-perf.txt"
  env "$@" BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout 60 "$C" perf --backend webgpu --op MUL_MAT \
    --min-time-ms 300 --case "$cases" $layouts > /tmp/perf.txt 2>&1
  grep -o "native mul_mat_[a-z0-9_]*\|(read from the split layout in place)" \
    /tmp/perf.txt | sort | uniq -c | tee -a "$OUT/split-perf.txt"
  grep "MUL_MAT(" /tmp/perf.txt | tee -a "$OUT/split-perf.txt"
}
SIZE=${SIZE:-m=4096,k=14336}
M=${SIZE%%,*} K=${SIZE#*,}
CASES="type_a=(q4_0|q4_K),type_b=f32,$M,n=(1|512),$K,"
ONE="type_a=q4_0,type_b=f32,$M,n=1,$K,"
WIDE="type_a=q4_0,type_b=f32,$M,n=512,$K,"
GEMMS=${GEMMS:-256x128k32hp2 256x128k32h 128x128k64}
for round in 1 2; do
  perf "round $round: ggml's layout, WGSL" "$CASES" "" BACKPLANE_WEBGPU_NATIVE=off
  perf "round $round: split, WGSL" "$CASES" --weight-layouts BACKPLANE_WEBGPU_NATIVE=off
  perf "round $round: ggml's layout, native mat-vec" "$ONE" "" BACKPLANE_WEBGPU_NATIVE=on
  perf "round $round: split, native mat-vec" "$ONE" --weight-layouts BACKPLANE_WEBGPU_NATIVE=on
  for g in $GEMMS; do
    perf "round $round: ggml's layout, native GEMM $g" "$WIDE" "" \
      BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g
    perf "round $round: split, native GEMM $g" "$WIDE" --weight-layouts \
      BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g
  done
done

split_conf() { conf split-conformance.txt 'mul_mat_[a-z0-9_]*' "$@"; }
split_conf "split, native=off, whole MUL_MAT catalogue" \
  env BACKPLANE_WEBGPU_NATIVE=off "$C" test --backend webgpu --op MUL_MAT --weight-layouts
split_conf "split, native=on, whole MUL_MAT catalogue" \
  env BACKPLANE_WEBGPU_NATIVE=on "$C" test --backend webgpu --op MUL_MAT --weight-layouts
for g in $GEMMS; do
  split_conf "split, native=on, GEMM $g, n >= 64" \
    env BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_GEMM=$g "$C" test --backend webgpu \
    --op MUL_MAT --tier sampled --case 'n=(6[4-9]|[7-9][0-9]|[1-9][0-9][0-9]+),' --weight-layouts
done
