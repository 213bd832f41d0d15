#!/bin/bash
# The conformance catalogue of the ops the native Vulkan kernels take
# (docs/webgpu.md, "Native Vulkan kernels"), with native=on, on an NVIDIA
# GPU machine with the Vulkan loader installed (see
# scripts/gpu_side_by_side.sh). $1: a folder holding backplane,
# backplane-conformance and libbackplane_webgpu.so built with
# `--features native-vulkan`; the other arguments: which runs, in order
# (default: all of them, an estimated 8-12 minutes, so more than one call
# of a 10-minute device; each run is appended to
# $OUT/catalogue-conformance.txt as it ends, with how many cases each
# native kernel ran and the first failures):
#   mul_mat       MUL_MAT, default tier
#   mul_mat_id    MUL_MAT_ID, default tier
#   fa_f16        FLASH_ATTN_EXT, full tier, f16 K/V
#   fa_quant      FLASH_ATTN_EXT, full tier, every other K/V type
#   mul_mat_full  MUL_MAT, full tier
# CONF_LIMIT (seconds per run, default 280) bounds each run; a run cut
# short prints no summary line.
. "$(dirname "$0")/gpu_native_env.sh" "$1"
shift
export CONF_LIMIT=${CONF_LIMIT:-280}
NATIVE_KERNELS='\(mul_mat\|flash_attn\)_[a-z0-9_]*'
run() { conf catalogue-conformance.txt "$NATIVE_KERNELS" "$@"; }
$N/backplane devices 2>&1 | grep -A1 "backend webgpu" | tee -a $OUT/catalogue-conformance.txt
for part in ${@:-mul_mat mul_mat_id fa_f16 fa_quant mul_mat_full}; do
  case $part in
    mul_mat) run "MUL_MAT, native=on, default tier" \
      env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op MUL_MAT ;;
    mul_mat_id) run "MUL_MAT_ID, native=on, default tier" \
      env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op MUL_MAT_ID ;;
    fa_f16) run "FLASH_ATTN_EXT, native=on, full tier, f16 K/V" \
      env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op FLASH_ATTN_EXT --tier full --case 'type_KV=f16' ;;
    fa_quant) run "FLASH_ATTN_EXT, native=on, full tier, other K/V types" \
      env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op FLASH_ATTN_EXT --tier full --case 'type_KV=(q|bf|f32)' ;;
    mul_mat_full) run "MUL_MAT, native=on, full tier" \
      env BACKPLANE_WEBGPU_NATIVE=on $C test --backend webgpu --op MUL_MAT --tier full ;;
    *) echo "unknown run $part (mul_mat mul_mat_id fa_f16 fa_quant mul_mat_full)"; exit 2 ;;
  esac
done
