//! Tokenizers built from a GGUF file's own vocabulary, giving the token ids
//! llama.cpp gives.
//!
//! * `tokenizer.ggml.model == "llama"`: SentencePiece-style merging by score
//!   with `<0xNN>` byte fallback ([`TokenizerKind::Spm`]).
//! * `tokenizer.ggml.model == "gpt2"`: byte-level BPE by merge rank, after the
//!   pre-tokenizer named by `tokenizer.ggml.pre` ([`TokenizerKind::Bpe`],
//!   [`PreTokenizer`]).
//!
//! Special tokens (control, user-defined) are found in the text first, as
//! llama.cpp's `llama_tokenize` does; BOS/EOS, the end-of-generation set and
//! the pieces of each token follow llama.cpp's defaults and GGUF flags.
//!
//! # How close to llama.cpp
//!
//! The tests compare with llama.cpp (llama-cpp-python 0.3.36) on the
//! `llama-spm`, `llama-bpe` and `qwen2` vocabularies: its own tokenizer test
//! inputs, its reference ids in both `add_special`/`parse_special` modes,
//! 407 seeded random strings (ids and `llama_detokenize`), every token's piece,
//! the end-of-generation set, and each supported pre-tokenizer family on a
//! rewritten `tokenizer.ggml.pre`. All agree. Known differences:
//!
//! * Where several texts could be the EOT (or a FIM) token and no key names
//!   it, the first in llama.cpp's list wins here; llama.cpp takes whichever
//!   its hash map yields first. The end-of-generation set is the same.
//! * Per-model strip attributes (llama.cpp strips spaces around special tokens
//!   for models named `phi-3`, and around `<mask>` for some jina models) are
//!   not applied.
//! * Duplicate token texts and a missing SentencePiece byte token are errors
//!   here ([`TokenizerError::DuplicateToken`], [`TokenizerError::MissingByteToken`]);
//!   llama.cpp aborts or throws.
//! * Only the tokenizer models and pre-tokenizers listed in
//!   [`TokenizerError::UnsupportedModel`] / [`TokenizerError::UnsupportedPre`]
//!   messages are implemented (no WordPiece, Unigram, RWKV).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gguf = backplane_gguf::Gguf::open("model.gguf")?;
//! let tokenizer = backplane_tokenizer::Tokenizer::from_gguf(&gguf)?;
//! let ids = tokenizer.encode("Hello world", true, false)?;
//! print!("{}", tokenizer.decode(&ids));
//! # Ok(()) }
//! ```

mod bpe;
mod byte_level;
mod detokenize;
mod error;
mod gguf;
mod pretok;
mod special;
mod spm;
mod vocab;

use std::collections::BTreeSet;

pub use error::TokenizerError;
pub use pretok::PreTokenizer;
pub use vocab::{SpecialTokens, Vocab, token_type};

use bpe::MergeRanks;
use byte_level::ByteLevel;
use pretok::{PreConfig, WordSplitter};
use special::Fragment;
use vocab::{Defaults, Vocabulary, attr};

/// A token id: an index into `tokenizer.ggml.tokens`.
pub type TokenId = u32;

/// Which tokenization algorithm a vocabulary uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenizerKind {
    /// SentencePiece with byte fallback (`tokenizer.ggml.model == "llama"`).
    Spm,
    /// Byte-level BPE (`tokenizer.ggml.model == "gpt2"`) with its pre-tokenizer.
    Bpe {
        /// The regex family chosen by `tokenizer.ggml.pre`.
        pre: PreTokenizer,
    },
}

/// The `tokenizer.ggml.model` values this crate supports, for error messages.
const SUPPORTED_MODELS: &str = "llama (SentencePiece), gpt2 (byte-level BPE)";

/// The parts only byte-level BPE needs.
#[derive(Debug)]
struct BpeParts {
    merges: MergeRanks,
    splitter: WordSplitter,
    ignore_merges: bool,
    byte_level: ByteLevel,
}

/// A tokenizer for one vocabulary: text to ids and ids to text, as llama.cpp does it.
#[derive(Debug)]
pub struct Tokenizer {
    kind: TokenizerKind,
    vocab: Vocabulary,
    special: SpecialTokens,
    eog: BTreeSet<TokenId>,
    /// Tokens matched in text before tokenization, longest first.
    special_order: Vec<TokenId>,
    /// Each token's piece without special-token text (`special == false`).
    pieces: Vec<Vec<u8>>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    bpe: Option<BpeParts>,
}

