#!/usr/bin/env bash
# Builds llama.cpp as the reference implementation: llama-cpp-python 0.3.36 (which
# vendors llama.cpp commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f) into
# .venv-llama, compiled from source for this CPU, plus llama.cpp's own llama-bench
# and llama-quantize from the same CMake build tree.
#
# Build form: GGML_NATIVE=ON (-march=native: AVX-512 where the CPU has it),
# GGML_CPU_REPACK=ON (repacked weight layouts for q4_0/q8_0/iq4_nl/...), OpenMP,
# Release (-O3). The multimodal library (LLAVA_BUILD) is left out: the references
# only need text models.
#
# Idempotent: every step is skipped when its result exists. Environment knobs:
#   LLAMA_CPP_PYTHON_SRC    an unpacked llama_cpp_python-0.3.36 source tree to build
#   LLAMA_CPP_PYTHON_SDIST  the sdist tarball to unpack (otherwise pip downloads it)
#   CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default 2)
#   FORCE=1                 rebuild even when the package and binaries exist
set -euo pipefail

VERSION=0.3.36
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-llama"
BUILD="$VENV/build"
LOGS="$VENV/logs"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
CMAKE_FLAGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_CPU_REPACK=ON -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF"

mkdir -p "$LOGS"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$VENV/bin/pip" --disable-pip-version-check)

if ! "$PY" -c "import scikit_build_core, numpy" 2>/dev/null || [ ! -x "$VENV/bin/cmake" ]; then
    "${PIP[@]}" install -q "scikit-build-core>=0.9.2" cmake ninja numpy typing-extensions diskcache jinja2
fi
CMAKE="$VENV/bin/cmake"

need_package=0
if [ "${FORCE:-0}" = 1 ] || ! "$PY" -c "import llama_cpp" 2>/dev/null; then
    need_package=1
fi
need_tools=0
if [ "${FORCE:-0}" = 1 ] || [ ! -x "$VENV/bin/llama-bench" ] || [ ! -x "$VENV/bin/llama-quantize" ]; then
    need_tools=1
fi

# The source tree: given, the one the kept build tree was configured from, or the sdist
# unpacked under .venv-llama/src (downloaded by pip unless LLAMA_CPP_PYTHON_SDIST names it).
SRC="${LLAMA_CPP_PYTHON_SRC:-}"
if [ -z "$SRC" ] && [ "$need_package" = 0 ] && [ -f "$BUILD/CMakeCache.txt" ]; then
    SRC="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
fi
SRC="${SRC:-$VENV/src/llama_cpp_python-$VERSION}"
if [ $((need_package + need_tools)) -gt 0 ] && [ ! -f "$SRC/CMakeLists.txt" ]; then
    mkdir -p "$VENV/src"
    SDIST="${LLAMA_CPP_PYTHON_SDIST:-}"
    if [ -z "$SDIST" ]; then
        # Only the package itself as source: `--no-binary :all:` would also build
        # its build dependencies (cmake, ninja) from source.
        "${PIP[@]}" download --no-deps --no-build-isolation --no-binary llama-cpp-python \
            "llama-cpp-python==$VERSION" -d "$VENV/src"
        SDIST="$VENV/src/llama_cpp_python-$VERSION.tar.gz"
    fi
    tar -xzf "$SDIST" -C "$VENV/src"
    SRC="$VENV/src/llama_cpp_python-$VERSION"
fi

# 1. The Python package and libllama/libggml, built in a kept build directory.
if [ "$need_package" = 1 ]; then
    start=$(date +%s)
    CMAKE_ARGS="$CMAKE_FLAGS" "${PIP[@]}" install -v --no-build-isolation \
        --config-settings=build-dir="$BUILD" \
        --config-settings=cmake.build-type=Release \
        "$SRC" >"$LOGS/pip-build.log" 2>&1
    echo "llama-cpp-python build: $(( $(date +%s) - start )) s" | tee -a "$LOGS/build-times"
fi

# 2. llama-bench and llama-quantize: the same build tree with the tools enabled; only
#    these two targets (and the libraries they link) are compiled.
if [ "$need_tools" = 1 ]; then
    start=$(date +%s)
    "$CMAKE" -S "$SRC" -B "$BUILD" -DLLAMA_BUILD_TOOLS=ON >"$LOGS/tools-configure.log" 2>&1
    "$CMAKE" --build "$BUILD" --target llama-bench llama-quantize >"$LOGS/tools-build.log" 2>&1
    for tool in llama-bench llama-quantize; do
        found="$(find "$BUILD" -type f -name "$tool" -perm -u+x | head -n 1)"
        [ -n "$found" ] || { echo "$tool was not built; see $LOGS/tools-build.log" >&2; exit 1; }
        install -m 0755 "$found" "$VENV/bin/$tool"
    done
    echo "llama-bench + llama-quantize build: $(( $(date +%s) - start )) s" | tee -a "$LOGS/build-times"
fi

# The vendored llama.cpp commit, for the reference headers.
commit="$(git -C "$SRC/vendor/llama.cpp" rev-parse HEAD 2>/dev/null || true)"
echo "${commit:-0c1e57098bba43ac29e6e3b677cdceebdd22334f}" >"$VENV/llama-cpp-commit"

LIBDIR="$("$PY" -c 'import llama_cpp, os; print(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))')"
echo "llama.cpp $(cat "$VENV/llama-cpp-commit") ready:"
echo "  python:          $PY (llama_cpp from $LIBDIR)"
echo "  llama-bench:     $VENV/bin/llama-bench"
echo "  llama-quantize:  $VENV/bin/llama-quantize"
# The tools find libllama/libggml in the build tree through their RPATH: keep $BUILD.
"$VENV/bin/llama-bench" --help >/dev/null
