//! The server behind `backplane serve`: each request maps onto the checked
//! host handles of a [`Registry`] (`Device`, `BufferType`, `Buffer`,
//! `Stream`), after every value from the client was checked ([`limits`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use backplane::registry::{Device, Registry};
use backplane_abi::plugin::caps_bits;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::SESSION_HEADER;
use crate::codec::{decode_desc, decode_graph};
use crate::limits::{self, Limits};
use crate::pb;
use crate::session::Session;

/// The gRPC service over one registry's devices.
pub struct RemoteService {
    state: Arc<State>,
}

struct State {
    devices: Vec<Device>,
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
        let devices = registry.devices().cloned().collect();
        RemoteService {
            state: Arc::new(State {
                devices,
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

fn plugin(what: &str, e: backplane_abi::plugin::PluginError) -> Status {
    let msg = format!("{what}: {e}");
    match e.kind {
        backplane_abi::plugin::error_kind::BAD_INPUT => Status::invalid_argument(msg),
        backplane_abi::plugin::error_kind::OUT_OF_MEMORY => Status::resource_exhausted(msg),
        backplane_abi::plugin::error_kind::UNSUPPORTED => Status::unimplemented(msg),
        _ => Status::internal(msg),
    }
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
        }
    }
}

/// Sessions opened by any server of this process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

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

/// A tensor record from a client, bound to the buffer `handle` of `session`:
/// checked values, the buffer it names, inside that buffer.
fn bind_tensor(
    session: &Session,
    handle: u64,
    packed: &[u8],
) -> Result<
    (
        backplane_abi::TensorDesc,
        Arc<backplane::registry::Buffer>,
        u64,
    ),
    Status,
> {
    let mut d = decode_desc(packed).map_err(bad)?;
    // Alone, a tensor has no graph: its links mean nothing and are cleared.
    d.src = [backplane_abi::tensor::NO_TENSOR; backplane_abi::tensor::MAX_SRC];
    d.view_src = backplane_abi::tensor::NO_TENSOR;
    let nbytes = limits::check_desc(&d, 0).map_err(bad)?;
    if d.buffer != handle {
        return Err(bad(format!(
            "tensor names buffer {} but the request buffer {handle}",
            d.buffer
        )));
    }
    let owned = session.buffer(handle).map_err(bad)?;
    let (id, size) = (owned.buffer.id(), owned.buffer.size());
    limits::bind(&mut d, nbytes, &mut |_| Some((id, size))).map_err(bad)?;
    Ok((d, owned.buffer.clone(), nbytes))
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
            let dev = st.device(r.device)?;
            let mut s = lock(&session);
            let room = st.limits.max_session_bytes.saturating_sub(s.bytes());
            if r.size > room {
                return Err(Status::resource_exhausted(format!(
                    "allocation of {} bytes on device {}: the session may hold {} bytes and has {} free",
                    r.size, r.device, st.limits.max_session_bytes, room
                )));
            }
            let bt = dev.buffer_type();
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
                .map_err(|e| plugin(&format!("alloc of {} bytes on device {}", r.size, r.device), e))?;
            let size = buf.size();
            let handle = s.insert(buf, r.device);
            Ok(Response::new(pb::AllocReply { handle, size }))
        })
        .await
    }

    async fn free(&self, req: Request<pb::BufferRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let h = req.into_inner().handle;
        if lock(&session).remove(h) {
            Ok(Response::new(pb::Empty {}))
        } else {
            Err(bad(format!("free of unknown buffer handle {h}")))
        }
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
        let r = req.into_inner();
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
        let (desc, buffer, nbytes) = bind_tensor(&lock(&session), r.handle, &r.tensor)?;
        limits::check_range(r.offset, r.size, nbytes, "memset").map_err(bad)?;
        let value = u8::try_from(r.value)
            .map_err(|_| bad(format!("memset value {} is not a byte", r.value)))?;
        blocking(move || {
            buffer
                .memset_tensor(&desc, value, r.offset, r.size)
                .map_err(|e| plugin("memset_tensor", e))
        })
        .await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn clear(&self, req: Request<pb::ClearRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let r = req.into_inner();
        let buffer = lock(&session).buffer(r.handle).map_err(bad)?.buffer.clone();
        let value = u8::try_from(r.value)
            .map_err(|_| bad(format!("clear value {} is not a byte", r.value)))?;
        blocking(move || buffer.clear(value).map_err(|e| plugin("clear", e))).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn supports_op(&self, req: Request<pb::SupportsOpRequest>) -> Reply<pb::VerdictReply> {
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            let dev = st.device(r.device)?;
            let mut graph = decode_graph(&r.graph).map_err(bad)?;
            graph.iter_mut().for_each(|d| d.buffer = 0);
            limits::check_graph(&mut graph, &st.limits, |_| None).map_err(bad)?;
            let node = r.node as usize;
            if node >= graph.len() {
                return Err(bad(format!(
                    "node {node} of a {}-tensor graph",
                    graph.len()
                )));
            }
            let v = dev.supports_op(&graph, node);
            Ok(Response::new(pb::VerdictReply {
                supported: v.is_supported(),
                reason: v.reason().unwrap_or_default().to_string(),
            }))
        })
        .await
    }

    async fn put_graph(&self, req: Request<pb::PutGraphRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let keep = self.state.limits.graph_cache;
        let limits = self.state.limits.clone();
        let r = req.into_inner();
        let hash: [u8; 32] = r
            .hash
            .as_slice()
            .try_into()
            .map_err(|_| bad(format!("graph hash of {} bytes, expected 32", r.hash.len())))?;
        if crate::codec::graph_hash(&r.graph) != hash {
            return Err(bad("graph hash does not match its bytes"));
        }
        let graph = decode_graph(&r.graph).map_err(bad)?;
        let mut probe = graph.clone();
        let s = &mut *lock(&session);
        limits::check_graph(&mut probe, &limits, |h| {
            s.buffer(h).ok().map(|o| (o.buffer.id(), o.buffer.size()))
        })
        .map_err(bad)?;
        s.put_graph(hash, graph, keep);
        Ok(Response::new(pb::Empty {}))
    }

    async fn compute(&self, req: Request<pb::ComputeRequest>) -> Reply<pb::Empty> {
        let session = self.state.session(&req)?;
        let st = self.state.clone();
        let r = req.into_inner();
        blocking(move || {
            let dev = st.device(r.device)?.clone();
            let hash: [u8; 32] = r
                .hash
                .as_slice()
                .try_into()
                .map_err(|_| bad("graph hash is not 32 bytes"))?;
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
