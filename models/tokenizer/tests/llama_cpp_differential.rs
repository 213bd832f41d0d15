//! Differential checks against llama.cpp (llama-cpp-python 0.3.36), with the
//! ground truth written by `tests/data/make_llama_cpp_data.py`:
//!
//! * 407 seeded random strings per vocabulary, in both modes, ids and
//!   `llama_detokenize` output;
//! * every token's piece (`special` false and true) by hash, the
//!   end-of-generation set, BOS, EOS and EOT.

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_tokenizer::{TokenId, Tokenizer};
use serde_json::Value;

const VOCABS: [&str; 3] = ["llama-spm", "llama-bpe", "qwen2"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(name: &str) -> Tokenizer {
    let path = crate_dir().join(format!("../vocab/ggml-vocab-{name}.gguf"));
    let gguf = Gguf::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn data(file: &str) -> Value {
    let path = crate_dir().join("tests/data").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ids(value: &Value) -> Vec<TokenId> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an id array: {value}"))
        .iter()
        .map(|id| {
            id.as_u64()
                .and_then(|id| TokenId::try_from(id).ok())
                .expect("id")
        })
        .collect()
}

fn optional_id(value: &Value) -> Option<TokenId> {
    value.as_u64().and_then(|id| TokenId::try_from(id).ok())
}

#[test]
fn random_strings_encode_and_detokenize_as_llama_cpp_does() {
    let data = data("llama_cpp_random.json");
    let cases = data["cases"].as_array().expect("cases");
    assert!(cases.len() >= 400, "only {} cases", cases.len());
    for name in VOCABS {
        let tokenizer = load(name);
        let mut failures = Vec::new();
        for case in cases {
            let text = case["text"].as_str().expect("text");
            for (mode, add_special, parse_special) in [
                ("special_added", true, false),
                ("special_parsed", false, true),
            ] {
                let expected = ids(&case[name][mode]);
                let got = tokenizer
                    .encode(text, add_special, parse_special)
                    .expect("encode");
                if got != expected {
                    failures.push(format!(
                        "{mode} {text:?}\n  expected {expected:?}\n  got      {got:?}"
                    ));
                }
                let detokenized = case[name][format!("{mode}_detokenized")]
                    .as_str()
                    .expect("detokenized");
                let ours = tokenizer.detokenize(&expected, false, false);
                if ours != detokenized {
                    failures.push(format!("detokenize {mode} {text:?}\n  expected {detokenized:?}\n  got      {ours:?}"));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{name}: {} differences from llama.cpp:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// FNV-1a, 64 bits, as the generator script computes it.
fn fnv1a64(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn every_piece_and_the_special_ids_equal_llama_cpp() {
    let data = data("llama_cpp_pieces.json");
    for name in VOCABS {
        let tokenizer = load(name);
        let expected = &data["vocabs"][name];
        assert_eq!(
            expected["n_vocab"].as_u64(),
            Some(tokenizer.n_vocab() as u64),
            "{name}"
        );
        for (mode, special) in [("plain", false), ("special", true)] {
            let mut hash = 0xcbf2_9ce4_8422_2325;
            for id in 0..tokenizer.n_vocab() as TokenId {
                let piece = if special {
                    tokenizer.piece_with_special(id)
                } else {
                    tokenizer.piece_bytes(id)
                };
                hash = fnv1a64(hash, &(piece.len() as u32).to_le_bytes());
                hash = fnv1a64(hash, piece);
            }
            assert_eq!(
                format!("{hash:016x}"),
                expected["pieces_fnv1a64"][mode].as_str().expect("hash"),
                "{name}: pieces with special = {special}"
            );
        }
        assert_eq!(
            tokenizer.eog_tokens().collect::<Vec<_>>(),
            ids(&expected["eog"]),
            "{name}: EOG"
        );
        assert_eq!(
            tokenizer.bos(),
            optional_id(&expected["bos"]),
            "{name}: BOS"
        );
        assert_eq!(
            tokenizer.eos(),
            optional_id(&expected["eos"]),
            "{name}: EOS"
        );
        assert_eq!(
            tokenizer.special_tokens().eot,
            optional_id(&expected["eot"]),
            "{name}: EOT"
        );
    }
}
