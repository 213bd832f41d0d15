#!/usr/bin/env python3
"""llama.cpp's own quantizer, through llama-cpp-python, for comparison with
`backplane quantize`.

    llama_quantize.py IN.gguf OUT.gguf TYPE [--threads N]
        quantizes IN with llama.cpp's llama_model_quantize (TYPE as
        llama-quantize spells it: Q8_0, Q4_K_M, ...).

    llama_quantize.py --refs [--out DIR]
        regenerates the byte-identity references of backplane-quantize
        (models/quantize/tests/ref/): writes the reference input models with
        `cargo run -p backplane-quantize --example reference_model`,
        quantizes each with llama.cpp to every reference type and records
        each output tensor's name, type, shape and SHA-256, the metadata
        keys, general.file_type and general.quantization_version, and the
        input's SHA-256 (so a change in the generator is caught).

    llama_quantize.py --describe FILE.gguf
        prints the same description of any GGUF file as JSON.

Needs llama_cpp (llama-cpp-python) importable for quantizing; the GGUF
reading below is self-contained.
"""

import argparse
import ctypes
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_DIR = os.path.join(REPO, "models", "quantize", "tests", "ref")

# llama_ftype codes (llama.h).
FTYPES = {
    "F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
    "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14,
    "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "BF16": 32,
}

# The types the references cover: the list, then the other mixes.
REF_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q6_K", "Q4_K_M", "Q5_K_M",
             "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q5_K_S", "F16", "BF16"]

VARIANTS = ["untied", "tied"]

# ggml type code -> (name, block size, bytes per block).
GGML_TYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20),
    6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 9: ("q8_1", 32, 36),
    10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110), 12: ("q4_K", 256, 144),
    13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 15: ("q8_K", 256, 292),
    24: ("i8", 1, 1), 25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8),
    30: ("bf16", 1, 2),
}


class Reader:
    """Little-endian reads from a byte buffer."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"truncated GGUF at byte {self.pos}")
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return values[0] if len(values) == 1 else values

    def string(self):
        n = self.take("Q")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8")

    SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
               10: "Q", 11: "q", 12: "d"}

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype = self.take("I")
            count = self.take("Q")
            return [self.value(etype) for _ in range(count)]
        return self.take(self.SCALARS[vtype])


def describe(path):
    """Metadata keys, file type, quantization version and per-tensor hashes."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take("4s") != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    metadata = []
    for _ in range(n_kv):
        key = r.string()
        metadata.append((key, r.value(r.take("I"))))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("I")
        ne = [r.take("Q") for _ in range(n_dims)]
        infos.append((name, ne, r.take("I"), r.take("Q")))
    values = dict(metadata)
    alignment = values.get("general.alignment", 32)
    data_start = (r.pos + alignment - 1) // alignment * alignment
    tensors = []
    for name, ne, code, offset in infos:
        type_name, block, type_size = GGML_TYPES[code]
        rows = 1
        for d in ne[1:]:
            rows *= d
        size = ne[0] // block * type_size * rows
        start = data_start + offset
        tensors.append({
            "name": name,
            "type": type_name,
            "ne": ne,
            "sha256": hashlib.sha256(data[start:start + size]).hexdigest(),
        })
    return {
        "gguf_version": version,
        "metadata_keys": [k for k, _ in metadata],
        "file_type": values.get("general.file_type"),
        "quantization_version": values.get("general.quantization_version"),
        "tensors": tensors,
    }


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def llama_quantize(inp, out, type_name, threads):
    """Runs llama.cpp's llama_model_quantize; returns the seconds it took."""
    import llama_cpp

    ftype = FTYPES.get(type_name.upper())
    if ftype is None:
        raise SystemExit(f"unknown type {type_name}: valid are {', '.join(FTYPES)}")
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    start = time.perf_counter()
    rc = llama_cpp.llama_model_quantize(inp.encode(), out.encode(), ctypes.byref(params))
    seconds = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"llama_model_quantize({inp} -> {out}, {type_name}) failed with {rc}")
    return seconds


def llama_cpp_version():
    try:
        from importlib.metadata import version
        return "llama-cpp-python " + version("llama_cpp_python")
    except Exception:  # noqa: BLE001 - the version is informative only
        return "llama-cpp-python (version unknown)"


def dump_ref(ref):
    """JSON with one line per tensor, to keep the references short and diffable."""
    text = json.dumps(ref, indent=1)
    one_line = lambda m: "{" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "}"
    return re.sub(r"\{\s*(\"name\"[^{}]*?)\s*\}", one_line, text) + "\n"


def make_refs(out_dir, threads):
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["cargo", "run", "--quiet", "-p", "backplane-quantize",
             "--example", "reference_model", "--", tmp],
            cwd=REPO, check=True)
        for type_name in REF_TYPES:
            models = {}
            for variant in VARIANTS:
                inp = os.path.join(tmp, f"ref-{variant}.gguf")
                out = os.path.join(tmp, f"ref-{variant}-{type_name}.gguf")
                llama_quantize(inp, out, type_name, threads)
                entry = {"input_sha256": sha256_file(inp)}
                entry.update(describe(out))
                models[variant] = entry
            path = os.path.join(out_dir, f"{type_name}.json")
            with open(path, "w") as f:
                f.write(dump_ref({"type": type_name, "ftype": FTYPES[type_name],
                                  "made_by": llama_cpp_version(), "models": models}))
            print(f"wrote {os.path.relpath(path, REPO)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="IN.gguf OUT.gguf TYPE")
    ap.add_argument("--refs", action="store_true", help="regenerate the reference JSON files")
    ap.add_argument("--out", default=REF_DIR, help="where --refs writes (default: the test refs)")
    ap.add_argument("--describe", metavar="FILE", help="print a GGUF file's description")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    args = ap.parse_args()
    if args.describe:
        json.dump(describe(args.describe), sys.stdout, indent=1)
        print()
    elif args.refs:
        make_refs(args.out, args.threads)
    elif len(args.paths) == 3:
        inp, out, type_name = args.paths
        seconds = llama_quantize(inp, out, type_name, args.threads)
        print(f"llama.cpp quantized {inp} -> {out} ({type_name}) in {seconds:.2f} s")
    else:
        ap.error("give IN OUT TYPE, --refs or --describe FILE")


if __name__ == "__main__":
    main()
