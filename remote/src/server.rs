//! The server behind `backplane serve`: each request maps onto the checked
//! host handles of a [`Registry`] (`Device`, `BufferType`, `Buffer`,
//! `Stream`), after every value from the client was checked ([`limits`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use backplane::registry::{BufferType, Device, Registry};
use backplane_abi::plugin::caps_bits;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::SESSION_HEADER;
use crate::codec::decode_graph;
use crate::limits::{self, Limits};
use crate::ops::{self, bind_tensor, plugin};
use crate::pb;
use crate::session::Session;
use crate::store::ModelStore;

/// The gRPC service over one registry's devices.
pub struct RemoteService {
    state: Arc<State>,
}

struct State {
    devices: Vec<Device>,
    store: Option<Arc<ModelStore>>,
    limits: Limits,
    sessions: Mutex<Sessions>,
    _registry: Arc<Registry>,
}

#[derive(Default)]
struct Sessions {
    live: HashMap<u64, (u64, Arc<Mutex<Session>>)>,
    clock: u64,
}

type Reply<T> = Result<Response<T>, Status>;

impl RemoteService {
    /// Serves every device of `registry` under `limits`.
    pub fn new(registry: Arc<Registry>, limits: Limits) -> RemoteService {
        RemoteService::with_store(registry, limits, None)
    }

    /// Serves every device of `registry` under `limits`, filling tensors
    /// from `store` when a client names their content by hash.
    pub fn with_store(
        registry: Arc<Registry>,
        limits: Limits,
        store: Option<Arc<ModelStore>>,
    ) -> RemoteService {
        let devices = registry.devices().cloned().collect();
        RemoteService {
            state: Arc::new(State {
                devices,
                store,
                limits,
                sessions: Mutex::new(Sessions::default()),
                _registry: registry,
            }),
        }
    }

    /// Number of devices served.
    pub fn device_count(&self) -> usize {
        self.state.devices.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn bad(e: impl Into<String>) -> Status {
    Status::invalid_argument(e.into())
}

/// Runs blocking plugin work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("server task failed: {e}")))?
}

impl State {
    fn device(&self, index: u32) -> Result<&Device, Status> {
        self.devices.get(index as usize).ok_or_else(|| {
            bad(format!(
                "no device {index} (this server has {})",
                self.devices.len()
            ))
        })
    }

    /// What a `supports_op` question is about: device `index`, the extra
    /// buffer type `buffer_type` names (none when empty), and the graph,
    /// decoded and checked with its buffers cleared.
    fn question(
        &self,
        index: u32,
        buffer_type: &str,
        graph: &[u8],
    ) -> Result<(&Device, Option<BufferType>, Vec<backplane_abi::TensorDesc>), Status> {
        let dev = self.device(index)?;
        let extra = if buffer_type.is_empty() {
            None
        } else {
            Some(self.buffer_type(index, buffer_type)?)
        };
        let mut graph = decode_graph(graph).map_err(bad)?;
        graph.iter_mut().for_each(|d| d.buffer = 0);
        limits::check_graph(&mut graph, &self.limits, |_| None).map_err(bad)?;
        Ok((dev, extra, graph))
    }

