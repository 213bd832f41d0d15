#!/bin/bash
# The native cm2 attention (docs/webgpu.md, "Native Vulkan kernels",
# `flash_attn_cm2`) on an NVIDIA GPU machine with the Vulkan loader
# installed (see scripts/gpu_side_by_side.sh). $1: a folder holding
# backplane, backplane-conformance and libbackplane_webgpu.so built with
# `--features native-vulkan`. Results in $OUT: attention-conformance.txt
# and attention-perf.txt, appended as they come (an estimated 5-7
# minutes in all).
#
# 1. Speed of the perf cases (512 queries over 20,000 keys at head sizes
#    256 and 128, and a decode over 16,384 keys): native=auto (the
#    default), WGSL (native=off), native=on; then the key split and every
#    configuration (BACKPLANE_WEBGPU_NATIVE_FA); WGSL again last. The
#    first processes of a call that time the GPU ran 2-3x slower on an
#    H100 whatever they ran, so the first two repeat at the end.
# 2. Conformance of the f16 K/V cases of the full tier with native=on and
#    the default configurations, then the sampled tier under every other
#    configuration.
set -x
. "$(dirname "$0")/gpu_native_env.sh" "$1"
CONFIGS="128x64w256r 64x64w128 128x64w256 64x32w128 32x32w128 128x32w256"

# $1: label; $2: case regex; the rest: environment words.
perf() {
  local label=$1 cases=$2; shift 2
  echo "== $label" | tee -a $OUT/attention-perf.txt
  env "$@" BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout 60 $C perf --backend webgpu --op FLASH_ATTN_EXT \
    --min-time-ms 300 --case "$cases" > /tmp/perf.txt 2>&1
  grep -o "native flash_attn_cm2_[a-z0-9_]*\|keys split [0-9]* ways of [0-9]*\|WGSL kernels: .*" /tmp/perf.txt \
    | sort -u | head -5 | tee -a $OUT/attention-perf.txt
  grep "FLASH_ATTN_EXT(" /tmp/perf.txt | tee -a $OUT/attention-perf.txt
}
# fa_conf LABEL COMMAND...: the summary, the native kernels that ran, failures.
fa_conf() { conf attention-conformance.txt 'flash_attn_cm2_[a-z0-9_]*' "$@"; }
ALL='kv=20000,nb=512|kv=16384,nb=1,mask=true,type_KV=f16'
PRE='kv=20000,nb=512'
perf "auto (warming up)" "$ALL"
perf "WGSL (warming up)" "$ALL" BACKPLANE_WEBGPU_NATIVE=off
perf "auto" "$ALL"
perf "WGSL" "$ALL" BACKPLANE_WEBGPU_NATIVE=off
perf "native=on (decode too)" "$ALL" BACKPLANE_WEBGPU_NATIVE=on
for s in 2 4 8 16; do perf "defaults, keys split $s ways" "$PRE" BACKPLANE_WEBGPU_FLASH_ATTN_SPLITS=$s; done
for c in $CONFIGS; do perf "configuration $c" "$PRE" BACKPLANE_WEBGPU_NATIVE_FA=$c; done
perf "WGSL again" "$PRE" BACKPLANE_WEBGPU_NATIVE=off

fa_conf "native=on, defaults, full tier, f16 K/V" env BACKPLANE_WEBGPU_NATIVE=on \
  $C test --backend webgpu --op FLASH_ATTN_EXT --tier full --case 'type_KV=f16'
for c in $CONFIGS; do
  [ $c = 128x64w256r ] || [ $c = 64x64w128 ] && continue
  fa_conf "configuration $c, sampled" env BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_NATIVE_FA=$c \
    $C test --backend webgpu --op FLASH_ATTN_EXT --tier sampled
done
