//! The model commands: `run`, `tokenize`, `logits`, `bench` and
//! `explain-model`, over GGUF models of the llama, qwen2 and qwen3
//! architectures.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use backplane_llm::{LoadOptions, LoadProgress, Logits, Model, Sampler, Split, SplitMode, UBATCH};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

/// Commands that load a GGUF model.
#[derive(Subcommand)]
pub enum Command {
    /// Generate text from a prompt, streaming it as it comes.
    Run(RunArgs),
    /// Print the token ids of a text.
    Tokenize(TokenizeArgs),
    /// Write the logits of a token sequence as JSON.
    Logits(LogitsArgs),
    /// Measure prefill and decode speed, like llama-bench's pp512 / tg128.
    Bench(BenchArgs),
    /// Show how the scheduler routes a model's forward graph over the
    /// devices: every node's backend and why, the refusals, the copies
    /// between backends and the input writes.
    ExplainModel(ExplainModelArgs),
}

/// Where and how a model is loaded.
#[derive(Args)]
pub struct ModelArgs {
    /// The GGUF file.
    #[arg(long, short = 'm', value_name = "M.gguf")]
    model: PathBuf,
    /// cpu, auto, a backend (webgpu, sycl, hexagon) or backend:device;
    /// several separated by commas (A,B) split the layers across them.
    #[arg(long, default_value = "auto")]
    device: String,
    /// With several devices: `layer` gives each a contiguous range of
    /// layers, `none` uses only the first.
    #[arg(
        long = "split",
        visible_alias = "split-mode",
        default_value = "layer",
        value_name = "MODE"
    )]
    split: SplitMode,
    /// Share of the layers of each device in --device, e.g. 3,1 (default:
    /// in proportion to each device's free memory).
    #[arg(long = "tensor-split", value_delimiter = ',', value_name = "R,R")]
    tensor_split: Vec<f32>,
    /// Like llama.cpp's -ngl: of the blocks and the output layer, the last
    /// L go on the device, the rest on the CPU (default: all).
    #[arg(
        long = "gpu-layers",
        short = 'g',
        visible_alias = "ngl",
        value_name = "L"
    )]
    gpu_layers: Option<usize>,
    /// Context size in tokens (default: the training context, at most 4096).
    #[arg(long = "ctx-size", short = 'c', default_value_t = 0)]
    ctx_size: usize,
    /// Search this directory for plugins first (repeatable).
    #[arg(long = "plugin-dir", value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Keep every weight in ggml's layout instead of its device's
    /// preferred one (the CPU's repacked mat-mul weights), like llama.cpp's
    /// --no-repack.
    #[arg(long = "no-repack", visible_alias = "nr")]
    no_repack: bool,
    /// Set a backend option, NAME.KEY=VALUE (repeatable; `backplane
    /// devices --options` lists them), e.g. webgpu.matmul_path=tiled.
    #[arg(long = "backend-option", value_name = "NAME.KEY=VALUE")]
    backend_options: Vec<String>,
}

/// Arguments of `backplane run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (a BOS token is added when the model wants one).
    #[arg(long, short = 'p')]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    n: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temp: f32,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Keep going past end-of-generation tokens.
    #[arg(long)]
    ignore_eos: bool,
}

/// Arguments of `backplane tokenize`.
#[derive(Args)]
pub struct TokenizeArgs {
    /// The GGUF file.
    #[arg(long, short = 'm', value_name = "M.gguf")]
    model: PathBuf,
    /// The text.
    text: String,
    /// Print `{"tokens":[...]}`.
    #[arg(long)]
    json: bool,
    /// Do not add the BOS token.
    #[arg(long)]
    no_bos: bool,
    /// Turn special-token text (`<|im_start|>`) into its token.
    #[arg(long)]
    parse_special: bool,
}

/// Arguments of `backplane logits`.
#[derive(Args)]
pub struct LogitsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Comma-separated token ids.
    #[arg(long, value_delimiter = ',', required = true)]
    tokens: Vec<u32>,
    /// Every position's logits, not just the last one's.
    #[arg(long)]
    all: bool,
    /// The JSON file to write.
    #[arg(long, value_name = "F")]
    json: PathBuf,
}

/// Arguments of `backplane bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prefill tokens (0: skip).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pp: usize,
    /// Decode tokens (0: skip).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    tg: usize,
    /// Timed repetitions (after one warm-up).
    #[arg(short = 'r', long, default_value_t = 5)]
    repetitions: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `backplane explain-model`.
#[derive(Args)]
pub struct ExplainModelArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Tokens in the graph: 1 is a decode step, more a prefill ubatch.
    #[arg(long, default_value_t = 1)]
    tokens: usize,
    /// Print the schedule as Graphviz DOT instead.
    #[arg(long)]
    dot: bool,
}

