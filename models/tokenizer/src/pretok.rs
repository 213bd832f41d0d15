//! Pre-tokenizers of byte-level BPE vocabularies: the regexes that cut text
//! into words before merges run, chosen by `tokenizer.ggml.pre`.
//!
//! Engine choice: the patterns llama.cpp uses (taken from each model's
//! `tokenizer.json`) rely on the lookahead `\s+(?!\S)` ("a whitespace run, but
//! leave its last character to the word that follows"), which the `regex`
//! crate cannot express. `fancy-regex` handles it with a backtracking VM and
//! hands every lookaround-free piece of a pattern to `regex-automata`, so
//! patterns without lookaround (`\p{N}+`, `[0-9][0-9][0-9]`) run entirely on
//! the fast engine; rewriting the lookahead by hand was the alternative and
//! would have been one more place to get wrong.
//!
//! Both engines take `\s`, `\p{L}`, `\p{N}`, `\p{P}`, `\p{M}`, `\p{S}` from
//! Unicode 16.0's tables, while llama.cpp's generated tables stop at Unicode
//! 15.1 and treat characters assigned in 16.0 as unassigned. Every category is
//! therefore intersected with `\p{Age:V15_1}` (see [`pin_unicode_version`]);
//! with that, all 1,112,064 scalar values fall in the same classes as in
//! llama.cpp's tables (`\s` needs no pinning: its set is unchanged since 6.0).

use std::ops::Range;

use fancy_regex::Regex;

use crate::TokenizerError;

/// The regex family a byte-level BPE vocabulary splits words with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreTokenizer {
    /// llama.cpp's fallback for `default` (and for a missing `tokenizer.ggml.pre`):
    /// punctuation runs, then GPT-2's pattern, then digit runs cut in threes.
    Default,
    /// GPT-2's pattern (`gpt-2`, `phi-2`, `mpt`, `olmo`, `jais`, `exaone4`).
    Gpt2,
    /// Llama 3's pattern, digits in groups of up to three (`llama3`, `llama-bpe`,
    /// `llama-v3`, `falcon3`, `falcon-h1`, `pixtral`, `midm-2.0`, `lfm2`,
    /// `jina-v5-nano`, and with other flags `dbrx`, `smaug-bpe`).
    Llama3,
    /// Qwen 2's pattern: Llama 3's with single digits (`qwen2`,
    /// `deepseek-r1-qwen`, `kormo`, `f2llmv2`, `megrez`, `stablelm2`).
    Qwen2,
    /// Qwen 3.5's pattern: Qwen 2's with combining marks kept in words (`qwen35`).
    Qwen35,
    /// Single digits, then GPT-2's pattern (`starcoder`, `refact`, `command-r`,
    /// `smollm`, `codeshell`, `exaone`, `minerva-7b`).
    Starcoder,
    /// Punctuation runs, GPT-2's pattern, digits in threes (`falcon`).
    Falcon,
}

/// Everything a `tokenizer.ggml.pre` name decides, as llama.cpp's vocabulary loader sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreConfig {
    pub family: PreTokenizer,
    /// A word that is itself a token is emitted whole, without running merges.
    pub ignore_merges: bool,
    /// The BOS default when `tokenizer.ggml.add_bos_token` is absent.
    pub add_bos_default: bool,
    /// llama.cpp's detokenizer tidies spaces before punctuation for this vocabulary.
    pub clean_spaces: bool,
}

/// The `tokenizer.ggml.pre` values this crate supports, for error messages.
pub(crate) const SUPPORTED_PRE: &str = "default, llama3, llama-v3, llama-bpe, falcon3, falcon-h1, \
pixtral, midm-2.0, lfm2, jina-v5-nano, dbrx, smaug-bpe, gpt-2, phi-2, mpt, olmo, jais, exaone4, \
qwen2, deepseek-r1-qwen, kormo, f2llmv2, megrez, stablelm2, qwen35, starcoder, refact, \
command-r, smollm, codeshell, exaone, minerva-7b, falcon";

