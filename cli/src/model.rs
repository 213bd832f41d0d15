//! The model commands: `run`, `tokenize`, `logits` and `bench` (being written).

use clap::Subcommand;

/// Commands that load a GGUF model.
#[derive(Subcommand)]
pub enum Command {}

/// Runs one model command.
pub fn run(cmd: Command) -> Result<(), String> {
    match cmd {}
}
