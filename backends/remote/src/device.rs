//! Remote devices, buffer types, buffers and streams: each call is one
//! request to the device's server, with the plugin's own buffer ids
//! translated to the server's handles.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use backplane_abi::plugin::{
    Backend, Buffer, BufferType, Device, DeviceCaps, DeviceType, Memory, PluginError, Verdict,
    caps_bits,
};
use backplane_abi::{Op, TensorDesc};
use backplane_remote::codec::encode_graph;
use backplane_remote::pb::DeviceInfo;
use backplane_remote::{Client, RemoteBuffer, RemoteError};

use crate::config::Server;
use crate::isolate::Isolated;

/// The error of a failed remote call, of the kind its status says.
pub fn plugin_error(e: RemoteError) -> PluginError {
    let text = e.to_string();
    if e.is_bad_input() {
        PluginError::bad_input(text)
    } else if e.code == tonic_code_resource_exhausted() {
        PluginError::out_of_memory(text)
    } else {
        PluginError::other(text)
    }
}

fn tonic_code_resource_exhausted() -> i32 {
    8
}

/// The devices of one server (asks it now).
pub fn server_devices(k: usize, server: Server) -> Result<Vec<Arc<dyn Device>>, String> {
    let (_, hello) = server.client.hello().map_err(|e| e.to_string())?;
    let batch_tensors = (hello.max_graph_nodes as usize).min(BATCH_TENSORS);
    Ok(hello
        .devices
        .into_iter()
        .map(|info| {
            Arc::new(RemoteDevice {
                name: short(&format!("r{k}-{}-{}", info.backend, info.name)),
                client: server.client.clone(),
                isolated: server.isolated.clone(),
                info,
                verdicts: Mutex::new(HashMap::new()),
                batch_tensors,
                single_questions: AtomicBool::new(false),
            }) as Arc<dyn Device>
        })
        .collect())
}

fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Most tensors in one batched `SupportsOps` question (852 KiB of
/// records), less when the server allows fewer per graph.
const BATCH_TENSORS: usize = 4096;

/// Most op signatures whose verdicts a device keeps.
const MAX_VERDICTS: usize = 4096;

/// One device of a server.
pub struct RemoteDevice {
    name: String,
    client: Arc<Client>,
    isolated: Option<Arc<Isolated>>,
    info: DeviceInfo,
    verdicts: Mutex<HashMap<Vec<u8>, Verdict>>,
    /// Most tensors one batched question carries.
    batch_tensors: usize,
    /// Set when the server does not know `SupportsOps` (older server):
    /// one question per signature.
    single_questions: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `graph[node]` with its sources alone: sources first, then the node,
/// buffers and offsets cleared. Both what the server is asked and the key
/// of the verdict cache (equal signatures get equal verdicts).
pub fn op_signature(graph: &[TensorDesc], node: usize) -> Vec<TensorDesc> {
    let clear = |d: &TensorDesc| TensorDesc {
        buffer: 0,
        offset: 0,
        view_offset: 0,
        src: [backplane_abi::tensor::NO_TENSOR; backplane_abi::tensor::MAX_SRC],
        view_src: backplane_abi::tensor::NO_TENSOR,
        ..*d
    };
    let mut out = Vec::new();
    let mut n = graph[node];
    for slot in n.src.iter_mut() {
        if let Some(s) = usize::try_from(*slot).ok().filter(|&s| s < graph.len()) {
            *slot = out.len() as i32;
            out.push(clear(&graph[s]));
        }
    }
    n.view_src = backplane_abi::tensor::NO_TENSOR;
    n.buffer = 0;
    n.offset = 0;
    n.view_offset = 0;
    out.push(n);
    out
}

impl RemoteDevice {
    /// Asks the server in one call about `graph[node]` and the later
    /// compute nodes whose signatures have no verdict yet (as many as fit
    /// [`RemoteDevice::batch_tensors`]), and keeps the verdicts.
    fn ask_ahead(&self, graph: &[TensorDesc], node: usize) -> Result<(), RemoteError> {
        let mut batch: Vec<TensorDesc> = Vec::new();
        let mut asked: Vec<u32> = Vec::new();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        {
            let cache = lock(&self.verdicts);
            if cache.len() >= MAX_VERDICTS {
                return Ok(());
            }
            for j in node..graph.len() {
                if graph[j].op().is_ok_and(|o| o == Op::None) {
                    continue;
                }
                let sig = op_signature(graph, j);
                let key = encode_graph(&sig);
                if cache.contains_key(&key) || keys.contains(&key) {
                    continue;
                }
                if batch.len() + sig.len() > self.batch_tensors
                    || keys.len() + cache.len() >= MAX_VERDICTS
                {
                    break;
                }
                let base = batch.len() as i32;
                batch.extend(sig.into_iter().map(|mut d| {
                    d.src
                        .iter_mut()
                        .filter(|s| **s >= 0)
                        .for_each(|s| *s += base);
                    d
                }));
                asked.push((batch.len() - 1) as u32);
                keys.push(key);
            }
        }
        if asked.is_empty() {
            return Ok(());
        }
        let verdicts = self.client.supports_ops(self.info.index, &batch, &asked)?;
        let mut cache = lock(&self.verdicts);
        for (key, v) in keys.into_iter().zip(verdicts) {
            if cache.len() < MAX_VERDICTS {
                cache.insert(key, Verdict::from(v));
            }
        }
        Ok(())
    }
}

impl Device for RemoteDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn description(&self) -> String {
        let how = if self.isolated.is_some() {
            "isolated child"
        } else {
            "server"
        };
        short(&format!(
            "{}/{} on {how} {}",
            self.info.backend,
            self.info.name,
            self.client.target()
        ))
    }

    fn device_type(&self) -> DeviceType {
        match DeviceType::from_code(self.info.device_type) {
            Some(DeviceType::Cpu) | None => DeviceType::Accel,
            Some(t) => t,
        }
    }

    fn memory(&self) -> Memory {
        Memory {
            free_bytes: self.info.free_bytes.min(self.info.total_bytes),
            total_bytes: self.info.total_bytes,
        }
    }

    fn caps(&self) -> DeviceCaps {
        let _ = caps_bits::decode(self.info.caps);
        DeviceCaps::default()
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        if node >= graph.len() {
            return Verdict::unsupported(format!("node {node} of a {}-tensor graph", graph.len()));
        }
        // A server that was lost (killed, restarted) is asked again first,
        // no more often than the client's backoff allows: the scheduler
        // asks a device again after a failed call and before each run
        // while it is out of service, and this answer is what takes it out
        // or brings it back.
        if !self.client.is_connected()
            && let Err(e) = self.client.hello()
        {
            return Verdict::unsupported(e.to_string());
        }
        let sig = op_signature(graph, node);
        let key = encode_graph(&sig);
        if let Some(v) = lock(&self.verdicts).get(&key) {
            return v.clone();
        }
        // One round trip for this node and every later one not asked yet
        // (the scheduler asks about the nodes of a graph one by one); a
        // batch the server refuses as a whole leaves the single question.
        if !self.single_questions.load(Ordering::Relaxed) {
            match self.ask_ahead(graph, node) {
                Ok(()) => {
                    if let Some(v) = lock(&self.verdicts).get(&key) {
                        return v.clone();
                    }
                }
                Err(e) if e.is_unimplemented() => {
                    self.single_questions.store(true, Ordering::Relaxed)
                }
                Err(_) => {}
            }
        }
        match self
            .client
            .supports_op(self.info.index, &sig, sig.len() - 1)
        {
            Ok(r) => {
                let v = Verdict::from(r);
                let mut cache = lock(&self.verdicts);
                if cache.len() < MAX_VERDICTS {
                    cache.insert(key, v.clone());
                }
                v
            }
            Err(e) => Verdict::unsupported(e.to_string()),
        }
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(RemoteBufferType {
            name: short(&format!("remote-{}", self.name)),
            client: self.client.clone(),
            device: self.info.index,
            alignment: self.info.alignment.max(1).next_power_of_two(),
            max_size: self.info.max_size,
        })
    }

    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        crate::config::refuse_stream_params(params)?;
        Ok(Box::new(RemoteStream {
            name: self.name.clone(),
            client: self.client.clone(),
            device: self.info.index,
        }))
    }
}

/// The memory of one remote device.
pub struct RemoteBufferType {
    name: String,
    client: Arc<Client>,
    device: u32,
    alignment: u64,
    max_size: u64,
}

impl BufferType for RemoteBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let rb = self
            .client
            .alloc(self.device, size_bytes)
            .map_err(plugin_error)?;
        let id = next_id();
        ids()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (self.client.clone(), rb));
        Ok(Box::new(RemoteBufferObj {
            id,
            client: self.client.clone(),
            remote: rb,
        }))
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn max_size(&self) -> u64 {
        self.max_size
    }
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

