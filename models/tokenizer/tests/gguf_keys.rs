//! `Tokenizer::from_gguf` on small GGUF files written for the test: each
//! missing, mistyped or unsupported key gives an error that names it.

use std::path::PathBuf;

use backplane_gguf::{Gguf, GgufWriter, Value};
use backplane_tokenizer::{Tokenizer, TokenizerError, TokenizerKind};

/// A minimal SentencePiece vocabulary's keys.
fn spm_keys() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("tokenizer.ggml.model", "llama");
    w.set(
        "tokenizer.ggml.tokens",
        vec!["<unk>", "<s>", "</s>", "▁", "a", "▁a"],
    );
    w.set(
        "tokenizer.ggml.scores",
        vec![0.0f32, 0.0, 0.0, -1.0, -2.0, -0.5],
    );
    w.set("tokenizer.ggml.token_type", vec![2i32, 3, 3, 1, 1, 1]);
    w
}

fn open(name: &str, writer: &GgufWriter) -> Result<Tokenizer, TokenizerError> {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tokenizer-{name}.gguf"));
    std::fs::write(&path, writer.header_bytes().expect("header")).expect("write");
    let gguf = Gguf::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf)
}

#[test]
fn minimal_spm_file_tokenizes_with_its_scores() {
    let tokenizer = open("minimal-spm", &spm_keys()).expect("tokenizer");
    assert_eq!(tokenizer.kind(), TokenizerKind::Spm);
    assert_eq!(tokenizer.n_vocab(), 6);
    assert_eq!(
        tokenizer.encode("a a", true, false).expect("encode"),
        [1, 5, 5]
    );
}

#[test]
fn missing_token_list_names_the_key() {
    let mut w = spm_keys();
    w.remove("tokenizer.ggml.tokens");
    let err = open("no-tokens", &w).expect_err("missing tokens");
    assert!(
        matches!(
            err,
            TokenizerError::MissingKey {
                key: "tokenizer.ggml.tokens"
            }
        ),
        "{err}"
    );
}

#[test]
fn mistyped_scores_name_the_key_and_both_types() {
    let mut w = spm_keys();
    w.set("tokenizer.ggml.scores", vec!["x", "y", "z", "w", "v", "u"]);
    let message = open("bad-scores", &w).expect_err("bad scores").to_string();
    assert!(
        message.contains("tokenizer.ggml.scores") && message.contains("array of strings"),
        "{message}"
    );
}

#[test]
fn unsupported_model_names_the_value() {
    let mut w = spm_keys();
    w.set("tokenizer.ggml.model", "t5");
    let message = open("t5", &w).expect_err("t5").to_string();
    assert!(
        message.contains("'t5'") && message.contains("gpt2"),
        "{message}"
    );
}

#[test]
fn gpt2_without_merges_names_the_merges_key() {
    let mut w = spm_keys();
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "qwen2");
    let err = open("no-merges", &w).expect_err("no merges");
    assert!(
        matches!(
            err,
            TokenizerError::MissingKey {
                key: "tokenizer.ggml.merges"
            }
        ),
        "{err}"
    );
}

#[test]
fn unsupported_pre_tokenizer_lists_the_supported_ones() {
    let mut w = spm_keys();
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "klingon");
    w.set("tokenizer.ggml.merges", Value::from(vec!["a b"]));
    let message = open("klingon", &w).expect_err("klingon").to_string();
    assert!(
        message.contains("'klingon'") && message.contains("llama-bpe"),
        "{message}"
    );
}

#[test]
fn out_of_range_bos_key_falls_back_to_the_default_like_llama_cpp() {
    let mut w = spm_keys();
    w.set("tokenizer.ggml.bos_token_id", 999u32);
    let tokenizer = open("bos-out-of-range", &w).expect("tokenizer");
    assert_eq!(tokenizer.bos(), Some(1));
}
