//! `cargo xtask make-model`: writes a random-weight GGUF test model (see
//! models/testmodel/README.md).

use std::path::PathBuf;
use std::time::Instant;

use backplane_testmodel::{
    Arch, FileType, ModelSpec, Preset, Progress, Shape, Stage, WriteOptions, write_model_with,
};
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `make-model`.
#[derive(clap::Args)]
pub struct Args {
    /// Architecture: llama, qwen2 or qwen3.
    #[arg(long)]
    arch: Arch,
    /// Size preset: tiny (tests) or 1b (Llama-3.2-1B's dimensions).
    #[arg(long)]
    preset: Preset,
    /// File type: f32, f16, bf16, q8_0, q4_0, q4_K_M, ... (llama.cpp's names).
    #[arg(long = "type")]
    dtype: FileType,
    /// Seed of the weights.
    #[arg(long, default_value_t = ModelSpec::DEFAULT_SEED)]
    seed: u64,
    /// Directory of llama.cpp's ggml-vocab-*.gguf files (default: models/vocab).
    #[arg(long)]
    vocab_dir: Option<PathBuf>,
    /// Output file.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

/// Writes the model, with a progress bar for the 1b preset.
pub fn run(args: &Args) -> Result<(), String> {
    let spec = ModelSpec {
        arch: args.arch,
        preset: args.preset,
        dtype: args.dtype,
        seed: args.seed,
    };
    let shape = Shape::of(spec.arch, spec.preset);
    eprintln!(
        "xtask: {} ({} parameters) -> {}",
        spec.general_name(),
        shape.parameter_count(),
        args.output.display()
    );
    let bar = (spec.preset == Preset::OneB).then(|| {
        let bar = ProgressBar::new(shape.parameter_count());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>10} [{elapsed_precise}] {wide_bar} {percent:>3}% eta {eta}",
        ) {
            bar.set_style(style);
        }
        bar
    });
    let report = |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_message(match p.stage {
                Stage::Generating => "generating",
                Stage::Quantizing => "quantizing",
            });
            bar.set_length(p.total);
            bar.set_position(p.done);
        }
    };
    let mut options = WriteOptions {
        progress: Some(&report),
        ..WriteOptions::default()
    };
    if let Some(dir) = &args.vocab_dir {
        options.vocab_dir = dir.clone();
    }
    let start = Instant::now();
    let result = write_model_with(&spec, &args.output, &options);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    result.map_err(|e| e.to_string())?;
    let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    eprintln!(
        "xtask: wrote {} ({size} bytes) in {:.1} s",
        args.output.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
