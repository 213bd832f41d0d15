#!/usr/bin/env python3
"""backplane and llama.cpp on the same GGUF files, back to back, as ratios.

    scripts/side_by_side.py [--pairs N] [--threads T] MODEL.gguf...

For each model, N pairs of runs (llama.cpp's llama-bench, then `backplane
bench`, each pp512 + tg128 with one repetition after its own warm-up):
pairing each backplane run with the llama.cpp run just before it cancels
slow drifts of a shared machine's speed. Prints one line per model: the
median tokens/s of each side and the median of the per-pair ratios; with
--json, the raw runs too. Needs llama-bench from scripts/llama-cpp.sh and
the release `backplane` binary.
"""
import argparse, json, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def llama(model, threads):
    out = subprocess.run(
        [str(ROOT / ".venv-llama/bin/llama-bench"), "-m", model, "-p", "512", "-n", "128",
         "-t", str(threads), "-ngl", "0", "-r", "1", "-o", "json"],
        capture_output=True, text=True, check=True).stdout
    runs = json.loads(out)
    pp = next(r["avg_ts"] for r in runs if r["n_prompt"] == 512 and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in runs if r["n_gen"] == 128 and r["n_prompt"] == 0)
    return pp, tg


def ours(model, extra):
    out = subprocess.run(
        [str(ROOT / "target/release/backplane"), "bench", "--model", model, "-p", "512",
         "-n", "128", "-r", "1", "--device", "cpu", "--json", *extra],
        capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["pp_tok_s"], r["tg_tok_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--extra", default="", help="extra backplane bench arguments")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    report = []
    for m in a.models:
        runs = []
        for _ in range(a.pairs):
            load = open("/proc/loadavg").read().split()[0]
            lp, lt = llama(m, a.threads)
            bp, bt = ours(m, a.extra.split())
            runs.append({"llama_pp": lp, "llama_tg": lt, "ours_pp": bp, "ours_tg": bt, "load": load})
        med = lambda k: statistics.median(r[k] for r in runs)
        ratio = lambda o, l: statistics.median(r[o] / r[l] for r in runs)
        line = {
            "model": Path(m).name, "ours_pp": med("ours_pp"), "llama_pp": med("llama_pp"),
            "pp_ratio": ratio("ours_pp", "llama_pp"), "ours_tg": med("ours_tg"),
            "llama_tg": med("llama_tg"), "tg_ratio": ratio("ours_tg", "llama_tg"), "runs": runs,
        }
        report.append(line)
        print(f"{line['model']}: pp512 {line['ours_pp']:.1f} vs {line['llama_pp']:.1f} "
              f"(x{line['pp_ratio']:.2f}), tg128 {line['ours_tg']:.1f} vs {line['llama_tg']:.1f} "
              f"(x{line['tg_ratio']:.2f}), load {[r['load'] for r in runs]}", flush=True)
    if a.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