impl Tokenizer {
    /// Builds the tokenizer a GGUF file describes under `tokenizer.ggml.*`.
    pub fn from_gguf(g: &backplane_gguf::Gguf) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_vocab(Vocab::from_gguf(g)?)
    }

    /// Builds a tokenizer from a vocabulary given field by field.
    pub fn from_vocab(vocab: Vocab) -> Result<Tokenizer, TokenizerError> {
        let (kind, defaults, pre) = match vocab.model.as_str() {
            "llama" => (TokenizerKind::Spm, Defaults::Spm, None),
            "gpt2" => {
                let pre = PreConfig::from_name(vocab.pre.as_deref())?;
                (
                    TokenizerKind::Bpe { pre: pre.family },
                    Defaults::Bpe,
                    Some(pre),
                )
            }
            other => {
                return Err(TokenizerError::UnsupportedModel {
                    model: other.to_owned(),
                    supported: SUPPORTED_MODELS,
                });
            }
        };
        let mut vocabulary = Vocabulary::new(&vocab)?;
        let (special, eog) = vocab::resolve_special(&vocab, &mut vocabulary, defaults);
        let special_order = vocab::special_match_order(&vocabulary);
        let bpe = match pre {
            Some(pre) => Some(BpeParts {
                merges: MergeRanks::new(&vocab.merges),
                splitter: WordSplitter::new(pre.family)?,
                ignore_merges: pre.ignore_merges,
                byte_level: ByteLevel::new(),
            }),
            None => None,
        };
        let add_bos = vocab
            .add_bos
            .unwrap_or(pre.is_none_or(|pre| pre.add_bos_default));
        let mut tokenizer = Tokenizer {
            kind,
            special,
            eog,
            special_order,
            pieces: Vec::new(),
            add_bos,
            add_eos: vocab.add_eos.unwrap_or(false),
            add_space_prefix: vocab.add_space_prefix.unwrap_or(pre.is_none()),
            clean_spaces: pre.is_some_and(|pre| pre.clean_spaces),
            bpe,
            vocab: vocabulary,
        };
        tokenizer.pieces = (0..tokenizer.vocab.len())
            .map(|id| tokenizer.build_piece(id as TokenId))
            .collect();
        Ok(tokenizer)
    }

    /// Text to ids as llama.cpp's `llama_tokenize(text, add_special, parse_special)`:
    /// with `add_special`, BOS/EOS as the vocabulary's flags ask; with
    /// `parse_special`, control tokens written in the text become those tokens
    /// (user-defined tokens always do).
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<TokenId>, TokenizerError> {
        let specials = self
            .special_order
            .iter()
            .filter(|&&id| {
                parse_special || self.vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) == 0
            })
            .map(|&id| (id, self.vocab.texts[id as usize].as_str()));
        let fragments = special::partition(text, specials);

        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.push(
                self.special
                    .bos
                    .ok_or(TokenizerError::MissingSpecialToken {
                        flag: "tokenizer.ggml.add_bos_token",
                        which: "BOS",
                        key: "tokenizer.ggml.bos_token_id",
                    })?,
            );
        }
        match &self.bpe {
            None => self.encode_spm(text, &fragments, &mut out)?,
            Some(bpe) => self.encode_bpe(bpe, text, &fragments, &mut out)?,
        }
        if add_special && self.add_eos {
            out.push(
                self.special
                    .eos
                    .ok_or(TokenizerError::MissingSpecialToken {
                        flag: "tokenizer.ggml.add_eos_token",
                        which: "EOS",
                        key: "tokenizer.ggml.eos_token_id",
                    })?,
            );
        }
        Ok(out)
    }

    fn encode_spm(
        &self,
        text: &str,
        fragments: &[Fragment],
        out: &mut Vec<TokenId>,
    ) -> Result<(), TokenizerError> {
        // The first text, and any text right after a special token, gets the space prefix.
        let mut after_special = true;
        let mut escaped = String::new();
        for fragment in fragments {
            match fragment {
                Fragment::Text(range) => {
                    escaped.clear();
                    if self.add_space_prefix && after_special {
                        escaped.push('\u{2581}');
                    }
                    for ch in text[range.clone()].chars() {
                        escaped.push(if ch == ' ' { '\u{2581}' } else { ch });
                    }
                    spm::tokenize(&self.vocab, &escaped, out)?;
                    after_special = false;
                }
                Fragment::Token(id) => {
                    out.push(*id);
                    after_special = true;
                }
            }
        }
        Ok(())
    }

    fn encode_bpe(
        &self,
        bpe: &BpeParts,
        text: &str,
        fragments: &[Fragment],
        out: &mut Vec<TokenId>,
    ) -> Result<(), TokenizerError> {
        let mut encoded = String::new();
        for fragment in fragments {
            match fragment {
                Fragment::Text(range) => {
                    let piece = &text[range.clone()];
                    let words = bpe.splitter.split(piece).map_err(|err| match err {
                        TokenizerError::PatternFailed {
                            pattern,
                            offset,
                            message,
                        } => TokenizerError::PatternFailed {
                            pattern,
                            offset: offset + range.start,
                            message,
                        },
                        other => other,
                    })?;
                    for word in words {
                        bpe.byte_level.encode(&piece[word], &mut encoded);
                        bpe::tokenize_word(
                            &self.vocab,
                            &bpe.merges,
                            bpe.ignore_merges,
                            &encoded,
                            out,
                        );
                    }
                }
                Fragment::Token(id) => out.push(*id),
            }
        }
        Ok(())
    }

    /// The bytes of one token as llama.cpp's `llama_token_to_piece(special = false)`
    /// gives them: nothing for control and unknown tokens, the byte of a
    /// `<0xNN>` token, U+2581 as a space (SentencePiece), GPT-2's byte mapping
    /// undone (byte-level BPE). An id outside the vocabulary gives nothing.
    pub fn piece(&self, id: TokenId) -> Vec<u8> {
        self.piece_bytes(id).to_vec()
    }

    /// [`Tokenizer::piece`] without the copy.
    pub fn piece_bytes(&self, id: TokenId) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The piece with `special = true`: control and unknown tokens give their text.
    pub fn piece_with_special(&self, id: TokenId) -> &[u8] {
        if self.vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) != 0 {
            return self.vocab.texts[id as usize].as_bytes();
        }
        self.piece_bytes(id)
    }

    fn build_piece(&self, id: TokenId) -> Vec<u8> {
        let attrs = self.vocab.attr(id);
        let text = &self.vocab.texts[id as usize];
        if attrs & (attr::CONTROL | attr::UNKNOWN) != 0 {
            Vec::new()
        } else if attrs & attr::USER_DEFINED != 0 {
            text.as_bytes().to_vec()
        } else if attrs & attr::NORMAL != 0 {
            match &self.bpe {
                None => text.replace('\u{2581}', " ").into_bytes(),
                Some(bpe) => bpe.byte_level.decode_token_text(text),
            }
        } else if attrs & attr::BYTE != 0 {
            vec![byte_token_value(text)]
        } else {
            Vec::new()
        }
    }

    /// Ids to text: the pieces concatenated, invalid UTF-8 replaced at the very
    /// end (a character may span several tokens). Unlike llama.cpp's
    /// `llama_detokenize`, no space is removed; see [`Tokenizer::detokenize`].
    pub fn decode(&self, ids: &[TokenId]) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            bytes.extend_from_slice(self.piece_bytes(id));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Ids to text exactly as llama.cpp's `llama_detokenize(remove_special,
    /// unparse_special)`: SentencePiece drops the first piece's leading space,
    /// and byte-level vocabularies whose pre-tokenizer asks for it get spaces
    /// before `?!.,` and around lone apostrophes tidied.
    pub fn detokenize(
        &self,
        ids: &[TokenId],
        remove_special: bool,
        unparse_special: bool,
    ) -> String {
        detokenize::detokenize(self, ids, remove_special, unparse_special)
    }

    /// The number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.vocab.len()
    }

    /// The beginning-of-sequence token, if the vocabulary has one.
    pub fn bos(&self) -> Option<TokenId> {
        self.special.bos
    }

    /// The end-of-sequence token, if the vocabulary has one.
    pub fn eos(&self) -> Option<TokenId> {
        self.special.eos
    }

    /// All special token ids in force (BOS, EOS, EOT, padding, FIM ...).
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// Whether the token ends generation: EOS, EOT, EOM and the other tokens
    /// llama.cpp collects by their text (`<|im_end|>`, `<|endoftext|>`, ...).
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.contains(&id)
    }

    /// Every end-of-generation token, in id order.
    pub fn eog_tokens(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.eog.iter().copied()
    }

    /// Whether `encode(.., add_special = true, ..)` puts BOS first.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` puts EOS last.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    /// The token's text as stored in the vocabulary.
    pub fn token_text(&self, id: TokenId) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }

    /// The id of the token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.vocab.id_of(text)
    }

    /// Whether the token is a control token (not rendered by [`Tokenizer::piece`]).
    pub fn is_control(&self, id: TokenId) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    /// SentencePiece or byte-level BPE, and which pre-tokenizer.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
}

/// The byte a `<0xNN>` token stands for, read as llama.cpp does (the hex
/// digits at offsets 3 and 4; as many as parse, 0 when none do).
fn byte_token_value(text: &str) -> u8 {
    text.bytes()
        .skip(3)
        .take(2)
        .map_while(|b| (b as char).to_digit(16))
        .fold(0u8, |acc, digit| {
            acc.wrapping_mul(16).wrapping_add(digit as u8)
        })
}

#[cfg(test)]
mod tests;
