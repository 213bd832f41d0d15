//! `backplane serve`: exposes this machine's devices to remote clients
//! (the `remote` plugin) over gRPC.
//!
//! `--listen ADDR` serves TCP with TLS (the given `--cert`/`--key`, or a
//! generated self-signed certificate written to `--cert-out` for clients
//! to trust; its SHA-256 is printed) and needs a token (`--token` or
//! `BACKPLANE_REMOTE_TOKEN`) or client certificates (`--client-ca`).
//! `--insecure` drops TLS and is refused off loopback. `--unix PATH`
//! serves a Unix socket created with mode 0600. `--plugin FILE` serves
//! only those plugin files (used for isolation); otherwise every plugin
//! the registry finds, plus the built-in CPU backend.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use backplane::registry::{Registry, RegistryOptions, SearchPath};
use backplane_remote::auth::{Identity, TOKEN_ENV};
use backplane_remote::{Limits, Listen, ServeOptions, Tls};

/// The arguments of `backplane serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Serve TCP on this address (e.g. 127.0.0.1:50052; port 0 picks one).
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "unix",
        required_unless_present = "unix"
    )]
    listen: Option<SocketAddr>,
    /// Serve a Unix socket at this path (mode 0600).
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// Plain TCP without TLS (loopback addresses only).
    #[arg(long)]
    insecure: bool,
    /// The shared token clients must send (default: $BACKPLANE_REMOTE_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// TLS certificate chain (PEM); with --key.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Write the generated self-signed certificate here (for clients'
    /// BACKPLANE_REMOTE_CA).
    #[arg(long, value_name = "PATH")]
    cert_out: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM).
    #[arg(long, value_name = "PEM")]
    client_ca: Option<PathBuf>,
    /// Serve only this plugin file (repeatable); no built-in CPU backend.
    #[arg(long = "plugin", value_name = "FILE")]
    plugins: Vec<PathBuf>,
    /// Search this directory first (repeatable).
    #[arg(long = "plugin-dir", value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Bytes one client session may hold allocated.
    #[arg(long, default_value_t = Limits::default().max_session_bytes)]
    max_session_bytes: u64,
    /// Largest tensor data chunk in bytes.
    #[arg(long, default_value_t = Limits::default().max_chunk_bytes)]
    max_chunk_bytes: usize,
    /// Most tensors in one graph.
    #[arg(long, default_value_t = Limits::default().max_graph_nodes)]
    max_graph_nodes: usize,
    /// Exit when standard input closes (a supervising parent died).
    #[arg(long)]
    exit_on_stdin_eof: bool,
    /// Index the GGUF files in this directory (or this file; repeatable)
    /// so clients' weight uploads are filled from the server's own copy
    /// when the contents match (default: $BACKPLANE_SERVE_MODELS).
    #[arg(long = "models", value_name = "DIR")]
    models: Vec<PathBuf>,
}

/// Runs the server until it fails (or stdin closes with --exit-on-stdin-eof).
pub fn run(args: Args) -> Result<(), String> {
    let registry = load_registry(&args)?;
    let listen = match (&args.listen, &args.unix) {
        (Some(a), _) => Listen::Tcp(*a),
        (None, Some(p)) => Listen::Unix(p.clone()),
        (None, None) => return Err("give --listen ADDR or --unix PATH".into()),
    };
    let tls = if args.insecure || args.unix.is_some() {
        Tls::Insecure
    } else {
        let identity = match (&args.cert, &args.key) {
            (Some(c), Some(k)) => Identity {
                cert_pem: read(c)?,
                key_pem: read(k)?,
            },
            _ => {
                let id = Identity::self_signed(&[])?;
                if let Some(out) = &args.cert_out {
                    std::fs::write(out, &id.cert_pem)
                        .map_err(|e| format!("writing {}: {e}", out.display()))?;
                }
                id
            }
        };
        let client_ca = args.client_ca.as_ref().map(read).transpose()?;
        Tls::Identity {
            identity,
            client_ca,
        }
    };
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty());
    let limits = Limits {
        max_session_bytes: args.max_session_bytes,
        max_chunk_bytes: args.max_chunk_bytes.clamp(1, 4 << 20),
        max_graph_nodes: args.max_graph_nodes,
        ..Limits::default()
    };
    let opts = ServeOptions {
        listen,
        tls,
        token,
        limits,
    };
    let server = if args.models.is_empty() {
        backplane_remote::start(registry, opts)?
    } else {
        let store = backplane_remote::index_models(&args.models)?;
        backplane_remote::start_with_store(registry, opts, store)?
    };
    let tls_note = server
        .fingerprint
        .as_ref()
        .map(|f| format!(" tls-cert-sha256 {f}"))
        .unwrap_or_default();
    println!(
        "backplane serve: {} devices on {}{tls_note}",
        server.devices, server.address
    );
    let _ = std::io::stdout().flush();
    if args.exit_on_stdin_eof {
        std::thread::spawn(|| {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            std::process::exit(0);
        });
    }
    server.wait()
}

fn read(p: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))
}

/// The registry to serve: the named plugin files alone, or everything.
fn load_registry(args: &Args) -> Result<Registry, String> {
    if args.plugins.is_empty() {
        return Ok(Registry::load(&RegistryOptions {
            search: SearchPath {
                host_dirs: args.plugin_dirs.clone(),
                ..SearchPath::default()
            },
            builtin: Some(backplane::builtin_cpu()),
        }));
    }
    // The registry searches directories: link the files into a private
    // one, emptied first (a dead process of the same pid may have left
    // links to other plugins there).
    let dir = std::env::temp_dir().join(format!("backplane-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for file in &args.plugins {
        let name = file
            .file_name()
            .ok_or_else(|| format!("{} is not a file", file.display()))?;
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        let target = std::fs::canonicalize(file).map_err(|e| format!("{}: {e}", file.display()))?;
        std::os::unix::fs::symlink(&target, &link)
            .map_err(|e| format!("linking {}: {e}", file.display()))?;
    }
    let registry = Registry::load(&RegistryOptions {
        search: SearchPath::only([dir.clone()]),
        builtin: None,
    });
    if let Some(r) = registry.refused().first() {
        return Err(format!("plugin {} refused: {}", r.path.display(), r.reason));
    }
    Ok(registry)
}
