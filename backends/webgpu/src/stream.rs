//! A stream: graphs are encoded node by node and submitted in batches, or
//! replayed when a recent graph was the same ([`crate::replay`]);
//! `graph_compute` returns when the GPU is done and the error flag has been
//! read back.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use backplane_abi::plugin::{Backend, PluginError};
use backplane_abi::{Op, TensorDesc, flags};

use crate::context::Ctx;
use crate::encode::{Encoder, StreamState};
use crate::facts::Facts;
use crate::ops;
use crate::options::NativeReplayMode;
use crate::replay::{Recording, next_stream_id, same_buffer};
use crate::{lock, profile};

/// The error flag's two words read back after a graph that bound it, or
/// why they could not be read; `None` when no kernel bound it.
type FlagWords = Option<Result<[u8; 8], String>>;

/// One stream on a device.
pub struct WebGpuStream {
    name: String,
    /// This stream's key in the device's recordings.
    id: u64,
    ctx: Arc<Ctx>,
    /// The device's facts with this stream's tuning.
    facts: Facts,
    state: Mutex<StreamState>,
    /// Where the error flag is copied at the end of a graph that bound it,
    /// in the graph's own wait (no second round trip to read it).
    flag_staging: wgpu::Buffer,
}

impl WebGpuStream {
    /// A stream on `ctx` deciding by `facts` (the device's, with the
    /// stream's tuning).
    pub fn new(name: String, ctx: Arc<Ctx>, facts: Facts) -> WebGpuStream {
        let error_flag = Arc::new(ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane error flag"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
        let flag_staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane error flag readback"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        WebGpuStream {
            name,
            id: next_stream_id(),
            flag_staging,
            ctx,
            facts,
            state: Mutex::new(StreamState {
                scratch: None,
                scratch_used: 0,
                error_flag,
                needs_flag_clear: true,
            }),
        }
    }

    fn run(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let t0 = std::time::Instant::now();
        let compiled_before = self.ctx.pipelines.compile_ns();
        let mut state = lock(&self.state);
        // This graph writes device memory: the last one's outputs go stale.
        self.ctx.prefetch.forget();
        let flag = Arc::clone(&state.error_flag);
        let replay = self.facts.tuning.replay;
        let recording = replay
            .then(|| {
                self.ctx
                    .recordings
                    .find(self.id, graph, state.scratch.as_ref())
            })
            .flatten();
        // A replay submitted as one native command buffer needs no encoder
        // ([`crate::replay::native`]); per-kernel profiles need wgpu passes.
        let native_wanted = self.facts.tuning.native_replay.wanted(self.facts.is_cpu)
            && self.ctx.profiler.is_none();
        let submit_start = std::time::Instant::now();
        let native = recording.as_ref().filter(|_| native_wanted).and_then(|r| {
            let target = crate::replay::native::Target {
                name: &self.ctx.name,
                device: &self.ctx.device,
                queue: &self.ctx.queue,
                state: &self.ctx.native_replay,
                serial: self.facts.tuning.native_replay == NativeReplayMode::Serial,
                timed: self.ctx.step_timing,
                uploads: &self.ctx.uploads,
            };
            crate::replay::native::try_submit(&target, r, &flag)
        });
        let submit_ns = submit_start.elapsed().as_nanos() as u64;
        if let (Some(built_ns), Some(r)) = (native, &recording) {
            crate::replay::count_replay();
            let (t1, flag_words) = self.wait_for_graph(graph, &flag, r.error_flag_used)?;
            if self.ctx.graph_timing {
                let ns = |d: std::time::Duration| d.as_nanos() as u64;
                let t = profile::GraphTimes {
                    encode: ns(t1 - t0),
                    wait: ns(t1.elapsed()),
                    // Building the native twin is a one-time cost, as
                    // compiling is (it counts in dispatch, as compiling
                    // does); the rest is submitting.
                    compile: built_ns,
                    dispatch: built_ns,
                    submit: submit_ns.saturating_sub(built_ns),
                    ..Default::default()
                };
                profile::record_graph(r.steps.len() as u64, t, true);
            }
            return self.flag_verdict(graph, flag_words);
        }
        // The host's staged writes go before the graph's first submission.
        self.ctx.uploads.flush(&self.ctx.device, &self.ctx.queue);
        let mut enc = Encoder::new(&self.ctx, &self.facts, graph, &mut state);
        let result = match &recording {
            Some(r) => {
                crate::replay::count_replay();
                enc.replay(r);
                Ok(())
            }
            None => {
                let generation = self.ctx.recordings.generation();
                let scratch_before = enc.scratch_buffer();
                if replay {
                    enc.start_log();
                }
                let result = self.encode(&mut enc, graph);
                if let Some(steps) = enc.take_log().filter(|_| result.is_ok()) {
                    let scratch = enc.scratch_buffer();
                    if same_buffer(scratch_before.as_ref(), scratch.as_ref()) {
                        let r = Recording::new(graph, scratch, steps, enc.error_flag_used());
                        self.ctx.recordings.keep(self.id, generation, r);
                    } else {
                        // Recordings bind the old scratch buffer: drop them
                        // rather than keep it alive.
                        self.ctx.recordings.forget_stream(self.id);
                    }
                }
                result
            }
        };
        enc.flush();
        let used_flag = enc.error_flag_used();
        let kernels = enc.kernels();
        profile::note_graph_kernels(kernels);
        let times = enc.times();
        drop(enc);
        let (t1, flag_words) = self.wait_for_graph(graph, &flag, used_flag)?;
        if self.ctx.graph_timing {
            let ns = |d: std::time::Duration| d.as_nanos() as u64;
            let t = profile::GraphTimes {
                encode: ns(t1 - t0),
                wait: ns(t1.elapsed()),
                compile: self.ctx.pipelines.compile_ns() - compiled_before,
                ..times
            };
            profile::record_graph(kernels, t, recording.is_some());
        }
        result?;
        self.flag_verdict(graph, flag_words)
    }

