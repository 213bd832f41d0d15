# Sourced by the scripts/gpu_native*.sh scripts: the Vulkan environment of
# an NVIDIA GPU machine (the loader installed as scripts/gpu_side_by_side.sh
# does; VK_DRIVER_FILES set beforehand picks another driver, e.g. lavapipe's
# for a dry run here), the plugin folder $1, and `conf`.
N=$1
C=$N/backplane-conformance
export BACKPLANE_PLUGIN_PATH=$N
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg}; mkdir -p -m700 $XDG_RUNTIME_DIR
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}

# conf FILE KERNELS LABEL COMMAND...: runs a conformance COMMAND (at most
# CONF_LIMIT seconds, default 200) with the kernel trace on and appends
# to $OUT/FILE the summary line, how many cases each native kernel whose
# name matches the regex KERNELS ran, and the first failures.
conf() {
  local file=$1 kernels=$2 label=$3; shift 3
  BACKPLANE_WEBGPU_MATMUL_TRACE=1 timeout ${CONF_LIMIT:-200} "$@" > /tmp/conf.txt 2>&1
  echo "== $label: $(grep '^conformance:' /tmp/conf.txt | tail -1)" | tee -a $OUT/$file
  grep -o "native $kernels" /tmp/conf.txt | sort | uniq -c | tee -a $OUT/$file
  grep -m5 "FAIL\|failed to build\|error" /tmp/conf.txt | cut -c1-300 | tee -a $OUT/$file
}
