//! Per-session server state: the buffers a client allocated (behind
//! handles only it can name), its streams and its cached graphs.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use backplane::registry::{Buffer, Stream};
use backplane_abi::TensorDesc;

/// One buffer a session owns.
pub struct Owned {
    /// The plugin's buffer (freed when the last reference goes).
    pub buffer: Arc<Buffer>,
    /// The server device it lives on.
    pub device: u32,
}

/// A client's state on the server.
#[derive(Default)]
pub struct Session {
    buffers: HashMap<u64, Owned>,
    next_handle: u64,
    bytes: u64,
    streams: HashMap<u32, Arc<Stream>>,
    graphs: HashMap<[u8; 32], Arc<Vec<TensorDesc>>>,
    graph_order: VecDeque<[u8; 32]>,
}

impl Session {
    /// Bytes allocated now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds a buffer; returns its handle (never 0, never reused).
    pub fn insert(&mut self, buffer: Buffer, device: u32) -> u64 {
        self.next_handle += 1;
        self.bytes += buffer.size();
        self.buffers.insert(
            self.next_handle,
            Owned {
                buffer: Arc::new(buffer),
                device,
            },
        );
        self.next_handle
    }

    /// Drops a buffer; false when the handle is unknown.
    pub fn remove(&mut self, handle: u64) -> bool {
        match self.buffers.remove(&handle) {
            Some(o) => {
                self.bytes -= o.buffer.size();
                true
            }
            None => false,
        }
    }

    /// The buffer behind `handle`.
    pub fn buffer(&self, handle: u64) -> Result<&Owned, String> {
        self.buffers.get(&handle).ok_or_else(|| {
            format!("unknown buffer handle {handle} (not allocated in this session)")
        })
    }

    /// (real id, size) of the buffer behind `handle` when it is on `device`.
    pub fn resolve_on(&self, handle: u64, device: u32) -> Option<(u64, u64)> {
        let o = self.buffers.get(&handle)?;
        (o.device == device).then(|| (o.buffer.id(), o.buffer.size()))
    }

    /// The stream of `device`, made by `make` on first use.
    pub fn stream(
        &mut self,
        device: u32,
        make: impl FnOnce() -> Result<Stream, String>,
    ) -> Result<Arc<Stream>, String> {
        if let Some(s) = self.streams.get(&device) {
            return Ok(s.clone());
        }
        let s = Arc::new(make()?);
        self.streams.insert(device, s.clone());
        Ok(s)
    }

    /// Caches a checked graph under its hash, dropping the oldest beyond `keep`.
    pub fn put_graph(&mut self, hash: [u8; 32], graph: Vec<TensorDesc>, keep: usize) {
        if self.graphs.insert(hash, Arc::new(graph)).is_none() {
            self.graph_order.push_back(hash);
        }
        while self.graph_order.len() > keep.max(1) {
            if let Some(old) = self.graph_order.pop_front() {
                self.graphs.remove(&old);
            }
        }
    }

    /// The graph cached under `hash` (marked as recently used).
    pub fn graph(&mut self, hash: &[u8; 32]) -> Option<Arc<Vec<TensorDesc>>> {
        let g = self.graphs.get(hash)?.clone();
        if let Some(pos) = self.graph_order.iter().position(|h| h == hash) {
            self.graph_order.remove(pos);
            self.graph_order.push_back(*hash);
        }
        Some(g)
    }

    /// Number of graphs cached.
    pub fn graph_count(&self) -> usize {
        self.graphs.len()
    }
}
