//! Recorded graphs, replayed instead of planned again.
//!
//! A decode step computes the same graph every token (fixed shapes, padded
//! KV cache), and planning its ops gives the same kernels every time. A
//! stream therefore records what it dispatched for a graph (pipeline,
//! storage bindings, parameter words and workgroup counts, in order) and,
//! when the next graph's descriptors are byte-identical and nothing else
//! the planning read has changed, records those kernels again without
//! running the op encoders. Batching into submissions is the encoder's
//! own (it depends only on the kernel count), so a replay submits exactly
//! what a fresh encoding would.
//!
//! What planning reads besides the descriptors: the stream's facts and
//! tuning (fixed for a stream), the device's buffers by id (ids are never
//! reused; every free empties the recordings, [`Recordings::clear`]), the
//! split-layout set (fixed per buffer id), the stream's scratch buffer
//! (its identity and so its size: a recording is kept only when scratch
//! was not replaced while encoding, and is replayed only on that same
//! buffer), and per-graph state that starts empty every graph (the kept
//! converted copy). A graph whose encoding failed is not recorded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use backplane_abi::TensorDesc;
use backplane_shaders::PipelineKey;

use crate::bind_cache::Binding;
use crate::lock;
use crate::pipelines::Pipeline;

pub mod native;

/// Recorded graphs kept per stream (least recently used dropped first).
pub const RECORDINGS_PER_STREAM: usize = 4;

/// Bind groups one recorded kernel keeps, one per parameter buffer of the
/// device's pool it ran with.
const BIND_GROUPS_PER_KERNEL: usize = 8;

/// One kernel as the op encoders asked for it.
pub struct Step {
    /// The pipeline.
    pub pipeline: Arc<Pipeline>,
    /// The key it was built from (none for the native kernels' pipelines,
    /// which have no WGSL): what native replay builds its twin from.
    pub key: Option<PipelineKey>,
    /// Its storage bindings, in order.
    pub bindings: Vec<Binding>,
    /// Its parameter words.
    pub params: Vec<u32>,
    /// Workgroups per dimension (none zero).
    pub groups: [u32; 3],
    /// Bind groups already built for this kernel, by parameter buffer.
    bind_groups: Mutex<Vec<(wgpu::Buffer, wgpu::BindGroup)>>,
}

impl Step {
    /// A kernel of `pipeline` (built from `key`, if any) over `bindings`
    /// with `params` and `groups`.
    pub fn new(
        pipeline: Arc<Pipeline>,
        key: Option<PipelineKey>,
        bindings: &[Binding],
        params: &[u32],
        groups: [u32; 3],
    ) -> Step {
        Step {
            pipeline,
            key,
            bindings: bindings.to_vec(),
            params: params.to_vec(),
            groups,
            bind_groups: Mutex::default(),
        }
    }

    /// The bind group of this kernel with `params` as its parameter buffer,
    /// built by `build` the first time (at most
    /// [`BIND_GROUPS_PER_KERNEL`] kept; the oldest goes first).
    pub fn bind_group(
        &self,
        params: &wgpu::Buffer,
        build: impl FnOnce() -> wgpu::BindGroup,
    ) -> wgpu::BindGroup {
        let mut kept = lock(&self.bind_groups);
        if let Some((_, bg)) = kept.iter().find(|(b, _)| b == params) {
            return bg.clone();
        }
        let bg = build();
        if kept.len() >= BIND_GROUPS_PER_KERNEL {
            kept.remove(0);
        }
        kept.push((params.clone(), bg.clone()));
        bg
    }
}

/// What one graph dispatched, and what replaying it needs unchanged.
pub struct Recording {
    /// The graph's descriptors.
    graph: Vec<TensorDesc>,
    /// Their hash ([`graph_hash`]).
    hash: u64,
    /// The scratch buffer the kernels bind (none when they bind none).
    pub scratch: Option<Arc<wgpu::Buffer>>,
    /// The kernels in order.
    pub steps: Vec<Step>,
    /// Whether a kernel binds the error flag (read back after the graph).
    pub error_flag_used: bool,
    /// Its native command buffer, once built ([`crate::replay::native`]).
    pub native: native::NativeSlot,
}

