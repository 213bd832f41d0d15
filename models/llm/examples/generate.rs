//! Generates text with a GGUF model.
//!
//! `cargo run --release -p backplane-llm --example generate -- M.gguf "Once upon a time" [N] [DEVICE]`

use std::io::Write;

use backplane_llm::{LoadOptions, Model, Sampler};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: generate M.gguf PROMPT [N] [DEVICE]")?;
    let prompt = args.next().unwrap_or_else(|| "Once upon a time".into());
    let n: usize = args.next().map_or(Ok(32), |s| s.parse())?;
    let device = args.next().unwrap_or_else(|| "auto".into());

    let options = LoadOptions {
        device,
        ..LoadOptions::default()
    };
    let model = Model::load(&path, &options)?;
    eprintln!(
        "{}: {} layers, {} on {}",
        model.name(),
        model.hparams().n_layer,
        model.placement().offloaded_layers(),
        model.placement().device
    );
    let tok = model.tokenizer()?;
    let ids = tok.encode(&prompt, true, false)?;
    let mut session = model.session(ids.len() + n)?;
    let mut out = std::io::stdout();
    print!("{prompt}");
    let mut pending = Vec::new();
    session.generate(&ids, n, &Sampler::default(), |t| {
        pending.extend_from_slice(&tok.piece(t));
        // Print whole UTF-8 characters only; a split one waits for its rest.
        let whole = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        let _ = out.write_all(String::from_utf8_lossy(&pending[..whole]).as_bytes());
        let _ = out.flush();
        pending.drain(..whole);
        true
    })?;
    println!();
    Ok(())
}