    /// The buffer type a request names on device `index`: the device's
    /// own when `name` is empty, else one of its extra buffer types.
    fn buffer_type(&self, index: u32, name: &str) -> Result<BufferType, Status> {
        let dev = self.device(index)?;
        if name.is_empty() {
            return Ok(dev.buffer_type());
        }
        if name.len() > MAX_BUFFER_TYPE_NAME {
            return Err(bad(format!(
                "buffer type name of {} bytes (at most {MAX_BUFFER_TYPE_NAME})",
                name.len()
            )));
        }
        let extra = dev.extra_buffer_types();
        extra
            .iter()
            .find(|b| b.name() == name)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<String> = extra.iter().map(|b| b.name()).collect();
                bad(format!(
                    "device {index} ({}/{}) has no extra buffer type '{}' (it has: {})",
                    dev.backend(),
                    dev.name(),
                    name.escape_debug(),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    }

    fn session<T>(&self, req: &Request<T>) -> Result<Arc<Mutex<Session>>, Status> {
        let id = session_id(req)?;
        let mut all = lock(&self.sessions);
        all.clock += 1;
        let now = all.clock;
        let entry = all.live.get_mut(&id).ok_or_else(|| {
            Status::failed_precondition(format!("unknown session {id} (closed or evicted)"))
        })?;
        entry.0 = now;
        Ok(entry.1.clone())
    }

    fn open(&self) -> u64 {
        let id = random_session_id(NEXT_SESSION.fetch_add(1, Ordering::Relaxed));
        let mut all = lock(&self.sessions);
        all.clock += 1;
        let now = all.clock;
        while all.live.len() >= self.limits.max_sessions.max(1) {
            let oldest = all
                .live
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => all.live.remove(&k),
                None => break,
            };
        }
        all.live
            .insert(id, (now, Arc::new(Mutex::new(Session::default()))));
        id
    }

    fn device_info(&self, index: usize, d: &Device) -> pb::DeviceInfo {
        let m = d.memory();
        let bt = d.buffer_type();
        pb::DeviceInfo {
            index: index as u32,
            backend: d.backend().to_string(),
            name: d.name(),
            description: d.description(),
            device_type: d.device_type().code(),
            free_bytes: m.free_bytes,
            total_bytes: m.total_bytes,
            caps: caps_bits::encode(d.caps()),
            buffer_type: bt.name(),
            alignment: bt.alignment(),
            max_size: bt.max_size(),
            extra_buffer_types: d
                .extra_buffer_types()
                .iter()
                .map(|b| pb::ExtraBufferTypeInfo {
                    name: b.name(),
                    alignment: b.alignment(),
                    max_size: b.max_size(),
                })
                .collect(),
        }
    }
}

/// Longest buffer type name a request may carry (the registry cleans
/// names to 64 characters of up to 4 bytes).
const MAX_BUFFER_TYPE_NAME: usize = 256;

/// The answer to one `supports_op` question: about the device when
/// `extra` is `None`, else about the node reading its weights from a
/// buffer of that extra type.
fn verdict(
    dev: &Device,
    extra: Option<&BufferType>,
    graph: &[backplane_abi::TensorDesc],
    node: usize,
) -> pb::VerdictReply {
    match extra {
        None => {
            let v = dev.supports_op(graph, node);
            pb::VerdictReply {
                supported: v.is_supported(),
                reason: v.reason().unwrap_or_default().to_string(),
            }
        }
        Some(b) if b.supports_op(graph, node) => pb::VerdictReply {
            supported: true,
            reason: String::new(),
        },
        Some(b) => pb::VerdictReply {
            supported: false,
            reason: format!(
                "buffer type {} does not run this op on its weights",
                b.name()
            ),
        },
    }
}

/// Sessions opened by any server of this process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// Checks a graph sent by a client (its hash, its values, its buffers in
/// the session) and caches it; returns the hash.
fn store_graph(
    session: &Mutex<Session>,
    limits: &Limits,
    hash: &[u8],
    packed: &[u8],
) -> Result<[u8; 32], Status> {
    let hash: [u8; 32] = hash
        .try_into()
        .map_err(|_| bad(format!("graph hash of {} bytes, expected 32", hash.len())))?;
    if crate::codec::graph_hash(packed) != hash {
        return Err(bad("graph hash does not match its bytes"));
    }
    let graph = decode_graph(packed).map_err(bad)?;
    let mut probe = graph.clone();
    let s = &mut *lock(session);
    limits::check_graph(&mut probe, limits, |h| {
        s.buffer(h).ok().map(|o| (o.buffer.id(), o.buffer.size()))
    })
    .map_err(bad)?;
    s.put_graph(hash, graph, limits.graph_cache);
    Ok(hash)
}

/// A session id that another client cannot guess and that a restarted
/// server does not hand out again (so stale client handles never alias):
/// the counter hashed with a per-process random key, never 0.
fn random_session_id(counter: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let mut h = KEY
        .get_or_init(std::collections::hash_map::RandomState::new)
        .build_hasher();
    h.write_u64(counter);
    h.finish().max(1)
}

/// The session a request names.
fn session_id<T>(req: &Request<T>) -> Result<u64, Status> {
    req.metadata()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            Status::failed_precondition(format!("no {SESSION_HEADER} header: call Open first"))
        })
}

#[tonic::async_trait]
impl pb::remote_server::Remote for RemoteService {
    async fn open(&self, req: Request<pb::OpenRequest>) -> Reply<pb::OpenReply> {
        let st = self.state.clone();
        let client = req.into_inner().client;
        let devices = blocking(move || {
            Ok(st
                .devices
                .iter()
                .enumerate()
                .map(|(i, d)| st.device_info(i, d))
                .collect::<Vec<_>>())
        })
        .await?;
        let session = self.state.open();
        let l = &self.state.limits;
        tracing::info!(client, session, "session opened");
        Ok(Response::new(pb::OpenReply {
            session,
            devices,
            max_chunk_bytes: l.max_chunk_bytes as u64,
            max_session_bytes: l.max_session_bytes,
            max_graph_nodes: l.max_graph_nodes as u32,
            stored_tensors: self.state.store.as_ref().map_or(0, |s| s.len() as u64),
        }))
    }