impl PreConfig {
    /// The configuration for a `tokenizer.ggml.pre` value; `None` (key absent)
    /// falls back to `default` as llama.cpp does.
    pub(crate) fn from_name(name: Option<&str>) -> Result<PreConfig, TokenizerError> {
        use PreTokenizer::*;
        let plain = |family| PreConfig {
            family,
            ignore_merges: false,
            add_bos_default: false,
            clean_spaces: true,
        };
        let Some(name) = name else {
            return Ok(plain(Default));
        };
        let config = match name {
            "default" => plain(Default),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreConfig {
                ignore_merges: true,
                add_bos_default: true,
                ..plain(Llama3)
            },
            "dbrx" | "smaug-bpe" => plain(Llama3),
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "exaone4" => plain(Gpt2),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" => PreConfig {
                clean_spaces: false,
                ..plain(Qwen2)
            },
            "megrez" | "stablelm2" => plain(Qwen2),
            "qwen35" => PreConfig {
                clean_spaces: false,
                ..plain(Qwen35)
            },
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => plain(Starcoder),
            "command-r" | "smollm" => PreConfig {
                clean_spaces: false,
                ..plain(Starcoder)
            },
            "falcon" => plain(Falcon),
            other => {
                return Err(TokenizerError::UnsupportedPre {
                    pre: other.to_owned(),
                    supported: SUPPORTED_PRE,
                });
            }
        };
        Ok(config)
    }
}

/// GPT-2's word pattern. llama.cpp's copy lacks the final `|\s+`, but its
/// hand-written matcher for this pattern has that branch; with or without it
/// the words come out the same (a lone whitespace before a non-space would
/// otherwise be left between matches, which becomes a word of its own anyway).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3's pattern with the case-insensitive contractions spelled out in
/// ASCII (Unicode case folding would also let `'ſ` or `'K` through).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const PUNCTUATION_RUNS: &str = r"[\p{P}\$\+<=>\^~\|]+";
const FALCON_PUNCTUATION_RUNS: &str = r"[\p{P}\$\+<=>\^~\|`]+";
const DIGIT_RUNS: &str = r"\p{N}+";
const SINGLE_DIGITS: &str = r"\p{N}";
const ASCII_DIGIT_TRIPLES: &str = r"[0-9][0-9][0-9]";

/// The Unicode version llama.cpp's category tables were generated from.
const UNICODE_AGE: &str = r"\p{Age:V15_1}";

/// Rewrites each general-category class `\p{X}` of a pattern as
/// `[\p{X}&&\p{Age:V15_1}]` (a nested class, so it works inside `[...]` too).
pub(crate) fn pin_unicode_version(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut rest = pattern;
    while let Some(at) = rest.find(r"\p{") {
        let Some(close) = rest[at..].find('}') else {
            break;
        };
        let class = &rest[at..at + close + 1];
        out.push_str(&rest[..at]);
        out.push('[');
        out.push_str(class);
        out.push_str("&&");
        out.push_str(UNICODE_AGE);
        out.push(']');
        rest = &rest[at + close + 1..];
    }
    out.push_str(rest);
    out
}

impl PreTokenizer {
    /// The patterns applied one after the other, each cutting the pieces the previous one left.
    pub(crate) fn patterns(self) -> &'static [&'static str] {
        match self {
            PreTokenizer::Default => &[PUNCTUATION_RUNS, GPT2, DIGIT_RUNS, ASCII_DIGIT_TRIPLES],
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::Llama3 => &[LLAMA3],
            PreTokenizer::Qwen2 => &[QWEN2],
            PreTokenizer::Qwen35 => &[QWEN35],
            PreTokenizer::Starcoder => &[SINGLE_DIGITS, GPT2],
            PreTokenizer::Falcon => &[FALCON_PUNCTUATION_RUNS, GPT2, ASCII_DIGIT_TRIPLES],
        }
    }

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            PreTokenizer::Default => "default",
            PreTokenizer::Gpt2 => "gpt-2",
            PreTokenizer::Llama3 => "llama3",
            PreTokenizer::Qwen2 => "qwen2",
            PreTokenizer::Qwen35 => "qwen35",
            PreTokenizer::Starcoder => "starcoder",
            PreTokenizer::Falcon => "falcon",
        }
    }
}

