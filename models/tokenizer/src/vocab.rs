//! The vocabulary as a GGUF file states it ([`Vocab`]) and as the tokenizer
//! uses it ([`Vocabulary`]): text <-> id, scores, and the per-token attributes
//! llama.cpp derives from token types and well-known token texts.

use std::collections::{BTreeSet, HashMap};

use crate::{TokenId, TokenizerError};

/// A vocabulary as stored under `tokenizer.ggml.*`: what [`crate::Tokenizer::from_vocab`]
/// builds from. `None` fields mean "key absent": llama.cpp's defaults apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vocab {
    /// `tokenizer.ggml.model`: `"llama"` (SentencePiece) or `"gpt2"` (byte-level BPE).
    pub model: String,
    /// `tokenizer.ggml.pre`: the BPE pre-tokenizer name.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`: token texts, indexed by id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`: SentencePiece merge scores; empty means all 0.
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.token_type`: see [`token_type`]; empty means all normal.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: BPE merges, `"left right"`, earliest first.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<TokenId>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<TokenId>,
    /// `tokenizer.ggml.eot_token_id` (end of turn).
    pub eot: Option<TokenId>,
    /// `tokenizer.ggml.eom_token_id` (end of message).
    pub eom: Option<TokenId>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<TokenId>,
    /// `tokenizer.ggml.seperator_token_id` (sic).
    pub sep: Option<TokenId>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<TokenId>,
    /// `tokenizer.ggml.mask_token_id`.
    pub mask: Option<TokenId>,
    /// `tokenizer.ggml.fim_pre_token_id` (or the older `prefix_token_id`).
    pub fim_pre: Option<TokenId>,
    /// `tokenizer.ggml.fim_suf_token_id` (or the older `suffix_token_id`).
    pub fim_suf: Option<TokenId>,
    /// `tokenizer.ggml.fim_mid_token_id` (or the older `middle_token_id`).
    pub fim_mid: Option<TokenId>,
    /// `tokenizer.ggml.fim_pad_token_id`.
    pub fim_pad: Option<TokenId>,
    /// `tokenizer.ggml.fim_rep_token_id`.
    pub fim_rep: Option<TokenId>,
    /// `tokenizer.ggml.fim_sep_token_id`.
    pub fim_sep: Option<TokenId>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix` (SentencePiece: prefix text with a space).
    pub add_space_prefix: Option<bool>,
}

/// Values of `tokenizer.ggml.token_type`, as llama.cpp's `llama_token_type`.
pub mod token_type {
    /// No type given.
    pub const UNDEFINED: i32 = 0;
    /// An ordinary piece of text.
    pub const NORMAL: i32 = 1;
    /// The unknown-token marker.
    pub const UNKNOWN: i32 = 2;
    /// A control token (`<s>`, `<|eot_id|>`): matched in text only with `parse_special`.
    pub const CONTROL: i32 = 3;
    /// A user-defined token: always matched in text as a whole.
    pub const USER_DEFINED: i32 = 4;
    /// A reserved, unused slot.
    pub const UNUSED: i32 = 5;
    /// A byte-fallback token `<0xNN>`.
    pub const BYTE: i32 = 6;
}

/// Attribute bits as llama.cpp's `llama_token_attr`.
pub(crate) mod attr {
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
}

/// The special token ids in force after llama.cpp's defaults, the GGUF keys
/// and the detection of well-known texts have been applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<TokenId>,
    /// End of sequence.
    pub eos: Option<TokenId>,
    /// End of turn.
    pub eot: Option<TokenId>,
    /// End of message.
    pub eom: Option<TokenId>,
    /// Unknown.
    pub unk: Option<TokenId>,
    /// Separator.
    pub sep: Option<TokenId>,
    /// Padding.
    pub pad: Option<TokenId>,
    /// Mask.
    pub mask: Option<TokenId>,
    /// Fill-in-the-middle prefix.
    pub fim_pre: Option<TokenId>,
    /// Fill-in-the-middle suffix.
    pub fim_suf: Option<TokenId>,
    /// Fill-in-the-middle middle.
    pub fim_mid: Option<TokenId>,
    /// Fill-in-the-middle padding.
    pub fim_pad: Option<TokenId>,
    /// Fill-in-the-middle repository.
    pub fim_rep: Option<TokenId>,
    /// Fill-in-the-middle file separator.
    pub fim_sep: Option<TokenId>,
}

/// Texts llama.cpp takes for an end-of-turn token when no key names one.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
/// Texts that end generation wherever they appear in the vocabulary.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// gpt-oss markers llama.cpp always renders as text.
const ALWAYS_RENDERED_TEXTS: &[&str] =
    &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// The vocabulary in the form the tokenizers use.
