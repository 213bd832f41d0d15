//! The plugin's configuration from the environment: the options of
//! [`REMOTE_OPTIONS`] (all load-time: they say which servers the plugin
//! connects to when it loads) through their variables, and the
//! credentials, which are environment-only and never listed as options
//! (`BACKPLANE_REMOTE_TOKEN`, `BACKPLANE_REMOTE_CA`,
//! `BACKPLANE_REMOTE_CERT`, `BACKPLANE_REMOTE_KEY`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backplane_abi::plugin::PluginError;
use backplane_abi::support::options::{OptionKind, OptionSpec, Options, refuse_settled};
use backplane_remote::client::ConnectHook;
use backplane_remote::{Client, ClientOptions, Target};

use crate::isolate::Isolated;

/// One server to use: a client, and the child process when isolated.
pub struct Server {
    /// The connection.
    pub client: Arc<Client>,
    /// The supervised child server, for isolated plugins.
    pub isolated: Option<Arc<Isolated>>,
}

/// The remote backend's options (load-time; set through the environment).
pub const REMOTE_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "servers",
        kind: OptionKind::Text,
        default: "",
        meaning: "load-time: servers to use, comma-separated (host:port, unix:/path)",
        env: "BACKPLANE_REMOTE",
    },
    OptionSpec {
        name: "isolate",
        kind: OptionKind::Text,
        default: "",
        meaning: "load-time: plugin files to run in a supervised child server, comma-separated",
        env: "BACKPLANE_REMOTE_ISOLATE",
    },
    OptionSpec {
        name: "insecure",
        kind: OptionKind::Bool,
        default: "off",
        meaning: "load-time: plain TCP instead of TLS",
        env: "BACKPLANE_REMOTE_INSECURE",
    },
    OptionSpec {
        name: "timeout_ms",
        kind: OptionKind::Integer {
            min: 1,
            max: 86_400_000,
        },
        default: "",
        meaning: "load-time: longest a call to a server may take, in ms",
        env: "BACKPLANE_REMOTE_TIMEOUT_MS",
    },
];

/// Refuses stream params: every remote option is load-time; the error
/// names the key and the variable to set.
pub fn refuse_stream_params(params: &str) -> Result<(), PluginError> {
    let why = "load-time: it chooses the servers used at load";
    refuse_settled("remote", REMOTE_OPTIONS, params, |_| true, why)?;
    Ok(())
}

/// What the environment asks for.
pub struct Config {
    /// Servers named in `BACKPLANE_REMOTE`.
    pub targets: Vec<Target>,
    /// Plugin files to isolate.
    pub isolate: Vec<PathBuf>,
    /// Client options for every server.
    pub options: ClientOptions,
    /// Settings that could not be used, one line each.
    pub problems: Vec<String>,
}

impl Config {
    /// Reads `BACKPLANE_REMOTE*`.
    pub fn from_env() -> Config {
        Config::resolve(|k| std::env::var(k).ok())
    }

    /// Reads the `BACKPLANE_REMOTE*` variables through `env`.
    pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Config {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let options =
            Options::resolve("remote", REMOTE_OPTIONS, "", &env, &[]).unwrap_or_else(|e| {
                problems.push(e.to_string());
                Options::defaults("remote", REMOTE_OPTIONS)
            });
        let list = options.text("servers").unwrap_or_default();
        let list = list
            .trim()
            .strip_prefix("servers=")
            .unwrap_or(list.trim())
            .to_string();
        let targets = list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(Target::parse)
            .collect();
        let isolate = options
            .text("isolate")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| PathBuf::from(s.trim()))
            .collect();
        let mut client = ClientOptions {
            token: var("BACKPLANE_REMOTE_TOKEN"),
            ca_file: var("BACKPLANE_REMOTE_CA").map(PathBuf::from),
            insecure: options.bool("insecure"),
            ..ClientOptions::default()
        };
        match (var("BACKPLANE_REMOTE_CERT"), var("BACKPLANE_REMOTE_KEY")) {
            (Some(cert), Some(key)) => {
                client.client_identity = Some((PathBuf::from(cert), PathBuf::from(key)))
            }
            (None, None) => {}
            (Some(_), None) => problems
                .push("BACKPLANE_REMOTE_CERT is set but BACKPLANE_REMOTE_KEY is not: no client certificate sent".into()),
            (None, Some(_)) => problems
                .push("BACKPLANE_REMOTE_KEY is set but BACKPLANE_REMOTE_CERT is not: no client certificate sent".into()),
        }
        if let Some(ms) = options.integer("timeout_ms") {
            // Positive by the schema.
            client.call_timeout = Duration::from_millis(ms as u64);
        }
        Config {
            targets,
            isolate,
            options: client,
            problems,
        }
    }

    /// A client per server, then a supervised child per isolated plugin.
    pub fn servers(&self) -> Vec<Server> {
        let mut out: Vec<Server> = self
            .targets
            .iter()
            .map(|t| Server {
                client: Arc::new(Client::new(t.clone(), self.options.clone())),
                isolated: None,
            })
            .collect();
        for file in &self.isolate {
            let iso = Arc::new(Isolated::new(file.clone()));
            let mut opts = self.options.clone();
            let hook_iso = iso.clone();
            opts.before_connect = Some(ConnectHook(Arc::new(move |after_failure| {
                hook_iso.ensure_running(after_failure)
            })));
            out.push(Server {
                client: Arc::new(Client::new(Target::Unix(iso.socket().to_path_buf()), opts)),
                isolated: Some(iso),
            });
        }
        out
    }
}
