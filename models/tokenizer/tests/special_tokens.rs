//! BOS/EOS, special-token parsing and end-of-generation tokens on llama.cpp's
//! vocab-only GGUF files (ids as llama.cpp gives them for these files).

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_tokenizer::Tokenizer;

fn load(name: &str) -> Tokenizer {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../vocab/ggml-vocab-{name}.gguf"));
    let gguf = Gguf::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn llama_spm_adds_bos_and_detokenize_drops_it_with_the_prefix_space() {
    let tokenizer = load("llama-spm");
    let ids = tokenizer
        .encode("Hello world", true, false)
        .expect("encode");
    assert_eq!(ids, [1, 15043, 3186]);
    assert_eq!(
        tokenizer.decode(&ids),
        " Hello world",
        "BOS renders as nothing"
    );
    assert_eq!(tokenizer.detokenize(&ids, true, false), " Hello world");
    assert_eq!(tokenizer.detokenize(&ids[1..], false, false), "Hello world");
    assert!(tokenizer.is_eog(2));
    assert!(!tokenizer.is_eog(1));
}

#[test]
fn llama_spm_parses_control_tokens_only_when_asked() {
    let tokenizer = load("llama-spm");
    let parsed = tokenizer.encode("<s>x</s>", false, true).expect("encode");
    assert_eq!(parsed, [1, 921, 2]);
    let plain = tokenizer.encode("<s>x</s>", false, false).expect("encode");
    assert!(!plain.contains(&1) && !plain.contains(&2), "{plain:?}");
    assert_eq!(tokenizer.decode(&plain), " <s>x</s>");
}

#[test]
fn llama_bpe_adds_bos_and_parses_header_tokens() {
    let tokenizer = load("llama-bpe");
    assert_eq!(tokenizer.bos(), Some(128000));
    assert_eq!(tokenizer.eos(), Some(128001));
    let text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
    let ids = tokenizer.encode(text, true, true).expect("encode");
    assert_eq!(ids, [128000, 128006, 882, 128007, 271, 13347, 128009]);
    assert_eq!(
        tokenizer.decode(&ids),
        "user\n\nHi",
        "control tokens render as nothing"
    );
    assert_eq!(
        tokenizer.detokenize(&ids, false, true),
        format!("<|begin_of_text|>{text}")
    );
    let plain = tokenizer.encode(text, false, false).expect("encode");
    assert!(plain.iter().all(|&id| id < 128000), "{plain:?}");
    assert_eq!(tokenizer.decode(&plain), text);
}

#[test]
fn llama_bpe_ends_generation_on_eot_and_end_of_text() {
    let tokenizer = load("llama-bpe");
    assert_eq!(tokenizer.special_tokens().eot, Some(128009));
    assert!(tokenizer.is_eog(128009));
    assert!(tokenizer.is_eog(128001));
    assert!(!tokenizer.is_eog(128000));
    assert!(!tokenizer.is_eog(128006));
}

#[test]
fn qwen2_adds_no_bos_and_parses_chat_markers() {
    let tokenizer = load("qwen2");
    assert!(!tokenizer.adds_bos());
    let ids = tokenizer
        .encode("<|im_start|>user\nHi<|im_end|>", true, true)
        .expect("encode");
    assert_eq!(ids, [151644, 872, 198, 13048, 151645]);
    assert!(tokenizer.is_eog(151645), "<|im_end|>");
    assert!(tokenizer.is_eog(151643), "<|endoftext|>");
    assert!(!tokenizer.is_eog(151644), "<|im_start|>");
    assert_eq!(tokenizer.piece(151645), b"");
    assert_eq!(tokenizer.piece_with_special(151645), b"<|im_end|>");
}
