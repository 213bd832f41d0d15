#!/usr/bin/env python3
"""Writes the llama.cpp ground truth the tokenizer's differential tests read.

Run from the repository root with the llama.cpp build of scripts/llama-cpp.sh:

    .venv-llama/bin/python models/tokenizer/tests/data/make_llama_cpp_data.py

It writes, beside this script:

* llama_cpp_random.json: seeded random strings (mixed scripts, whitespace
  runs, digits, emoji, contractions, special-token texts, characters new in
  Unicode 16, U+2581 itself) with llama.cpp's ids for each vocabulary in both
  modes (add_special / parse_special) and llama_detokenize of those ids.
* llama_cpp_pre_variants.json: the llama-bpe vocabulary with
  tokenizer.ggml.pre rewritten to each other supported pre-tokenizer, ids of
  the random strings and of the vocab test inputs (add_special and
  parse_special both false).
* llama_cpp_pieces.json: per vocabulary, a 64-bit FNV-1a hash of every
  token's llama_token_to_piece (special false, then true; each piece
  preceded by its length as u32 little-endian), the end-of-generation ids and
  BOS/EOS/EOT.
"""

import ctypes
import json
import random
import struct
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "scripts"))
import llama_reference as lr  # noqa: E402

HERE = Path(__file__).resolve().parent
VOCABS = ["llama-spm", "llama-bpe", "qwen2"]
MODES = {"special_added": (True, False), "special_parsed": (False, True)}

PIECES = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 3
    + list("0123456789") * 2
    + list(" \t\n\r  ") * 4
    + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    + ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re"]
    + list("äöüßéèñçÀÉÎØÅæœαβγδΩλπжщыэюяЖЩ中文测试你好世界こんにちはカタカナ안녕하세요مرحباनमस्तेสวัสดี")
    + ["\u00a0", "\u3000", "\u0085", "\u2028", "\u200b", "\u200d", "\ufeff", "\u2581", "\u2581\u2581"]
    + list("٠١٢٣４５６½Ⅻ²")
    + ["😀", "🦙", "🚀", "🇩🇪", "👨\u200d👩\u200d👧", "🧑🏽\u200d💻", "✅", "🫠"]
    + ["\u1c89", "\u0897", "\U0002ebf0", "\u0378", "\ue000", "\U0010fffd", "\u0301", "e\u0301"]
    + ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>",
       "<|begin_of_text|>", "<|start_header_id|>", "<0x41>", "<|reserved_special_token_5|>"]
    + ["Hello", " world", "the", " quick", "fn ", "def ", "    ", "\n\n", "1234567", "3.14"]
)


PRE_VARIANTS = ["default", "gpt-2", "starcoder", "falcon", "qwen35", "dbrx", "qwen2", "command-r"]


def with_pre(source: Path, pre: str, directory: Path) -> Path:
    """A copy of a tensor-less GGUF file whose tokenizer.ggml.pre string is `pre`."""
    data = source.read_bytes()
    key = b"tokenizer.ggml.pre"
    prefix = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8)
    at = data.find(prefix)
    if at < 0 or struct.unpack("<Q", data[8:16])[0] != 0:
        raise RuntimeError(f"{source}: no string tokenizer.ggml.pre, or it has tensors")
    start = at + len(prefix)
    (length,) = struct.unpack("<Q", data[start : start + 8])
    new = pre.encode()
    patched = data[:start] + struct.pack("<Q", len(new)) + new + data[start + 8 + length :]
    path = directory / f"{source.stem}-{pre}.gguf"
    path.write_bytes(patched)
    return path


def vocab_test_inputs(name: str) -> list:
    """The inputs of llama.cpp's own .inp test file, split as test-tokenizer-0 does."""
    raw = (ROOT / f"models/vocab/ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8")
    parts = raw.split("\n__ggml_vocab_test__\n")
    return parts[:-1] if parts and parts[-1] == "" else parts


def fnv1a64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def detokenize(model, ids):
    array = (ctypes.c_int32 * len(ids))(*ids)
    capacity = 64 + 16 * len(ids)
    buffer = ctypes.create_string_buffer(capacity)
    count = model.lib.llama_detokenize(model.vocab, array, len(ids), buffer, capacity, False, False)
    if count < 0:
        raise RuntimeError("detokenize buffer too small")
    return buffer.raw[:count].decode("utf-8", "replace")


def main():
    rng = random.Random(20261205)
    texts = []
    for _ in range(400):
        count = rng.choice([1, 2, 3, 5, 8, 13, 30])
        texts.append("".join(rng.choice(PIECES) for _ in range(count)))
    texts += [" " * 50 + "x", "a" * 300, "1" * 100, "\n" * 20 + " ", "😀" * 30, "▁▁hello▁world", " \t" * 30]

    cases = [{"text": text} for text in texts]
    pieces = {}
    for name in VOCABS:
        with lr.LlamaModel(ROOT / f"models/vocab/ggml-vocab-{name}.gguf", vocab_only=True) as model:
            for case in cases:
                for mode, (add_special, parse_special) in MODES.items():
                    ids = model.tokenize(case["text"], add_special, parse_special)
                    case.setdefault(name, {})[mode] = ids
                    case[name][mode + "_detokenized"] = detokenize(model, ids)
            buffer = ctypes.create_string_buffer(4096)
            hashes = {}
            for special in (False, True):
                stream = bytearray()
                for token in range(model.n_vocab):
                    count = model.lib.llama_token_to_piece(model.vocab, token, buffer, 4096, 0, special)
                    if count < 0:
                        raise RuntimeError(f"piece of {token} longer than 4096 bytes")
                    stream += struct.pack("<I", count) + buffer.raw[:count]
                hashes["special" if special else "plain"] = f"{fnv1a64(bytes(stream)):016x}"
            null = lambda token: None if token < 0 else token  # noqa: E731
            pieces[name] = {
                "n_vocab": model.n_vocab,
                "pieces_fnv1a64": hashes,
                "eog": [t for t in range(model.n_vocab) if model.lib.llama_vocab_is_eog(model.vocab, t)],
                "bos": null(model.lib.llama_vocab_bos(model.vocab)),
                "eos": null(model.lib.llama_vocab_eos(model.vocab)),
                "eot": null(model.lib.llama_vocab_eot(model.vocab)),
            }
    variants = {}
    variant_texts = texts + vocab_test_inputs("llama-bpe")
    with tempfile.TemporaryDirectory() as scratch:
        for pre in PRE_VARIANTS:
            path = with_pre(ROOT / "models/vocab/ggml-vocab-llama-bpe.gguf", pre, Path(scratch))
            with lr.LlamaModel(path, vocab_only=True) as model:
                variants[pre] = [model.tokenize(text, False, False) for text in variant_texts]

    header = {"generator": "models/tokenizer/tests/data/make_llama_cpp_data.py", "llama_cpp_python": "0.3.36"}
    with (HERE / "llama_cpp_random.json").open("w", encoding="utf-8") as out:
        json.dump({**header, "cases": cases}, out, ensure_ascii=False, separators=(",", ":"))
    with (HERE / "llama_cpp_pre_variants.json").open("w", encoding="utf-8") as out:
        json.dump(
            {**header, "vocab": "models/vocab/ggml-vocab-llama-bpe.gguf", "texts": variant_texts, "ids": variants},
            out,
            ensure_ascii=False,
            separators=(",", ":"),
        )
    with (HERE / "llama_cpp_pieces.json").open("w", encoding="utf-8") as out:
        json.dump({**header, "vocabs": pieces}, out, indent=1)


if __name__ == "__main__":
    main()