impl Recording {
    /// The recording of `graph`, which dispatched `steps` with `scratch` as
    /// the stream's scratch buffer throughout.
    pub fn new(
        graph: &[TensorDesc],
        scratch: Option<Arc<wgpu::Buffer>>,
        steps: Vec<Step>,
        error_flag_used: bool,
    ) -> Recording {
        Recording {
            graph: graph.to_vec(),
            hash: graph_hash(graph),
            scratch,
            steps,
            error_flag_used,
            native: Default::default(),
        }
    }

    /// Whether this records `graph` (hash `hash`) run with `scratch`.
    fn matches(
        &self,
        graph: &[TensorDesc],
        hash: u64,
        scratch: Option<&Arc<wgpu::Buffer>>,
    ) -> bool {
        self.hash == hash && self.records(graph, scratch)
    }

    /// Whether this records `graph` run with `scratch`, comparing the
    /// descriptors' bytes.
    fn records(&self, graph: &[TensorDesc], scratch: Option<&Arc<wgpu::Buffer>>) -> bool {
        same_buffer(self.scratch.as_ref(), scratch)
            && bytemuck::cast_slice::<TensorDesc, u8>(&self.graph)
                == bytemuck::cast_slice::<TensorDesc, u8>(graph)
    }
}

/// Whether two optional buffers are the same one.
pub fn same_buffer(a: Option<&Arc<wgpu::Buffer>>, b: Option<&Arc<wgpu::Buffer>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// A hash of every field of every descriptor (all integers, so equal
/// hashes and a field-wise compare mean byte-identical graphs).
pub fn graph_hash(graph: &[TensorDesc]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ graph.len() as u64;
    let mut mix = |w: u64| {
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    };
    for t in graph {
        mix(u64::from(t.dtype) | (u64::from(t.op) << 32));
        t.ne.iter().for_each(|&n| mix(n as u64));
        t.nb.iter().for_each(|&n| mix(n));
        t.op_params.iter().for_each(|&p| mix(p as u32 as u64));
        t.src.iter().for_each(|&s| mix(s as u32 as u64));
        mix(u64::from(t.view_src as u32) | (u64::from(t.flags) << 32));
        mix(t.view_offset);
        mix(t.buffer);
        mix(t.offset);
    }
    h
}

/// Graphs replayed in this process (for tests and measurements).
static REPLAYED: AtomicU64 = AtomicU64::new(0);

/// How many graphs the streams of this process have replayed so far.
pub fn replayed_graphs() -> u64 {
    REPLAYED.load(Ordering::Relaxed)
}

/// Counts one replayed graph.
pub fn count_replay() {
    REPLAYED.fetch_add(1, Ordering::Relaxed);
}

/// A new stream's id for [`Recordings`] (unique in the process).
pub fn next_stream_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Per stream, most recently used last; and how many times every
/// recording was dropped (a recording made across a drop is not kept).
type Lists = (HashMap<u64, Vec<Arc<Recording>>>, u64);

/// The recordings of every stream of one device, by stream id. They hold
/// the buffers their kernels bind, so the device empties them whenever a
/// buffer is freed.
#[derive(Default)]
pub struct Recordings {
    map: Mutex<Lists>,
}

impl Recordings {
    /// The current generation: pass it to [`Recordings::keep`] with a
    /// recording begun now.
    pub fn generation(&self) -> u64 {
        lock(&self.map).1
    }

    /// The recording of `graph` on stream `stream` run with `scratch`, if
    /// one is kept (it becomes the most recently used).
    pub fn find(
        &self,
        stream: u64,
        graph: &[TensorDesc],
        scratch: Option<&Arc<wgpu::Buffer>>,
    ) -> Option<Arc<Recording>> {
        let mut map = lock(&self.map);
        let list = map.0.get_mut(&stream)?;
        // The most recent one first, by its bytes alone: a decode step runs
        // the graph of the step before, and comparing is cheaper than
        // hashing (one pass, no dependent multiplies).
        if let Some(r) = list.last().filter(|r| r.records(graph, scratch)) {
            return Some(Arc::clone(r));
        }
        let hash = graph_hash(graph);
        let at = list.iter().position(|r| r.matches(graph, hash, scratch))?;
        let r = list.remove(at);
        list.push(Arc::clone(&r));
        Some(r)
    }

    /// Keeps `recording` for stream `stream`, begun at `generation`,
    /// dropping its least recently used one beyond
    /// [`RECORDINGS_PER_STREAM`]; a recording begun before the last
    /// [`Recordings::clear`] is dropped instead (it may bind a freed buffer).
    pub fn keep(&self, stream: u64, generation: u64, recording: Recording) {
        let mut map = lock(&self.map);
        if map.1 != generation {
            return;
        }
        let list = map.0.entry(stream).or_default();
        list.retain(|r| !r.matches(&recording.graph, recording.hash, recording.scratch.as_ref()));
        if list.len() >= RECORDINGS_PER_STREAM {
            list.remove(0);
        }
        list.push(Arc::new(recording));
    }

    /// Drops the recordings of stream `stream`.
    pub fn forget_stream(&self, stream: u64) {
        lock(&self.map).0.remove(&stream);
    }

    /// Drops every recording (a buffer was freed).
    pub fn clear(&self) {
        let mut map = lock(&self.map);
        map.0.clear();
        map.1 += 1;
    }

    /// Recordings kept for stream `stream`.
    pub fn count(&self, stream: u64) -> usize {
        lock(&self.map).0.get(&stream).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane_abi::DType;

    fn graph(k: i64) -> Vec<TensorDesc> {
        vec![TensorDesc::new(DType::F32, [k, 2, 1, 1]); 3]
    }

    fn recording(k: i64) -> Recording {
        Recording::new(&graph(k), None, Vec::new(), false)
    }

    #[test]
    fn a_stream_keeps_its_four_most_recently_used_graphs() {
        let r = Recordings::default();
        let g = r.generation();
        for k in 1..=4 {
            r.keep(7, g, recording(k));
        }
        // Using graph 1 makes graph 2 the least recently used.
        assert!(r.find(7, &graph(1), None).is_some());
        r.keep(7, g, recording(5));
        assert_eq!(r.count(7), RECORDINGS_PER_STREAM);
        assert!(r.find(7, &graph(2), None).is_none());
        for k in [1, 3, 4, 5] {
            assert!(r.find(7, &graph(k), None).is_some(), "graph {k}");
        }
        // Other streams and other graphs find nothing.
        assert!(r.find(8, &graph(1), None).is_none());
        let mut changed = graph(1);
        changed[2].offset = 64;
        assert!(r.find(7, &changed, None).is_none());
        r.forget_stream(7);
        assert_eq!(r.count(7), 0);
    }

    #[test]
    fn a_recording_begun_before_a_free_is_not_kept() {
        let r = Recordings::default();
        let before = r.generation();
        r.keep(1, before, recording(1));
        r.clear();
        assert_eq!(r.count(1), 0);
        r.keep(1, before, recording(2));
        assert_eq!(r.count(1), 0);
        r.keep(1, r.generation(), recording(2));
        assert!(r.find(1, &graph(2), None).is_some());
    }

    #[test]
    fn every_field_of_a_descriptor_changes_the_hash() {
        let base = graph(4);
        let h = graph_hash(&base);
        let edits: [fn(&mut TensorDesc); 9] = [
            |t| t.dtype = DType::F16.code(),
            |t| t.ne[3] = 2,
            |t| t.nb[2] += 4,
            |t| t.op_params[5] = 1,
            |t| t.src[1] = 0,
            |t| t.view_src = 0,
            |t| t.view_offset = 8,
            |t| t.buffer = 9,
            |t| t.offset = 256,
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut g = base.clone();
            edit(&mut g[1]);
            assert_ne!(graph_hash(&g), h, "edit {i}");
        }
        assert_ne!(graph_hash(&base[..2]), h);
    }
}
