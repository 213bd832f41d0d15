//! The crate's one error type.

/// Everything that can go wrong while building a tokenizer or encoding text.
///
/// Each variant names what it is about: the GGUF key, the token (id and text),
/// the byte offset in the input, or the pattern.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A required `tokenizer.ggml.*` key is absent from the GGUF file.
    #[error("missing GGUF key '{key}'")]
    MissingKey {
        /// The key looked for.
        key: &'static str,
    },
    /// A `tokenizer.ggml.*` key holds a value of another type than the tokenizer reads.
    #[error("GGUF key '{key}' holds {found}, expected {expected}")]
    WrongType {
        /// The key concerned.
        key: &'static str,
        /// The type the tokenizer reads.
        expected: &'static str,
        /// The type the file holds.
        found: &'static str,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("unsupported tokenizer.ggml.model '{model}' (supported: {supported})")]
    UnsupportedModel {
        /// The value found.
        model: String,
        /// The supported values, comma separated.
        supported: &'static str,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("unsupported tokenizer.ggml.pre '{pre}' (supported: {supported})")]
    UnsupportedPre {
        /// The value found.
        pre: String,
        /// The supported values, comma separated.
        supported: &'static str,
    },
    /// The vocabulary has no tokens at all.
    #[error("tokenizer.ggml.tokens is empty")]
    EmptyVocab,
    /// The vocabulary has more tokens than a 32-bit token id can name.
    #[error("tokenizer.ggml.tokens has {count} tokens, more than 32-bit ids can name")]
    TooManyTokens {
        /// The number of tokens.
        count: usize,
    },
    /// A per-token array is shorter than the token list.
    #[error("{key} has {len} entries but tokenizer.ggml.tokens has {expected}")]
    ShortArray {
        /// The array's key (`tokenizer.ggml.scores` or `tokenizer.ggml.token_type`).
        key: &'static str,
        /// Its length.
        len: usize,
        /// The number of tokens.
        expected: usize,
    },
    /// Two tokens have the same text, so text -> id would be ambiguous.
    #[error("tokenizer.ggml.tokens: token {second} has the same text {text:?} as token {first}")]
    DuplicateToken {
        /// The text both tokens share.
        text: String,
        /// The first token's id.
        first: u32,
        /// The later token's id.
        second: u32,
    },
    /// `add_special` asks for a BOS/EOS token that the vocabulary does not define.
    #[error(
        "encode with add_special: {flag} is set but the vocabulary has no {which} token ({key} absent or out of range)"
    )]
    MissingSpecialToken {
        /// The flag asking for it, e.g. `tokenizer.ggml.add_bos_token`.
        flag: &'static str,
        /// `BOS` or `EOS`.
        which: &'static str,
        /// The key that would name it.
        key: &'static str,
    },
    /// SentencePiece byte fallback needs a `<0xNN>` token the vocabulary lacks.
    #[error(
        "input byte {byte:#04x} at offset {offset} has no token: the vocabulary lacks <0x{byte:02X}>"
    )]
    MissingByteToken {
        /// The byte that could not be tokenized.
        byte: u8,
        /// Its offset in the (space-escaped) fragment being tokenized.
        offset: usize,
    },
    /// A pre-tokenizer pattern failed to compile.
    #[error("pre-tokenizer '{pre}': pattern {pattern:?} does not compile: {message}")]
    BadPattern {
        /// The pre-tokenizer the pattern belongs to.
        pre: String,
        /// The pattern.
        pattern: &'static str,
        /// The regex engine's message.
        message: String,
    },
    /// The regex engine gave up on the input (backtracking limit).
    #[error("pre-tokenizer pattern {pattern:?} failed at byte {offset} of the input: {message}")]
    PatternFailed {
        /// The pattern.
        pattern: &'static str,
        /// Byte offset in the input text of the fragment being split.
        offset: usize,
        /// The regex engine's message.
        message: String,
    },
}
