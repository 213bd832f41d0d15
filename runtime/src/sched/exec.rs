//! The [`Scheduler`]: a [`Planner`] over real devices, with their streams,
//! compute buffers, weight buffers, copies between backends and compute.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backplane_abi::plugin::{DeviceCaps, DeviceType, PluginError};
use backplane_abi::{Op, TensorDesc, flags};

use super::alloc::Loc;
use super::dot::to_dot;
use super::explain::Explanation;
use super::placement::{DevicePlacement, Placement};
use super::plan::{Plan, Planner};
use super::watchdog::Watchdog;
use super::weights::{self, WeightBlock, WeightBlocks};
use super::{BackendId, SchedError, SchedOptions, data_err};
use crate::graph::{Graph, TensorId};
use crate::host::HostTensors;
use crate::registry::{Buffer, Device, Event, Stream};

mod calls;
mod loss;

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
    /// Time spent planning (or finding the plan in the cache).
    pub plan_time: Duration,
    /// Time spent writing inputs into device memory.
    pub upload_time: Duration,
    /// Time spent reading outputs back.
    pub download_time: Duration,
    /// Time inside the backends' `graph_compute`, `synchronize` and event
    /// calls: the devices' work, or waiting for it.
    pub backend_time: Duration,
    /// Time copying tensors between backends (the `copies` above), their
    /// waits on other backends' work included.
    pub copy_time: Duration,
    /// Time of whole [`Scheduler::run`] / [`Scheduler::compute`] calls.
    pub total_time: Duration,
}

impl RunStats {
    /// The share of run time spent in the host rather than inside the
    /// backends' compute and synchronize calls (planning, uploads, copies,
    /// downloads, dispatch), from 0 to 1.
    pub fn host_share(&self) -> f64 {
        let total = self.total_time.as_secs_f64();
        if total <= 0.0 {
            return 0.0;
        }
        ((total - self.backend_time.as_secs_f64()) / total).clamp(0.0, 1.0)
    }
}

