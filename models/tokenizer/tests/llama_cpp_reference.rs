//! Reference ids written by llama.cpp itself (`models/testdata/tokens/*.json`,
//! from `scripts/llama_reference.py`): every case in two modes,
//! `add_special = true, parse_special = false` and `add_special = false,
//! parse_special = true`.

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_tokenizer::Tokenizer;
use serde_json::Value;

fn repo_models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn ids(value: &Value, what: &str) -> Vec<u32> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .map(|id| {
            id.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .unwrap_or_else(|| panic!("{what}: bad id {id}"))
        })
        .collect()
}

fn check(name: &str) {
    let reference_path = repo_models().join(format!("testdata/tokens/ggml-vocab-{name}.json"));
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(&reference_path)
            .unwrap_or_else(|e| panic!("{}: {e}", reference_path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", reference_path.display()));
    let gguf_path = repo_models().join(format!("vocab/ggml-vocab-{name}.gguf"));
    let gguf = Gguf::open(&gguf_path).unwrap_or_else(|e| panic!("{}: {e}", gguf_path.display()));
    let tokenizer = Tokenizer::from_gguf(&gguf).expect("tokenizer");
    assert_eq!(
        reference["n_vocab"].as_u64(),
        Some(tokenizer.n_vocab() as u64),
        "{name}: vocabulary size"
    );

    let modes = reference["modes"].as_object().expect("modes");
    let cases = reference["cases"].as_array().expect("cases");
    assert!(cases.len() >= 80, "{name}: only {} cases", cases.len());
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().expect("text");
        for (mode, flags) in modes {
            let add_special = flags["add_special"].as_bool().expect("add_special");
            let parse_special = flags["parse_special"].as_bool().expect("parse_special");
            let expected = ids(&case[mode.as_str()], mode);
            let got = tokenizer
                .encode(text, add_special, parse_special)
                .expect("encode");
            checked += 1;
            if got != expected {
                failures.push(format!(
                    "{mode} {text:?}\n  expected {expected:?}\n  got      {got:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {checked} encodings differ from llama.cpp:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn llama_spm_matches_llama_cpp_reference_ids_in_both_modes() {
    check("llama-spm");
}

#[test]
fn llama_bpe_matches_llama_cpp_reference_ids_in_both_modes() {
    check("llama-bpe");
}

#[test]
fn qwen2_matches_llama_cpp_reference_ids_in_both_modes() {
    check("qwen2");
}
