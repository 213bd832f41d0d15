//! Command encoding for one `graph_compute`: ops call [`Encoder::dispatch`]
//! with a pipeline key, their tensors' bindings and parameters; kernels are
//! recorded and submitted in batches of 4, 8, 16, then 32 (so the GPU
//! starts early; the `first_submit` option of [`crate::options`]), each batch with one
//! uniform buffer (256 bytes per kernel) from the device's pool, returned
//! to the pool when that submission completes.

use std::sync::Arc;
use std::time::Instant;

use backplane_abi::TensorDesc;
use backplane_shaders::PipelineKey;

pub use crate::bind_cache::Binding;
use crate::context::Ctx;
use crate::facts::Facts;
use crate::kept::{ByteRange, CopyOrigin, Kept};
use crate::pipelines::{Checks, Pipeline};
use crate::profile::GraphTimes;
use crate::replay::{Recording, Step};
use crate::{KERNELS_PER_SUBMIT, PARAM_SLOT_BYTES};

/// Per-stream memory reused across graphs.
pub struct StreamState {
    /// Scratch buffer (bump-allocated per graph).
    pub scratch: Option<Arc<wgpu::Buffer>>,
    /// Bytes of scratch used by the current graph.
    pub scratch_used: u64,
    /// Error-flag words (see [`Encoder::error_flag`]).
    pub error_flag: Arc<wgpu::Buffer>,
    /// The flag must be cleared before the graph's first kernel.
    pub needs_flag_clear: bool,
}

/// Kernel parameters: 32-bit scalars in declaration order, matching a WGSL
/// `struct Params` of `u32`/`i32`/`f32` fields.
#[derive(Clone, Debug, Default)]
pub struct Params(Vec<u32>);

impl Params {
    /// No parameters yet.
    pub fn new() -> Params {
        Params(Vec::with_capacity(32))
    }

    /// Appends a `u32`.
    pub fn u32(mut self, v: u32) -> Params {
        self.0.push(v);
        self
    }

    /// Appends an `i32`.
    pub fn i32(mut self, v: i32) -> Params {
        self.0.push(v as u32);
        self
    }

    /// Appends an `f32`.
    pub fn f32(mut self, v: f32) -> Params {
        self.0.push(v.to_bits());
        self
    }

    /// Appends four `u32` (e.g. ne or strides).
    pub fn u32x4(mut self, v: [u32; 4]) -> Params {
        self.0.extend_from_slice(&v);
        self
    }

    /// The words.
    pub fn words(&self) -> &[u32] {
        &self.0
    }
}

struct Recorded {
    pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    /// Byte offset of the kernel's parameter slot (dynamic offset).
    param_offset: u32,
    groups: [u32; 3],
    encode_ns: u64,
}

/// Encoder for one graph.
pub struct Encoder<'a> {
    ctx: &'a Ctx,
    facts: &'a Facts,
    /// The graph being computed.
    pub graph: &'a [TensorDesc],
    state: &'a mut StreamState,
    batch: Vec<Recorded>,
    /// Kernels after which the batch is submitted (doubles per submission).
    submit_at: usize,
    params: Vec<u8>,
    param_buf: Option<wgpu::Buffer>,
    /// Index of the node being encoded (for error flags; set by
    /// [`Encoder::begin_node`]).
    pub node: usize,
    error_flag_used: bool,
    kernels: u64,
    /// A converted tensor later nodes may reuse (see [`crate::kept`]).
    kept: Kept<Binding>,
    /// Host time spent in dispatch, pass recording and submission, when
    /// `BACKPLANE_WEBGPU_PROFILE=graph` asks for it.
    times: Option<GraphTimes>,
    /// The kernels recorded so far, when [`Encoder::start_log`] asked for
    /// them (to replay the graph, [`crate::replay`]).
    log: Option<Vec<Step>>,
}

