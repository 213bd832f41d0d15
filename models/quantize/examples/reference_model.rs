//! Writes the reference input models of the byte-identity tests
//! (`ref-untied.gguf`, `ref-tied.gguf`) into a directory, for
//! `scripts/llama_quantize.py --refs` to quantize with llama.cpp.
//!
//! `cargo run -p backplane-quantize --example reference_model -- DIR`

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: reference_model DIR");
        std::process::exit(2);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for variant in support::VARIANTS {
        let path = dir.join(format!("ref-{}.gguf", variant.name));
        support::write_model(variant, &path);
        println!("{}", path.display());
    }
}
