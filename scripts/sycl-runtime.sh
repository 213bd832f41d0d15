#!/usr/bin/env bash
# Installs Intel's SYCL runtime (intel-sycl-rt, with libsycl-jit for the
# kernel_compiler extension) and OpenCL CPU runtime (intel-opencl-rt) into
# <workspace>/.venv when missing, then prints the environment to use:
#
#   eval "$(scripts/sycl-runtime.sh)"
#
# Versions: BACKPLANE_SYCL_RT_VERSION (default 2026.2.0, what pip offered
# when this was written; `pip index versions intel-sycl-rt` lists others).
# The wheel's OpenCL .icd file names a placeholder path, hence
# OCL_ICD_FILENAMES. Messages go to stderr, the environment to stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${BACKPLANE_SYCL_VENV:-$root/.venv}"
version="${BACKPLANE_SYCL_RT_VERSION:-2026.2.0}"

if [[ ! -f "$venv/include/sycl/sycl.hpp" || ! -f "$venv/lib/libsycl-jit.so" || ! -f "$venv/lib/libintelocl.so" ]]; then
    echo "sycl-runtime: installing intel-sycl-rt and intel-opencl-rt $version into $venv" >&2
    if [[ ! -x "$venv/bin/pip" ]]; then
        python3 -m venv "$venv" >&2
    fi
    "$venv/bin/pip" install --quiet "intel-sycl-rt==$version" "intel-opencl-rt==$version" >&2
fi

lib="$(cd "$venv/lib" && pwd)"
cache="${SYCL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/backplane/sycl}"
echo "export BACKPLANE_SYCL_ROOT=$(cd "$venv" && pwd)"
echo "export OCL_ICD_FILENAMES=$lib/libintelocl.so"
echo "export SYCL_CACHE_PERSISTENT=1"
echo "export SYCL_CACHE_DIR=$cache"
