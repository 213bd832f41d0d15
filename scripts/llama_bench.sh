#!/usr/bin/env bash
# llama.cpp's speed on this machine: runs llama.cpp's own llama-bench (built by
# scripts/llama-cpp.sh) on each given GGUF with prompt processing of 512 tokens (pp512)
# and generation of 128 tokens (tg128), CPU only, and prints its JSON.
#
#   scripts/llama_bench.sh M.gguf [M2.gguf ...]
#   scripts/llama_bench.sh --record models/testdata/bench-llama-cpp-amd-epyc.json M.gguf ...
#
# --record merges the results into FILE (one entry per model file name, replacing an
# older entry for the same name) together with the CPU model name and flags (lscpu),
# the llama.cpp commit and the exact command. Environment knobs: THREADS (default 2),
# REPETITIONS (llama-bench -r, default 5).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-llama"
BENCH="$VENV/bin/llama-bench"
THREADS="${THREADS:-2}"
REPETITIONS="${REPETITIONS:-5}"

record=""
if [ "${1:-}" = "--record" ]; then
    record="${2:?--record needs a file}"
    shift 2
fi
[ "$#" -ge 1 ] || { echo "usage: $0 [--record FILE] MODEL.gguf..." >&2; exit 2; }
[ -x "$BENCH" ] || { echo "$BENCH is missing: run scripts/llama-cpp.sh first" >&2; exit 1; }

for model in "$@"; do
    [ -f "$model" ] || { echo "model file $model does not exist" >&2; exit 1; }
    command=("$BENCH" -m "$model" -p 512 -n 128 -t "$THREADS" -ngl 0 -r "$REPETITIONS" -o json)
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    output="$("${command[@]}")"
    load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%s\n' "$output"
    if [ -n "$record" ]; then
        ROOT="$ROOT" RECORD="$record" MODEL="$model" LOAD_BEFORE="$load" LOAD_AFTER="$load_after" COMMAND="${command[*]}" \
            COMMIT_FILE="$VENV/llama-cpp-commit" BENCH_JSON="$output" "$VENV/bin/python" - <<'EOF'
import json, os, subprocess
from pathlib import Path

record = Path(os.environ["RECORD"])
lscpu = {}
for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
    key, _, value = line.partition(":")
    lscpu[key.strip()] = value.strip()
commit_file = Path(os.environ["COMMIT_FILE"])
data = json.loads(record.read_text()) if record.is_file() else {}
data["cpu"] = {
    "model_name": lscpu.get("Model name", "unknown"),
    "vendor": lscpu.get("Vendor ID", "unknown"),
    "family": lscpu.get("CPU family"),
    "model": lscpu.get("Model"),
    "cpus": lscpu.get("CPU(s)"),
    "flags": lscpu.get("Flags", ""),
}
data["llama_cpp_commit"] = commit_file.read_text().strip() if commit_file.is_file() else "unknown"
data["tool"] = "llama-bench (llama.cpp tools/llama-bench), built by scripts/llama-cpp.sh"
runs = data.setdefault("models", {})
model = Path(os.environ["MODEL"])
command = os.environ["COMMAND"].replace(str(model), model.name)
runs[model.name] = {
    "command": command.replace(os.environ["ROOT"] + "/", ""),
    "load_average_before": os.environ["LOAD_BEFORE"],
    "load_average_after": os.environ["LOAD_AFTER"],
    "results": [
        {
            "test": f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}",
            "tokens_per_second": r["avg_ts"],
            "stddev": r["stddev_ts"],
            "samples_ts": r.get("samples_ts"),
            "n_threads": r["n_threads"],
            "type_k": r.get("type_k"),
            "flash_attn": r.get("flash_attn"),
            "model_type": r.get("model_type"),
            "model_size": r.get("model_size"),
            "model_n_params": r.get("model_n_params"),
            "cpu_info": r.get("cpu_info"),
            "backends": r.get("backends"),
            "build_commit": r.get("build_commit"),
        }
        for r in json.loads(os.environ["BENCH_JSON"])
    ],
}
record.parent.mkdir(parents=True, exist_ok=True)
record.write_text(json.dumps(data, indent=1) + "\n")
print(f"recorded {model.name} in {record}")
EOF
    fi
done
