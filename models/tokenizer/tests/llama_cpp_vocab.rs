//! llama.cpp's own tokenizer test sets (`models/vocab/ggml-vocab-*.gguf.{inp,out}`),
//! read the way llama.cpp's `tests/test-tokenizer-0.cpp` reads them: inputs
//! separated by `\n__ggml_vocab_test__\n`, one line of expected ids per input,
//! tokenized with `add_special = false`, `parse_special = false`.

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_tokenizer::{PreTokenizer, Tokenizer, TokenizerKind};

fn vocab_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vocab")
}

fn load(name: &str) -> Tokenizer {
    let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf"));
    let gguf = Gguf::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (input, expected ids) pairs of one vocabulary's test set.
fn cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let base = vocab_dir().join(format!("ggml-vocab-{name}.gguf"));
    let read = |ext: &str| {
        let path = base.with_extension(format!("gguf.{ext}"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let raw = read("inp");
    let expected = read("out");
    // Every input, the last one included, is followed by the separator.
    let separator = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut rest = raw.as_str();
    while !rest.is_empty() {
        match rest.find(separator) {
            Some(end) => {
                inputs.push(rest[..end].to_owned());
                rest = &rest[end + separator.len()..];
            }
            None => {
                inputs.push(rest.to_owned());
                rest = "";
            }
        }
    }
    let outputs: Vec<Vec<u32>> = expected
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(|id| id.parse().unwrap_or_else(|e| panic!("id {id:?}: {e}")))
                .collect()
        })
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{name}: inputs and outputs differ in count"
    );
    inputs.into_iter().zip(outputs).collect()
}

fn check_all(name: &str) -> Tokenizer {
    let tokenizer = load(name);
    let cases = cases(name);
    assert!(cases.len() >= 40, "{name}: only {} cases", cases.len());
    let mut failures = Vec::new();
    for (input, expected) in &cases {
        let got = tokenizer.encode(input, false, false).expect("encode");
        if &got != expected {
            failures.push(format!(
                "{input:?}\n  expected {expected:?}\n  got      {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} inputs differ from llama.cpp:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    tokenizer
}

#[test]
fn llama_spm_matches_llama_cpp_on_every_test_input() {
    let tokenizer = check_all("llama-spm");
    assert_eq!(tokenizer.kind(), TokenizerKind::Spm);
}

#[test]
fn llama_bpe_matches_llama_cpp_on_every_test_input() {
    let tokenizer = check_all("llama-bpe");
    assert_eq!(
        tokenizer.kind(),
        TokenizerKind::Bpe {
            pre: PreTokenizer::Llama3
        }
    );
}

#[test]
fn qwen2_matches_llama_cpp_on_every_test_input() {
    let tokenizer = check_all("qwen2");
    assert_eq!(
        tokenizer.kind(),
        TokenizerKind::Bpe {
            pre: PreTokenizer::Qwen2
        }
    );
}

#[test]
fn spm_decode_gives_back_the_input_after_the_prefix_space() {
    let tokenizer = load("llama-spm");
    for (input, _) in cases("llama-spm") {
        let ids = tokenizer.encode(&input, false, false).expect("encode");
        let decoded = tokenizer.decode(&ids);
        if input.is_empty() {
            assert_eq!(decoded, "");
            continue;
        }
        // The tokenizer put a space in front; llama.cpp's detokenizer takes it away again.
        assert_eq!(decoded, format!(" {input}"), "decode of {input:?}");
        assert_eq!(
            tokenizer.detokenize(&ids, false, false),
            input,
            "detokenize of {input:?}"
        );
    }
}

#[test]
fn bpe_decode_gives_back_the_input_exactly() {
    for name in ["llama-bpe", "qwen2"] {
        let tokenizer = load(name);
        for (input, _) in cases(name) {
            let ids = tokenizer.encode(&input, false, false).expect("encode");
            assert_eq!(tokenizer.decode(&ids), input, "{name}: decode of {input:?}");
        }
    }
}
