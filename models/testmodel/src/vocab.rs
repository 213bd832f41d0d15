//! The tokenizer keys a model copies from llama.cpp's vocabulary files.

use std::path::{Path, PathBuf};

use backplane_gguf::{Gguf, Value};

use crate::TestModelError;
use crate::shape::Vocab;

/// The directory of llama.cpp's vocabulary test files in this repository
/// (`models/vocab/`), as seen from where this crate was built.
pub fn default_vocab_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("models"), Path::to_path_buf)
        .join("vocab")
}

/// True for the keys a model takes from its vocabulary file: every
/// `tokenizer.*` key (`tokenizer.ggml.*` and, for Qwen2, the chat
/// template).
pub fn is_tokenizer_key(key: &str) -> bool {
    key.starts_with("tokenizer.")
}

/// Reads every tokenizer key of `vocab` from `dir`, in file order, and
/// checks that the file has the number of tokens the shape assumes.
pub fn tokenizer_keys(dir: &Path, vocab: Vocab) -> Result<Vec<(String, Value)>, TestModelError> {
    let path = dir.join(vocab.file_name());
    let file = Gguf::open(&path).map_err(|source| TestModelError::Gguf {
        context: format!("reading vocabulary {}", path.display()),
        source,
    })?;
    let keys: Vec<(String, Value)> = file
        .metadata()
        .iter()
        .filter(|(key, _)| is_tokenizer_key(key))
        .cloned()
        .collect();
    let tokens = keys
        .iter()
        .find(|(key, _)| key == "tokenizer.ggml.tokens")
        .and_then(|(_, value)| value.as_array())
        .map(|tokens| tokens.len());
    if tokens != Some(vocab.token_count()) {
        return Err(TestModelError::Vocab {
            path,
            reason: format!(
                "tokenizer.ggml.tokens has {} tokens, expected {}",
                tokens.map_or_else(|| "no array of".to_string(), |n| n.to_string()),
                vocab.token_count()
            ),
        });
    }
    Ok(keys)
}