impl<'a> Encoder<'a> {
    /// An encoder over `graph`.
    pub fn new(
        ctx: &'a Ctx,
        facts: &'a Facts,
        graph: &'a [TensorDesc],
        state: &'a mut StreamState,
    ) -> Encoder<'a> {
        state.scratch_used = 0;
        state.needs_flag_clear = true;
        Encoder {
            ctx,
            facts,
            graph,
            state,
            batch: Vec::with_capacity(KERNELS_PER_SUBMIT),
            submit_at: facts.tuning.first_submit.clamp(1, KERNELS_PER_SUBMIT),
            params: vec![0; (PARAM_SLOT_BYTES as usize) * KERNELS_PER_SUBMIT],
            param_buf: None,
            node: 0,
            error_flag_used: false,
            kernels: 0,
            kept: Kept::default(),
            times: ctx.graph_timing.then(GraphTimes::default),
            log: None,
        }
    }

    /// Keeps every kernel recorded from now on, for [`Encoder::take_log`].
    pub fn start_log(&mut self) {
        self.log = Some(Vec::new());
    }

    /// The kernels kept since [`Encoder::start_log`], in order.
    pub fn take_log(&mut self) -> Option<Vec<Step>> {
        self.log.take()
    }

    /// Records the kernels of `recording` again, as its graph's encoding
    /// recorded them (same order, so the same submissions), with its
    /// parameter words in this encoder's parameter slots.
    pub fn replay(&mut self, recording: &Recording) {
        let ctx = self.ctx;
        for step in &recording.steps {
            let t0 = Instant::now();
            self.push_kernel(
                Arc::clone(&step.pipeline),
                &step.params,
                step.groups,
                t0,
                |params| {
                    step.bind_group(params, || {
                        ctx.bind_groups.get(
                            &ctx.device,
                            &step.pipeline.layout,
                            &step.bindings,
                            params,
                        )
                    })
                },
            );
        }
        self.error_flag_used = recording.error_flag_used;
    }

    /// The device context.
    pub fn ctx(&self) -> &Ctx {
        self.ctx
    }

    /// The facts this stream decides by: the device's, with the stream's
    /// [`Tuning`](crate::options::Tuning).
    pub fn facts(&self) -> &'a Facts {
        self.facts
    }

    /// The tensor descriptor of graph entry `i`.
    pub fn tensor(&self, i: usize) -> &'a TensorDesc {
        &self.graph[i]
    }

    /// The binding of graph tensor `i` covering its `nbytes()`.
    pub fn binding(&self, i: usize) -> Result<Binding, String> {
        let t = &self.graph[i];
        self.binding_span(i, t.nbytes())
    }

    /// The binding of graph tensor `i` covering `bytes` from its start.
    pub fn binding_span(&self, i: usize, bytes: u64) -> Result<Binding, String> {
        let t = &self.graph[i];
        let buffer = self.ctx.buffer_of(Some(i), t).map_err(|e| e.to_string())?;
        let align = self.ctx.facts.offset_alignment;
        let offset = t.offset - t.offset % align;
        let rem = t.offset - offset;
        let size = (rem + bytes.max(1)).next_multiple_of(4);
        if offset + size > buffer.size() {
            return Err(format!(
                "tensor {i}: {bytes} bytes at offset {} overrun its {}-byte buffer",
                t.offset,
                buffer.size()
            ));
        }
        if !self.ctx.facts.fits_binding(size) {
            return Err(self.ctx.facts.binding_refusal(&format!("tensor {i}"), size));
        }
        Ok(Binding {
            buffer,
            offset,
            size,
            rem_bytes: rem,
        })
    }

    /// Starts encoding node `i`: its kernels may reuse all scratch memory
    /// but a kept copy, because every dispatch is ordered after the
    /// previous node's (each binds its tensors read-write, so wgpu puts a
    /// barrier between them). A kept copy whose source node `i` writes is
    /// dropped.
    pub fn begin_node(&mut self, i: usize) {
        self.node = i;
        self.kept.forget_if_written(&ByteRange::of(&self.graph[i]));
        self.state.scratch_used = self.kept.scratch_end();
    }

    /// Drops the kept copy if graph tensor `i`'s bytes (about to be
    /// written) are its source's, as [`Encoder::begin_node`] does, for a
    /// fused kernel whose later node writes after it read the copy.
    pub fn forget_copies_of(&mut self, i: usize) {
        self.kept.forget_if_written(&ByteRange::of(&self.graph[i]));
    }

    /// The kept copy `origin` made, if it is still valid.
    pub fn kept_copy(&self, origin: &CopyOrigin) -> Option<Binding> {
        self.kept.find(origin).cloned()
    }

    /// Drops the kept copy before a new one is made; a node that has not
    /// taken scratch memory yet then starts again at its beginning.
    pub fn forget_kept_copy(&mut self) {
        if self.state.scratch_used == self.kept.scratch_end() {
            self.state.scratch_used = 0;
        }
        self.kept.forget();
    }

    /// Keeps `copy` (scratch memory) for later nodes of this graph.
    pub fn keep_copy(&mut self, origin: CopyOrigin, copy: Binding) {
        let end = copy.offset + copy.size;
        self.kept.keep(origin, copy, end);
    }

    /// Scratch memory of `bytes` bytes, valid until the next node.
    pub fn scratch(&mut self, bytes: u64) -> Result<Binding, String> {
        let align = self.ctx.facts.offset_alignment.max(256);
        let size = bytes.max(4).next_multiple_of(4);
        if !self.ctx.facts.fits_binding(size) {
            return Err(self.ctx.facts.binding_refusal("scratch", size));
        }
        let start = self.state.scratch_used.next_multiple_of(align);
        let fits = self
            .state
            .scratch
            .as_ref()
            .is_some_and(|b| start + size <= b.size());
        let start = if fits {
            start
        } else {
            // Room for what this node already took as well, so the next
            // graph that asks the same finds it all in one buffer.
            let cap = (start + size)
                .max(self.state.scratch.as_ref().map_or(0, |b| b.size() * 2))
                .max(1 << 20);
            let cap = cap.min(self.ctx.facts.max_buffer_bytes).max(size);
            // Cached bind groups would keep the old scratch buffer alive.
            self.ctx.bind_groups.clear();
            self.kept.forget();
            self.state.scratch = Some(Arc::new(self.ctx.device.create_buffer(
                &wgpu::BufferDescriptor {
                    label: Some("backplane scratch"),
                    size: cap,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                },
            )));
            0
        };
        self.state.scratch_used = start + size;
        Ok(Binding {
            buffer: Arc::clone(self.state.scratch.as_ref().expect("scratch allocated")),
            offset: start,
            size,
            rem_bytes: 0,
        })
    }

    /// The stream's scratch buffer now (none before a graph needed one).
    pub fn scratch_buffer(&self) -> Option<Arc<wgpu::Buffer>> {
        self.state.scratch.clone()
    }

    /// The stream's error-flag word: kernels that detect bad input (an
    /// out-of-range SET_ROWS index) store `node + 1` in word 0 and the bad
    /// value in word 1; `graph_compute` reads it back and fails the graph.
    pub fn error_flag(&mut self) -> Binding {
        self.error_flag_used = true;
        Binding {
            buffer: Arc::clone(&self.state.error_flag),
            offset: 0,
            size: self.state.error_flag.size(),
            rem_bytes: 0,
        }
    }

    /// Kernels recorded so far.
    pub fn kernels(&self) -> u64 {
        self.kernels
    }

    /// Whether a kernel of this graph bound the error flag.
    pub fn error_flag_used(&self) -> bool {
        self.error_flag_used
    }

    /// Records one kernel: `groups` workgroups of the pipeline for `key`.
    pub fn dispatch(
        &mut self,
        key: &PipelineKey,
        checks: Checks,
        bindings: &[Binding],
        params: &Params,
        groups: [u32; 3],
    ) -> Result<(), String> {
        let t0 = Instant::now();
        // The label is only formatted for an error (dispatch is hot).
        self.check_dispatch(|| key.label(), bindings, params, groups)?;
        let pipeline = self
            .ctx
            .pipelines
            .get(&self.ctx.device, key, checks, bindings.len())?;
        self.record(pipeline, Some(key), bindings, params, groups, t0)
    }

    /// Records one kernel of an already built `pipeline` (the native
    /// kernels' pipelines, [`crate::native`]): `groups` workgroups, with
    /// the bindings and parameters of [`Encoder::dispatch`].
    pub fn dispatch_pipeline(
        &mut self,
        pipeline: Arc<Pipeline>,
        bindings: &[Binding],
        params: &Params,
        groups: [u32; 3],
    ) -> Result<(), String> {
        let t0 = Instant::now();
        self.check_dispatch(|| pipeline.label.clone(), bindings, params, groups)?;
        self.record(pipeline, None, bindings, params, groups, t0)
    }

    /// Refuses a dispatch over the device's limits, naming the kernel
    /// (`label`).
    fn check_dispatch(
        &self,
        label: impl Fn() -> String,
        bindings: &[Binding],
        params: &Params,
        groups: [u32; 3],
    ) -> Result<(), String> {
        let max = self.ctx.facts.max_groups_per_dim;
        if groups.iter().any(|&g| g > max) {
            return Err(format!(
                "{}: dispatch {groups:?} over max {max} workgroups per dimension",
                label()
            ));
        }
        if bindings.len() > self.ctx.facts.max_storage_buffers as usize {
            return Err(format!(
                "{}: {} storage bindings > device max {}",
                label(),
                bindings.len(),
                self.ctx.facts.max_storage_buffers
            ));
        }
        let words = params.words();
        if words.len() * 4 > PARAM_SLOT_BYTES as usize {
            return Err(format!("{}: {} parameter words > 64", label(), words.len()));
        }
        Ok(())
    }

    /// Records `pipeline` (built from `key`, if any) with its bind group
    /// and parameter slot, and submits the batch when it is full.
    fn record(
        &mut self,
        pipeline: Arc<Pipeline>,
        key: Option<&PipelineKey>,
        bindings: &[Binding],
        params: &Params,
        groups: [u32; 3],
        t0: Instant,
    ) -> Result<(), String> {
        let words = params.words();
        if groups.contains(&0) {
            return Ok(());
        }
        if let Some(log) = &mut self.log {
            log.push(Step::new(
                Arc::clone(&pipeline),
                key.cloned(),
                bindings,
                words,
                groups,
            ));
        }
        let ctx = self.ctx;
        let layout = &pipeline.layout;
        let bind_group =
            |params: &wgpu::Buffer| ctx.bind_groups.get(&ctx.device, layout, bindings, params);
        self.push_kernel(Arc::clone(&pipeline), words, groups, t0, bind_group);
        Ok(())
    }

    /// Writes `words` into the next parameter slot and records the kernel
    /// with the bind group `bind_group` gives for the batch's parameter
    /// buffer; submits the batch when it is full.
    fn push_kernel(
        &mut self,
        pipeline: Arc<Pipeline>,
        words: &[u32],
        groups: [u32; 3],
        t0: Instant,
        bind_group: impl FnOnce(&wgpu::Buffer) -> wgpu::BindGroup,
    ) {
        let slot = self.batch.len();
        let at = slot * PARAM_SLOT_BYTES as usize;
        self.params[at..at + words.len() * 4].copy_from_slice(bytemuck::cast_slice(words));
        let ctx = self.ctx;
        let param_buf = self
            .param_buf
            .get_or_insert_with(|| ctx.take_param_buffer());
        let bind_group = bind_group(param_buf);
        self.kernels += 1;
        self.batch.push(Recorded {
            pipeline,
            bind_group,
            param_offset: at as u32,
            groups,
            encode_ns: t0.elapsed().as_nanos() as u64,
        });
        if let Some(t) = &mut self.times {
            t.dispatch += t0.elapsed().as_nanos() as u64;
        }
        if self.batch.len() >= self.submit_at {
            self.submit_at = (self.submit_at * 2).min(KERNELS_PER_SUBMIT);
            self.flush();
        }
    }

    /// Records a kernel over `total` workgroups in one dimension, split over
    /// x and y when it exceeds `max_compute_workgroups_per_dimension`; the
    /// kernel recovers the linear index as `wid.x + wid.y * nwg.x` (see
    /// `common/index.wgsl`) and must bounds-check it.
    pub fn dispatch_linear(
        &mut self,
        key: &PipelineKey,
        checks: Checks,
        bindings: &[Binding],
        params: &Params,
        total: u64,
    ) -> Result<(), String> {
        let groups = split_groups(total, self.ctx.facts.max_groups_per_dim)
            .ok_or_else(|| format!("{}: {total} workgroups are too many", key.label()))?;
        self.dispatch(key, checks, bindings, params, groups)
    }

    /// Host time spent in dispatch, pass recording and submission so far
    /// (zero unless `BACKPLANE_WEBGPU_PROFILE=graph`).
    pub fn times(&self) -> GraphTimes {
        self.times.unwrap_or_default()
    }

    /// Submits the recorded kernels.
    pub fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let t0 = Instant::now();
        let param_buf = self
            .param_buf
            .take()
            .expect("a recorded kernel took a param buffer");
        let used = self.batch.len() * PARAM_SLOT_BYTES as usize;
        self.ctx
            .queue
            .write_buffer(&param_buf, 0, &self.params[..used]);
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        if std::mem::take(&mut self.state.needs_flag_clear) {
            enc.clear_buffer(&self.state.error_flag, 0, None);
        }
        let batch = std::mem::take(&mut self.batch);
        match &self.ctx.profiler {
            Some(prof) => {
                let labels: Vec<(String, u64)> = batch
                    .iter()
                    .map(|r| (r.pipeline.label.clone(), r.encode_ns))
                    .collect();
                for (i, r) in batch.iter().enumerate() {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: prof.pass_writes(i),
                    });
                    pass.set_pipeline(&r.pipeline.pipeline);
                    pass.set_bind_group(0, &r.bind_group, &[r.param_offset]);
                    pass.dispatch_workgroups(r.groups[0], r.groups[1], r.groups[2]);
                }
                prof.resolve(&mut enc, batch.len());
                self.ctx.queue.submit([enc.finish()]);
                prof.collect(&self.ctx.device, &self.ctx.queue, &labels);
            }
            None => {
                {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    for r in &batch {
                        pass.set_pipeline(&r.pipeline.pipeline);
                        pass.set_bind_group(0, &r.bind_group, &[r.param_offset]);
                        pass.dispatch_workgroups(r.groups[0], r.groups[1], r.groups[2]);
                    }
                }
                let commands = enc.finish();
                let t1 = Instant::now();
                self.ctx.queue.submit([commands]);
                if let Some(t) = &mut self.times {
                    t.passes += (t1 - t0).as_nanos() as u64;
                    t.submit += t1.elapsed().as_nanos() as u64;
                }
            }
        }
        self.ctx.recycle_after_submission(vec![param_buf]);
    }
}

/// Splits `total` workgroups into `[x, y, 1]` with x, y <= `max`.
pub fn split_groups(total: u64, max: u32) -> Option<[u32; 3]> {
    let max = u64::from(max.max(1));
    if total <= max {
        return Some([total as u32, 1, 1]);
    }
    let y = total.div_ceil(max);
    (y <= max).then_some([max as u32, y as u32, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_dispatches_split_over_y() {
        assert_eq!(split_groups(10, 65535), Some([10, 1, 1]));
        assert_eq!(split_groups(65536, 65535), Some([65535, 2, 1]));
        assert_eq!(split_groups(65535u64 * 65535 + 1, 65535), None);
    }
}
