//! Unit tests on small hand-built vocabularies.

use super::*;

/// `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then the given (text, score) pieces.
fn spm_vocab(pieces: &[(&str, f32)]) -> Vocab {
    let mut vocab = Vocab {
        model: "llama".to_owned(),
        ..Vocab::default()
    };
    for (text, kind) in [
        ("<unk>", token_type::UNKNOWN),
        ("<s>", token_type::CONTROL),
        ("</s>", token_type::CONTROL),
    ] {
        vocab.tokens.push(text.to_owned());
        vocab.scores.push(0.0);
        vocab.token_types.push(kind);
    }
    for byte in 0..=255u8 {
        vocab.tokens.push(format!("<0x{byte:02X}>"));
        vocab.scores.push(0.0);
        vocab.token_types.push(token_type::BYTE);
    }
    for &(text, score) in pieces {
        vocab.tokens.push(text.to_owned());
        vocab.scores.push(score);
        vocab.token_types.push(token_type::NORMAL);
    }
    vocab
}

fn id(tokenizer: &Tokenizer, text: &str) -> TokenId {
    tokenizer
        .token_id(text)
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

#[test]
fn spm_merges_the_highest_scoring_pair_first() {
    // "▁ab" can come from "▁a"+"b" or "▁"+"ab"; "ab" scores higher, so it
    // forms first and "▁ab" is then "▁"+"ab". Both paths give "▁ab" here, but
    // "abc" only exists as "ab"+"c", and "▁a" must not win over "ab".
    let tokenizer = Tokenizer::from_vocab(spm_vocab(&[
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -2.0),
        ("c", -2.0),
        ("▁a", -3.0),
        ("ab", -0.5),
        ("abc", -0.7),
    ]))
    .expect("vocab");
    let ids = tokenizer.encode("abc", false, false).expect("encode");
    assert_eq!(ids, [id(&tokenizer, "▁"), id(&tokenizer, "abc")]);
}

#[test]
fn spm_equal_scores_merge_leftmost_pair_first() {
    let tokenizer =
        Tokenizer::from_vocab(spm_vocab(&[("▁", -1.0), ("x", -1.0), ("xx", -1.0)])).expect("vocab");
    let ids = tokenizer.encode("xxx", false, false).expect("encode");
    assert_eq!(
        ids,
        [
            id(&tokenizer, "▁"),
            id(&tokenizer, "xx"),
            id(&tokenizer, "x")
        ]
    );
}

#[test]
fn spm_unknown_characters_fall_back_to_byte_tokens() {
    let tokenizer = Tokenizer::from_vocab(spm_vocab(&[("▁", -1.0), ("h", -1.0)])).expect("vocab");
    let ids = tokenizer.encode("hé", false, false).expect("encode");
    assert_eq!(
        ids,
        [
            id(&tokenizer, "▁"),
            id(&tokenizer, "h"),
            id(&tokenizer, "<0xC3>"),
            id(&tokenizer, "<0xA9>")
        ]
    );
    assert_eq!(tokenizer.decode(&ids), " hé");
    assert_eq!(tokenizer.detokenize(&ids, false, false), "hé");
}

#[test]
fn spm_missing_byte_token_is_an_error_naming_the_byte() {
    let vocab = Vocab {
        model: "llama".to_owned(),
        tokens: vec!["<unk>".into(), "<s>".into(), "</s>".into(), "▁".into()],
        ..Vocab::default()
    };
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    let err = tokenizer
        .encode("z", false, false)
        .expect_err("no byte token");
    assert!(err.to_string().contains("0x7a"), "{err}");
}

#[test]
fn spm_adds_bos_by_default_and_eos_only_when_asked() {
    let mut vocab = spm_vocab(&[("▁", -1.0), ("a", -1.0)]);
    let tokenizer = Tokenizer::from_vocab(vocab.clone()).expect("vocab");
    assert_eq!(
        tokenizer.encode("a", true, false).expect("encode"),
        [1, 259, 260]
    );
    assert_eq!(
        tokenizer.encode("a", false, false).expect("encode"),
        [259, 260]
    );
    assert_eq!(tokenizer.encode("", true, false).expect("encode"), [1]);
    vocab.add_eos = Some(true);
    vocab.add_bos = Some(false);
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("a", true, false).expect("encode"),
        [259, 260, 2]
    );
}

