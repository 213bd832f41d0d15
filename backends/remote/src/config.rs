//! The plugin's configuration from the environment.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let list = var("BACKPLANE_REMOTE").unwrap_or_default();
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
        let isolate = var("BACKPLANE_REMOTE_ISOLATE")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| PathBuf::from(s.trim()))
            .collect();
        let mut options = ClientOptions {
            token: var("BACKPLANE_REMOTE_TOKEN"),
            ca_file: var("BACKPLANE_REMOTE_CA").map(PathBuf::from),
            insecure: var("BACKPLANE_REMOTE_INSECURE").is_some_and(|v| v == "1" || v == "true"),
            ..ClientOptions::default()
        };
        match (var("BACKPLANE_REMOTE_CERT"), var("BACKPLANE_REMOTE_KEY")) {
            (Some(cert), Some(key)) => {
                options.client_identity = Some((PathBuf::from(cert), PathBuf::from(key)))
            }
            (None, None) => {}
            (Some(_), None) => problems
                .push("BACKPLANE_REMOTE_CERT is set but BACKPLANE_REMOTE_KEY is not: no client certificate sent".into()),
            (None, Some(_)) => problems
                .push("BACKPLANE_REMOTE_KEY is set but BACKPLANE_REMOTE_CERT is not: no client certificate sent".into()),
        }
        if let Some(ms) = var("BACKPLANE_REMOTE_TIMEOUT_MS") {
            match ms.parse::<u64>() {
                Ok(ms) if ms > 0 => options.call_timeout = Duration::from_millis(ms),
                _ => problems.push(format!(
                    "BACKPLANE_REMOTE_TIMEOUT_MS={ms} is not a positive number"
                )),
            }
        }
        Config {
            targets,
            isolate,
            options,
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
