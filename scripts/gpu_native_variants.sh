#!/bin/bash
# The cm2 attention and GEMM variants (docs/webgpu.md, "Native Vulkan
# kernels": the attention's letters, the GEMM's `p` and `u`)
# beside the defaults, WGSL and PyTorch, on an NVIDIA GPU machine with
# the Vulkan loader installed (see scripts/gpu_side_by_side.sh). $1: a
# folder holding backplane, backplane-conformance, libbackplane_webgpu.so
# and the examples coopmat_peak and pipeline_stats, built with
# `--features native-vulkan`.
# $2: `perf` (the peak probe, the driver's pipeline statistics in
# $OUT/stats.txt, the timings and PyTorch: about 4 minutes on an H100)
# or `conformance` (the candidates' conformance: about 3 minutes); both
# when absent. Results in $OUT/peak.txt, $OUT/variants-perf.txt,
# $OUT/torch.txt and $OUT/variants-conformance.txt, appended as they
# come. A process timing the GPU sometimes runs 2-4x slow whichever
# kernel it runs (docs/webgpu.md), so the candidates are timed in two
# rounds, each beside the defaults, and only a figure repeated in both
# rounds counts. FA_CASE and GEMM_CASE replace the timed cases (e.g.
# small ones for a dry run on lavapipe, with VK_DRIVER_FILES set to its
# manifest).
. "$(dirname "$0")/gpu_native_env.sh" "$1"
FA=${FA_CASE:-'kv=20000,nb=512,mask=true,type_KV=f16'}
GEMM=${GEMM_CASE:-'type_a=f16,type_b=f32,m=4096,n=512,k=14336'}
STEPS=${2:-perf conformance}
# The defaults first, then the candidates: the attention variants that
# ran near or ahead of the defaults on an H100 on 2026-12-07 (`ro`, the
# former head-256 default `128x64w256`), the ones whose H200 figures
# looked like a slow process (`rh`, `64x32w128ro`), the KHR GEMMs with
# 64 x 64 shares (`256x128k32hp2` the fastest native one on an H100)
# and the cm2 GEMM nearest the WGSL one.
FA_VARIANTS="128x64w256r 64x64w128 128x64w256 128x64w256ro 128x64w256rh 64x32w128ro"
GEMM_VARIANTS="128x128k32w64h 128x128k32w64hdb 128x128k32w64db 256x128k32h 256x128k32hp2 cm2_128x256k32h"
# perf LABEL CASES OP ENV...: the kernels that ran and the timings.
perf() {
  local label=$1 cases=$2 op=$3; shift 3
  echo "== $label" | tee -a $OUT/variants-perf.txt
  env "$@" BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout 90 $C perf --backend webgpu --op $op \
    --min-time-ms 300 --case "$cases" > /tmp/perf.txt 2>&1
  grep -o "native \(mul_mat\|flash_attn\)_[a-z0-9_]*\|keys split [0-9]* ways of [0-9]*" /tmp/perf.txt | sort | uniq -c \
    | head -6 | tee -a $OUT/variants-perf.txt
  grep "$op(" /tmp/perf.txt | tee -a $OUT/variants-perf.txt
}
if [[ " $STEPS " == *" perf "* ]]; then
if [ -x $N/coopmat_peak ]; then
  echo "== cooperative-matrix peak (coopmat_peak)" | tee -a $OUT/peak.txt
  timeout 60 $N/coopmat_peak 2>&1 | tee -a $OUT/peak.txt
fi
if [ -x $N/pipeline_stats ]; then
  timeout 120 $N/pipeline_stats > $OUT/stats.txt 2>&1
fi
perf "attention, auto (warming up)" "$FA" FLASH_ATTN_EXT
perf "attention, WGSL" "$FA" FLASH_ATTN_EXT BACKPLANE_WEBGPU_NATIVE=off
perf "f16 GEMM, WGSL" "$GEMM" MUL_MAT BACKPLANE_WEBGPU_NATIVE=off
for round in 1 2; do
  for c in $FA_VARIANTS; do
    perf "round $round: attention $c" "$FA" FLASH_ATTN_EXT BACKPLANE_WEBGPU_NATIVE=on \
      BACKPLANE_WEBGPU_NATIVE_FA=$c
  done
  perf "round $round: attention 64x32w128ro, keys split 8 ways" "$FA" FLASH_ATTN_EXT \
    BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_FA=64x32w128ro BACKPLANE_WEBGPU_FLASH_ATTN_SPLITS=8
  for g in $GEMM_VARIANTS; do
    perf "round $round: f16 GEMM $g" "$GEMM" MUL_MAT BACKPLANE_WEBGPU_NATIVE=on \
      BACKPLANE_WEBGPU_NATIVE_GEMM=$g
  done
done
timeout 120 python3 "$(dirname "$0")/torch-baseline.py" 2>&1 | tee $OUT/torch.txt
fi
[[ " $STEPS " == *" conformance "* ]] || exit 0
# Conformance of the candidates not yet checked on a GPU.
for g in cm2_128x256k64h; do
  CONF_LIMIT=${CONF_LIMIT:-100} conf variants-conformance.txt 'mul_mat_cm2_[a-z0-9_]*' \
    "f16 GEMM $g, native=on, default tier" env BACKPLANE_WEBGPU_NATIVE=on \
    BACKPLANE_WEBGPU_NATIVE_GEMM=$g $C test --backend webgpu --op MUL_MAT
done
for c in 128x64w256ro 128x64w256; do
  CONF_LIMIT=${CONF_LIMIT:-100} conf variants-conformance.txt 'flash_attn_cm2_[a-z0-9_]*' \
    "attention $c, native=on, sampled" env BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_FA=$c \
    $C test --backend webgpu --op FLASH_ATTN_EXT --tier sampled
done
