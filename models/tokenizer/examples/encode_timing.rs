//! Times encoding a generated ~10 kB prompt with a GGUF file's tokenizer.
//!
//! `cargo run --release -p backplane-tokenizer --example encode_timing -- models/vocab/ggml-vocab-qwen2.gguf`

use std::time::Instant;

use backplane_gguf::Gguf;
use backplane_tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        return Err("usage: encode_timing <file.gguf>".into());
    };
    let started = Instant::now();
    let gguf = Gguf::open(&path)?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let loaded = started.elapsed();

    let paragraph = "The quick brown fox jumps over the lazy dog, again and again (1234567 times)!\n\
        Ünïcödé text, 日本語のテキスト, emoji 🦙🚀 and    runs of   spaces\tand tabs.\n";
    let mut prompt = String::new();
    while prompt.len() < 10_000 {
        prompt.push_str(paragraph);
    }

    let rounds = 20;
    let mut ids = Vec::new();
    let started = Instant::now();
    for _ in 0..rounds {
        ids = tokenizer.encode(&prompt, true, false)?;
    }
    let per_encode = started.elapsed() / rounds;
    let started = Instant::now();
    let decoded = tokenizer.decode(&ids);
    let decode_time = started.elapsed();

    println!(
        "{path}: {} tokens in vocabulary, built in {loaded:.2?}; {} bytes -> {} tokens in {per_encode:.2?} per encode; decode {decode_time:.2?} ({} bytes)",
        tokenizer.n_vocab(),
        prompt.len(),
        ids.len(),
        decoded.len()
    );

    // Degenerate inputs: long runs that make regex backtracking or merge
    // queues work hardest.
    let stress = [
        ("100 kB of spaces", " ".repeat(100_000)),
        ("100 kB of one letter", "a".repeat(100_000)),
        ("100 kB of digits", "7".repeat(100_000)),
        ("100 kB of newlines and spaces", "\n ".repeat(50_000)),
        ("100 kB of emoji", "\u{1f999}".repeat(25_000)),
    ];
    for (what, text) in stress {
        let started = Instant::now();
        let ids = tokenizer.encode(&text, false, false)?;
        println!(
            "  {what}: {} tokens in {:.2?}",
            ids.len(),
            started.elapsed()
        );
    }
    Ok(())
}