/// Runs one model command.
pub fn run(cmd: Command) -> Result<(), String> {
    match cmd {
        Command::Run(a) => generate(&a),
        Command::Tokenize(a) => tokenize(&a),
        Command::Logits(a) => logits(&a),
        Command::Bench(a) => bench(&a),
        Command::ExplainModel(a) => explain(&a),
    }
}

/// Loads the model with a progress bar over the weight upload.
fn load(a: &ModelArgs) -> Result<Model, String> {
    let options = LoadOptions {
        device: a.device.clone(),
        gpu_layers: a.gpu_layers,
        n_ctx: a.ctx_size,
        plugin_dirs: a.plugin_dirs.clone(),
        repack: !a.no_repack,
        backend_options: crate::options::parse(&a.backend_options)?,
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("loading {bar:40} {bytes}/{total_bytes} {elapsed}")
            .map_err(|e| e.to_string())?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let split = Split {
        mode: a.split,
        tensor_split: a.tensor_split.clone(),
    };
    let model = Model::load_split(&a.model, &options, &split, &mut |p: LoadProgress| {
        bar.set_length(p.total_bytes);
        bar.set_position(p.done_bytes);
    })
    .map_err(|e| e.to_string());
    bar.finish_and_clear();
    model
}

fn generate(a: &RunArgs) -> Result<(), String> {
    let model = load(&a.model)?;
    let tok = model.tokenizer().map_err(|e| e.to_string())?;
    let prompt = tok
        .encode(&a.prompt, true, false)
        .map_err(|e| format!("tokenizing the prompt: {e}"))?;
    if prompt.is_empty() {
        return Err("the prompt has no tokens".into());
    }
    let n_ctx = model.n_ctx().max(prompt.len() + a.n);
    let mut session = model.session(n_ctx).map_err(|e| e.to_string())?;
    // Prefill all but the last prompt token in ubatches with a progress
    // bar; the last goes through generate.
    let (head, last) = prompt.split_at(prompt.len() - 1);
    if !head.is_empty() {
        let bar = ProgressBar::new(head.len() as u64).with_style(
            ProgressStyle::with_template("prompt {bar:40} {pos}/{len} tokens {elapsed}")
                .map_err(|e| e.to_string())?,
        );
        for chunk in head.chunks(UBATCH) {
            session
                .eval(chunk, Logits::Last)
                .map_err(|e| e.to_string())?;
            bar.inc(chunk.len() as u64);
        }
        bar.finish_and_clear();
    }
    let sampler = Sampler {
        temp: a.temp,
        seed: a.seed,
        top_k: 0,
        stop_at_eog: !a.ignore_eos,
    };
    let mut out = std::io::stdout().lock();
    let mut pending: Vec<u8> = Vec::new();
    let start = std::time::Instant::now();
    let generated = session
        .generate(last, a.n, &sampler, |t| {
            if model.is_eog(t) {
                return true;
            }
            pending.extend_from_slice(&tok.piece(t));
            let _ = out.write_all(&take_complete_utf8(&mut pending));
            let _ = out.flush();
            true
        })
        .map_err(|e| e.to_string())?;
    if !pending.is_empty() {
        let _ = out.write_all(String::from_utf8_lossy(&pending).as_bytes());
    }
    let _ = writeln!(out);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{} prompt tokens, {} generated in {:.2} s ({:.1} tokens/s) on {}",
        prompt.len(),
        generated.len(),
        secs,
        generated.len() as f64 / secs.max(1e-9),
        model.placement().device
    );
    Ok(())
}

/// Removes and returns the longest prefix of `buf` that is whole UTF-8
/// (invalid bytes become U+FFFD); an incomplete character at the end stays
/// for the next piece.
fn take_complete_utf8(buf: &mut Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        match std::str::from_utf8(buf) {
            Ok(_) => {
                out.append(buf);
                return out;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                out.extend_from_slice(&buf[..valid]);
                match e.error_len() {
                    Some(bad) => {
                        out.extend_from_slice("\u{FFFD}".as_bytes());
                        buf.drain(..valid + bad);
                    }
                    None => {
                        buf.drain(..valid);
                        return out;
                    }
                }
            }
        }
    }
}

fn tokenize(a: &TokenizeArgs) -> Result<(), String> {
    let tok = backplane_llm::load_tokenizer(&a.model).map_err(|e| e.to_string())?;
    let ids = tok
        .encode(&a.text, !a.no_bos, a.parse_special)
        .map_err(|e| format!("tokenizing: {e}"))?;
    if a.json {
        println!("{}", serde_json::json!({ "tokens": ids }));
    } else {
        for id in ids {
            println!(
                "{id:>6} -> '{}'",
                String::from_utf8_lossy(&tok.piece(id)).escape_debug()
            );
        }
    }
    Ok(())
}

