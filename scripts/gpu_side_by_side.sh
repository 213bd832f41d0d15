#!/bin/bash
# backplane (WebGPU on Vulkan) and llama.cpp (CUDA) side by side on an NVIDIA
# GPU machine with CUDA's compiler, CMake and ninja but no network.
# Run from the repository root there, with beside it (prepared here):
#   .gl/*.deb              the Vulkan/EGL loader packages (libvulkan1, libegl1, libglvnd0, ...)
#   .devbin/bins.tar.xz    a baseline build: backplane, xtask, backplane-conformance, libbackplane_webgpu.so (stripped)
#   .devbin/bins2.tar.xz   the build to measure, same four files
#   .llamacpp/llsrc.tar.xz llama.cpp sources (CMakeLists, cmake, ggml without other GPU backends, src,
#                          include, common, vendor, licenses, tools/llama-bench with a tools/CMakeLists
#                          that adds only it)
# llama.cpp builds on cores 4-15 while ours runs on cores 0-3. Every step
# keeps its result in /tmp/gss and is skipped when run again, so a call cut
# off by a time limit is resumed by running the script again on the same
# machine. Results (also copied to $OUT): gpu.txt, bench.txt (ours, old/new),
# llama.txt (llama-bench jsonl), profile.txt (kernels and host time per
# token), perf.txt (MUL_MAT n=1, split layout or not), llbuild.txt.
set -x
S=/tmp/gss; mkdir -p $S; cp $S/*.txt $OUT/ 2>/dev/null
keep() { cp $S/$1 $OUT/ 2>/dev/null; }
step() { [ -e $S/$1.done ] && return 1; return 0; }
done_() { touch $S/$1.done; }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m700 $XDG_RUNTIME_DIR
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
# NEW: the build to measure (default .devbin/bins2.tar.xz); make-model comes
# from bins2 whatever NEW is, or from NEW when there is no bins2.
# OLD: the baseline build (default .devbin/bins.tar.xz; OLD=none: no baseline).
# VARIANTS: environment settings (space-separated words like
#   BACKPLANE_WEBGPU_NATIVE_REPLAY=on; A=1+B=2 sets two) each benchmarked
#   with NEW beside llama.cpp, and profiled (default: NEW as it is).
# OLDFIRST=1 benchmarks the baseline once before anything else too.
# EARLY=0 skips our first round (it runs while llama.cpp compiles);
# PERF=0 skips the MUL_MAT layout timings; PROFILE=0 the host-time profiles; LLAMA=0 skips llama.cpp
# (our VARIANTS then run alone); KPROFILE=1 keeps the per-kernel GPU times
# of a q4_0 decode (kprofile.txt; the baseline's too); MVSWEEP=1 times the
# n=1 MUL_MAT cases at k=2048/8192/14336 under each BACKPLANE_WEBGPU_MATMUL
# variant (mvsweep.txt); OLDBENCH=0 keeps the baseline out of the model
# runs; RUNCHECK=1 generates 48 tokens of the q4_0 and f16 files with
# native replay on, off and serial (a barrier between every two kernels)
# and with fusion off and compares the texts
# (runcheck.txt); CONF=1 runs the conformance of the WGSL norm and
# product kernels (conf.txt); NATIVE=1 runs
# scripts/gpu_native.sh, while llama.cpp compiles.
NEW=${NEW:-.devbin/bins2.tar.xz}
OLD=${OLD:-.devbin/bins.tar.xz}
B2=.devbin/bins2.tar.xz; [ -e $B2 ] || B2=$NEW
[ -x /tmp/new/backplane ] || { mkdir -p /tmp/old /tmp/new /tmp/b2 && { [ $OLD = none ] || tar xJf $OLD -C /tmp/old; } && tar xJf $NEW -C /tmp/new && tar xJf $B2 -C /tmp/b2; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv > $S/gpu.txt; keep gpu.txt
nproc; nvcc --version | tail -1
LB=/tmp/ll/b/bin/llama-bench
if [ "${LLAMA:-1}" = 1 ] && [ ! -x $LB ] && [ ! -e $S/llbuild.started ]; then
  touch $S/llbuild.started
  ( mkdir -p /tmp/ll && tar xJf .llamacpp/llsrc.tar.xz -C /tmp/ll && cd /tmp/ll && \
    cmake -S src -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_APP=OFF \
     -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > $S/llbuild.txt 2>&1 && \
    taskset -c 4-15 cmake --build b --target llama-bench -j 12 >> $S/llbuild.txt 2>&1; echo "build rc $? at $(date)" >> $S/llbuild.txt ) &
fi
T="taskset -c 0-3"
BACKPLANE_PLUGIN_PATH=/tmp/new /tmp/new/backplane devices 2>&1 | grep -A3 "backend webgpu" | head -8
for t in q4_0 q8_0 q4_K_M f16; do
  [ -s /tmp/m-$t.gguf ] || $T timeout 100 /tmp/b2/xtask make-model --arch llama --preset 1b --type $t --vocab-dir models/vocab -o /tmp/m-$t.gguf 2>&1 | tail -1
done
date
VARIANTS=${VARIANTS:-NONE=1}
# $1: build (old/new); $2: weight type; $3: an environment setting.
ours() { local e=${3:-NONE=1}; env ${e//+/ } BACKPLANE_PLUGIN_PATH=/tmp/$1 $T timeout 90 /tmp/$1/backplane bench --model /tmp/m-$2.gguf -p 512 -n 128 -r 3 --device webgpu --gpu-layers 99 --json 2>&1 | tail -2 | sed "s/^/$1 ${3:-} /" >> $S/bench.txt; keep bench.txt; }
if [ "${OLDFIRST:-0}" = 1 ] && [ $OLD != none ]; then
  for t in q4_0 q8_0 q4_K_M f16; do step old0-$t && { ours old $t; done_ old0-$t; }; done
fi
if [ "${EARLY:-1}" = 1 ]; then
  for t in q4_0 q8_0 q4_K_M f16; do step ours1-$t && { ours new $t; done_ ours1-$t; }; done
fi
if [ -n "$NATIVE" ] && step native; then timeout 270 bash scripts/gpu_native.sh /tmp/new; cp $OUT/native-*.txt $S/ 2>/dev/null; done_ native; fi
if [ "${PROFILE:-1}" = 1 ] && step profile; then
  profile() { env $2 BACKPLANE_PLUGIN_PATH=/tmp/$1 BACKPLANE_WEBGPU_PROFILE=graph $T timeout 60 /tmp/$1/backplane bench --model /tmp/m-q4_0.gguf -p 0 -n 32 -r 1 --device webgpu --gpu-layers 99 2>&1 | tail -8 | sed "s/^/$1 $2 /" >> $S/profile.txt; }
  if [ "$VARIANTS" = NONE=1 ]; then
    profile new NONE=1; profile new BACKPLANE_WEBGPU_REPLAY=off
  else
    for e in $VARIANTS; do profile new $e; done
  fi
  [ $OLD = none ] || profile old NONE=1
  keep profile.txt; done_ profile
fi
date
if [ -n "$KPROFILE" ] && step kprofile; then
  for v in new old; do
    [ $v = old ] && [ $OLD = none ] && continue
    echo "== $v" >> $S/kprofile.txt
    BACKPLANE_PLUGIN_PATH=/tmp/$v BACKPLANE_WEBGPU_PROFILE=kernels $T timeout 60 /tmp/$v/backplane bench --model /tmp/m-q4_0.gguf -p 0 -n 32 -r 1 --device webgpu --gpu-layers 99 >> $S/kprofile.txt 2>&1
  done; keep kprofile.txt; done_ kprofile
fi
if [ -n "$MVSWEEP" ] && step mvsweep; then
  for v in none xf32 rows=1 rows=4 wg=64 wg=128; do
    echo "== $v" >> $S/mvsweep.txt
    env $( [ $v = none ] || echo BACKPLANE_WEBGPU_MATMUL=$v ) BACKPLANE_PLUGIN_PATH=/tmp/new $T timeout 20 /tmp/new/backplane-conformance perf --backend webgpu --op MUL_MAT --case 'n=1,k=(2048|8192|14336),' --min-time-ms 200 2>&1 | grep "MUL_MAT(" >> $S/mvsweep.txt
  done; keep mvsweep.txt; done_ mvsweep
fi
if [ -n "$RUNCHECK" ] && step runcheck; then
  for t in q4_0 f16; do
    for m in on off serial fuseoff; do
      f=on; r=$m; [ $m = fuseoff ] && { f=off; r=on; }
      BACKPLANE_WEBGPU_FUSE=$f BACKPLANE_WEBGPU_NATIVE_REPLAY=$r BACKPLANE_PLUGIN_PATH=/tmp/new $T timeout 60 /tmp/new/backplane run --model /tmp/m-$t.gguf --device webgpu --gpu-layers 99 -n 48 --prompt "The history of the" --temp 0 2>/dev/null > /tmp/run-$t-$m.txt
      cmp -s /tmp/run-$t-on.txt /tmp/run-$t-$m.txt && echo "$t $m: same text as native replay on ($(wc -c < /tmp/run-$t-$m.txt) bytes)" >> $S/runcheck.txt || { echo "$t $m: text differs" >> $S/runcheck.txt; head -c 300 /tmp/run-$t-on.txt /tmp/run-$t-$m.txt >> $S/runcheck.txt; }
    done
  done; keep runcheck.txt; done_ runcheck
fi
if [ -n "$CONF" ] && step conf; then
  for op in RMS_NORM NORM GLU MUL_MAT; do
    BACKPLANE_PLUGIN_PATH=/tmp/new $T timeout 45 /tmp/new/backplane-conformance test --backend webgpu --op $op 2>&1 | tail -1 | sed "s/^/$op /" >> $S/conf.txt
  done; keep conf.txt; done_ conf
fi
while [ "${LLAMA:-1}" = 1 ] && [ ! -x $LB ] && ! grep -q "build rc" $S/llbuild.txt 2>/dev/null; do sleep 5; done
tail -2 $S/llbuild.txt; grep -q "build rc 0" $S/llbuild.txt || keep llbuild.txt; date
for t in q4_0 q8_0 q4_K_M f16; do
  step llama-$t || continue
  [ -x $LB ] && $T timeout 90 $LB -m /tmp/m-$t.gguf -ngl 99 -p 512 -n 128 -r 3 -o jsonl 2>/dev/null >> $S/llama.txt; keep llama.txt
  for e in $VARIANTS; do ours new $t $e; done; done_ llama-$t
done
date
if [ "${PERF:-1}" = 1 ] && step perf; then
  for sp in off on; do
    echo "split_weights=$sp" >> $S/perf.txt
    BACKPLANE_WEBGPU_SPLIT_WEIGHTS=$sp BACKPLANE_PLUGIN_PATH=/tmp/new $T timeout 60 /tmp/new/backplane-conformance perf --backend webgpu --op MUL_MAT --case 'type_a=(q4_0|q4_K),type_b=f32,m=4096,n=(1|512),k=14336,' --repeats 1024 --weight-layouts 2>&1 | grep MUL_MAT >> $S/perf.txt
  done; keep perf.txt; done_ perf
fi
# The baseline build last: its figures are also in docs/models.md.
[ $OLD = none ] || [ "${OLDBENCH:-1}" = 0 ] || for t in q4_0 q8_0 q4_K_M f16; do step old-$t && { ours old $t; done_ old-$t; }; done
date
