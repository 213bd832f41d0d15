//! The `backplane` command line.
//!
//! `backplane devices [--json] [--options] [--plugin-dir DIR]...` lists
//! every loaded backend and device (with `--options`, each backend's
//! options), then every plugin file that was refused and why.
//! `backplane explain` routes an example transformer block. The model
//! commands (`run`, `tokenize`, `logits`, `bench`) live in [`model`], and
//! `quantize` in [`quantize`].
//! `BACKPLANE_LOG=debug` (or warn, info, trace) sets what is logged to stderr.

use std::path::PathBuf;

use backplane::registry::{BuiltinStatus, Registry, RegistryOptions, SearchPath};
use clap::{Parser, Subcommand};

mod model;
mod options;
mod quantize;
mod serve;

#[derive(Parser)]
#[command(
    name = "backplane",
    version,
    about = "Tensor graphs on every backend a machine has"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List backends, devices and refused plugin files.
    Devices {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Search this directory first (repeatable).
        #[arg(long = "plugin-dir", value_name = "DIR")]
        plugin_dirs: Vec<PathBuf>,
        /// Do not add the built-in CPU backend.
        #[arg(long)]
        no_builtin: bool,
        /// Also list each backend's options (type, default, meaning).
        #[arg(long)]
        options: bool,
    },
    /// Show how the scheduler routes an example transformer block over this
    /// machine's devices, and why better backends refused any node.
    Explain {
        /// Print the schedule as Graphviz DOT instead.
        #[arg(long)]
        dot: bool,
        /// Search this directory first (repeatable).
        #[arg(long = "plugin-dir", value_name = "DIR")]
        plugin_dirs: Vec<PathBuf>,
    },
    #[command(flatten)]
    Model(model::Command),
    /// Quantize a GGUF model (default type Q8_0).
    Quantize(quantize::Args),
    /// Serve this machine's devices to remote clients (gRPC).
    Serve(serve::Args),
}

fn main() {
    log::install();
    ensure_runtime_dir();
    let cli = Cli::parse();
    match cli.command {
        Command::Devices {
            json,
            plugin_dirs,
            no_builtin,
            options: with_options,
        } => {
            let options = RegistryOptions {
                search: SearchPath {
                    host_dirs: plugin_dirs,
                    ..SearchPath::default()
                },
                builtin: (!no_builtin).then(backplane::builtin_cpu),
            };
            let registry = Registry::load(&options);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&devices_json(&registry, with_options))
                        .expect("serializing JSON")
                );
            } else {
                print!("{}", devices_text(&registry, with_options));
            }
        }
        Command::Explain { dot, plugin_dirs } => {
            let options = RegistryOptions {
                search: SearchPath {
                    host_dirs: plugin_dirs,
                    ..SearchPath::default()
                },
                builtin: Some(backplane::builtin_cpu()),
            };
            let registry = Registry::load(&options);
            let order = backplane::sched::auto_order(registry.devices().cloned().collect());
            let out = if dot {
                backplane::examples::explain_example_dot(&order.devices)
            } else {
                backplane::examples::explain_example(&order.devices).map(|text| {
                    let mut text = text;
                    for l in &order.left_out {
                        text.push_str(&format!("left out: {}: {}\n", l.device, l.reason));
                    }
                    if let Some(note) = builtin_note(&registry) {
                        text.push_str(&format!("{note}\n"));
                    }
                    text
                })
            };
            match out {
                Ok(text) => print!("{text}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(1);
                }
            }
        }
        Command::Model(cmd) => exit_on_error(model::run(cmd)),
        Command::Quantize(args) => exit_on_error(quantize::run(args)),
        Command::Serve(args) => exit_on_error(serve::run(args)),
    }
}

/// Vulkan's loader and Mesa's drivers print an error on every start when
/// `XDG_RUNTIME_DIR` is unset (containers, CI, ssh without a login
/// session). Point it at a private directory of our own in that case.
fn ensure_runtime_dir() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir()) {
        return;
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
    let dir = std::env::temp_dir().join(format!("backplane-runtime-{user}"));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    }
    // SAFETY: called at the start of main, before any other thread exists.
    unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
}

