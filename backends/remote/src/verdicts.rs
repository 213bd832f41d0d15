//! `supports_op` verdicts of one server device, asked in batches and kept
//! per op signature: about the device itself, or about ops reading their
//! weights from one of its extra buffer types.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use backplane_abi::plugin::Verdict;
use backplane_abi::{Op, TensorDesc};
use backplane_remote::codec::encode_graph;
use backplane_remote::{Client, RemoteError};

/// Most tensors in one batched `SupportsOps` question (852 KiB of
/// records), less when the server allows fewer per graph.
pub const BATCH_TENSORS: usize = 4096;

/// Most op signatures whose verdicts one cache keeps.
const MAX_VERDICTS: usize = 4096;

/// Which nodes a batch asks about ahead of the one asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// Every compute node (the device's own verdicts).
    ComputeNodes,
    /// Compute nodes whose weight operand (`src[0]`) is a leaf: the only
    /// ones the host asks an extra buffer type about (it places leaves).
    WeightReaders,
}

/// The verdicts of one server device (for one buffer type), cached.
pub struct Verdicts {
    client: Arc<Client>,
    device: u32,
    /// "" for the device; else the server's name of an extra buffer type.
    buffer_type: String,
    ahead: Ahead,
    cache: Mutex<HashMap<Vec<u8>, Verdict>>,
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

fn is_leaf(d: &TensorDesc) -> bool {
    d.op().is_ok_and(|o| o == Op::None) && d.view_source().is_none()
}

impl Verdicts {
    /// An empty cache for server device `device` (`buffer_type` "" for the
    /// device itself), batching up to `batch_tensors` tensors per call.
    pub fn new(
        client: Arc<Client>,
        device: u32,
        buffer_type: &str,
        ahead: Ahead,
        batch_tensors: usize,
    ) -> Verdicts {
        Verdicts {
            client,
            device,
            buffer_type: buffer_type.to_string(),
            ahead,
            cache: Mutex::new(HashMap::new()),
            batch_tensors,
            single_questions: AtomicBool::new(false),
        }
    }

    /// Whether this node is asked about in a batch ahead of its turn.
    fn wanted(&self, graph: &[TensorDesc], j: usize) -> bool {
        let d = &graph[j];
        if d.op().is_ok_and(|o| o == Op::None) {
            return false;
        }
        match self.ahead {
            Ahead::ComputeNodes => true,
            Ahead::WeightReaders => usize::try_from(d.src[0])
                .ok()
                .and_then(|s| graph.get(s))
                .is_some_and(is_leaf),
        }
    }

    /// The verdict on `graph[node]` (`node` in range): from the cache, or
    /// asked of the server in one call together with the later nodes
    /// whose signatures are new (the host asks about a graph's nodes one
    /// by one), or alone when the server refuses the batch.
    pub fn verdict(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        let sig = op_signature(graph, node);
        let key = encode_graph(&sig);
        if let Some(v) = lock(&self.cache).get(&key) {
            return v.clone();
        }
        if !self.single_questions.load(Ordering::Relaxed) {
            match self.ask_ahead(graph, node) {
                Ok(()) => {
                    if let Some(v) = lock(&self.cache).get(&key) {
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
            .supports_op(self.device, &self.buffer_type, &sig, sig.len() - 1)
        {
            Ok(r) => {
                let v = Verdict::from(r);
                let mut cache = lock(&self.cache);
                if cache.len() < MAX_VERDICTS {
                    cache.insert(key, v.clone());
                }
                v
            }
            Err(e) => Verdict::unsupported(e.to_string()),
        }
    }

    /// Asks the server in one call about `graph[node]` and the later nodes
    /// ([`Ahead`]) whose signatures have no verdict yet (as many as fit
    /// the batch), and keeps the verdicts.
    fn ask_ahead(&self, graph: &[TensorDesc], node: usize) -> Result<(), RemoteError> {
        let mut batch: Vec<TensorDesc> = Vec::new();
        let mut asked: Vec<u32> = Vec::new();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        {
            let cache = lock(&self.cache);
            if cache.len() >= MAX_VERDICTS {
                return Ok(());
            }
            for j in node..graph.len() {
                if j != node && !self.wanted(graph, j) {
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
        let verdicts = self
            .client
            .supports_ops(self.device, &self.buffer_type, &batch, &asked)?;
        let mut cache = lock(&self.cache);
        for (key, v) in keys.into_iter().zip(verdicts) {
            if cache.len() < MAX_VERDICTS {
                cache.insert(key, Verdict::from(v));
            }
        }
        Ok(())
    }
}
