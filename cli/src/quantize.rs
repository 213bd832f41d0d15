//! `backplane quantize IN.gguf OUT.gguf [TYPE]` (being written).

/// Arguments of `backplane quantize`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `backplane quantize`.
pub fn run(_args: Args) -> Result<(), String> {
    Err("quantize is not implemented yet".into())
}
