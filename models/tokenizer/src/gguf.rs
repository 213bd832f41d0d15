//! Reading a [`Vocab`] from a GGUF file's `tokenizer.ggml.*` keys.

use backplane_gguf::{Array, Gguf, Value};

use crate::{TokenId, TokenizerError, Vocab};

fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Array(array) => match array {
            Array::String(_) => "an array of strings",
            Array::F32(_) => "an array of f32",
            Array::I32(_) => "an array of i32",
            _ => "an array of another type",
        },
        other => other.type_name(),
    }
}

fn wrong_type(key: &'static str, expected: &'static str, value: &Value) -> TokenizerError {
    TokenizerError::WrongType {
        key,
        expected,
        found: value_type(value),
    }
}

fn optional_str(g: &Gguf, key: &'static str) -> Result<Option<String>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(value) => value
            .as_str()
            .map(|s| Some(s.to_owned()))
            .ok_or_else(|| wrong_type(key, "a string", value)),
    }
}

fn optional_bool(g: &Gguf, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(value) => value
            .as_bool()
            .map(Some)
            .ok_or_else(|| wrong_type(key, "a bool", value)),
    }
}

/// A token id key. A value that does not fit a token id is kept as `u32::MAX`
/// so that the tokenizer treats it like any other out-of-range id (ignored in
/// favour of the default, as llama.cpp does).
fn optional_id(g: &Gguf, key: &'static str) -> Result<Option<TokenId>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(value) => value
            .as_i128()
            .map(|id| Some(TokenId::try_from(id).unwrap_or(TokenId::MAX)))
            .ok_or_else(|| wrong_type(key, "an integer", value)),
    }
}

fn strings(g: &Gguf, key: &'static str) -> Result<Option<Vec<String>>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::Array(Array::String(items))) => Ok(Some(items.clone())),
        Some(value) => Err(wrong_type(key, "an array of strings", value)),
    }
}

impl Vocab {
    /// Reads every `tokenizer.ggml.*` key the tokenizers use; absent optional
    /// keys stay `None`/empty.
    pub fn from_gguf(g: &Gguf) -> Result<Vocab, TokenizerError> {
        vocab_from_gguf(g)
    }
}

fn vocab_from_gguf(g: &Gguf) -> Result<Vocab, TokenizerError> {
    const MODEL: &str = "tokenizer.ggml.model";
    const TOKENS: &str = "tokenizer.ggml.tokens";
    const SCORES: &str = "tokenizer.ggml.scores";
    const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    const MERGES: &str = "tokenizer.ggml.merges";

    let model = optional_str(g, MODEL)?.ok_or(TokenizerError::MissingKey { key: MODEL })?;
    let tokens = strings(g, TOKENS)?.ok_or(TokenizerError::MissingKey { key: TOKENS })?;
    let scores = match g.get(SCORES) {
        None => Vec::new(),
        Some(Value::Array(Array::F32(scores))) => scores.clone(),
        // llama.cpp also accepts integer scores.
        Some(Value::Array(Array::I32(scores))) => scores.iter().map(|&s| s as f32).collect(),
        Some(value) => return Err(wrong_type(SCORES, "an array of f32 or i32", value)),
    };
    let token_types = match g.get(TOKEN_TYPE) {
        None => Vec::new(),
        Some(Value::Array(Array::I32(types))) => types.clone(),
        Some(value) => return Err(wrong_type(TOKEN_TYPE, "an array of i32", value)),
    };
    let merges = match strings(g, MERGES)? {
        Some(merges) => merges,
        None if model == "gpt2" => return Err(TokenizerError::MissingKey { key: MERGES }),
        None => Vec::new(),
    };
    let either =
        |key: &'static str, old: &'static str| -> Result<Option<TokenId>, TokenizerError> {
            // llama.cpp reads the current key first, then lets the deprecated one override it.
            Ok(optional_id(g, old)?.or(optional_id(g, key)?))
        };
    Ok(Vocab {
        model,
        pre: optional_str(g, "tokenizer.ggml.pre")?,
        tokens,
        scores,
        token_types,
        merges,
        bos: optional_id(g, "tokenizer.ggml.bos_token_id")?,
        eos: optional_id(g, "tokenizer.ggml.eos_token_id")?,
        eot: optional_id(g, "tokenizer.ggml.eot_token_id")?,
        eom: optional_id(g, "tokenizer.ggml.eom_token_id")?,
        unk: optional_id(g, "tokenizer.ggml.unknown_token_id")?,
        sep: optional_id(g, "tokenizer.ggml.seperator_token_id")?,
        pad: optional_id(g, "tokenizer.ggml.padding_token_id")?,
        mask: optional_id(g, "tokenizer.ggml.mask_token_id")?,
        fim_pre: either(
            "tokenizer.ggml.fim_pre_token_id",
            "tokenizer.ggml.prefix_token_id",
        )?,
        fim_suf: either(
            "tokenizer.ggml.fim_suf_token_id",
            "tokenizer.ggml.suffix_token_id",
        )?,
        fim_mid: either(
            "tokenizer.ggml.fim_mid_token_id",
            "tokenizer.ggml.middle_token_id",
        )?,
        fim_pad: optional_id(g, "tokenizer.ggml.fim_pad_token_id")?,
        fim_rep: optional_id(g, "tokenizer.ggml.fim_rep_token_id")?,
        fim_sep: optional_id(g, "tokenizer.ggml.fim_sep_token_id")?,
        add_bos: optional_bool(g, "tokenizer.ggml.add_bos_token")?,
        add_eos: optional_bool(g, "tokenizer.ggml.add_eos_token")?,
        add_space_prefix: optional_bool(g, "tokenizer.ggml.add_space_prefix")?,
    })
}
