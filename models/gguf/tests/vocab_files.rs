//! The vocab GGUFs llama.cpp ships (metadata only) open, expose their
//! tokenizer, and come back byte for byte through the writer.

use std::path::PathBuf;

use backplane_gguf::{Array, Gguf, GgufWriter, Value};

fn vocab(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../vocab")
        .join(name)
}

const FILES: [&str; 3] = [
    "ggml-vocab-llama-spm.gguf",
    "ggml-vocab-qwen2.gguf",
    "ggml-vocab-llama-bpe.gguf",
];

#[test]
fn vocab_files_open_and_expose_the_tokenizer() {
    for name in FILES {
        let file = Gguf::open(vocab(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(file.version(), 3, "{name}");
        assert_eq!(file.alignment(), 32, "{name}");
        assert!(file.tensors().is_empty(), "{name} has tensors");
        assert_eq!(file.path(), Some(vocab(name).as_path()));
        let tokens = file.get_str_array("tokenizer.ggml.tokens").unwrap();
        assert!(tokens.len() > 30_000, "{name}: {} tokens", tokens.len());
        let model = file.get_str("tokenizer.ggml.model").unwrap();
        assert!(model == "llama" || model == "gpt2", "{name}: model {model}");
        let types = file.get_i32_array("tokenizer.ggml.token_type").unwrap();
        assert_eq!(types.len(), tokens.len(), "{name}");
        let arch = file.get_str("general.architecture").unwrap();
        assert!(!arch.is_empty());
    }
}

#[test]
fn spm_vocab_has_scores_and_special_tokens() {
    let file = Gguf::open(vocab("ggml-vocab-llama-spm.gguf")).unwrap();
    let tokens = file.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 32_000);
    assert_eq!(tokens[1], "<s>");
    assert_eq!(tokens[2], "</s>");
    let scores = file.get_f32_array("tokenizer.ggml.scores").unwrap();
    assert_eq!(scores.len(), 32_000);
    assert_eq!(file.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(file.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 2);
}

#[test]
fn bpe_vocabs_have_merges() {
    for name in ["ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf"] {
        let file = Gguf::open(vocab(name)).unwrap();
        assert_eq!(file.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
        let merges = file.get_str_array("tokenizer.ggml.merges").unwrap();
        assert!(merges.len() > 50_000, "{name}: {} merges", merges.len());
        assert!(
            merges.iter().all(|m| m.contains(' ')),
            "{name}: merges are 'a b' pairs"
        );
        assert!(file.get_str("tokenizer.ggml.pre").is_ok());
    }
}

#[test]
fn vocab_files_round_trip_byte_for_byte_through_the_writer() {
    for name in FILES {
        let original = std::fs::read(vocab(name)).unwrap();
        let file = Gguf::from_bytes(original.clone()).unwrap();
        let mut writer = GgufWriter::new();
        for (key, value) in file.metadata() {
            writer.set(key.clone(), value.clone());
        }
        let stream = writer.begin(Vec::new()).unwrap();
        let written = stream.finish().unwrap();
        assert_eq!(written.len(), original.len(), "{name}: length");
        assert!(written == original, "{name}: bytes differ");
        assert_eq!(writer.file_size().unwrap(), original.len() as u64);
    }
}

#[test]
fn from_gguf_copies_metadata_in_order() {
    let file = Gguf::open(vocab("ggml-vocab-qwen2.gguf")).unwrap();
    let writer = GgufWriter::from_gguf(&file).unwrap();
    assert_eq!(writer.metadata(), file.metadata());
    let keys: Vec<&str> = file.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys[0], "general.architecture");
    assert!(matches!(
        file.get("tokenizer.ggml.tokens"),
        Some(Value::Array(Array::String(_)))
    ));
}
