#!/usr/bin/env bash
# Developer loop for the WebGPU backend: rebuild only the webgpu plugin,
# install it into target/plugins, and run the conformance runner on it.
#   scripts/webgpu-dev.sh --op ADD --op MUL -v
# Arguments go to `backplane-conformance test --backend webgpu`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -q -p backplane-webgpu -p backplane-conformance
mkdir -p "$target/plugins"
cp "$target/release/libbackplane_webgpu.so" "$target/plugins/.libbackplane_webgpu.so.$$.tmp"
mv "$target/plugins/.libbackplane_webgpu.so.$$.tmp" "$target/plugins/libbackplane_webgpu.so"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/backplane-xdg}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
exec "$target/release/backplane-conformance" test --backend webgpu "$@"