    /// Waits for the submitted `graph`. In the same wait, the error flag's
    /// words are copied and mapped when a kernel bound it (`flag_used`),
    /// and so are the graph's outputs for the host ([`crate::prefetch`]).
    /// Returns when the wait began, and the words.
    fn wait_for_graph(
        &self,
        graph: &[TensorDesc],
        flag: &wgpu::Buffer,
        flag_used: bool,
    ) -> Result<(std::time::Instant, FlagWords), PluginError> {
        let ctx = &self.ctx;
        let has_outputs = graph.iter().any(|t| t.has_flag(flags::OUTPUT));
        let (flag_read, outputs) = if flag_used || has_outputs {
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            if flag_used {
                enc.copy_buffer_to_buffer(flag, 0, &self.flag_staging, 0, 8);
            }
            let outputs = ctx
                .prefetch
                .copy_outputs(&ctx.device, &mut enc, graph, |t| {
                    (!ctx.is_split(t.buffer))
                        .then(|| ctx.buffer_of(None, t).ok())
                        .flatten()
                });
            if flag_used || outputs.is_some() {
                ctx.queue.submit([enc.finish()]);
            }
            (
                flag_used.then(|| self.map_error_flag()),
                outputs.and_then(|o| ctx.prefetch.map(o)),
            )
        } else {
            (None, None)
        };
        let t1 = std::time::Instant::now();
        let waited = self.ctx.wait_idle();
        let flag_words = flag_read.map(|mapped| self.read_error_flag(mapped));
        if let Some(o) = outputs {
            ctx.prefetch.finish(o);
        }
        waited.map_err(PluginError::other)?;
        Ok((t1, flag_words))
    }