#[derive(Debug)]
pub(crate) struct Vocabulary {
    pub texts: Vec<String>,
    scores: Vec<f32>,
    pub attrs: Vec<u32>,
    ids: HashMap<String, TokenId>,
}

impl Vocabulary {
    /// Indexes the token list; empty texts get llama.cpp's `[EMPTY_<id>]` stand-in.
    pub(crate) fn new(vocab: &Vocab) -> Result<Vocabulary, TokenizerError> {
        let count = vocab.tokens.len();
        if count == 0 {
            return Err(TokenizerError::EmptyVocab);
        }
        if u32::try_from(count).is_err() {
            return Err(TokenizerError::TooManyTokens { count });
        }
        if !vocab.scores.is_empty() && vocab.scores.len() < count {
            return Err(TokenizerError::ShortArray {
                key: "tokenizer.ggml.scores",
                len: vocab.scores.len(),
                expected: count,
            });
        }
        if !vocab.token_types.is_empty() && vocab.token_types.len() < count {
            return Err(TokenizerError::ShortArray {
                key: "tokenizer.ggml.token_type",
                len: vocab.token_types.len(),
                expected: count,
            });
        }
        let mut texts = Vec::with_capacity(count);
        let mut ids = HashMap::with_capacity(count);
        for (index, text) in vocab.tokens.iter().enumerate() {
            let id = index as TokenId;
            let text = if text.is_empty() {
                format!("[EMPTY_{index}]")
            } else {
                text.clone()
            };
            if let Some(first) = ids.insert(text.clone(), id) {
                return Err(TokenizerError::DuplicateToken {
                    text,
                    first,
                    second: id,
                });
            }
            texts.push(text);
        }
        let scores = if vocab.scores.is_empty() {
            vec![0.0; count]
        } else {
            vocab.scores[..count].to_vec()
        };
        let attrs = (0..count)
            .map(|i| match vocab.token_types.get(i).copied() {
                None => attr::NORMAL,
                Some(token_type::NORMAL) => attr::NORMAL,
                Some(token_type::UNKNOWN) => attr::UNKNOWN,
                Some(token_type::CONTROL) => attr::CONTROL,
                Some(token_type::USER_DEFINED) => attr::USER_DEFINED,
                Some(token_type::UNUSED) => attr::UNUSED,
                Some(token_type::BYTE) => attr::BYTE,
                Some(_) => 0,
            })
            .collect();
        Ok(Vocabulary {
            texts,
            scores,
            attrs,
            ids,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    /// The id of the token with exactly this text.
    pub(crate) fn id_of(&self, text: &str) -> Option<TokenId> {
        self.ids.get(text).copied()
    }

    pub(crate) fn score(&self, id: TokenId) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    pub(crate) fn attr(&self, id: TokenId) -> u32 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// SentencePiece byte fallback: the `<0xNN>` token, else a token whose text is that single byte.
    pub(crate) fn spm_byte_token(&self, byte: u8) -> Option<TokenId> {
        self.id_of(&format!("<0x{byte:02X}>")).or_else(|| {
            std::str::from_utf8(&[byte])
                .ok()
                .and_then(|text| self.id_of(text))
        })
    }
}

/// Which default ids a tokenizer model starts from before the GGUF keys apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Defaults {
    /// SentencePiece: `<unk>` 0, `<s>` 1, `</s>` 2.
    Spm,
    /// Byte-level BPE: BOS and EOS 11, as llama.cpp assumes.
    Bpe,
}

/// Special ids, end-of-generation set and attribute fix-ups, in llama.cpp's order.
pub(crate) fn resolve_special(
    vocab: &Vocab,
    vocabulary: &mut Vocabulary,
    defaults: Defaults,
) -> (SpecialTokens, BTreeSet<TokenId>) {
    let count = vocabulary.len();
    let in_range = |id: Option<TokenId>| id.filter(|&id| (id as usize) < count);
    // A default out of range is dropped; a key out of range keeps the default.
    let pick = |key: Option<TokenId>, default: Option<TokenId>| in_range(key).or(in_range(default));
    let (bos, eos, unk) = match defaults {
        Defaults::Spm => (Some(1), Some(2), Some(0)),
        Defaults::Bpe => (Some(11), Some(11), None),
    };
    let mut special = SpecialTokens {
        bos: pick(vocab.bos, bos),
        eos: pick(vocab.eos, eos),
        eot: pick(vocab.eot, None),
        eom: pick(vocab.eom, None),
        unk: pick(vocab.unk, unk),
        sep: pick(vocab.sep, None),
        pad: pick(vocab.pad, None),
        mask: pick(vocab.mask, None),
        fim_pre: pick(vocab.fim_pre, None),
        fim_suf: pick(vocab.fim_suf, None),
        fim_mid: pick(vocab.fim_mid, None),
        fim_pad: pick(vocab.fim_pad, None),
        fim_rep: pick(vocab.fim_rep, None),
        fim_sep: pick(vocab.fim_sep, None),
    };

    // Ids not named by a key are found by well-known text and marked as
    // control tokens. Where several listed texts exist, llama.cpp takes
    // whichever its hash map yields first; here the earlier text in the list
    // wins (`<|eot_id|>` over `<|end_of_text|>`, `<|im_end|>` over
    // `<|endoftext|>`). All of them end generation either way.
    let detect = |slot: &mut Option<TokenId>, texts: &[&str], vocabulary: &mut Vocabulary| {
        if slot.is_some() {
            return;
        }
        if let Some(id) = texts.iter().find_map(|text| vocabulary.id_of(text)) {
            *slot = Some(id);
            vocabulary.attrs[id as usize] |= attr::CONTROL;
        }
    };
    detect(&mut special.eot, EOT_TEXTS, vocabulary);
    detect(&mut special.eom, EOM_TEXTS, vocabulary);
    detect(&mut special.fim_pre, FIM_PRE_TEXTS, vocabulary);
    detect(&mut special.fim_suf, FIM_SUF_TEXTS, vocabulary);
    detect(&mut special.fim_mid, FIM_MID_TEXTS, vocabulary);
    detect(&mut special.fim_pad, FIM_PAD_TEXTS, vocabulary);
    detect(&mut special.fim_rep, FIM_REP_TEXTS, vocabulary);
    detect(&mut special.fim_sep, FIM_SEP_TEXTS, vocabulary);

    // Control tokens named "...unused..." are unused slots.
    for (text, attrs) in vocabulary.texts.iter().zip(vocabulary.attrs.iter_mut()) {
        if *attrs & attr::CONTROL != 0 && text.contains("unused") {
            *attrs |= attr::UNUSED;
        }
    }

    let mut eog: BTreeSet<TokenId> = [special.fim_pad, special.fim_rep, special.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for (index, text) in vocabulary.texts.iter().enumerate() {
        if EOG_TEXTS.contains(&text.as_str()) {
            eog.insert(index as TokenId);
            vocabulary.attrs[index] |= attr::CONTROL;
        }
        if ALWAYS_RENDERED_TEXTS.contains(&text.as_str()) {
            vocabulary.attrs[index] = attr::USER_DEFINED;
        }
    }
    eog.extend(
        [special.eos, special.eot, special.eom]
            .into_iter()
            .flatten(),
    );

    // With "<|return|>" and "<|call|>" (gpt-oss) or "<|call(s)|>" and
    // "<|flush|>" (solar-open) present, "<|end|>" only ends a message.
    let eog_with = |eog: &BTreeSet<TokenId>, text: &str| {
        eog.iter()
            .copied()
            .find(|&id| vocabulary.texts[id as usize] == text)
    };
    let has_call = eog_with(&eog, "<|call|>").is_some() || eog_with(&eog, "<|calls|>").is_some();
    let has_return_or_flush =
        eog_with(&eog, "<|return|>").is_some() || eog_with(&eog, "<|flush|>").is_some();
    if let Some(end) = eog_with(&eog, "<|end|>")
        && has_call
        && has_return_or_flush
    {
        eog.remove(&end);
        vocabulary.attrs[end as usize] = attr::USER_DEFINED;
    }
    // Where "<|tool_response>" or "<|plamo:eos|>" ends generation, "</s>" is plain text.
    let has_other_end =
        eog_with(&eog, "<|tool_response>").is_some() || eog_with(&eog, "<|plamo:eos|>").is_some();
    if let Some(s) = eog_with(&eog, "</s>")
        && has_other_end
    {
        eog.remove(&s);
        vocabulary.attrs[s as usize] = attr::NORMAL;
    }
    (special, eog)
}

/// Tokens matched in text before normal tokenization (control, user-defined
/// and unknown), longest text first; equal lengths by id.
pub(crate) fn special_match_order(vocabulary: &Vocabulary) -> Vec<TokenId> {
    let mut order: Vec<TokenId> = (0..vocabulary.len())
        .filter(|&i| {
            vocabulary.attrs[i] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
        })
        .map(|i| i as TokenId)
        .collect();
    order.sort_by_key(|&id| std::cmp::Reverse(vocabulary.texts[id as usize].len()));
    order
}