/// A pre-tokenizer's compiled patterns.
#[derive(Debug)]
pub(crate) struct WordSplitter {
    patterns: Vec<(&'static str, Regex)>,
}

impl WordSplitter {
    pub(crate) fn new(family: PreTokenizer) -> Result<WordSplitter, TokenizerError> {
        let patterns = family
            .patterns()
            .iter()
            .map(|&pattern| {
                Regex::new(&pin_unicode_version(pattern))
                    .map(|regex| (pattern, regex))
                    .map_err(|err| TokenizerError::BadPattern {
                        pre: family.name().to_owned(),
                        pattern,
                        message: err.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WordSplitter { patterns })
    }

    /// Cuts `text` into words (byte ranges, in order, covering all of it), as
    /// llama.cpp's `unicode_regex_split`: each pattern cuts every piece the
    /// previous one left; the text between two matches is a piece of its own.
    pub(crate) fn split(&self, text: &str) -> Result<Vec<Range<usize>>, TokenizerError> {
        let mut pieces: Vec<Range<usize>> = Vec::new();
        if !text.is_empty() {
            pieces.push(0..text.len());
        }
        for (pattern, regex) in &self.patterns {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                let mut covered = piece.start;
                for found in regex.find_iter(&text[piece.clone()]) {
                    let found = found.map_err(|err| TokenizerError::PatternFailed {
                        pattern,
                        offset: covered,
                        message: err.to_string(),
                    })?;
                    if found.start() == found.end() {
                        continue;
                    }
                    let (start, end) = (piece.start + found.start(), piece.start + found.end());
                    if start > covered {
                        next.push(covered..start);
                    }
                    next.push(start..end);
                    covered = end;
                }
                if covered < piece.end {
                    next.push(covered..piece.end);
                }
            }
            pieces = next;
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(family: PreTokenizer, text: &str) -> Vec<String> {
        let splitter = WordSplitter::new(family).expect("patterns compile");
        splitter
            .split(text)
            .expect("split succeeds")
            .into_iter()
            .map(|r| text[r].to_owned())
            .collect()
    }

    #[test]
    fn category_classes_are_pinned_to_unicode_15_1_inside_and_outside_brackets() {
        assert_eq!(
            pin_unicode_version(r"[^\r\p{L}]?\p{N}+"),
            r"[^\r[\p{L}&&\p{Age:V15_1}]]?[\p{N}&&\p{Age:V15_1}]+"
        );
    }

    #[test]
    fn characters_new_in_unicode_16_split_as_unassigned_like_llama_cpp() {
        // U+1C89 is a letter since Unicode 16.0, unassigned in llama.cpp's
        // tables: it cannot continue the word "a", only prefix the next one.
        assert_eq!(
            words(PreTokenizer::Llama3, "a\u{1c89}b"),
            ["a", "\u{1c89}b"]
        );
        // U+2EBF0 (CJK extension I, Unicode 15.1) is a letter in both.
        assert_eq!(words(PreTokenizer::Llama3, "a\u{2ebf0}"), ["a\u{2ebf0}"]);
    }

    #[test]
    fn every_family_compiles() {
        for family in [
            PreTokenizer::Default,
            PreTokenizer::Gpt2,
            PreTokenizer::Llama3,
            PreTokenizer::Qwen2,
            PreTokenizer::Qwen35,
            PreTokenizer::Starcoder,
            PreTokenizer::Falcon,
        ] {
            WordSplitter::new(family).expect("compiles");
        }
    }

    #[test]
    fn whitespace_run_leaves_its_last_space_to_the_next_word() {
        assert_eq!(
            words(PreTokenizer::Llama3, "a   b"),
            ["a", "  ", " b"],
            "\\s+(?!\\S) must give back one space"
        );
        assert_eq!(words(PreTokenizer::Gpt2, "x  \n"), ["x", "  \n"]);
    }

    #[test]
    fn llama3_groups_digits_in_threes_and_qwen2_singly() {
        assert_eq!(words(PreTokenizer::Llama3, "1234567"), ["123", "456", "7"]);
        assert_eq!(words(PreTokenizer::Qwen2, "123"), ["1", "2", "3"]);
    }

    #[test]
    fn llama3_contractions_match_either_case() {
        assert_eq!(
            words(PreTokenizer::Llama3, "I'LL we've"),
            ["I", "'LL", " we", "'ve"]
        );
    }

    #[test]
    fn default_cuts_punctuation_then_words_then_digit_triples() {
        assert_eq!(
            words(PreTokenizer::Default, "hi!! 12345"),
            ["hi", "!!", " ", "123", "45"]
        );
    }

    #[test]
    fn newlines_after_punctuation_stay_with_it_in_llama3() {
        assert_eq!(
            words(PreTokenizer::Llama3, "ok.\n\nNext"),
            ["ok", ".\n\n", "Next"]
        );
    }

    #[test]
    fn unknown_pre_names_the_value_and_lists_supported_ones() {
        let err = PreConfig::from_name(Some("klingon")).expect_err("unknown");
        let message = err.to_string();
        assert!(message.contains("'klingon'"), "{message}");
        assert!(
            message.contains("llama-bpe") && message.contains("qwen2"),
            "{message}"
        );
    }
}