    /// Fails the graph if the error flag's words (read back when a kernel
    /// bound it) name a node.
    fn flag_verdict(&self, graph: &[TensorDesc], flag_words: FlagWords) -> Result<(), PluginError> {
        if let Some(words) = flag_words {
            let words = words.map_err(PluginError::other)?;
            let node = u32::from_le_bytes(words[0..4].try_into().expect("4 bytes"));
            let value = i32::from_le_bytes(words[4..8].try_into().expect("4 bytes"));
            if node != 0 {
                let i = node as usize - 1;
                let op = graph
                    .get(i)
                    .and_then(|t| t.op().ok())
                    .map_or("?".into(), |o| o.to_string());
                return Err(PluginError::bad_input(format!(
                    "{}: node {i} ({op}): index {value} is out of range",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// Asks for `flag_staging` mapped once the error flag's copy into it
    /// (submitted after the graph's kernels) is done; the graph's wait
    /// completes both.
    fn map_error_flag(&self) -> Receiver<Result<(), wgpu::BufferAsyncError>> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.flag_staging
            .slice(..8)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        rx
    }

    /// The error flag's two words, once `map_error_flag`'s mapping is done.
    fn read_error_flag(
        &self,
        mapped: Receiver<Result<(), wgpu::BufferAsyncError>>,
    ) -> Result<[u8; 8], String> {
        // The mapping completes in the wait after the graph; poll once more
        // in case it was reported after that wait returned.
        let status = match mapped.try_recv() {
            Ok(r) => r,
            Err(_) => match self.ctx.wait_idle().map(|()| mapped.recv()) {
                Ok(Ok(r)) => r,
                Ok(Err(_)) | Err(_) => {
                    // Still pending: cancel it, so the next graph can map.
                    self.flag_staging.unmap();
                    return Err("the error flag's readback never completed".into());
                }
            },
        };
        status.map_err(|e| format!("mapping the error flag: {e}"))?;
        let mut words = [0u8; 8];
        {
            let view = self
                .flag_staging
                .slice(..8)
                .get_mapped_range()
                .map_err(|e| format!("reading the error flag: {e}"))?;
            words.copy_from_slice(&view[..8]);
        }
        self.flag_staging.unmap();
        Ok(words)
    }

    /// Plans and records every node of `graph` (fusing where it can).
    fn encode(&self, enc: &mut Encoder, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let mut result = Ok(());
        // Nodes a fused kernel encoded before their place.
        let mut done = vec![false; graph.len()];
        for (i, t) in graph.iter().enumerate() {
            if done[i] {
                continue;
            }
            let op = match t.op() {
                Ok(op) => op,
                Err(e) => {
                    result = Err(PluginError::unsupported(format!("node {i}: {e}")));
                    break;
                }
            };
            if op == Op::None || op.is_view() {
                continue;
            }
            let in_split = |s: usize| self.ctx.is_split(graph[s].buffer);
            let check =
                |n: usize| crate::split::check_reads(graph, n, &self.ctx.split_name(), in_split);
            let fusion = self
                .facts
                .tuning
                .fuse
                .then(|| ops::fusion::find(graph, i, &self.facts))
                .flatten();
            let encoded = match fusion {
                Some(f) => {
                    f.begun_first().into_iter().for_each(|n| enc.begin_node(n));
                    f.nodes()
                        .into_iter()
                        .try_for_each(check)
                        .and_then(|()| ops::fusion::encode(enc, &f))
                        .map(|nodes| nodes.into_iter().for_each(|n| done[n] = true))
                }
                None => {
                    enc.begin_node(i);
                    check(i).and_then(|()| ops::encode(enc, i))
                }
            };
            if let Err(e) = encoded {
                let fused = fusion.map_or(String::new(), |f| {
                    format!(", fused with nodes {:?}", f.nodes())
                });
                result = Err(PluginError::other(format!(
                    "{}: node {i} ({op}{fused}): {e}",
                    self.name
                )));
                break;
            }
        }
        result
    }
}

impl Drop for WebGpuStream {
    fn drop(&mut self) {
        self.ctx.recordings.forget_stream(self.id);
    }
}

impl Backend for WebGpuStream {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let scope = self
            .ctx
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        let r = self.run(graph);
        if let Some(e) = pollster::block_on(scope.pop()) {
            // Whatever this graph recorded is not to be replayed.
            self.ctx.recordings.forget_stream(self.id);
            return Err(PluginError::other(format!(
                "{}: wgpu validation: {e}",
                self.name
            )));
        }
        r
    }

    fn synchronize(&self) -> Result<(), PluginError> {
        self.ctx.wait_idle().map_err(PluginError::other)
    }
}
