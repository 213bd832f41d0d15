//! Every supported pre-tokenizer family against llama.cpp: the llama-bpe
//! vocabulary with `tokenizer.ggml.pre` rewritten (`default`, `gpt-2`,
//! `starcoder`, `falcon`, `qwen35`, `dbrx`, `qwen2`, `command-r`), the ids
//! llama.cpp gives such a file for 453 strings (seeded random ones and the
//! vocab test inputs), `add_special = false`, `parse_special = false`.

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_tokenizer::{TokenId, Tokenizer, Vocab};
use serde_json::Value;

#[test]
fn every_pre_tokenizer_splits_as_llama_cpp_does() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let data_path = dir.join("tests/data/llama_cpp_pre_variants.json");
    let data: Value = serde_json::from_str(
        &std::fs::read_to_string(&data_path)
            .unwrap_or_else(|e| panic!("{}: {e}", data_path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", data_path.display()));
    let gguf_path = dir.join("../vocab/ggml-vocab-llama-bpe.gguf");
    let gguf = Gguf::open(&gguf_path).unwrap_or_else(|e| panic!("{}: {e}", gguf_path.display()));
    let vocab = Vocab::from_gguf(&gguf).expect("vocab");

    let texts: Vec<&str> = data["texts"]
        .as_array()
        .expect("texts")
        .iter()
        .map(|t| t.as_str().expect("text"))
        .collect();
    assert!(texts.len() >= 450, "only {} texts", texts.len());
    let variants = data["ids"].as_object().expect("ids");
    assert_eq!(variants.len(), 8, "pre-tokenizer variants");
    for (pre, expected) in variants {
        let tokenizer = Tokenizer::from_vocab(Vocab {
            pre: Some(pre.clone()),
            ..vocab.clone()
        })
        .unwrap_or_else(|e| panic!("{pre}: {e}"));
        let expected = expected.as_array().expect("per-text ids");
        assert_eq!(expected.len(), texts.len(), "{pre}");
        let mut failures = Vec::new();
        for (text, expected) in texts.iter().zip(expected) {
            let expected: Vec<TokenId> = expected
                .as_array()
                .expect("ids")
                .iter()
                .map(|id| {
                    id.as_u64()
                        .and_then(|id| TokenId::try_from(id).ok())
                        .expect("id")
                })
                .collect();
            let got = tokenizer.encode(text, false, false).expect("encode");
            if got != expected {
                failures.push(format!(
                    "{text:?}\n  expected {expected:?}\n  got      {got:?}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "pre '{pre}': {} of {} texts differ from llama.cpp:\n{}",
            failures.len(),
            texts.len(),
            failures.join("\n")
        );
    }
}