/// Runs graphs over several devices: highest priority first, the CPU last.
pub struct Scheduler {
    planner: Planner,
    devices: Vec<Device>,
    caps: Vec<DeviceCaps>,
    streams: Vec<Arc<Stream>>,
    /// Per device: nothing queued on its stream since its last
    /// `synchronize` (no compute, async copy or event wait), so a
    /// synchronize would wait for nothing and is skipped (a trip to the
    /// device's call thread saved: a decode step copies its inputs from
    /// the CPU to a GPU, each copy synchronizing both sides).
    idle: Vec<bool>,
    events: Vec<Option<Event>>,
    compute: Vec<Option<Buffer>>,
    weights: WeightBlocks,
    watchdogs: Vec<Watchdog>,
    /// Per device: out of service after a failed call, until it accepts
    /// the refused node again (`loss`).
    lost: Vec<Option<loss::Lost>>,
    stats: RunStats,
    /// Counts changes of the buffers descriptors are bound to (compute
    /// buffers, placed weights), so bound descriptors are reused only
    /// while it stays.
    buffers_generation: u64,
    /// The last plan's split descriptors, bound to buffer ids.
    bound: Option<calls::BoundSplits>,
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
        let params: Vec<String> = devices
            .iter()
            .map(|d| options.backend_options.params(d.backend()).to_string())
            .collect();
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
            streams.push(Arc::new(
                d.init_backend(&params[b])
                    .map_err(|e| plugin_err(name, "init_backend", e))?,
            ));
            let c = d.caps();
            caps.push(c);
            events.push(if c.events { d.new_event().ok() } else { None });
        }
        let n = devices.len();
        let watchdogs = devices
            .iter()
            .map(|d| {
                Watchdog::for_device(matches!(
                    d.device_type(),
                    DeviceType::Gpu | DeviceType::IGpu
                ))
            })
            .collect();
        Ok(Scheduler {
            planner,
            devices,
            caps,
            streams,
            idle: vec![true; n],
            events,
            compute: (0..n).map(|_| None).collect(),
            weights: WeightBlocks::default(),
            watchdogs,
            lost: (0..n).map(|_| None).collect(),
            stats: RunStats::default(),
            buffers_generation: 0,
            bound: None,
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

    /// Places leaves `tensors` of `graph` (weights, or caches the graph
    /// writes into) in one new buffer of backend `backend`, writing the
    /// buffer's key and the offsets into the graph; ops reading them are
    /// then pulled to that backend. Fill them with [`Scheduler::upload`];
    /// later graphs get the same placement through
    /// [`Scheduler::bind_weights`] (matched by name).
    ///
    /// The key written into `TensorDesc::buffer` is unique in the host, not
    /// the plugin's own buffer id: plugins number buffers independently, and
    /// the scheduler turns the key back into the plugin's id only when it
    /// hands a descriptor to that plugin.
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
        self.place_in(graph, backend, &buft, tensors)
    }

    /// As [`Scheduler::place_weights`], but each tensor goes into the
    /// first of the device's extra buffer types (a layout of its own, such
    /// as the CPU's repacked weights) that runs every op of `graph` reading
    /// it, as ggml's extra buffer types; the rest into the default buffer
    /// type. Returns the keys of the blocks made, the default one first.
    pub fn place_weights_preferred(
        &mut self,
        graph: &mut Graph,
        backend: BackendId,
        tensors: &[TensorId],
    ) -> Result<Vec<u64>, SchedError> {
        let count = self.devices.len();
        let device = self
            .devices
            .get(backend)
            .ok_or(SchedError::UnknownBackend {
                index: backend,
                count,
            })?;
        let extra = device.extra_buffer_types().to_vec();
        let groups = weights::by_preferred_type(graph, &extra, tensors);
        let mut keys = Vec::new();
        for (slot, group) in groups.iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let buft = match slot.checked_sub(1) {
                Some(i) => extra[i].clone(),
                None => self.devices[backend].buffer_type(),
            };
            match self.place_in(graph, backend, &buft, group) {
                Ok(block) => keys.push(block.key()),
                Err(e) => {
                    for k in keys {
                        self.release_weights(k);
                    }
                    return Err(e);
                }
            }
        }
        Ok(keys)
    }

    /// Places `tensors` in one new buffer of `buft` on `backend`.
    fn place_in(
        &mut self,
        graph: &mut Graph,
        backend: BackendId,
        buft: &crate::registry::BufferType,
        tensors: &[TensorId],
    ) -> Result<&WeightBlock, SchedError> {
        let align = buft.alignment().max(1);
        let (placed, end) = weights::lay_out(graph, tensors, align, |d| buft.alloc_size(d))?;
        if end > buft.max_size() {
            return Err(SchedError::BufferTooLarge {
                backend: self.name(backend).to_string(),
                size_bytes: end,
                max_bytes: buft.max_size(),
            });
        }
        let buffer = buft.alloc_buffer(end.max(1)).map_err(|e| {
            plugin_err(
                self.name(backend),
                format!(
                    "alloc_buffer of {end} bytes in '{}' for weights",
                    buft.name()
                ),
                e,
            )
        })?;
        let block = weights::new_block(graph, backend, buffer, &placed);
        self.planner.register_buffer(block.key(), backend)?;
        self.weights.push(block);
        self.buffers_generation += 1;
        Ok(self.weights.last().expect("just pushed"))
    }

    /// Gives the leaves of `graph` named like placed weights their
    /// placement; returns how many were bound.
    pub fn bind_weights(&self, graph: &mut Graph) -> usize {
        self.weights.bind(graph)
    }

    /// Frees the placed buffer with key `key` (a session's KV cache, weights
    /// no longer needed) and forgets its key: graphs still naming it fail
    /// to plan with an error naming the key. Returns false when no buffer
    /// has that key. A buffer of a device out of service is not freed
    /// (its stuck call may still use it) but forgotten all the same.
    pub fn release_weights(&mut self, key: u64) -> bool {
        let Some(block) = self.weights.remove(key) else {
            return false;
        };
        self.buffers_generation += 1;
        self.planner.unregister_buffer(key);
        if self.watchdogs[block.backend].is_stuck() {
            std::mem::forget(block);
        }
        true
    }

    /// The placed buffers, in the order they were placed.
    pub fn weight_blocks(&self) -> impl Iterator<Item = &WeightBlock> {
        self.weights.iter()
    }

    /// Writes `data` into a placed weight of `graph`.
    pub fn upload(&self, graph: &Graph, t: TensorId, data: &[u8]) -> Result<(), SchedError> {
        let d = *graph
            .try_desc(t)
            .map_err(|e| data_err(graph, t, e.to_string()))?;
        let w = self
            .weights
            .get(d.buffer)
            .filter(|_| d.buffer != 0)
            .ok_or_else(|| {
                data_err(
                    graph,
                    t,
                    "not a placed weight (see place_weights / bind_weights)".into(),
                )
            })?;
        let mut bound = d;
        bound.buffer = w.buffer.id();
        w.buffer.set_tensor(&bound, 0, data).map_err(|e| {
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
            self.buffers_generation += 1;
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

    /// The plugin's own buffer id and the offset for `loc`.
    fn bind(&self, loc: Loc) -> (u64, u64) {
        match loc {
            Loc::None => (0, 0),
            Loc::Compute { backend, offset } => {
                (self.compute[backend].as_ref().map_or(0, Buffer::id), offset)
            }
            Loc::External { buffer, offset, .. } => (
                self.weights.get(buffer).map_or(0, |w| w.buffer.id()),
                offset,
            ),
        }
    }

    fn buffer_at(&self, loc: Loc) -> Option<&Buffer> {
        match loc {
            Loc::None => None,
            Loc::Compute { backend, .. } => self.compute[backend].as_ref(),
            Loc::External {
                backend, buffer, ..
            } => self
                .weights
                .get(buffer)
                .filter(|w| w.backend == backend)
                .map(|w| &w.buffer),
        }
    }

    fn bound(&self, d: &TensorDesc, loc: Loc) -> TensorDesc {
        let mut d = *d;
        (d.buffer, d.offset) = self.bind(loc);
        d
    }

    /// [`Scheduler::compute`] without the handling of lost devices.
    fn compute_once(
        &mut self,
        graph: &Graph,
        host: &mut HostTensors,
    ) -> Result<Arc<Plan>, SchedError> {
        let start = Instant::now();
        let plan = self.plan_timed(graph)?;
        let t0 = Instant::now();
        let mut data: Vec<Option<&[u8]>> = vec![None; graph.len()];
        for &i in &plan.inputs {
            data[i] = Some(host.bytes(TensorId(i)));
        }
        self.write_inputs(graph, &plan, &data)?;
        self.stats.upload_time += t0.elapsed();
        self.run_splits(graph, &plan)?;

        let t0 = Instant::now();
        let mut outputs = graph.outputs();
        if outputs.is_empty()
            && let Some(last) = plan.splits.last().and_then(|s| s.nodes.last())
        {
            outputs.push(TensorId(*last));
        }
        for t in outputs {
            let mut bytes = vec![0u8; graph.desc(t).nbytes() as usize];
            self.read_output(graph, &plan, t, &mut bytes)?;
            host.set_bytes(graph, t, &bytes)
                .map_err(|e| data_err(graph, t, e.to_string()))?;
        }
        self.stats.download_time += t0.elapsed();
        self.stats.runs += 1;
        self.stats.total_time += start.elapsed();
        Ok(plan)
    }

    /// [`Scheduler::run`] without the handling of lost devices.
    fn run_once(
        &mut self,
        graph: &Graph,
        inputs: &[(TensorId, &[u8])],
        outputs: &mut [(TensorId, &mut [u8])],
    ) -> Result<Arc<Plan>, SchedError> {
        let start = Instant::now();
        let plan = self.plan_timed(graph)?;
        let t0 = Instant::now();
        let a = &plan.assignment;
        let mut given: Vec<Option<&[u8]>> = vec![None; graph.len()];
        for &(t, data) in inputs {
            let d = graph
                .try_desc(t)
                .map_err(|e| data_err(graph, t, e.to_string()))?;
            if d.op().is_ok_and(|op| op != Op::None) || a.root[t.index()] != t.index() {
                return Err(data_err(
                    graph,
                    t,
                    "inputs must be leaves, not views".into(),
                ));
            }
            if a.preplaced[t.index()].is_some() {
                return Err(data_err(
                    graph,
                    t,
                    "is placed (weights, caches): write it with upload, not as an input".into(),
                ));
            }
            given[t.index()] = Some(data);
        }
        if let Some(&i) = plan.inputs.iter().find(|&&i| given[i].is_none()) {
            return Err(data_err(
                graph,
                TensorId(i),
                "is read by the graph but neither given as an input nor placed".into(),
            ));
        }
        self.write_inputs(graph, &plan, &given)?;
        self.stats.upload_time += t0.elapsed();
        self.run_splits(graph, &plan)?;

        let t0 = Instant::now();
        for (t, out) in outputs.iter_mut() {
            let d = graph
                .try_desc(*t)
                .map_err(|e| data_err(graph, *t, e.to_string()))?;
            let root = a.root[t.index()];
            if !d.has_flag(flags::OUTPUT) && a.preplaced[root].is_none() {
                return Err(data_err(
                    graph,
                    *t,
                    "is not flagged as an output (Graph::mark_output), so its memory may be \
                     reused before the graph ends"
                        .into(),
                ));
            }
            self.read_output(graph, &plan, *t, out)?;
        }
        self.stats.download_time += t0.elapsed();
        self.stats.runs += 1;
        self.stats.total_time += start.elapsed();
        Ok(plan)
    }

    fn plan_timed(&mut self, graph: &Graph) -> Result<Arc<Plan>, SchedError> {
        let t0 = Instant::now();
        let plan = self.planner.plan(graph)?;
        self.ensure_buffers(&plan)?;
        self.stats.plan_time += t0.elapsed();
        Ok(plan)
    }

    /// Writes the inputs' host bytes (`data`, by tensor) into their memory,
    /// as the plan's [`InputWrite`](super::inputs::InputWrite)s: one `set_tensor` per write, of one
    /// input or of several lying side by side.
    fn write_inputs(
        &self,
        graph: &Graph,
        plan: &Plan,
        data: &[Option<&[u8]>],
    ) -> Result<(), SchedError> {
        for &i in &plan.inputs {
            let t = TensorId(i);
            let (have, want) = (data[i].map_or(0, <[u8]>::len), graph.desc(t).nbytes());
            if have as u64 != want {
                return Err(data_err(
                    graph,
                    t,
                    format!("input has {have} bytes, the tensor {want}"),
                ));
            }
        }
        let mut joint = Vec::new();
        for w in &plan.input_writes {
            let loc = Loc::Compute {
                backend: w.backend,
                offset: w.offset,
            };
            let Some(buf) = self.buffer_at(loc) else {
                continue; // nothing reads them
            };
            let bytes = |i: usize| data[i].unwrap_or_default();
            let (desc, bytes) = match w.members[..] {
                [(i, _)] => (*graph.desc(TensorId(i)), bytes(i)),
                _ => {
                    joint.clear();
                    joint.resize(w.len as usize, 0u8);
                    for &(i, at) in &w.members {
                        let b = bytes(i);
                        joint[at as usize..at as usize + b.len()].copy_from_slice(b);
                    }
                    (w.desc(), &joint[..])
                }
            };
            buf.set_tensor(&self.bound(&desc, loc), 0, bytes)
                .map_err(|e| {
                    let names: Vec<String> = w
                        .members
                        .iter()
                        .map(|&(i, _)| format!("'{}'", graph.name(TensorId(i))))
                        .collect();
                    plugin_err(
                        self.name(w.backend),
                        format!("set_tensor of input {}", names.join(", ")),
                        e,
                    )
                })?;
        }
        Ok(())
    }

    /// Reads a tensor's bytes into `out` (exactly its size).
    fn read_output(
        &self,
        graph: &Graph,
        plan: &Plan,
        t: TensorId,
        out: &mut [u8],
    ) -> Result<(), SchedError> {
        let d = graph.desc(t);
        if out.len() as u64 != d.nbytes() {
            return Err(data_err(
                graph,
                t,
                format!(
                    "output slice has {} bytes, the tensor {}",
                    out.len(),
                    d.nbytes()
                ),
            ));
        }
        let loc = plan.allocation.tensor[t.index()];
        let buf = self
            .buffer_at(loc)
            .ok_or_else(|| data_err(graph, t, "output has no memory".into()))?;
        buf.get_tensor(&self.bound(d, loc), 0, out).map_err(|e| {
            plugin_err(
                self.name(plan.assignment.memory_backend(t.index())),
                loss::output_call(graph, plan, t),
                e,
            )
        })
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

impl Drop for Scheduler {
    /// A device whose call timed out still has a thread inside the plugin,
    /// which may touch that device's memory whenever it returns: its
    /// buffers, stream and events are leaked rather than freed under it.
    fn drop(&mut self) {
        for b in 0..self.devices.len() {
            if !self.watchdogs[b].is_stuck() {
                continue;
            }
            if let Some(buf) = self.compute[b].take() {
                std::mem::forget(buf);
            }
            if let Some(ev) = self.events[b].take() {
                std::mem::forget(ev);
            }
            std::mem::forget(Arc::clone(&self.streams[b]));
            self.weights.leak_backend(b);
        }
    }
}
