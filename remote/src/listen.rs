//! Starting a server: where it listens (TCP with TLS, loopback TCP without,
//! or a Unix socket with mode 0600), with which credentials, on its own
//! runtime thread.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use backplane::registry::Registry;
use std::time::Duration;

use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Server, ServerTlsConfig};

use crate::auth::{Identity, TokenCheck, insecure_allowed};
use crate::limits::Limits;
use crate::pb::remote_server::RemoteServer;
use crate::server::RemoteService;
use crate::store::{MODELS_ENV, ModelStore, StoreSummary};

/// Where to listen.
#[derive(Clone, Debug)]
pub enum Listen {
    /// TCP on this address (port 0 picks a free port).
    Tcp(SocketAddr),
    /// A Unix socket at this path (created with mode 0600; an old socket
    /// file there is replaced).
    Unix(PathBuf),
}

/// Transport security of a TCP listener.
#[derive(Clone, Debug)]
pub enum Tls {
    /// Plain TCP, allowed on loopback only.
    Insecure,
    /// TLS with this identity; `client_ca` additionally requires client
    /// certificates signed by it.
    Identity {
        /// The server's certificate and key.
        identity: Identity,
        /// PEM of the CA that client certificates must chain to.
        client_ca: Option<String>,
    },
}

/// Everything `serve` needs besides the registry.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen.
    pub listen: Listen,
    /// TLS for TCP (ignored for Unix sockets).
    pub tls: Tls,
    /// The shared token clients must send; required on TCP unless client
    /// certificates are required.
    pub token: Option<String>,
    /// Bounds on what clients may ask.
    pub limits: Limits,
}

/// A server running on its own thread; stops when dropped.
pub struct RunningServer {
    /// `host:port` or the socket path, as a client names it.
    pub address: String,
    /// Fingerprint of the TLS certificate, when TLS is on.
    pub fingerprint: Option<String>,
    /// Number of devices served.
    pub devices: usize,
    /// What the model store indexed, when there is one.
    pub stored: Option<StoreSummary>,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl RunningServer {
    /// Blocks until the server stops (an error, or never).
    pub fn wait(mut self) -> Result<(), String> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| "server thread panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts serving `registry`'s devices as `opts` say; returns once the
/// socket is bound. When `BACKPLANE_SERVE_MODELS` names directories, their
/// GGUF files are indexed first ([`index_models`]).
pub fn start(registry: Registry, opts: ServeOptions) -> Result<RunningServer, String> {
    let dirs: Vec<PathBuf> = std::env::var_os(MODELS_ENV)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    start_with_store(registry, opts, index_models(&dirs)?)
}

/// Indexes the GGUF files of `dirs` (directories or files) into a
/// [`ModelStore`] and prints a line saying what was found (and one per
/// file skipped); `None` when `dirs` is empty.
pub fn index_models(dirs: &[PathBuf]) -> Result<Option<(ModelStore, StoreSummary)>, String> {
    if dirs.is_empty() {
        return Ok(None);
    }
    let (store, summary) = ModelStore::index(dirs)?;
    eprintln!(
        "backplane serve: model store: {} tensors ({} bytes) of {} GGUF files indexed in {:.1} s",
        summary.tensors,
        summary.bytes,
        summary.files,
        store.indexing_time().as_secs_f64()
    );
    for s in &summary.skipped {
        eprintln!("backplane serve: model store: skipped {s}");
    }
    Ok(Some((store, summary)))
}

/// [`start`] with a model store already indexed (or none).
pub fn start_with_store(
    registry: Registry,
    opts: ServeOptions,
    store: Option<(ModelStore, StoreSummary)>,
) -> Result<RunningServer, String> {
    let needs_token = matches!(opts.listen, Listen::Tcp(_))
        && !matches!(
            &opts.tls,
            Tls::Identity {
                client_ca: Some(_),
                ..
            }
        );
    if needs_token && opts.token.as_deref().is_none_or(str::is_empty) {
        return Err(
            "serving over TCP needs credentials: a token (--token or BACKPLANE_REMOTE_TOKEN) or client certificates (--client-ca)".into(),
        );
    }
    if let (Listen::Tcp(addr), Tls::Insecure) = (&opts.listen, &opts.tls) {
        insecure_allowed(addr)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("backplane-serve")
        .build()
        .map_err(|e| format!("starting the server runtime: {e}"))?;
    let limits = opts.limits.clone();
    let (store, stored) = match store {
        Some((s, summary)) => (Some(Arc::new(s)), Some(summary)),
        None => (None, None),
    };
    let service = RemoteService::with_store(Arc::new(registry), limits.clone(), store);
    let devices = service.device_count();
    let token = match opts.listen {
        Listen::Unix(_) => None,
        Listen::Tcp(_) => opts.token.clone(),
    };
    let svc = InterceptedService::new(
        RemoteServer::new(service)
            .max_decoding_message_size(limits.max_message_bytes)
            .max_encoding_message_size(limits.max_message_bytes),
        TokenCheck::new(token.as_deref()),
    );
    let mut builder = Server::builder()
        .concurrency_limit_per_connection(32)
        .max_frame_size(Some(1 << 20));
    let mut fingerprint = None;
    if let (
        Listen::Tcp(_),
        Tls::Identity {
            identity,
            client_ca,
        },
    ) = (&opts.listen, &opts.tls)
    {
        let mut tls = ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(
            &identity.cert_pem,
            &identity.key_pem,
        ));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder
            .tls_config(tls)
            .map_err(|e| format!("TLS configuration: {e}"))?;
        fingerprint = Some(identity.fingerprint());
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut grace_rx = stop_rx.clone();
    let (address, serve): (String, _) = match &opts.listen {
        Listen::Tcp(addr) => {
            let listener = rt
                .block_on(tokio::net::TcpListener::bind(addr))
                .map_err(|e| format!("binding {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| format!("{addr}: {e}"))?;
            // TCP_NODELAY on every accepted connection: without it a
            // reply written in several small frames waits for the client's
            // delayed ACK (about 40 ms per call on Linux loopback).
            let incoming = tonic::transport::server::TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .with_keepalive(Some(Duration::from_secs(30)));
            let fut: std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<(), String>> + Send>,
            > = Box::pin(async move {
                builder
                    .serve_with_incoming_shutdown(svc, incoming, stopped(stop_rx))
                    .await
                    .map_err(|e| format!("server on {local}: {e}"))
            });
            (local.to_string(), fut)
        }
        Listen::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let listener = {
                let _guard = rt.enter();
                tokio::net::UnixListener::bind(path)
                    .map_err(|e| format!("binding {}: {e}", path.display()))?
            };
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("chmod 0600 {}: {e}", path.display()))?;
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let shown = path.display().to_string();
            let fut: std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<(), String>> + Send>,
            > = Box::pin(async move {
                builder
                    .serve_with_incoming_shutdown(svc, incoming, stopped(stop_rx))
                    .await
                    .map_err(|e| format!("server on {shown}: {e}"))
            });
            (format!("unix:{}", path.display()), fut)
        }
    };
    let thread = std::thread::Builder::new()
        .name("backplane-serve".into())
        .spawn(move || {
            // Stop: new connections end at once; open ones get a short grace.
            let r = rt.block_on(async move {
                tokio::select! {
                    r = serve => r,
                    _ = async {
                        let _ = grace_rx.changed().await;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    } => Ok(()),
                }
            });
            rt.shutdown_timeout(Duration::from_secs(1));
            r
        })
        .map_err(|e| format!("starting the server thread: {e}"))?;
    Ok(RunningServer {
        address,
        fingerprint,
        devices,
        stored,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.changed().await;
}