type IdMap = Mutex<HashMap<u64, (Arc<Client>, RemoteBuffer)>>;

/// Plugin buffer id -> the server and handle behind it.
fn ids() -> &'static IdMap {
    static IDS: OnceLock<IdMap> = OnceLock::new();
    IDS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// One remote allocation.
pub struct RemoteBufferObj {
    id: u64,
    client: Arc<Client>,
    remote: RemoteBuffer,
}

impl RemoteBufferObj {
    fn on_server(&self, tensor: &TensorDesc) -> Result<TensorDesc, PluginError> {
        if tensor.buffer != self.id {
            return Err(PluginError::bad_input(format!(
                "tensor is in buffer {}, not in this buffer {}",
                tensor.buffer, self.id
            )));
        }
        Ok(TensorDesc {
            buffer: self.remote.handle,
            ..*tensor
        })
    }
}

impl Drop for RemoteBufferObj {
    fn drop(&mut self) {
        lock(ids()).remove(&self.id);
        let _ = self.client.free(&self.remote);
    }
}

impl Buffer for RemoteBufferObj {
    fn id(&self) -> u64 {
        self.id
    }

    fn size(&self) -> u64 {
        self.remote.size
    }

    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        let t = self.on_server(tensor)?;
        self.client
            .upload(&self.remote, &t, offset, data)
            .map_err(plugin_error)
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        let t = self.on_server(tensor)?;
        self.client
            .download(&self.remote, &t, offset, out)
            .map_err(plugin_error)
    }

    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        let t = self.on_server(tensor)?;
        self.client
            .memset(&self.remote, &t, value, offset, size)
            .map_err(plugin_error)
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        self.client.clear(&self.remote, value).map_err(plugin_error)
    }
}

/// The buffers of `graph` that belong to another session than `current`
/// (lost with a restarted or unreachable server), each as `buffer B (N
/// tensors from tensor I, session S)`; at most eight and a count.
fn lost_buffers(graph: &[TensorDesc], current: u64) -> Vec<String> {
    let map = lock(ids());
    // (plugin buffer id, session, tensors, first tensor), in graph order.
    let mut lost: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (i, d) in graph.iter().enumerate() {
        let Some((_, rb)) = map.get(&d.buffer) else {
            continue;
        };
        if rb.session == current {
            continue;
        }
        match lost.iter_mut().find(|l| l.0 == d.buffer) {
            Some(l) => l.2 += 1,
            None => lost.push((d.buffer, rb.session, 1, i)),
        }
    }
    let mut out: Vec<String> = lost
        .iter()
        .take(8)
        .map(|&(b, s, n, first)| {
            format!("buffer {b} ({n} tensors from tensor {first}, session {s})")
        })
        .collect();
    if lost.len() > out.len() {
        out.push(format!("{} more buffers", lost.len() - out.len()));
    }
    out
}

/// A stream on a remote device: each graph is one Compute call.
pub struct RemoteStream {
    name: String,
    client: Arc<Client>,
    device: u32,
}

impl Backend for RemoteStream {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let map = lock(ids());
        let mut wire = graph.to_vec();
        let mut session = None;
        for (i, d) in wire.iter_mut().enumerate() {
            if d.buffer == 0 {
                continue;
            }
            match map.get(&d.buffer) {
                Some((c, rb)) if Arc::ptr_eq(c, &self.client) => {
                    d.buffer = rb.handle;
                    session = Some(rb.session);
                }
                Some((c, _)) => {
                    return Err(PluginError::bad_input(format!(
                        "tensor {i} lives on server {}, not on {}",
                        c.target(),
                        self.client.target()
                    )));
                }
                None => {
                    return Err(PluginError::bad_input(format!(
                        "tensor {i} is in buffer {} which this plugin did not allocate",
                        d.buffer
                    )));
                }
            }
        }
        drop(map);
        let current = self.client.hello().map_err(plugin_error)?.0;
        let lost = lost_buffers(graph, current);
        if !lost.is_empty() {
            return Err(PluginError::other(format!(
                "remote server {}: {} lost with the server's session (restarted or unreachable); place and upload them again",
                self.client.target(),
                lost.join(", ")
            )));
        }
        self.client
            .compute(self.device, &wire, session)
            .map_err(plugin_error)
    }
}
