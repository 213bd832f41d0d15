#!/usr/bin/env bash
# Bundles what a run on the GPU machine needs (it has no Rust toolchain):
# the release conformance runner and the webgpu plugin, stripped, into
# .devbin/ (git-ignored via .git/info/exclude). On the device:
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
#   export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m700 $XDG_RUNTIME_DIR
#   BACKPLANE_PLUGIN_PATH=$PWD/.devbin .devbin/backplane-conformance test --backend webgpu --op MUL_MAT
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -q -p backplane-webgpu -p backplane-conformance
rm -rf .devbin && mkdir -p .devbin
strip -o .devbin/backplane-conformance "$target/release/backplane-conformance"
strip -o .devbin/libbackplane_webgpu.so "$target/release/libbackplane_webgpu.so"
du -sh .devbin/*
