//! Remote devices, buffer types, buffers and streams: each call is one
//! request to the device's server, with the plugin's own buffer ids
//! translated to the server's handles.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use backplane_abi::TensorDesc;
use backplane_abi::plugin::{
    Backend, Buffer, BufferType, Device, DeviceCaps, DeviceType, Memory, PluginError, Verdict,
    caps_bits,
};
use backplane_remote::pb::DeviceInfo;
use backplane_remote::{Client, RemoteBuffer, RemoteError};

use crate::config::Server;
use crate::isolate::Isolated;
use crate::verdicts::{Ahead, BATCH_TENSORS, Verdicts};

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
            let name = short(&format!("r{k}-{}-{}", info.backend, info.name));
            let client = &server.client;
            let extra = info
                .extra_buffer_types
                .iter()
                .map(|e| {
                    Arc::new(RemoteBufferType {
                        name: short(&format!("remote-{name}:{}", e.name)),
                        client: client.clone(),
                        device: info.index,
                        server_type: e.name.clone(),
                        alignment: e.alignment.max(1).next_power_of_two(),
                        max_size: e.max_size,
                        weight_verdicts: Some(Verdicts::new(
                            client.clone(),
                            info.index,
                            &e.name,
                            Ahead::WeightReaders,
                            batch_tensors,
                        )),
                    })
                })
                .collect();
            Arc::new(RemoteDevice {
                verdicts: Verdicts::new(
                    client.clone(),
                    info.index,
                    "",
                    Ahead::ComputeNodes,
                    batch_tensors,
                ),
                name,
                client: client.clone(),
                isolated: server.isolated.clone(),
                info,
                extra,
            }) as Arc<dyn Device>
        })
        .collect())
}

fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

/// One device of a server.
pub struct RemoteDevice {
    name: String,
    client: Arc<Client>,
    isolated: Option<Arc<Isolated>>,
    info: DeviceInfo,
    verdicts: Verdicts,
    /// The device's extra buffer types (its server plugin's weight
    /// layouts), most preferred first.
    extra: Vec<Arc<RemoteBufferType>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RemoteDevice {
    /// The name of the device's own buffer type.
    fn buffer_type_name(&self) -> String {
        short(&format!("remote-{}", self.name))
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
        self.verdicts.verdict(graph, node)
    }

    fn supports_buft(&self, name: &str, _is_host: bool) -> bool {
        name == self.buffer_type_name() || self.extra.iter().any(|b| b.name == name)
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(RemoteBufferType {
            name: self.buffer_type_name(),
            client: self.client.clone(),
            device: self.info.index,
            server_type: String::new(),
            alignment: self.info.alignment.max(1).next_power_of_two(),
            max_size: self.info.max_size,
            weight_verdicts: None,
        })
    }

    fn extra_buffer_types(&self) -> Vec<Arc<dyn BufferType>> {
        self.extra
            .iter()
            .map(|b| b.clone() as Arc<dyn BufferType>)
            .collect()
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

/// The memory of one remote device: its own buffer type, or one of its
/// extra buffer types (a layout of the server plugin's own, whose uploads
/// and downloads the server plugin converts from and to ggml's layout).
pub struct RemoteBufferType {
    name: String,
    client: Arc<Client>,
    device: u32,
    /// "" for the device's own; else the server's name of the extra type.
    server_type: String,
    alignment: u64,
    max_size: u64,
    /// For an extra type: which ops run with their weights in it.
    weight_verdicts: Option<Verdicts>,
}

impl BufferType for RemoteBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let rb = self
            .client
            .alloc_in(self.device, &self.server_type, size_bytes)
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

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        node < graph.len()
            && self
                .weight_verdicts
                .as_ref()
                .is_some_and(|v| v.verdict(graph, node).is_supported())
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
