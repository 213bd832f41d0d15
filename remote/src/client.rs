//! The client the `remote` plugin uses: a blocking facade over the gRPC
//! calls with per-call deadlines, bounded upload/download chunks, a graph
//! cache by hash, and reconnection with backoff after a failure.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use backplane_abi::TensorDesc;
use tonic::Code;
use tonic::codegen::InterceptedService;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::auth::ClientHeaders;
use crate::codec::{encode_graph, graph_hash};
use crate::pb;
use crate::pb::buffer_op::Op;
use crate::pb::remote_client::RemoteClient;
use crate::queue::Pending;

mod questions;
mod transfer;

/// Where a server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `host:port` over TCP.
    Tcp(String),
    /// A Unix socket.
    Unix(PathBuf),
}

impl Target {
    /// `unix:/path` or `/path` is a socket; anything else `host:port`.
    pub fn parse(s: &str) -> Target {
        let s = s.trim();
        if let Some(p) = s.strip_prefix("unix:") {
            Target::Unix(PathBuf::from(p))
        } else if s.starts_with('/') {
            Target::Unix(PathBuf::from(s))
        } else {
            Target::Tcp(s.to_string())
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => f.write_str(a),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// How to reach and authenticate to a server.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The shared token, if the server wants one.
    pub token: Option<String>,
    /// PEM file of the certificate (or CA) to trust for TLS; `None` with
    /// `insecure` false uses TLS with... nothing trusted, so set one of them.
    pub ca_file: Option<PathBuf>,
    /// PEM files of a client certificate (chain) and its private key, for
    /// servers that require client certificates (`--client-ca`); both or
    /// neither.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Plain TCP (loopback servers started with `--insecure`).
    pub insecure: bool,
    /// Deadline of one call.
    pub call_timeout: Duration,
    /// Deadline of connecting.
    pub connect_timeout: Duration,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Called before each connection attempt (with true after a failure),
    /// e.g. to (re)start a supervised child server.
    pub before_connect: Option<ConnectHook>,
}

/// A hook run before connecting; its argument is true after a failure.
#[derive(Clone)]
pub struct ConnectHook(pub Arc<dyn Fn(bool) -> Result<(), String> + Send + Sync>);

impl std::fmt::Debug for ConnectHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectHook")
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            ca_file: None,
            client_identity: None,
            insecure: false,
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(3),
            max_backoff: Duration::from_secs(30),
            before_connect: None,
        }
    }
}

/// A failed remote call: which server, what was asked, what went wrong.
#[derive(Clone, Debug, thiserror::Error)]
#[error("remote server {server}: {what}: {message}")]
pub struct RemoteError {
    /// The server.
    pub server: String,
    /// The call (`"compute on device 0"`).
    pub what: String,
    /// The reason.
    pub message: String,
    /// The gRPC status code (`Unavailable` when the server is gone).
    pub code: i32,
}

impl RemoteError {
    /// True when the server could not be reached (down, killed, timed out).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            Code::from_i32(self.code),
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
        )
    }
    /// True when the server refused the request's values.
    pub fn is_bad_input(&self) -> bool {
        Code::from_i32(self.code) == Code::InvalidArgument
    }
    /// True when the server does not know the call (an older server).
    pub fn is_unimplemented(&self) -> bool {
        Code::from_i32(self.code) == Code::Unimplemented
    }
}

type Grpc = RemoteClient<InterceptedService<Channel, ClientHeaders>>;

struct Conn {
    grpc: Grpc,
    session: u64,
    hello: pb::OpenReply,
    graphs: HashSet<[u8; 32]>,
    pending: Pending,
    /// Places (buffer handle, tensor offset) whose upload the model store
    /// did not hold: activations copied in at every step, not weights;
    /// later uploads there skip the hash and the question.
    store_misses: HashSet<(u64, u64)>,
}

impl Conn {
    /// Sends the queued operations now (one `Apply`), if any.
    async fn flush(&mut self) -> Result<(), tonic::Status> {
        if !self.pending.is_empty() {
            let ops = self.pending.take();
            self.grpc.apply(pb::ApplyRequest { ops }).await?;
        }
        Ok(())
    }

    /// Makes room for an operation carrying `bytes` of data.
    async fn room_for(&mut self, bytes: usize) -> Result<(), tonic::Status> {
        if !self.pending.has_room(bytes) {
            self.flush().await?;
        }
        Ok(())
    }
}