#[test]
fn control_tokens_in_text_are_parsed_only_with_parse_special() {
    let tokenizer = Tokenizer::from_vocab(spm_vocab(&[
        ("▁", -1.0),
        ("a", -1.0),
        ("<", -1.0),
        ("s", -1.0),
        (">", -1.0),
        ("/", -1.0),
    ]))
    .expect("vocab");
    let parsed = tokenizer.encode("a</s>a", false, true).expect("encode");
    // After a special token the text gets the space prefix again.
    assert_eq!(parsed, [259, 260, 2, 259, 260]);
    let plain = tokenizer.encode("a</s>a", false, false).expect("encode");
    assert_eq!(plain, [259, 260, 261, 264, 262, 263, 260]);
    assert_eq!(tokenizer.piece(2), b"");
    assert_eq!(tokenizer.piece_with_special(2), b"</s>");
}

#[test]
fn user_defined_tokens_are_matched_even_without_parse_special() {
    let mut vocab = spm_vocab(&[("▁", -1.0), ("a", -1.0)]);
    vocab.tokens.push("<tool>".to_owned());
    vocab.scores.push(0.0);
    vocab.token_types.push(token_type::USER_DEFINED);
    let tool = (vocab.tokens.len() - 1) as TokenId;
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    // The text after it starts a new fragment, so it gets the space prefix.
    assert_eq!(
        tokenizer.encode("<tool>a", false, false).expect("encode"),
        [tool, 259, 260]
    );
    assert_eq!(tokenizer.piece(tool), b"<tool>");
}

/// A byte-level vocabulary: token `b` is byte `b`'s mapped character, then `extra` tokens.
fn bpe_vocab(extra: &[&str], merges: &[&str], pre: &str) -> Vocab {
    let map = ByteLevel::new();
    let mut tokens: Vec<String> = (0..=255u8).map(|byte| mapped(&map, byte)).collect();
    tokens.extend(extra.iter().map(|s| s.to_string()));
    Vocab {
        model: "gpt2".to_owned(),
        pre: Some(pre.to_owned()),
        tokens,
        merges: merges.iter().map(|s| s.to_string()).collect(),
        ..Vocab::default()
    }
}

fn mapped(map: &ByteLevel, byte: u8) -> String {
    (0..0x144u32)
        .filter_map(char::from_u32)
        .find(|&c| map.byte_of(c) == Some(byte))
        .map(String::from)
        .unwrap_or_default()
}

#[test]
fn bpe_merges_by_rank_not_by_position() {
    // "b c" ranks before "a b", so "bc" forms first and "a" stays alone.
    let vocab = bpe_vocab(&["ab", "bc"], &["b c", "a b"], "gpt-2");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("abc", false, false).expect("encode"),
        [97, 257]
    );
    let vocab = bpe_vocab(&["ab", "bc"], &["a b", "b c"], "gpt-2");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("abc", false, false).expect("encode"),
        [256, 99]
    );
}

#[test]
fn bpe_space_is_byte_mapped_and_decodes_back() {
    let vocab = bpe_vocab(&["Ġh", "Ġhi"], &["Ġ h", "Ġh i"], "gpt-2");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    let ids = tokenizer.encode("a hi\n", false, false).expect("encode");
    assert_eq!(ids, [97, 257, 10]);
    assert_eq!(tokenizer.decode(&ids), "a hi\n");
    assert_eq!(tokenizer.piece(257), b" hi");
}

#[test]
fn bpe_pre_tokenizer_keeps_merges_inside_words() {
    // No merge may cross the word boundary between "a" and " b".
    let vocab = bpe_vocab(&["aĠ"], &["a Ġ"], "gpt-2");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("a b", false, false).expect("encode"),
        [97, 32, 98]
    );
}

#[test]
fn llama3_ignore_merges_takes_a_whole_word_token_directly() {
    // "abc" is a token but no merge path leads to it; llama-bpe takes it whole.
    let vocab = bpe_vocab(&["abc"], &[], "llama-bpe");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("abc", false, false).expect("encode"),
        [256]
    );
    let vocab = bpe_vocab(&["abc"], &[], "gpt-2");
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(
        tokenizer.encode("abc", false, false).expect("encode"),
        [97, 98, 99]
    );
}

