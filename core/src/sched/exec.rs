//! The [`Scheduler`]: a [`Planner`] over real devices, with their streams,
//! compute buffers, weight buffers, copies between backends and compute.

use std::collections::HashMap;
use std::sync::Arc;

use backplane_abi::plugin::{DeviceCaps, PluginError};
use backplane_abi::{Op, TensorDesc, flags};

use super::alloc::Loc;
use super::dot::to_dot;
use super::explain::Explanation;
use super::placement::{DevicePlacement, Placement};
use super::plan::{Plan, Planner};
use super::split::Entry;
use super::{BackendId, SchedError, SchedOptions};
use crate::graph::{Graph, TensorId};
use crate::host::HostTensors;
use crate::registry::{Buffer, Device, Event, Stream};

/// Weights placed in one buffer of one backend by [`Scheduler::place_weights`].
pub struct WeightBlock {
    /// The backend whose memory holds them.
    pub backend: BackendId,
    buffer: Buffer,
    /// Tensor name -> byte offset in the buffer.
    offsets: HashMap<String, u64>,
}

impl WeightBlock {
    /// Id of the buffer (as in `TensorDesc::buffer`).
    pub fn buffer_id(&self) -> u64 {
        self.buffer.id()
    }

    /// Bytes of the buffer.
    pub fn size_bytes(&self) -> u64 {
        self.buffer.size()
    }
}

/// Counters of the scheduler's work since it was made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Graphs computed.
    pub runs: u64,
    /// Compute buffers allocated (a reserve that fits keeps this still).
    pub buffer_allocations: u64,
    /// Tensors copied between backends.
    pub copies: u64,
    /// Bytes those copies moved.
    pub bytes_copied: u64,
}

/// Runs graphs over several devices: highest priority first, the CPU last.
pub struct Scheduler {
    planner: Planner,
    devices: Vec<Device>,
    caps: Vec<DeviceCaps>,
    streams: Vec<Stream>,
    events: Vec<Option<Event>>,
    compute: Vec<Option<Buffer>>,
    weights: Vec<WeightBlock>,
    stats: RunStats,
}

fn plugin_err(backend: &str, call: impl Into<String>, e: PluginError) -> SchedError {
    SchedError::Backend {
        backend: backend.to_string(),
        call: call.into(),
        message: e.to_string(),
    }
}

impl Scheduler {
    /// A scheduler over `devices` in priority order (put the CPU last).
    pub fn new(devices: Vec<Device>, options: SchedOptions) -> Result<Scheduler, SchedError> {
        let placements: Vec<Box<dyn Placement + Send + Sync>> = devices
            .iter()
            .map(|d| Box::new(DevicePlacement::new(d.clone())) as Box<dyn Placement + Send + Sync>)
            .collect();
        let planner = Planner::new(placements, options)?;
        let mut streams = Vec::new();
        let mut events = Vec::new();
        let mut caps = Vec::new();
        for (b, d) in devices.iter().enumerate() {
            let name = &planner.backend_names()[b];
            streams.push(
                d.init_backend("")
                    .map_err(|e| plugin_err(name, "init_backend", e))?,
            );
            let c = d.caps();
            caps.push(c);
            events.push(if c.events { d.new_event().ok() } else { None });
        }
        let n = devices.len();
        Ok(Scheduler {
            planner,
            devices,
            caps,
            streams,
            events,
            compute: (0..n).map(|_| None).collect(),
            weights: Vec::new(),
            stats: RunStats::default(),
        })
    }

    /// The planner (options, pins, cache counters).
    pub fn planner(&self) -> &Planner {
        &self.planner
    }

    /// The planner, to change options or pins.
    pub fn planner_mut(&mut self) -> &mut Planner {
        &mut self.planner
    }

    /// The devices, in priority order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Work counters.
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// Pins tensor `t` to backend `backend` in graphs planned from now on.
    pub fn pin(&mut self, t: TensorId, backend: BackendId) -> Result<(), SchedError> {
        self.planner.pin(t.index(), backend)
    }

    fn name(&self, b: BackendId) -> &str {
        &self.planner.backend_names()[b]
    }