/// Prints `error: ...` and exits with status 1 when a command failed.
fn exit_on_error(result: Result<(), String>) {
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn devices_json(registry: &Registry, with_options: bool) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = registry
        .backends()
        .iter()
        .flat_map(|b| {
            b.devices.iter().map(move |d| {
                let mem = d.memory();
                let caps = d.caps();
                serde_json::json!({
                    "backend": b.name,
                    "device": d.name(),
                    "description": d.description(),
                    "type": d.device_type().name(),
                    "memory_total": mem.total_bytes,
                    "memory_free": mem.free_bytes,
                    "caps": { "async": caps.async_ops, "host_buffer": caps.host_buffer, "events": caps.events },
                    "weight_layouts": d.extra_buffer_types().iter().map(|t| t.name()).collect::<Vec<_>>(),
                    "score": b.score,
                    "path": b.source.path().map(|p| p.display().to_string()),
                })
            })
        })
        .collect();
    // Every loaded backend, also those with no (usable) device, with why.
    let backends: Vec<serde_json::Value> = registry
        .backends()
        .iter()
        .map(|b| {
            let mut j = serde_json::json!({
                "backend": b.name,
                "score": b.score,
                "path": b.source.path().map(|p| p.display().to_string()),
                "devices": b.devices.len(),
                "no_device_reason": b.no_device_reason,
                "refused_devices": b.refused_devices,
            });
            if with_options {
                j["options"] = options::json(b);
            }
            j
        })
        .collect();
    let refused: Vec<serde_json::Value> = registry
        .refused()
        .iter()
        .map(|r| serde_json::json!({ "path": r.path.display().to_string(), "reason": r.reason }))
        .collect();
    serde_json::json!({
        "devices": devices,
        "backends": backends,
        "refused": refused,
        "builtin": registry.builtin().to_string(),
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn devices_text(registry: &Registry, with_options: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for b in registry.backends() {
        let from = b
            .source
            .path()
            .map_or("built-in".to_string(), |p| p.display().to_string());
        let _ = writeln!(out, "backend {}  score {}  {}", b.name, b.score, from);
        if with_options {
            options::text(b, &mut out);
        }
        if b.devices.is_empty() {
            let why = b
                .no_device_reason
                .as_deref()
                .unwrap_or(if b.refused_devices.is_empty() {
                    "the plugin gave no reason"
                } else {
                    "every device it offered was refused"
                });
            let _ = writeln!(out, "  no devices: {why}");
        }
        for why in &b.refused_devices {
            let _ = writeln!(out, "  {why}");
        }
        for d in &b.devices {
            let mem = d.memory();
            let caps = d.caps();
            let caps: Vec<&str> = [
                (caps.async_ops, "async"),
                (caps.host_buffer, "host_buffer"),
                (caps.events, "events"),
            ]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
            let _ = writeln!(
                out,
                "  device {} [{}]  {}",
                d.name(),
                d.device_type(),
                d.description()
            );
            let _ = writeln!(
                out,
                "    memory {} free / {} total  caps: {}",
                gib(mem.free_bytes),
                gib(mem.total_bytes),
                if caps.is_empty() {
                    "-".to_string()
                } else {
                    caps.join(", ")
                }
            );
            let extra: Vec<String> = d.extra_buffer_types().iter().map(|b| b.name()).collect();
            if !extra.is_empty() {
                let _ = writeln!(out, "    weight layouts: {}", extra.join(", "));
            }
        }
    }
    if !registry.refused().is_empty() {
        let _ = writeln!(out, "refused plugin files:");
        for r in registry.refused() {
            let _ = writeln!(out, "  {}: {}", r.path.display(), r.reason);
        }
    }
    if let Some(note) = builtin_note(registry) {
        let _ = writeln!(out, "{note}");
    }
    out
}

/// A line saying what became of the built-in backend, unless it was simply
/// added (a plain `backend cpu ... built-in` line shows that).
fn builtin_note(registry: &Registry) -> Option<String> {
    match registry.builtin() {
        BuiltinStatus::Added { .. } => None,
        other => Some(format!("note: {other}")),
    }
}

/// A minimal `tracing` subscriber: events at or above `BACKPLANE_LOG`
/// (default `warn`) go to stderr as `level: message key=value`.
mod log {
    use std::fmt::Write;

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    struct Stderr {
        max: Level,
    }

    struct Fields(String);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                let _ = write!(self.0, "{value:?}");
            } else {
                let _ = write!(self.0, " {}={value:?}", field.name());
            }
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "message" {
                self.0.push_str(value);
            } else {
                let _ = write!(self.0, " {}={value}", field.name());
            }
        }
    }

    impl Subscriber for Stderr {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            *metadata.level() <= self.max
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut f = Fields(String::new());
            event.record(&mut f);
            eprintln!(
                "{}: {}",
                event.metadata().level().as_str().to_lowercase(),
                f.0
            );
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    pub fn install() {
        let max = match std::env::var("BACKPLANE_LOG")
            .unwrap_or_default()
            .to_lowercase()
            .as_str()
        {
            "error" => Level::ERROR,
            "info" => Level::INFO,
            "debug" => Level::DEBUG,
            "trace" => Level::TRACE,
            _ => Level::WARN,
        };
        let _ = tracing::subscriber::set_global_default(Stderr { max });
    }
}