#[test]
fn bos_defaults_follow_the_pre_tokenizer_and_the_gguf_flag_wins() {
    let mut vocab = bpe_vocab(&["<|begin_of_text|>"], &[], "llama-bpe");
    vocab.bos = Some(256);
    let tokenizer = Tokenizer::from_vocab(vocab.clone()).expect("vocab");
    assert_eq!(
        tokenizer.encode("a", true, false).expect("encode"),
        [256, 97]
    );
    vocab.add_bos = Some(false);
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert_eq!(tokenizer.encode("a", true, false).expect("encode"), [97]);

    let tokenizer = Tokenizer::from_vocab(bpe_vocab(&[], &[], "qwen2")).expect("vocab");
    assert_eq!(tokenizer.encode("a", true, false).expect("encode"), [97]);
}

#[test]
fn end_of_generation_tokens_are_collected_by_text() {
    let mut vocab = bpe_vocab(
        &["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        &[],
        "qwen2",
    );
    vocab.token_types = vec![token_type::NORMAL; 256];
    vocab.token_types.extend([token_type::CONTROL; 3]);
    vocab.eos = Some(256);
    let tokenizer = Tokenizer::from_vocab(vocab).expect("vocab");
    assert!(tokenizer.is_eog(256));
    assert!(!tokenizer.is_eog(257));
    assert!(tokenizer.is_eog(258));
    assert!(!tokenizer.is_eog(97));
    assert_eq!(tokenizer.eog_tokens().collect::<Vec<_>>(), [256, 258]);
    assert_eq!(
        tokenizer
            .encode("<|im_start|>a<|im_end|>", false, true)
            .expect("encode"),
        [257, 97, 258]
    );
    assert_eq!(tokenizer.decode(&[257, 97, 258]), "a");
}

#[test]
fn unknown_model_is_an_error_listing_the_supported_ones() {
    let vocab = Vocab {
        model: "t5".to_owned(),
        tokens: vec!["a".to_owned()],
        ..Vocab::default()
    };
    let message = Tokenizer::from_vocab(vocab)
        .expect_err("unsupported")
        .to_string();
    assert!(
        message.contains("'t5'") && message.contains("llama") && message.contains("gpt2"),
        "{message}"
    );
}

#[test]
fn duplicate_token_text_is_an_error_naming_both_ids() {
    let vocab = Vocab {
        model: "llama".to_owned(),
        tokens: vec!["a".to_owned(), "b".to_owned(), "a".to_owned()],
        ..Vocab::default()
    };
    let message = Tokenizer::from_vocab(vocab)
        .expect_err("duplicate")
        .to_string();
    assert!(
        message.contains("token 2") && message.contains("token 0"),
        "{message}"
    );
}

#[test]
fn short_scores_array_is_an_error_naming_the_key() {
    let mut vocab = spm_vocab(&[("a", 0.0)]);
    vocab.scores.truncate(3);
    let message = Tokenizer::from_vocab(vocab).expect_err("short").to_string();
    assert!(message.contains("tokenizer.ggml.scores"), "{message}");
}

#[test]
fn out_of_range_ids_give_empty_pieces_instead_of_panicking() {
    let tokenizer = Tokenizer::from_vocab(spm_vocab(&[("▁", 0.0)])).expect("vocab");
    assert_eq!(tokenizer.piece(1_000_000), b"");
    assert_eq!(tokenizer.decode(&[1_000_000, 259]), " ");
    assert!(!tokenizer.is_eog(u32::MAX));
}

#[test]
fn one_tokenizer_serves_several_threads_at_once() {
    let tokenizer =
        Tokenizer::from_vocab(spm_vocab(&[("▁", -1.0), ("a", -1.0), ("▁a", -0.5)])).expect("vocab");
    let expected = tokenizer.encode("a a a", true, false).expect("encode");
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| tokenizer.encode("a a a", true, false).expect("encode")))
            .collect();
        for handle in handles {
            assert_eq!(handle.join().expect("thread"), expected);
        }
    });
    assert_eq!(expected, [1, 261, 261, 261]);
}