struct Backoff {
    failures: u32,
    next_try: Option<Instant>,
}

/// A connection to one server (reopened after failures, with backoff).
pub struct Client {
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
    target: Target,
    opts: ClientOptions,
    conn: Mutex<Option<Conn>>,
    backoff: Mutex<Backoff>,
    /// True while a session is open (read without the connection lock).
    connected: AtomicBool,
    sent_bytes: AtomicU64,
    stored_bytes: AtomicU64,
}

/// Tensor bytes a client moved to its server so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Sent over the connection (uploads, queued or streamed).
    pub sent_bytes: u64,
    /// Filled by the server from its own files instead ([`Client::upload`]
    /// asks first for tensors of at least
    /// [`MIN_STORED_BYTES`](crate::store::MIN_STORED_BYTES) when the server
    /// has a model store).
    pub stored_bytes: u64,
}

/// A buffer handle on a server, valid within one session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBuffer {
    /// The server's handle.
    pub handle: u64,
    /// The session it belongs to.
    pub session: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A runtime without threads of its own: every call drives it from the
/// caller's thread (`block_on` under the connection lock). Plugins are
/// also opened inside the registry's probe child before `main`, where a
/// runtime starting worker threads never comes up.
fn new_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the remote client runtime: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Client {
    /// A client for `target`; connects on first use.
    pub fn new(target: Target, opts: ClientOptions) -> Client {
        Client {
            runtime: OnceLock::new(),
            target,
            opts,
            conn: Mutex::new(None),
            backoff: Mutex::new(Backoff {
                failures: 0,
                next_try: None,
            }),
            connected: AtomicBool::new(false),
            sent_bytes: AtomicU64::new(0),
            stored_bytes: AtomicU64::new(0),
        }
    }

    /// Tensor bytes sent, and filled by the server from its own files.
    pub fn transfer_stats(&self) -> TransferStats {
        TransferStats {
            sent_bytes: self.sent_bytes.load(Ordering::Relaxed),
            stored_bytes: self.stored_bytes.load(Ordering::Relaxed),
        }
    }

    /// The server as the user named it.
    pub fn target(&self) -> &Target {
        &self.target
    }

    fn err(&self, what: &str, status: tonic::Status) -> RemoteError {
        RemoteError {
            server: self.target.to_string(),
            what: what.to_string(),
            message: status.message().to_string(),
            code: status.code() as i32,
        }
    }

    async fn open(&self) -> Result<Conn, RemoteError> {
        let fail = |m: String| RemoteError {
            server: self.target.to_string(),
            what: "connect".into(),
            message: m,
            code: Code::Unavailable as i32,
        };
        let channel = match &self.target {
            Target::Tcp(addr) => {
                let scheme = if self.opts.insecure { "http" } else { "https" };
                let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
                    .map_err(|e| fail(format!("address {addr}: {e}")))?
                    .connect_timeout(self.opts.connect_timeout)
                    .timeout(self.opts.call_timeout);
                if !self.opts.insecure {
                    let mut tls = ClientTlsConfig::new().domain_name(
                        addr.rsplit_once(':')
                            .map_or(addr.as_str(), |(h, _)| h)
                            .trim_matches(['[', ']']),
                    );
                    if let Some(ca) = &self.opts.ca_file {
                        let pem = std::fs::read_to_string(ca)
                            .map_err(|e| fail(format!("reading {}: {e}", ca.display())))?;
                        tls = tls.ca_certificate(Certificate::from_pem(pem));
                    }
                    if let Some((cert, key)) = &self.opts.client_identity {
                        let read = |p: &PathBuf| {
                            std::fs::read_to_string(p)
                                .map_err(|e| fail(format!("reading {}: {e}", p.display())))
                        };
                        tls = tls.identity(tonic::transport::Identity::from_pem(
                            read(cert)?,
                            read(key)?,
                        ));
                    }
                    ep = ep.tls_config(tls).map_err(|e| fail(format!("TLS: {e}")))?;
                }
                ep.connect()
                    .await
                    .map_err(|e| fail(crate::error_chain(&e)))?
            }
            Target::Unix(path) => {
                let path = path.clone();
                Endpoint::from_static("http://localhost")
                    .connect_timeout(self.opts.connect_timeout)
                    .timeout(self.opts.call_timeout)
                    .connect_with_connector(tower::service_fn(move |_| {
                        let path = path.clone();
                        async move {
                            let s = tokio::net::UnixStream::connect(path).await?;
                            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                        }
                    }))
                    .await
                    .map_err(|e| fail(crate::error_chain(&e)))?
            }
        };
        let token = match &self.opts.token {
            Some(t) => Some(
                MetadataValue::try_from(format!("Bearer {t}"))
                    .map_err(|_| fail("the token has characters a header cannot carry".into()))?,
            ),
            None => None,
        };
        let mut headers = ClientHeaders {
            token,
            session: None,
        };
        let mut grpc = RemoteClient::with_interceptor(channel.clone(), headers.clone())
            .max_decoding_message_size(64 << 20);
        let hello = grpc
            .open(pb::OpenRequest {
                client: format!("backplane-remote pid {}", std::process::id()),
            })
            .await
            .map_err(|s| self.err("open", s))?
            .into_inner();
        headers.session = Some(hello.session);
        let grpc =
            RemoteClient::with_interceptor(channel, headers).max_decoding_message_size(64 << 20);
        Ok(Conn {
            grpc,
            session: hello.session,
            hello,
            graphs: HashSet::new(),
            pending: Pending::default(),
            store_misses: HashSet::new(),
        })
    }

    /// Runs `f` on the connection, connecting first when needed (no more
    /// often than the backoff allows); a failure that means the server is
    /// gone drops the connection so that the next use reconnects.
    fn with<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(&mut Conn) -> Result<T, tonic::Status>,
    ) -> Result<T, RemoteError> {
        let mut guard = lock(&self.conn);
        let runtime = match self.runtime.get_or_init(new_runtime) {
            Ok(rt) => rt,
            Err(m) => {
                return Err(RemoteError {
                    server: self.target.to_string(),
                    what: what.to_string(),
                    message: m.clone(),
                    code: Code::Internal as i32,
                });
            }
        };
        runtime.block_on(async {
            if guard.is_none() {
                {
                    let b = lock(&self.backoff);
                    if let Some(t) = b.next_try
                        && Instant::now() < t
                    {
                        return Err(RemoteError {
                            server: self.target.to_string(),
                            what: what.to_string(),
                            message: format!(
                                "unreachable after {} attempts; next try in {} ms",
                                b.failures,
                                (t - Instant::now()).as_millis()
                            ),
                            code: Code::Unavailable as i32,
                        });
                    }
                }
                if let Some(hook) = &self.opts.before_connect {
                    let after_failure = lock(&self.backoff).failures > 0;
                    if let Err(m) = (hook.0)(after_failure) {
                        self.note_failure();
                        return Err(RemoteError {
                            server: self.target.to_string(),
                            what: "start".into(),
                            message: m,
                            code: Code::Unavailable as i32,
                        });
                    }
                }
                match self.open().await {
                    Ok(c) => {
                        *guard = Some(c);
                        self.connected.store(true, Ordering::Relaxed);
                        *lock(&self.backoff) = Backoff {
                            failures: 0,
                            next_try: None,
                        };
                    }
                    Err(e) => {
                        self.note_failure();
                        return Err(e);
                    }
                }
            }
            let conn = guard
                .as_mut()
                .ok_or_else(|| self.err(what, tonic::Status::unavailable("no connection")))?;
            match f(conn).await {
                Ok(v) => Ok(v),
                Err(s) => {
                    let e = self.err(what, s);
                    // Unreachable, or the server lost our session (restart,
                    // eviction): reconnect on the next use. `Aborted` (our
                    // own stale-buffer check) keeps the connection.
                    if e.is_unreachable() || Code::from_i32(e.code) == Code::FailedPrecondition {
                        *guard = None;
                        self.connected.store(false, Ordering::Relaxed);
                        self.note_failure();
                    }
                    Err(e)
                }
            }
        })
    }

    fn note_failure(&self) {
        let mut b = lock(&self.backoff);
        b.failures += 1;
        let wait = Duration::from_millis(100u64 << b.failures.min(12)).min(self.opts.max_backoff);
        b.next_try = Some(Instant::now() + wait);
    }

    /// The server's devices and limits (opens the session).
    pub fn hello(&self) -> Result<(u64, pb::OpenReply), RemoteError> {
        self.with("open", async |c| Ok((c.session, c.hello.clone())))
    }

    /// True while a session is open; unlike [`Client::session`] it does
    /// not wait for a call in flight on another thread.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// The current session, if connected.
    pub fn session(&self) -> Option<u64> {
        lock(&self.conn).as_ref().map(|c| c.session)
    }

    fn check_session(&self, c: &Conn, b: &RemoteBuffer) -> Result<(), tonic::Status> {
        if c.session == b.session {
            Ok(())
        } else {
            Err(tonic::Status::aborted(format!(
                "buffer {} belonged to session {} which was lost (server restarted or unreachable); reload it",
                b.handle, b.session
            )))
        }
    }

    /// Allocates `size` bytes on server device `device`.
    pub fn alloc(&self, device: u32, size: u64) -> Result<RemoteBuffer, RemoteError> {
        self.alloc_in(device, "", size)
    }

    /// Allocates `size` bytes on server device `device` in its buffer type
    /// called `buffer_type` (one of its extra buffer types,
    /// [`pb::DeviceInfo::extra_buffer_types`]; "" for its own).
    pub fn alloc_in(
        &self,
        device: u32,
        buffer_type: &str,
        size: u64,
    ) -> Result<RemoteBuffer, RemoteError> {
        let what = if buffer_type.is_empty() {
            format!("alloc of {size} bytes on device {device}")
        } else {
            format!("alloc of {size} bytes in {buffer_type} on device {device}")
        };
        self.with(&what, async |c| {
            let before = c.pending.take();
            let r = c
                .grpc
                .alloc(pb::AllocRequest {
                    device,
                    size,
                    before,
                    buffer_type: buffer_type.to_string(),
                })
                .await?
                .into_inner();
            Ok(RemoteBuffer {
                handle: r.handle,
                session: c.session,
                size: r.size,
            })
        })
    }

    /// Frees a buffer (nothing to do when its session is gone).
    pub fn free(&self, b: &RemoteBuffer) -> Result<(), RemoteError> {
        if self.session() != Some(b.session) {
            return Ok(());
        }
        self.with("free", async |c| {
            c.room_for(0).await?;
            c.pending
                .push(Op::Free(pb::BufferRequest { handle: b.handle }), 0);
            Ok(())
        })
    }

    /// Runs `graph` (buffers named by handle, all of session `session`
    /// when any) on server device `device`; the graph crosses the network
    /// only the first time (then by hash).
    pub fn compute(
        &self,
        device: u32,
        graph: &[TensorDesc],
        session: Option<u64>,
    ) -> Result<(), RemoteError> {
        let packed = encode_graph(graph);
        let hash = graph_hash(&packed);
        self.with(&format!("compute of a {}-tensor graph on device {device}", graph.len()), async |c| {
            if let Some(s) = session
                && s != c.session
            {
                return Err(tonic::Status::aborted(format!(
                    "the graph's buffers belonged to session {s}, lost with the connection (server restarted or unreachable); reload them"
                )));
            }
            // The queued operations and, the first time, the graph itself
            // travel with the call; a server that lost the graph (evicted
            // from its cache) answers NOT_FOUND and gets it again.
            let before = c.pending.take();
            let mut request = pb::ComputeRequest {
                device,
                hash: hash.to_vec(),
                before,
                graph: if c.graphs.contains(&hash) { Vec::new() } else { packed.clone() },
            };
            for attempt in 0..2 {
                match c.grpc.compute(request.clone()).await {
                    Ok(_) => {
                        c.graphs.insert(hash);
                        return Ok(());
                    }
                    Err(s) if s.code() == Code::NotFound && attempt == 0 => {
                        c.graphs.remove(&hash);
                        request.before.clear();
                        request.graph = packed.clone();
                    }
                    Err(s) => return Err(s),
                }
            }
            Err(tonic::Status::internal("graph evicted twice in a row"))
        })
    }

    /// Sends the queued buffer operations now (they otherwise travel with
    /// the next alloc, download or compute); their first error, if any.
    pub fn flush(&self) -> Result<(), RemoteError> {
        self.with("queued buffer operations", async |c| c.flush().await)
    }

    /// Closes the session (its buffers are freed on the server).
    pub fn close(&self) {
        let mut guard = lock(&self.conn);
        self.connected.store(false, Ordering::Relaxed);
        if let (Some(mut c), Some(Ok(rt))) = (guard.take(), self.runtime.get()) {
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(2), c.grpc.close(pb::Empty {})).await
            });
        }
    }
}