    async fn close(&self, req: Request<pb::Empty>) -> Reply<pb::Empty> {
        let id = session_id(&req)?;
        lock(&self.state.sessions).live.remove(&id);
        Ok(Response::new(pb::Empty {}))
    }

    async fn alloc(&self, req: Request<pb::AllocRequest>) -> Reply<pb::AllocReply> {
        let session = self.state.session(&req)?;
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            ops::apply(&session, &st.limits, &r.before)?;
            let bt = st.buffer_type(r.device, &r.buffer_type)?;
            let mut s = lock(&session);
            let room = st.limits.max_session_bytes.saturating_sub(s.bytes());
            if r.size > room {
                return Err(Status::resource_exhausted(format!(
                    "allocation of {} bytes on device {}: the session may hold {} bytes and has {} free",
                    r.size, r.device, st.limits.max_session_bytes, room
                )));
            }
            if r.size > bt.max_size() {
                return Err(Status::resource_exhausted(format!(
                    "allocation of {} bytes: buffer type {} allows at most {}",
                    r.size,
                    bt.name(),
                    bt.max_size()
                )));
            }
            let buf = bt
                .alloc_buffer(r.size)
                .map_err(|e| plugin(&format!("alloc of {} bytes in {} on device {}", r.size, bt.name(), r.device), e))?;
            let size = buf.size();
            tracing::debug!(device = r.device, size, buffer_type = %bt.name(), "alloc");
            let handle = s.insert(buf, r.device);
            Ok(Response::new(pb::AllocReply { handle, size }))
        })
        .await
    }

    async fn free(&self, req: Request<pb::BufferRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        ops::free(&session, req.into_inner().handle)?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn upload(&self, req: Request<Streaming<pb::UploadChunk>>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let max_chunk = self.state.limits.max_chunk_bytes;
        let mut chunks = req.into_inner();
        let mut bound = None;
        while let Some(chunk) = chunks.message().await? {
            if chunk.data.len() > max_chunk {
                return Err(bad(format!(
                    "upload chunk of {} bytes, more than {max_chunk}",
                    chunk.data.len()
                )));
            }
            if bound.is_none() {
                let s = lock(&session);
                bound = Some(bind_tensor(&s, chunk.handle, &chunk.tensor)?);
            }
            let (desc, buffer, nbytes) = bound
                .clone()
                .ok_or_else(|| bad("upload without a tensor"))?;
            limits::check_range(chunk.offset, chunk.data.len() as u64, nbytes, "upload")
                .map_err(bad)?;
            blocking(move || {
                buffer
                    .set_tensor(&desc, chunk.offset, &chunk.data)
                    .map_err(|e| plugin("set_tensor", e))
            })
            .await?;
        }
        Ok(Response::new(pb::Empty {}))
    }

    type DownloadStream = ReceiverStream<Result<pb::DataChunk, Status>>;

    async fn download(&self, req: Request<pb::DownloadRequest>) -> Reply<Self::DownloadStream> {
        let session = self.state.session(&req)?;
        let max_chunk = self.state.limits.max_chunk_bytes as u64;
        let mut r = req.into_inner();
        if !r.before.is_empty() {
            let (session, limits, before) = (
                session.clone(),
                self.state.limits.clone(),
                std::mem::take(&mut r.before),
            );
            blocking(move || ops::apply(&session, &limits, &before)).await?;
        }
        let (desc, buffer, nbytes) = bind_tensor(&lock(&session), r.handle, &r.tensor)?;
        limits::check_range(r.offset, r.size, nbytes, "download").map_err(bad)?;
        let (tx, rx) = mpsc::channel(2);
        tokio::task::spawn_blocking(move || {
            let mut at = 0u64;
            while at < r.size {
                let n = (r.size - at).min(max_chunk);
                let mut data = vec![0u8; n as usize];
                let res = buffer
                    .get_tensor(&desc, r.offset + at, &mut data)
                    .map(|()| pb::DataChunk { data })
                    .map_err(|e| plugin("get_tensor", e));
                let failed = res.is_err();
                if tx.blocking_send(res).is_err() || failed {
                    return;
                }
                at += n;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn memset(&self, req: Request<pb::MemsetRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let r = req.into_inner();
        blocking(move || ops::memset(&session, &r)).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn clear(&self, req: Request<pb::ClearRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let r = req.into_inner();
        blocking(move || ops::clear(&session, &r)).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn upload_stored(&self, req: Request<pb::UploadStoredRequest>) -> Reply<pb::StoredReply> {
        let session = self.state.session(&req)?;
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            ops::apply(&session, &st.limits, &r.before)?;
            let (desc, buffer, nbytes) = bind_tensor(&lock(&session), r.handle, &r.tensor)?;
            limits::check_range(r.offset, r.size, nbytes, "upload_stored").map_err(bad)?;
            let hash: [u8; 32] = r.hash.as_slice().try_into().map_err(|_| {
                bad(format!("content hash of {} bytes, expected 32", r.hash.len()))
            })?;
            let found = st.store.as_ref().and_then(|s| s.get(&hash));
            let Some((data, file, name)) = found.filter(|(d, _, _)| d.len() as u64 == r.size)
            else {
                return Ok(Response::new(pb::StoredReply { found: false }));
            };
            buffer
                .set_tensor(&desc, r.offset, data)
                .map_err(|e| plugin("set_tensor from the model store", e))?;
            tracing::debug!(tensor = name, file = %file.display(), bytes = r.size, "filled from the model store");
            Ok(Response::new(pb::StoredReply { found: true }))
        })
        .await
    }

    async fn apply(&self, req: Request<pb::ApplyRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let limits = self.state.limits.clone();
        let r = req.into_inner();
        blocking(move || ops::apply(&session, &limits, &r.ops)).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn supports_op(&self, req: Request<pb::SupportsOpRequest>) -> Reply<pb::VerdictReply> {
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            let (dev, extra, graph) = st.question(r.device, &r.buffer_type, &r.graph)?;
            let node = r.node as usize;
            if node >= graph.len() {
                return Err(bad(format!(
                    "node {node} of a {}-tensor graph",
                    graph.len()
                )));
            }
            tracing::debug!(device = r.device, nodes = 1, buffer_type = %r.buffer_type, "supports_op");
            Ok(Response::new(verdict(dev, extra.as_ref(), &graph, node)))
        })
        .await
    }

    async fn supports_ops(&self, req: Request<pb::SupportsOpsRequest>) -> Reply<pb::VerdictsReply> {
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            let (dev, extra, graph) = st.question(r.device, &r.buffer_type, &r.graph)?;
            if r.nodes.len() > graph.len() {
                return Err(bad(format!(
                    "{} nodes asked about in a {}-tensor graph",
                    r.nodes.len(),
                    graph.len()
                )));
            }
            if let Some(k) = r.nodes.iter().position(|&n| n as usize >= graph.len()) {
                return Err(bad(format!(
                    "question {k}: node {} of a {}-tensor graph",
                    r.nodes[k],
                    graph.len()
                )));
            }
            tracing::debug!(device = r.device, nodes = r.nodes.len(), buffer_type = %r.buffer_type, "supports_op");
            let verdicts = r
                .nodes
                .iter()
                .map(|&n| verdict(dev, extra.as_ref(), &graph, n as usize))
                .collect();
            Ok(Response::new(pb::VerdictsReply { verdicts }))
        })
        .await
    }

    async fn put_graph(&self, req: Request<pb::PutGraphRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let r = req.into_inner();
        store_graph(&session, &self.state.limits, &r.hash, &r.graph)?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn compute(&self, req: Request<pb::ComputeRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            ops::apply(&session, &st.limits, &r.before)?;
            let dev = st.device(r.device)?.clone();
            let hash = if r.graph.is_empty() {
                r.hash
                    .as_slice()
                    .try_into()
                    .map_err(|_| bad("graph hash is not 32 bytes"))?
            } else {
                store_graph(&session, &st.limits, &r.hash, &r.graph)?
            };
            let (mut graph, stream, _keep) = {
                let mut s = lock(&session);
                let g = s
                    .graph(&hash)
                    .ok_or_else(|| Status::not_found("graph not cached: send it with PutGraph"))?;
                let mut graph = (*g).clone();
                let device = r.device;
                limits::check_graph(&mut graph, &st.limits, |h| s.resolve_on(h, device))
                    .map_err(|e| bad(format!("graph for device {device}: {e}")))?;
                // Buffers stay alive while the graph runs even if freed meanwhile.
                let keep: Vec<_> = g
                    .iter()
                    .filter_map(|d| s.buffer(d.buffer).ok().map(|o| o.buffer.clone()))
                    .collect();
                let stream = s
                    .stream(device, || {
                        dev.init_backend("")
                            .map_err(|e| format!("init_backend: {e}"))
                    })
                    .map_err(Status::internal)?;
                (graph, stream, keep)
            };
            graph.shrink_to_fit();
            stream
                .graph_compute(&graph)
                .map_err(|e| plugin(&format!("graph_compute on device {}", r.device), e))?;
            stream.synchronize().map_err(|e| plugin("synchronize", e))?;
            Ok(Response::new(pb::Empty {}))
        })
        .await
    }
}