fn logits(a: &LogitsArgs) -> Result<(), String> {
    let model = load(&a.model)?;
    let n_ctx = model.n_ctx().max(a.tokens.len());
    let mut session = model.session(n_ctx).map_err(|e| e.to_string())?;
    let which = if a.all { Logits::All } else { Logits::Last };
    let logits = session.eval(&a.tokens, which).map_err(|e| e.to_string())?;
    let n_vocab = model.n_vocab();
    let rows: Vec<&[f32]> = logits.chunks(n_vocab).collect();
    let json = serde_json::json!({
        "n_vocab": n_vocab,
        "tokens": a.tokens,
        "logits": rows,
    });
    let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
    std::fs::write(&a.json, text).map_err(|e| format!("{}: {e}", a.json.display()))?;
    eprintln!(
        "wrote {} row(s) of {n_vocab} logits to {}",
        rows.len(),
        a.json.display()
    );
    Ok(())
}

fn explain(a: &ExplainModelArgs) -> Result<(), String> {
    let model = load(&a.model)?;
    let mut session = model.session(a.model.ctx_size).map_err(|e| e.to_string())?;
    let out = if a.dot {
        session.dot(a.tokens)
    } else {
        session.explain(a.tokens).map(|e| e.to_string())
    };
    print!("{}", out.map_err(|e| e.to_string())?);
    Ok(())
}

fn bench(a: &BenchArgs) -> Result<(), String> {
    let model = load(&a.model)?;
    let spinner = ProgressBar::new_spinner().with_message(format!(
        "pp{} / tg{} x {} on {}",
        a.pp,
        a.tg,
        a.repetitions,
        model.placement().device
    ));
    spinner.enable_steady_tick(Duration::from_millis(200));
    let r = backplane_llm::bench(&model, a.pp, a.tg, a.repetitions);
    spinner.finish_and_clear();
    let r = r.map_err(|e| e.to_string())?;
    let device = model.placement().device.clone();
    if a.json {
        let json = serde_json::json!({
            "model": model.name(),
            "device": device,
            "gpu_layers": model.placement().offloaded_layers(),
            "pp_tokens": r.pp_tokens,
            "pp_tok_s": r.pp_tok_s,
            "tg_tokens": r.tg_tokens,
            "tg_tok_s": r.tg_tok_s,
            "host_share": r.host_share,
            "pp_host_share": r.pp_host_share,
            "tg_host_us": {
                "plan": r.tg_host_us.plan,
                "upload": r.tg_host_us.upload,
                "download": r.tg_host_us.download,
                "other": r.tg_host_us.other,
                "other_in_scheduler": r.tg_host_us.scheduler,
                "copies": r.tg_host_us.copies,
            },
            "repetitions": r.repetitions,
        });
        println!("{json}");
    } else {
        println!("| model | device | ngl | test | t/s | host share |");
        println!("| --- | --- | ---: | ---: | ---: | ---: |");
        let ngl = model.placement().offloaded_layers();
        if r.pp_tokens > 0 {
            println!(
                "| {} | {device} | {ngl} | pp{} | {:.2} | {:.1}% |",
                model.name(),
                r.pp_tokens,
                r.pp_tok_s,
                r.pp_host_share * 100.0
            );
        }
        if r.tg_tokens > 0 {
            println!(
                "| {} | {device} | {ngl} | tg{} | {:.2} | {:.1}% |",
                model.name(),
                r.tg_tokens,
                r.tg_tok_s,
                r.host_share * 100.0
            );
            eprintln!(
                "per decoded token: planning {:.1} us, input upload {:.1} us, logits download {:.1} us, other host work {:.1} us ({:.1} of it inside the scheduler)",
                r.tg_host_us.plan,
                r.tg_host_us.upload,
                r.tg_host_us.download,
                r.tg_host_us.other,
                r.tg_host_us.scheduler
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::take_complete_utf8;

    #[test]
    fn utf8_split_across_pieces_is_held_until_whole() {
        let euro = "€".as_bytes(); // 3 bytes
        let mut buf = vec![b'a', euro[0]];
        assert_eq!(take_complete_utf8(&mut buf), b"a");
        assert_eq!(buf, vec![euro[0]]);
        buf.extend_from_slice(&euro[1..]);
        buf.push(b'b');
        assert_eq!(take_complete_utf8(&mut buf), "€b".as_bytes());
        assert!(buf.is_empty());
    }

    #[test]
    fn invalid_utf8_becomes_a_replacement_character() {
        let mut buf = vec![b'x', 0xFF, b'y'];
        assert_eq!(take_complete_utf8(&mut buf), "x\u{FFFD}y".as_bytes());
    }
}
