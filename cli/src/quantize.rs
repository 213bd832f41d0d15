//! `backplane quantize IN.gguf OUT.gguf [TYPE]`: llama.cpp's model
//! quantizer (same per-tensor choices, same bytes), with a progress bar.

use std::path::PathBuf;

use backplane_quantize::{FileType, Progress, QuantizeParams, quantize_file};
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `backplane quantize`.
#[derive(clap::Args)]
pub struct Args {
    /// The model to quantize (f32, f16 or bf16 weights).
    #[arg(value_name = "IN.gguf")]
    input: PathBuf,
    /// Where to write the quantized model (replaced only when complete).
    #[arg(value_name = "OUT.gguf")]
    output: PathBuf,
    /// Target type or llama.cpp mix: Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q5_0, Q5_1,
    /// Q4_K_M, Q4_K_S, Q4_0, Q4_1, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K, F16, BF16, F32
    /// (case-insensitive).
    #[arg(value_name = "TYPE", default_value = "Q8_0")]
    ftype: String,
    /// Worker threads (0: one per core).
    #[arg(long, short = 't', default_value_t = 0)]
    threads: usize,
    /// Convert tensors that are already quantized (loses quality).
    #[arg(long)]
    allow_requantize: bool,
    /// Keep output.weight as it is.
    #[arg(long)]
    leave_output_tensor: bool,
    /// Give every quantized tensor the type itself, without the mix's rules.
    #[arg(long)]
    pure: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// Mebibytes, for the summary.
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Runs `backplane quantize`.
pub fn run(args: Args) -> Result<(), String> {
    let ftype: FileType = args.ftype.parse().map_err(|e| format!("{e}"))?;
    let params = QuantizeParams {
        ftype,
        requantize: args.allow_requantize,
        quantize_output: !args.leave_output_tensor,
        threads: args.threads,
        pure: args.pure,
    };
    let mut bar: Option<ProgressBar> = None;
    let quiet = args.quiet;
    let mut on_progress = |p: &Progress| {
        if quiet {
            return;
        }
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(p.count as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} tensors {elapsed} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        let change = if p.from == p.to {
            format!("{} (copied)", p.to)
        } else {
            format!("{} -> {}", p.from, p.to)
        };
        bar.set_message(format!("{} {change}", p.name));
        bar.inc(1);
    };
    let result = quantize_file(&args.input, &args.output, &params, &mut on_progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let summary = result.map_err(|e| e.to_string())?;
    println!(
        "quantized {} ({:.2} MiB) -> {} ({:.2} MiB) as {ftype} in {:.2} s: {} tensors, {} converted, {} copied",
        args.input.display(),
        mib(summary.bytes_in),
        args.output.display(),
        mib(summary.bytes_out),
        summary.seconds,
        summary.tensors,
        summary.quantized,
        summary.tensors - summary.quantized,
    );
    Ok(())
}
