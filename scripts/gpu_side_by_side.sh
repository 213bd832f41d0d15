#!/bin/bash
# backplane (WebGPU on Vulkan) and llama.cpp (CUDA) side by side on an NVIDIA
# GPU machine with CUDA's compiler, CMake and ninja but no network, in one
# call. Run from the repository root there, with beside it (prepared here):
#   .gl/*.deb              the Vulkan/EGL loader packages (libvulkan1, libegl1, libglvnd0, ...)
#   .devbin/bins.tar.xz    a baseline build: backplane, xtask, backplane-conformance, libbackplane_webgpu.so (stripped)
#   .devbin/bins2.tar.xz   the build to measure, same four files
#   .llamacpp/llsrc.tar.xz llama.cpp sources (CMakeLists, cmake, ggml without other GPU backends, src,
#                          include, common, vendor, licenses, tools/llama-bench with a tools/CMakeLists
#                          that adds only it)
# Results go to $OUT: bench.txt (ours, old/new), llama.txt (llama-bench jsonl),
# profile.txt (kernels and host time per token), perf.txt (MUL_MAT n=1, split layout or not).
set -x
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m700 $XDG_RUNTIME_DIR
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
mkdir -p /tmp/old /tmp/new && tar xJf .devbin/bins.tar.xz -C /tmp/old && tar xJf .devbin/bins2.tar.xz -C /tmp/new
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv | tee $OUT/gpu.txt
nproc; nvcc --version | tail -1
( mkdir -p /tmp/ll && tar xJf .llamacpp/llsrc.tar.xz -C /tmp/ll && cd /tmp/ll && \
  cmake -S src -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_APP=OFF \
   -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > $OUT/llbuild.txt 2>&1 && \
  taskset -c 4-15 cmake --build b --target llama-bench -j 12 >> $OUT/llbuild.txt 2>&1; echo "build rc $? at $(date)" >> $OUT/llbuild.txt ) &
BPID=$!
T="taskset -c 0-3"
BACKPLANE_PLUGIN_PATH=/tmp/new /tmp/new/backplane devices 2>&1 | grep -A3 "backend webgpu" | head -8
date
for t in q4_0 q8_0 q4_K_M f16; do
  $T timeout 100 /tmp/new/xtask make-model --arch llama --preset 1b --type $t --vocab-dir models/vocab -o /tmp/m-$t.gguf 2>&1 | tail -1
done
date
ours() { BACKPLANE_PLUGIN_PATH=/tmp/$1 $T timeout 90 /tmp/$1/backplane bench --model /tmp/m-$2.gguf -p 512 -n 128 -r 3 --device webgpu --gpu-layers 99 --json 2>&1 | tail -2 | sed "s/^/$1 /" | tee -a $OUT/bench.txt; }
for t in q4_0 q8_0 q4_K_M f16; do ours old $t; ours new $t; done
BACKPLANE_PLUGIN_PATH=/tmp/new BACKPLANE_WEBGPU_PROFILE=graph $T timeout 60 /tmp/new/backplane bench --model /tmp/m-q4_0.gguf -p 0 -n 32 -r 1 --device webgpu --gpu-layers 99 2>&1 | tail -6 | tee -a $OUT/profile.txt
BACKPLANE_PLUGIN_PATH=/tmp/old BACKPLANE_WEBGPU_PROFILE=graph $T timeout 60 /tmp/old/backplane bench --model /tmp/m-q4_0.gguf -p 0 -n 32 -r 1 --device webgpu --gpu-layers 99 2>&1 | tail -6 | tee -a $OUT/profile.txt
date
wait $BPID; tail -2 $OUT/llbuild.txt; date
LB=/tmp/ll/b/bin/llama-bench
for t in q4_0 q8_0 q4_K_M f16; do
  [ -x $LB ] && $T timeout 90 $LB -m /tmp/m-$t.gguf -ngl 99 -p 512 -n 128 -r 3 -o jsonl 2>/dev/null | tee -a $OUT/llama.txt
  ours new $t
done
for wl in "" --weight-layouts; do
  BACKPLANE_PLUGIN_PATH=/tmp/new $T timeout 60 /tmp/new/backplane-conformance perf --backend webgpu --op MUL_MAT --case 'type_a=(q4_0|q4_K),type_b=f32,m=4096,n=1,k=14336,' --repeats 1024 $wl 2>&1 | grep MUL_MAT | tee -a $OUT/perf.txt
done
date