    /// Places weight leaves `tensors` of `graph` in one new buffer of
    /// backend `backend`, writing the buffer id and offsets into the graph;
    /// ops reading them are then pulled to that backend. Fill them with
    /// [`Scheduler::upload`]; later graphs get the same placement through
    /// [`Scheduler::bind_weights`] (matched by name).
    pub fn place_weights(
        &mut self,
        graph: &mut Graph,
        backend: BackendId,
        tensors: &[TensorId],
    ) -> Result<&WeightBlock, SchedError> {
        let count = self.devices.len();
        let device = self
            .devices
            .get(backend)
            .ok_or(SchedError::UnknownBackend {
                index: backend,
                count,
            })?;
        let buft = device.buffer_type();
        let align = buft.alignment().max(1);
        let mut offsets = HashMap::new();
        let mut end = 0u64;
        let mut placed = Vec::new();
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
            end = off + buft.alloc_size(&d).max(d.nbytes());
            offsets.insert(graph.name(t).to_string(), off);
            placed.push((t, off));
        }
        if end > buft.max_size() {
            return Err(SchedError::BufferTooLarge {
                backend: self.name(backend).to_string(),
                size_bytes: end,
                max_bytes: buft.max_size(),
            });
        }
        let buffer = buft.alloc_buffer(end).map_err(|e| {
            plugin_err(
                self.name(backend),
                format!("alloc_buffer of {end} bytes for weights"),
                e,
            )
        })?;
        self.planner.register_buffer(buffer.id(), backend)?;
        for (t, off) in placed {
            let d = &mut graph.tensors_mut()[t.index()];
            d.buffer = buffer.id();
            d.offset = off;
        }
        self.weights.push(WeightBlock {
            backend,
            buffer,
            offsets,
        });
        Ok(self.weights.last().expect("just pushed"))
    }

    /// Gives the leaves of `graph` named like placed weights their
    /// placement; returns how many were bound.
    pub fn bind_weights(&self, graph: &mut Graph) -> usize {
        let mut bound = 0;
        for t in graph.ids().collect::<Vec<_>>() {
            if graph.desc(t).op().is_ok_and(|op| op != Op::None) {
                continue;
            }
            let name = graph.name(t).to_string();
            if let Some(w) = self.weights.iter().find(|w| w.offsets.contains_key(&name)) {
                let d = &mut graph.tensors_mut()[t.index()];
                d.buffer = w.buffer.id();
                d.offset = w.offsets[&name];
                bound += 1;
            }
        }
        bound
    }

    /// Writes `data` into a placed weight of `graph`.
    pub fn upload(&self, graph: &Graph, t: TensorId, data: &[u8]) -> Result<(), SchedError> {
        let d = *graph
            .try_desc(t)
            .map_err(|e| data_err(graph, t, e.to_string()))?;
        let w = self
            .weights
            .iter()
            .find(|w| d.buffer != 0 && w.buffer.id() == d.buffer)
            .ok_or_else(|| {
                data_err(
                    graph,
                    t,
                    "not a placed weight (see place_weights / bind_weights)".into(),
                )
            })?;
        w.buffer.set_tensor(&d, 0, data).map_err(|e| {
            plugin_err(
                self.name(w.backend),
                format!("set_tensor of weight '{}'", graph.name(t)),
                e,
            )
        })
    }

    /// Plans `graph` and makes sure every compute buffer can hold it. Later
    /// graphs needing no more memory do not allocate.
    pub fn reserve(&mut self, graph: &Graph) -> Result<Arc<Plan>, SchedError> {
        let plan = self.planner.plan(graph)?;
        self.ensure_buffers(&plan)?;
        Ok(plan)
    }

    fn ensure_buffers(&mut self, plan: &Plan) -> Result<(), SchedError> {
        for b in 0..self.devices.len() {
            let need = plan.stats.peak_bytes[b];
            if need == 0
                || self.compute[b]
                    .as_ref()
                    .is_some_and(|buf| buf.size() >= need)
            {
                continue;
            }
            let buft = self.devices[b].buffer_type();
            if need > buft.max_size() {
                return Err(SchedError::BufferTooLarge {
                    backend: self.name(b).to_string(),
                    size_bytes: need,
                    max_bytes: buft.max_size(),
                });
            }
            self.compute[b] = None;
            let buf = buft.alloc_buffer(need).map_err(|e| {
                plugin_err(
                    self.name(b),
                    format!("alloc_buffer of {need} bytes (compute buffer)"),
                    e,
                )
            })?;
            self.compute[b] = Some(buf);
            self.stats.buffer_allocations += 1;
        }
        Ok(())
    }

    fn bind(&self, loc: Loc) -> (u64, u64) {
        match loc {
            Loc::None => (0, 0),
            Loc::Compute { backend, offset } => {
                (self.compute[backend].as_ref().map_or(0, Buffer::id), offset)
            }
            Loc::External { buffer, offset } => (buffer, offset),
        }
    }

    fn buffer_at(&self, loc: Loc) -> Option<&Buffer> {
        match loc {
            Loc::None => None,
            Loc::Compute { backend, .. } => self.compute[backend].as_ref(),
            Loc::External { buffer, .. } => self
                .weights
                .iter()
                .find(|w| w.buffer.id() == buffer)
                .map(|w| &w.buffer),
        }
    }

    fn bound(&self, d: &TensorDesc, loc: Loc) -> TensorDesc {
        let mut d = *d;
        (d.buffer, d.offset) = self.bind(loc);
        d
    }

    /// Runs `graph`: uploads its leaves that are not placed weights from
    /// `host`, computes split by split with copies between backends, waits
    /// for every backend, and reads its outputs (tensors flagged OUTPUT, or
    /// the last node when none is) back into `host`.
    pub fn compute(
        &mut self,
        graph: &Graph,
        host: &mut HostTensors,
    ) -> Result<Arc<Plan>, SchedError> {
        let plan = self.planner.plan(graph)?;
        self.ensure_buffers(&plan)?;
        let g = graph.tensors();
        let a = &plan.assignment;
        let alloc = &plan.allocation;

        for (i, d) in g.iter().enumerate() {
            let is_leaf = d.op().is_ok_and(|op| op == Op::None);
            if !is_leaf || a.root[i] != i || a.preplaced[i].is_some() {
                continue;
            }
            let loc = alloc.tensor[i];
            let Some(buf) = self.buffer_at(loc) else {
                continue;
            };
            let data = host.bytes(TensorId(i));
            buf.set_tensor(&self.bound(d, loc), 0, data).map_err(|e| {
                plugin_err(
                    self.name(a.backend[i]),
                    format!("set_tensor of input '{}'", graph.name(TensorId(i))),
                    e,
                )
            })?;
        }

        let nb = self.devices.len();
        let mut pending: Vec<Vec<BackendId>> = vec![Vec::new(); nb];
        let mut used = vec![false; nb];
        for (k, split) in plan.splits.iter().enumerate() {
            let b = split.backend;
            for r in std::mem::take(&mut pending[b]) {
                self.wait_for(r, b)?;
            }
            for &c in &split.copies {
                self.copy(graph, &plan, c, &mut pending)?;
            }
            let descs: Vec<TensorDesc> = split
                .graph
                .iter()
                .zip(&split.entries)
                .map(|(d, e)| match *e {
                    Entry::Tensor(t) => self.bound(d, alloc.tensor[t]),
                    Entry::Copy(c) => self.bound(d, alloc.copy[c]),
                })
                .collect();
            let first = split.nodes[0];
            self.streams[b].graph_compute(&descs).map_err(|e| {
                plugin_err(
                    self.name(b),
                    format!(
                        "graph_compute of split {k} ({} nodes from node {first} '{}', {})",
                        split.nodes.len(),
                        graph.name(TensorId(first)),
                        g[first]
                            .op()
                            .map_or_else(|e| e.to_string(), |o| o.to_string())
                    ),
                    e,
                )
            })?;
            used[b] = true;
            if let Some(ev) = &self.events[b] {
                self.streams[b]
                    .event_record(ev)
                    .map_err(|e| plugin_err(self.name(b), "event_record", e))?;
            }
        }
        for b in 0..nb {
            if used[b] || !pending[b].is_empty() {
                self.streams[b]
                    .synchronize()
                    .map_err(|e| plugin_err(self.name(b), "synchronize", e))?;
            }
            for r in std::mem::take(&mut pending[b]) {
                self.streams[r]
                    .synchronize()
                    .map_err(|e| plugin_err(self.name(r), "synchronize", e))?;
            }
        }

        let mut outputs = graph.outputs();
        if outputs.is_empty()
            && let Some(last) = plan.splits.last().and_then(|s| s.nodes.last())
        {
            outputs.push(TensorId(*last));
        }
        for t in outputs {
            let d = graph.desc(t);
            let loc = alloc.tensor[t.index()];
            let buf = self
                .buffer_at(loc)
                .ok_or_else(|| data_err(graph, t, "output has no memory".into()))?;
            let mut bytes = vec![0u8; d.nbytes() as usize];
            buf.get_tensor(&self.bound(d, loc), 0, &mut bytes)
                .map_err(|e| {
                    plugin_err(
                        self.name(a.memory_backend(t.index())),
                        format!("get_tensor of output '{}'", graph.name(t)),
                        e,
                    )
                })?;
            host.set_bytes(graph, t, &bytes)
                .map_err(|e| data_err(graph, t, e.to_string()))?;
        }
        self.stats.runs += 1;
        Ok(plan)
    }

    /// Makes backend `m` wait until backend `r`'s queued work (reading `m`'s memory) is done.
    fn wait_for(&self, r: BackendId, m: BackendId) -> Result<(), SchedError> {
        if let (Some(ev), true) = (&self.events[r], self.caps[m].events) {
            self.streams[r]
                .event_record(ev)
                .map_err(|e| plugin_err(self.name(r), "event_record", e))?;
            self.streams[m]
                .event_wait(ev)
                .map_err(|e| plugin_err(self.name(m), "event_wait", e))
        } else {
            self.streams[r]
                .synchronize()
                .map_err(|e| plugin_err(self.name(r), "synchronize", e))
        }
    }

    /// Copies plan copy `c` into its backend: queued on the destination
    /// stream when both sides are one plugin offering async copies and
    /// events, else synchronously (through host memory when the plugins differ).
    fn copy(
        &mut self,
        graph: &Graph,
        plan: &Plan,
        c: usize,
        pending: &mut [Vec<BackendId>],
    ) -> Result<(), SchedError> {
        let copy = &plan.copies[c];
        let (m, to) = (copy.from, copy.to);
        let src_loc = plan.allocation.tensor[copy.tensor];
        let dst_loc = plan.allocation.copy[c];
        let src = self.bound(&graph.tensors()[copy.tensor], src_loc);
        let dst = self.bound(&copy.desc, dst_loc);
        self.stats.copies += 1;
        self.stats.bytes_copied += copy.bytes;
        let what = || {
            format!(
                "copy of '{}' ({} bytes) from {}",
                graph.name(TensorId(copy.tensor)),
                copy.bytes,
                self.name(m)
            )
        };
        let same_plugin = self.devices[m].backend() == self.devices[to].backend();
        if same_plugin && self.caps[to].async_ops && self.caps[to].events {
            if let Some(ev) = &self.events[m] {
                self.streams[to]
                    .event_wait(ev)
                    .map_err(|e| plugin_err(self.name(to), "event_wait", e))?;
            } else {
                self.streams[m]
                    .synchronize()
                    .map_err(|e| plugin_err(self.name(m), "synchronize", e))?;
            }
            if self.streams[to]
                .cpy_tensor_async(&src, &dst)
                .map_err(|e| plugin_err(self.name(to), what(), e))?
            {
                pending[m].push(to);
                return Ok(());
            }
        }
        self.streams[m]
            .synchronize()
            .map_err(|e| plugin_err(self.name(m), "synchronize", e))?;
        self.streams[to]
            .synchronize()
            .map_err(|e| plugin_err(self.name(to), "synchronize", e))?;
        let src_buf = self.buffer_at(src_loc).ok_or_else(|| {
            data_err(
                graph,
                TensorId(copy.tensor),
                "copy source has no memory".into(),
            )
        })?;
        let dst_buf = self.buffer_at(dst_loc).ok_or_else(|| {
            data_err(
                graph,
                TensorId(copy.tensor),
                "copy destination has no memory".into(),
            )
        })?;
        if same_plugin
            && dst_buf
                .cpy_tensor(&src, &dst)
                .map_err(|e| plugin_err(self.name(to), what(), e))?
        {
            return Ok(());
        }
        let mut tmp = vec![0u8; copy.bytes as usize];
        src_buf
            .get_tensor(&src, 0, &mut tmp)
            .map_err(|e| plugin_err(self.name(m), what(), e))?;
        dst_buf
            .set_tensor(&dst, 0, &tmp)
            .map_err(|e| plugin_err(self.name(to), what(), e))
    }

    /// The routing of `graph` (planned, or from the cache), strict mode or not.
    pub fn explain(&mut self, graph: &Graph) -> Result<Explanation, SchedError> {
        let plan = self.planner.plan_lenient(graph)?;
        Ok(Explanation::new(&plan, graph))
    }

    /// The scheduled `graph` as Graphviz DOT, coloured by backend.
    pub fn dot(&mut self, graph: &Graph) -> Result<String, SchedError> {
        let plan = self.planner.plan_lenient(graph)?;
        Ok(to_dot(&plan, graph))
    }

    /// Leaves of `graph` flagged as weights that are not placed yet.
    pub fn unplaced_weights(graph: &Graph) -> Vec<TensorId> {
        graph
            .ids()
            .filter(|&t| graph.desc(t).has_flag(flags::WEIGHT) && graph.desc(t).buffer == 0)
            .collect()
    }
}

fn data_err(graph: &Graph, t: TensorId, reason: String) -> SchedError {
    let name = if t.index() < graph.len() {
        graph.name(t).to_string()
    } else {
        String::new()
    };
    SchedError::Data {
        tensor: t.index(),
        name,
        reason,
    }
}
