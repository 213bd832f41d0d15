#!/usr/bin/env python3
"""llama.cpp as the reference implementation: token ids, logits and greedy continuations.

Runs llama.cpp (through llama-cpp-python's low-level ctypes binding, CPU only) and
prints or records what the backplane model runner must reproduce. Run it with the
interpreter of the virtual environment that scripts/llama-cpp.sh builds:

    .venv-llama/bin/python scripts/llama_reference.py tokens --model V.gguf --text-file F
    .venv-llama/bin/python scripts/llama_reference.py logits --model M.gguf --tokens 1,2,3 --all
    .venv-llama/bin/python scripts/llama_reference.py greedy --model M.gguf --tokens 1,2,3 -n 32
    .venv-llama/bin/python scripts/llama_reference.py refs --out models/testdata
    .venv-llama/bin/python scripts/llama_reference.py verify --dir models/testdata --threads 1

docs/llama-cpp-reference.md describes the reference files this writes.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
VOCAB_DIR = REPO_ROOT / "models" / "vocab"
MODEL_CACHE = REPO_ROOT / "models" / ".cache"

# The separator llama.cpp's tokenizer tests put between the inputs of a .inp file.
VOCAB_TEST_SEPARATOR = "\n__ggml_vocab_test__\n"

# The vocabularies whose tokenizations are checked in.
REFERENCE_VOCABS = ("ggml-vocab-llama-spm", "ggml-vocab-llama-bpe", "ggml-vocab-qwen2")

# Strings every vocabulary is tokenized on, beside the lines of its .inp file.
TOKENIZER_TEST_STRINGS = [
    "",
    " ",
    "a",
    "Hello world",
    " Hello world",
    "  two leading spaces",
    "trailing spaces   ",
    "tab\tseparated\tcolumns",
    "line one\nline two\r\nline three\n\n\nafter blank lines",
    " \t \n\t\t  mixed whitespace run  \n ",
    "1234567890",
    "3.14159265358979323846264338327950288419716939937510",
    "phone: +1 (555) 010-9999, year 2026, 1,000,000 and 0.5%",
    "Grüße aus Köln: Straße, Äpfel, Öl, Übermut",
    "Ελληνικά: Καλημέρα κόσμε",
    "Русский текст: Съешь же ещё этих мягких французских булок",
    "中文测试：你好，世界！今天天气很好。",
    "日本語のテキスト：こんにちは、世界。カタカナとひらがな",
    "한국어 문장: 안녕하세요 세계",
    "العربية: مرحبا بالعالم",
    "עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया",
    "ไทย: สวัสดีชาวโลก",
    "emoji: 😀 🦙 🚀 🇩🇪 🇯🇵",
    "ZWJ family: 👨‍👩‍👧‍👦 and 🧑🏽‍💻 with skin tone",
    "combining: e\u0301 a\u0308 n\u0303 versus é ä ñ",
    "zero\u200bwidth\u200bspace and non\u00a0breaking space",
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    'fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!("{:?}", v); }',
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "<s> [INST] question [/INST] answer </s>",
    "<s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "I'm you're it's we'll they'd DON'T",
    "!!!??? ... --- *** ___ ~~~ ```",
    "https://example.com/path?query=1&other=two#fragment",
    "a" * 64,
    " " * 17 + "x",
]

# The prompt every logits reference starts from (llama.cpp tokenizes it, BOS included
# where the vocabulary asks for one).
REFERENCE_PROMPT = "The quick brown fox jumps over the lazy dog"

# Most stored positions per logits reference; the largest vocabularies get fewer so
# that models/testdata stays small.
MAX_STORED_POSITIONS = 8
LARGE_VOCAB = 100_000
LARGE_VOCAB_STORED_POSITIONS = 4

# The tiny test models whose logits are checked in: (arch, [types]).
REFERENCE_MODELS = (
    ("llama", ("f32", "f16", "q8_0", "q4_0", "q4_K_M")),
    ("qwen2", ("f32", "f16", "q8_0")),
    ("qwen3", ("f32", "f16", "q8_0")),
)
# The seed of every test model (make-model's default).
MODEL_SEED = 0
GREEDY_TYPES = ("f32", "f16")
GREEDY_STEPS = 32
DEFAULT_THREADS = 2
DEFAULT_CONTEXT = 512

# llama_flash_attn_type values (llama.h); llama.cpp's own tools default to auto.
FLASH_ATTN_TYPES = {"auto": -1, "off": 0, "on": 1}

# ggml_type values (ggml.h) of the KV cache types one may ask for; llama.cpp's default is f16.
# With flash attention llama.cpp casts an f32 cache to f16 before the attention op.
KV_CACHE_TYPES = {"f32": 0, "f16": 1}


_BINDING = None


def load_binding():
    """llama-cpp-python's ctypes binding, imported and initialised once, llama.cpp's log silenced."""
    global _BINDING
    if _BINDING is not None:
        return _BINDING
    try:
        import llama_cpp  # noqa: PLC0415
    except ImportError as error:
        sys.exit(
            f"llama_cpp is not importable ({error}); run scripts/llama-cpp.sh and use "
            ".venv-llama/bin/python"
        )
    llama_cpp.llama_backend_init()
    quiet = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    load_binding.keep_alive = quiet  # the callback must outlive every llama.cpp call
    _BINDING = llama_cpp
    return llama_cpp


def llama_cpp_commit() -> str:
    """The llama.cpp commit the binding was built from (scripts/llama-cpp.sh records it)."""
    path = REPO_ROOT / ".venv-llama" / "llama-cpp-commit"
    return path.read_text().strip() if path.is_file() else "unknown"


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class LlamaModel:
    """A GGUF file loaded by llama.cpp on the CPU, with one context when not vocab-only."""

    def __init__(
        self,
        path: Path,
        vocab_only: bool = False,
        threads: int = DEFAULT_THREADS,
        n_ctx: int = DEFAULT_CONTEXT,
        flash_attn: str = "auto",
        kv_type: str = "f16",
    ):
        self.lib = load_binding()
        self.path = path
        if not path.is_file():
            raise FileNotFoundError(f"model file {path} does not exist")
        model_params = self.lib.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model_params.vocab_only = vocab_only
        model_params.use_mmap = True
        self.model = self.lib.llama_model_load_from_file(str(path).encode(), model_params)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.vocab = self.lib.llama_model_get_vocab(self.model)
        self.n_vocab = self.lib.llama_vocab_n_tokens(self.vocab)
        self.ctx = None
        self.threads = threads
        self.n_ctx = n_ctx
        self.flash_attn = flash_attn
        self.kv_type = kv_type
        if not vocab_only:
            ctx_params = self.lib.llama_context_default_params()
            ctx_params.n_ctx = n_ctx
            ctx_params.n_batch = n_ctx
            ctx_params.n_ubatch = n_ctx
            ctx_params.n_threads = threads
            ctx_params.n_threads_batch = threads
            ctx_params.flash_attn_type = FLASH_ATTN_TYPES[flash_attn]
            ctx_params.type_k = KV_CACHE_TYPES[kv_type]
            ctx_params.type_v = KV_CACHE_TYPES[kv_type]
            ctx_params.no_perf = True
            self.ctx = self.lib.llama_init_from_model(self.model, ctx_params)
            if not self.ctx:
                raise RuntimeError(f"llama.cpp could not create a context for {path}")

    def close(self) -> None:
        """Frees the context and the model."""
        if self.ctx:
            self.lib.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None

    def __enter__(self) -> "LlamaModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        """Token ids of `text` as llama_tokenize gives them."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        for _ in range(2):
            buffer = (self.lib.llama_token * capacity)()
            count = self.lib.llama_tokenize(
                self.vocab, data, len(data), buffer, capacity, add_special, parse_special
            )
            if count >= 0:
                return list(buffer[:count])
            capacity = -count
        raise RuntimeError(f"llama_tokenize kept asking for more room for {text!r}")

    def _decode(self, tokens: Sequence[int], first_pos: int, want_logits: Sequence[bool]):
        batch = self.lib.llama_batch_init(len(tokens), 0, 1)
        try:
            for index, token in enumerate(tokens):
                if not 0 <= token < self.n_vocab:
                    raise ValueError(f"token id {token} is outside the vocabulary of {self.n_vocab}")
                batch.token[index] = token
                batch.pos[index] = first_pos + index
                batch.n_seq_id[index] = 1
                batch.seq_id[index][0] = 0
                batch.logits[index] = 1 if want_logits[index] else 0
            batch.n_tokens = len(tokens)
            status = self.lib.llama_decode(self.ctx, batch)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status} at position {first_pos}")
        finally:
            self.lib.llama_batch_free(batch)

    def _logits_row(self, index: int) -> np.ndarray:
        pointer = self.lib.llama_get_logits_ith(self.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).astype(np.float32, copy=True)

    def reset(self) -> None:
        """Forgets every decoded token (clears the KV cache)."""
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), True)

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits [len(tokens)][n_vocab] of one decode of all tokens from position 0."""
        if not tokens:
            raise ValueError("logits needs at least one token")
        if len(tokens) > self.n_ctx:
            raise ValueError(f"{len(tokens)} tokens do not fit a context of {self.n_ctx}")
        self.reset()
        self._decode(tokens, 0, [True] * len(tokens))
        return np.stack([self._logits_row(i) for i in range(len(tokens))])

    def greedy(self, tokens: Sequence[int], steps: int) -> list[int]:
        """Greedy continuation: argmax over the raw logits, one token decoded per step."""
        if len(tokens) + steps > self.n_ctx:
            raise ValueError(f"{len(tokens)} + {steps} tokens do not fit a context of {self.n_ctx}")
        self.reset()
        want = [False] * len(tokens)
        want[-1] = True
        self._decode(tokens, 0, want)
        position = len(tokens)
        continuation = []
        for step in range(steps):
            row = self._logits_row(-1)
            token = int(np.argmax(row))
            continuation.append(token)
            if step + 1 < steps:
                self._decode([token], position, [True])
                position += 1
        return continuation


def read_vocab_test_inputs(path: Path) -> list[str]:
    """The inputs of a llama.cpp tokenizer test file (.inp), in order."""
    raw = path.read_text(encoding="utf-8")
    parts = raw.split(VOCAB_TEST_SEPARATOR)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_token_list(text: str) -> list[int]:
    """'1,2,3' -> [1, 2, 3]."""
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError as error:
        raise SystemExit(f"--tokens must be comma-separated integers: {error}") from error


def nmse(reference: np.ndarray, candidate: np.ndarray) -> float:
    """sum((c - r)^2) / sum(r^2), the measure the model tests bound."""
    reference = reference.astype(np.float64)
    candidate = candidate.astype(np.float64)
    return float(np.sum((candidate - reference) ** 2) / max(np.sum(reference**2), 1e-300))


# ---------------------------------------------------------------- the subcommands


def command_tokens(args) -> None:
    if args.text_file:
        path = Path(args.text_file)
        texts = read_vocab_test_inputs(path) if path.suffix == ".inp" else [path.read_text("utf-8")]
    else:
        texts = [sys.stdin.read()]
    with LlamaModel(Path(args.model), vocab_only=True) as model:
        result = [
            {"text": text, "ids": model.tokenize(text, args.add_special, args.parse_special)}
            for text in texts
        ]
    print("[\n " + ",\n ".join(json.dumps(entry, ensure_ascii=False) for entry in result) + "\n]")


def command_logits(args) -> None:
    tokens = parse_token_list(args.tokens)
    with LlamaModel(
        Path(args.model), threads=args.threads, flash_attn=args.flash_attn, kv_type=args.kv_type
    ) as model:
        logits = model.logits(tokens)
    rows = logits if args.all else logits[-1:]
    if args.out:
        rows.astype("<f4").tofile(args.out)
        print(json.dumps({"positions": len(rows), "n_vocab": int(logits.shape[1]), "file": args.out}))
    else:
        json.dump({"n_vocab": int(logits.shape[1]), "logits": rows.tolist()}, sys.stdout)
        print()


def command_greedy(args) -> None:
    tokens = parse_token_list(args.tokens)
    with LlamaModel(
        Path(args.model), threads=args.threads, flash_attn=args.flash_attn, kv_type=args.kv_type
    ) as model:
        print(json.dumps(model.greedy(tokens, args.n)))


def json_with_flat_number_lists(document: dict) -> str:
    """Indented JSON, except that lists of numbers stay on one line."""
    number_list = re.compile(r"\[([-0-9.e+,\s]+)\]")

    def flatten(match: re.Match) -> str:
        return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"

    return number_list.sub(flatten, json.dumps(document, indent=1)) + "\n"


def json_one_entry_per_line(document: dict, list_key: str) -> str:
    """JSON of document with the entries of document[list_key] one per line (diff-friendly)."""
    head = {key: value for key, value in document.items() if key != list_key}
    lines = [json.dumps(entry, ensure_ascii=False) for entry in document[list_key]]
    text = json.dumps(head, ensure_ascii=False, indent=1)
    body = ",\n  ".join(lines)
    return f'{text[:-2]},\n "{list_key}": [\n  {body}\n ]\n}}\n'


def tokenizer_reference(vocab_name: str) -> dict:
    """The checked-in tokenizations of one vocabulary."""
    vocab_path = VOCAB_DIR / f"{vocab_name}.gguf"
    cases = [("builtin", text) for text in TOKENIZER_TEST_STRINGS]
    cases += [("inp", text) for text in read_vocab_test_inputs(VOCAB_DIR / f"{vocab_name}.gguf.inp")]
    with LlamaModel(vocab_path, vocab_only=True) as model:
        entries = [
            {
                "origin": origin,
                "text": text,
                "special_added": model.tokenize(text, add_special=True, parse_special=False),
                "special_parsed": model.tokenize(text, add_special=False, parse_special=True),
            }
            for origin, text in cases
        ]
        n_vocab = model.n_vocab
    return {
        "vocab": f"models/vocab/{vocab_name}.gguf",
        "vocab_sha256": sha256_of(vocab_path),
        "n_vocab": n_vocab,
        "llama_cpp_commit": llama_cpp_commit(),
        "modes": {
            "special_added": {"add_special": True, "parse_special": False},
            "special_parsed": {"add_special": False, "parse_special": True},
        },
        "origins": {
            "builtin": "TOKENIZER_TEST_STRINGS in scripts/llama_reference.py",
            "inp": f"the inputs of models/vocab/{vocab_name}.gguf.inp, in order",
        },
        "cases": entries,
    }


def make_model(arch: str, preset: str, dtype: str, force: bool) -> tuple[Path, list[str]]:
    """Writes (or reuses) models/.cache/<arch>-<preset>-<type>.gguf with cargo xtask make-model."""
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    path = MODEL_CACHE / f"{arch}-{preset}-{dtype}.gguf"
    command = ["cargo", "xtask", "make-model", "--arch", arch, "--preset", preset, "--type", dtype]
    command += ["--seed", str(MODEL_SEED), "-o"]
    if force or not path.is_file():
        subprocess.run(command + [str(path)], cwd=REPO_ROOT, check=True)
    return path, command + [f"models/.cache/{path.name}"]


def stored_positions(n_tokens: int, n_vocab: int) -> list[int]:
    """Which prompt positions a logits reference keeps (the last ones: they see the most context)."""
    keep = LARGE_VOCAB_STORED_POSITIONS if n_vocab > LARGE_VOCAB else MAX_STORED_POSITIONS
    keep = min(keep, n_tokens)
    return list(range(n_tokens - keep, n_tokens))


def logits_reference(arch: str, dtype: str, out_dir: Path, args) -> dict:
    """Writes <arch>-tiny-<type>.json and .logits.f32 under out_dir/logits; returns the header."""
    model_path, command = make_model(arch, "tiny", dtype, args.regen_models)
    with LlamaModel(
        model_path, threads=args.threads, flash_attn=args.flash_attn, kv_type=args.kv_type
    ) as model:
        tokens = model.tokenize(REFERENCE_PROMPT, add_special=True, parse_special=False)
        logits = model.logits(tokens)
        continuation = model.greedy(tokens, GREEDY_STEPS) if dtype in GREEDY_TYPES else None
        n_vocab = model.n_vocab
    positions = stored_positions(len(tokens), n_vocab)
    name = f"{arch}-tiny-{dtype}"
    logits_dir = out_dir / "logits"
    logits_dir.mkdir(parents=True, exist_ok=True)
    logits[positions].astype("<f4").tofile(logits_dir / f"{name}.logits.f32")
    header = {
        "model": {
            "arch": arch,
            "preset": "tiny",
            "type": dtype,
            "seed": MODEL_SEED,
            "file": f"models/.cache/{model_path.name}",
            "sha256": sha256_of(model_path),
            "command": " ".join(command),
        },
        "llama_cpp_commit": llama_cpp_commit(),
        "prompt": REFERENCE_PROMPT,
        "tokens": tokens,
        "tokenize": {"add_special": True, "parse_special": False},
        "n_vocab": n_vocab,
        "positions": positions,
        "logits_file": f"{name}.logits.f32",
        "logits_layout": "little-endian f32 [len(positions)][n_vocab], rows in positions order",
        "greedy": continuation,
        "greedy_note": "argmax over raw logits, prompt decoded in one batch, then one token per decode"
        if continuation is not None
        else "not recorded for quantized models",
        "runtime": {
            "threads": args.threads,
            "n_ctx": DEFAULT_CONTEXT,
            "n_ubatch": DEFAULT_CONTEXT,
            "flash_attn": args.flash_attn,
            "kv_cache_type": args.kv_type,
            "device": "CPU",
        },
    }
    (logits_dir / f"{name}.json").write_text(json_with_flat_number_lists(header))
    return header


def command_refs(args) -> None:
    out_dir = Path(args.out)
    if not args.skip_tokens:
        tokens_dir = out_dir / "tokens"
        tokens_dir.mkdir(parents=True, exist_ok=True)
        for vocab_name in REFERENCE_VOCABS:
            reference = tokenizer_reference(vocab_name)
            target = tokens_dir / f"{vocab_name}.json"
            target.write_text(json_one_entry_per_line(reference, "cases"), "utf-8")
            print(f"{target}: {len(reference['cases'])} cases")
    if args.skip_logits:
        return
    skipped = []
    for arch, dtypes in REFERENCE_MODELS:
        for dtype in dtypes:
            if args.only and f"{arch}-{dtype}" not in args.only.split(","):
                continue
            try:
                header = logits_reference(arch, dtype, out_dir, args)
            except subprocess.CalledProcessError as error:
                print(f"{arch}-tiny-{dtype}: SKIPPED, make-model failed ({error})", file=sys.stderr)
                skipped.append(f"{arch}-{dtype}")
                continue
            print(
                f"{arch}-tiny-{dtype}: {len(header['tokens'])} tokens, n_vocab {header['n_vocab']},"
                f" {len(header['positions'])} positions stored, greedy {header['greedy']}"
            )
    if skipped:
        sys.exit(f"not written (make-model failed): {', '.join(skipped)}")


def logits_references(directory: Path) -> Iterator[tuple[dict, np.ndarray]]:
    """Every logits reference header under directory/logits with its logits array."""
    for header_path in sorted((directory / "logits").glob("*.json")):
        header = json.loads(header_path.read_text())
        raw = np.fromfile(header_path.parent / header["logits_file"], dtype="<f4")
        yield header, raw.reshape(len(header["positions"]), header["n_vocab"])


def verify_tokens(directory: Path) -> bool:
    """Re-tokenizes every tokenizer reference, and checks llama.cpp against its own .out files."""
    all_good = True
    for reference_path in sorted((directory / "tokens").glob("*.json")):
        reference = json.loads(reference_path.read_text("utf-8"))
        vocab_path = REPO_ROOT / reference["vocab"]
        with LlamaModel(vocab_path, vocab_only=True) as model:
            differing = [
                case["text"]
                for case in reference["cases"]
                if model.tokenize(case["text"], True, False) != case["special_added"]
                or model.tokenize(case["text"], False, True) != case["special_parsed"]
            ]
            inputs = read_vocab_test_inputs(Path(f"{vocab_path}.inp"))
            expected = Path(f"{vocab_path}.out").read_text("utf-8").splitlines()
            upstream_misses = sum(
                model.tokenize(text, False, False) != [int(t) for t in line.split()]
                for text, line in zip(inputs, expected)
            )
        all_good &= not differing and not upstream_misses
        print(
            f"{reference_path.name}: {len(reference['cases'])} cases, {len(differing)} differ; "
            f"{vocab_path.name}.out: {len(inputs) - upstream_misses}/{len(inputs)} match"
        )
    return all_good


def command_verify(args) -> None:
    """Recomputes every reference and reports how far llama.cpp lands from it."""
    if not args.skip_tokens:
        verify_tokens(Path(args.dir))
    worst = 0.0
    for header, stored in logits_references(Path(args.dir)):
        model_path = REPO_ROOT / header["model"]["file"]
        if sha256_of(model_path) != header["model"]["sha256"]:
            print(f"{model_path}: SHA-256 differs from the reference's; regenerate the model")
            continue
        with LlamaModel(
            model_path, threads=args.threads, flash_attn=args.flash_attn, kv_type=args.kv_type
        ) as model:
            logits = model.logits(header["tokens"])[header["positions"]]
            greedy = model.greedy(header["tokens"], GREEDY_STEPS) if header["greedy"] else None
        error = nmse(stored, logits)
        worst = max(worst, error)
        same_argmax = bool(np.all(np.argmax(stored, 1) == np.argmax(logits, 1)))
        print(
            f"{header['model']['arch']}-{header['model']['type']}: threads {args.threads} "
            f"flash_attn {args.flash_attn} kv {args.kv_type}: nmse {error:.3e}, max |diff| "
            f"{float(np.max(np.abs(stored - logits))):.3e}, same argmax {same_argmax}, "
            f"bitwise equal {bool(np.array_equal(stored, logits))}, greedy "
            f"{'n/a' if greedy is None else ('same' if greedy == header['greedy'] else 'DIFFERENT')}"
        )
    print(f"worst nmse {worst:.3e}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def runtime_options(sub):
        sub.add_argument("--threads", type=int, default=DEFAULT_THREADS)
        sub.add_argument("--flash-attn", choices=sorted(FLASH_ATTN_TYPES), default="auto")
        sub.add_argument("--kv-type", choices=sorted(KV_CACHE_TYPES), default="f16")

    tokens = commands.add_parser("tokens", help="token ids of each input of a text file")
    tokens.add_argument("--model", required=True)
    tokens.add_argument("--text-file", help="a .inp file (one input per separator) or plain text")
    tokens.add_argument("--add-special", action=argparse.BooleanOptionalAction, default=True)
    tokens.add_argument("--parse-special", action=argparse.BooleanOptionalAction, default=False)
    tokens.set_defaults(run=command_tokens)

    logits = commands.add_parser("logits", help="logits of one decode of the given tokens")
    logits.add_argument("--model", required=True)
    logits.add_argument("--tokens", required=True, help="comma-separated token ids")
    logits.add_argument("--all", action="store_true", help="every position, not just the last")
    logits.add_argument("--out", help="write raw little-endian f32 here instead of JSON")
    runtime_options(logits)
    logits.set_defaults(run=command_logits)

    greedy = commands.add_parser("greedy", help="greedy continuation ids")
    greedy.add_argument("--model", required=True)
    greedy.add_argument("--tokens", required=True, help="comma-separated token ids")
    greedy.add_argument("-n", type=int, default=GREEDY_STEPS)
    runtime_options(greedy)
    greedy.set_defaults(run=command_greedy)

    refs = commands.add_parser("refs", help="regenerate the checked-in reference files")
    refs.add_argument("--out", default=str(REPO_ROOT / "models" / "testdata"))
    refs.add_argument("--skip-tokens", action="store_true")
    refs.add_argument("--skip-logits", action="store_true")
    refs.add_argument("--only", help="comma-separated arch-type pairs, e.g. llama-f16,qwen2-q8_0")
    refs.add_argument("--regen-models", action="store_true", help="rewrite models/.cache files")
    runtime_options(refs)
    refs.set_defaults(run=command_refs)

    verify = commands.add_parser("verify", help="recompute the logits references and compare")
    verify.add_argument("--dir", default=str(REPO_ROOT / "models" / "testdata"))
    verify.add_argument("--skip-tokens", action="store_true")
    runtime_options(verify)
    verify.set_defaults(run=command_verify)

    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
