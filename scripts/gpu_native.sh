#!/bin/bash
# The native Vulkan kernels (docs/webgpu.md, "Native Vulkan kernels") on an
# NVIDIA GPU machine with the Vulkan loader installed (see
# scripts/gpu_side_by_side.sh). $1: a folder holding backplane,
# backplane-conformance and libbackplane_webgpu.so built with
# `--features native-vulkan`. Results in $OUT: native-devices.txt,
# native-conformance.txt, native-perf.txt.
set -x
N=$1
export BACKPLANE_PLUGIN_PATH=$N
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg}; mkdir -p -m700 $XDG_RUNTIME_DIR
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
$N/backplane devices 2>&1 | grep -A1 "backend webgpu" | tee $OUT/native-devices.txt
# Every MUL_MAT case with the native kernels forced on (the GEMM runs only with on).
BACKPLANE_WEBGPU_NATIVE=on BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout 240 $N/backplane-conformance test --backend webgpu --op MUL_MAT \
  > /tmp/conf.txt 2>&1; tail -4 /tmp/conf.txt | tee $OUT/native-conformance.txt
grep -o "native mul_mat_[a-z0-9_]*" /tmp/conf.txt | sort | uniq -c | tee -a $OUT/native-conformance.txt
grep -m5 "FAIL\|failed" /tmp/conf.txt | tee -a $OUT/native-conformance.txt
# Speed: native on and off alternating, two rounds.
for r in 1 2; do for mode in on off; do
  echo "== round $r native=$mode" | tee -a $OUT/native-perf.txt
  BACKPLANE_WEBGPU_NATIVE=$mode timeout 60 $N/backplane-conformance perf --backend webgpu --op MUL_MAT \
    --case 'type_a=(q4_0|q8_0|f16),type_b=f32,m=4096,n=(1|512),' 2>&1 | grep "MUL_MAT(" | tee -a $OUT/native-perf.txt
done; done
