//! Buffers placed before planning (weights, KV caches) and the keys that
//! name them.
//!
//! Plugins number their buffers independently: two backends (two WebGPU
//! adapters, webgpu and hexagon, any two plugins counting from 1) may hand
//! out the same id. A graph must never name a buffer by a plugin's raw id,
//! or one backend's weights would be read from the other's memory. So every
//! placed buffer gets a *key* unique in the host process; `TensorDesc::buffer`
//! in host graphs holds that key, the planner maps it to the backend, and
//! the scheduler turns it back into the plugin's own id only when it hands a
//! descriptor to that plugin.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use backplane_abi::Op;
use backplane_abi::plugin::PluginError;

use super::{BackendId, SchedError, data_err};
use crate::graph::{Graph, TensorId};
use crate::registry::Buffer;

/// High bits every host buffer key carries, so a key handed to a plugin by
/// mistake stands out in its error messages.
const KEY_TAG: u64 = 0x4b00_0000_0000_0000;

/// A buffer key no other buffer of this process has or will have.
pub(crate) fn new_buffer_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    KEY_TAG | NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Tensors placed in one buffer of one backend by
/// [`super::Scheduler::place_weights`].
pub struct WeightBlock {
    /// The backend whose memory holds them.
    pub backend: BackendId,
    key: u64,
    pub(crate) buffer: Buffer,
    /// Tensor name -> byte offset in the buffer.
    offsets: HashMap<String, u64>,
}

impl WeightBlock {
    /// The buffer's key, as written into `TensorDesc::buffer` of the tensors
    /// placed in it (unique in the host; not the plugin's own buffer id).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Bytes of the buffer.
    pub fn size_bytes(&self) -> u64 {
        self.buffer.size()
    }

    /// Byte offset of the tensor named `name`, if it is placed here.
    pub fn offset_of(&self, name: &str) -> Option<u64> {
        self.offsets.get(name).copied()
    }

    /// Sets every byte of the buffer to `value` (a KV cache starts zeroed).
    pub fn clear(&self, value: u8) -> Result<(), PluginError> {
        self.buffer.clear(value)
    }
}

/// The placed buffers of one scheduler, by key.
#[derive(Default)]
pub(crate) struct WeightBlocks {
    blocks: Vec<WeightBlock>,
    by_key: HashMap<u64, usize>,
}

impl WeightBlocks {
    pub(crate) fn get(&self, key: u64) -> Option<&WeightBlock> {
        self.by_key.get(&key).map(|&i| &self.blocks[i])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &WeightBlock> {
        self.blocks.iter()
    }

    pub(crate) fn last(&self) -> Option<&WeightBlock> {
        self.blocks.last()
    }

    pub(crate) fn push(&mut self, block: WeightBlock) {
        self.by_key.insert(block.key, self.blocks.len());
        self.blocks.push(block);
    }

    /// Removes the block with `key`, returning it (dropping it frees the
    /// buffer).
    pub(crate) fn remove(&mut self, key: u64) -> Option<WeightBlock> {
        let i = self.by_key.remove(&key)?;
        let block = self.blocks.remove(i);
        for v in self.by_key.values_mut() {
            if *v > i {
                *v -= 1;
            }
        }
        Some(block)
    }

    /// Forgets the blocks of backend `b` without freeing them (the device
    /// may still be using them: see the scheduler's `Drop`).
    pub(crate) fn leak_backend(&mut self, b: BackendId) {
        let (leak, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.blocks)
            .into_iter()
            .partition(|w| w.backend == b);
        std::mem::forget(leak);
        self.by_key.clear();
        for block in keep {
            self.push(block);
        }
    }

    /// Gives the leaves of `graph` named like placed tensors their
    /// placement; returns how many were bound.
    pub(crate) fn bind(&self, graph: &mut Graph) -> usize {
        let mut bound = 0;
        for t in graph.ids().collect::<Vec<_>>() {
            if graph.desc(t).op().is_ok_and(|op| op != Op::None) {
                continue;
            }
            let name = graph.name(t);
            if let Some((key, off)) = self
                .blocks
                .iter()
                .find_map(|w| w.offset_of(name).map(|o| (w.key, o)))
            {
                let d = &mut graph.tensors_mut()[t.index()];
                d.buffer = key;
                d.offset = off;
                bound += 1;
            }
        }
        bound
    }
}

/// Sorts `tensors` by where they go: slot 0 the default buffer type, slot
/// `i + 1` the extra buffer type `extra[i]`, the first that runs every op
/// of `graph` reading the tensor as its weight operand (`src[0]` only; a
/// tensor read any other way, or by nothing, stays in ggml's layout).
pub fn by_preferred_type(
    graph: &Graph,
    extra: &[crate::registry::BufferType],
    tensors: &[TensorId],
) -> Vec<Vec<TensorId>> {
    let mut groups = vec![Vec::new(); extra.len() + 1];
    if extra.is_empty() {
        groups[0] = tensors.to_vec();
        return groups;
    }
    let descs = graph.tensors();
    let mut readers: HashMap<i32, Vec<usize>> = HashMap::new();
    for (n, d) in descs.iter().enumerate() {
        for (i, &s) in d.src.iter().enumerate() {
            if s >= 0 {
                // A read other than as src[0] marks the tensor unmovable.
                readers
                    .entry(s)
                    .or_default()
                    .push(if i == 0 { n } else { usize::MAX });
            }
        }
    }
    for &t in tensors {
        let nodes = readers.get(&(t.index() as i32)).map_or(&[][..], |v| &v[..]);
        let slot = extra.iter().position(|b| {
            !nodes.is_empty()
                && nodes
                    .iter()
                    .all(|&n| n != usize::MAX && b.supports_op(descs, n))
        });
        groups[slot.map_or(0, |i| i + 1)].push(t);
    }
    groups
}

/// Lays `tensors` out one after another at `align`, each taking what
/// `size_of` says; returns `(tensor, offset)` pairs and the total size.
pub(crate) fn lay_out(
    graph: &Graph,
    tensors: &[TensorId],
    align: u64,
    size_of: impl Fn(&backplane_abi::TensorDesc) -> u64,
) -> Result<(Vec<(TensorId, u64)>, u64), SchedError> {
    let mut end = 0u64;
    let mut placed = Vec::with_capacity(tensors.len());
    for &t in tensors {
        let d = *graph
            .try_desc(t)
            .map_err(|e| data_err(graph, t, e.to_string()))?;
        if d.op().is_ok_and(|op| op != Op::None) || d.view_source().is_some() {
            return Err(data_err(
                graph,
                t,
                "only leaves (not views) can be placed as weights".into(),
            ));
        }
        let off = end.div_ceil(align) * align;
        end = off + size_of(&d).max(d.nbytes());
        placed.push((t, off));
    }
    Ok((placed, end))
}

/// A new block for `buffer` holding `placed`, with a fresh key written into
/// each placed tensor of `graph`.
pub(crate) fn new_block(
    graph: &mut Graph,
    backend: BackendId,
    buffer: Buffer,
    placed: &[(TensorId, u64)],
) -> WeightBlock {
    let key = new_buffer_key();
    let mut offsets = HashMap::with_capacity(placed.len());
    for &(t, off) in placed {
        offsets.insert(graph.name(t).to_string(), off);
        let d = &mut graph.tensors_mut()[t.index()];
        d.buffer = key;
        d.offset = off;
    }
    WeightBlock {
        backend,
        key,
        buffer,
        offsets,
    }
}
