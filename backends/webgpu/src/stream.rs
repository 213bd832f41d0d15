//! A stream: graphs are encoded node by node and submitted in batches, or
//! replayed when a recent graph was the same ([`crate::replay`]);
//! `graph_compute` returns when the GPU is done and the error flag has been
//! read back.

use std::sync::{Arc, Mutex};

use backplane_abi::plugin::{Backend, PluginError};
use backplane_abi::{Op, TensorDesc};

use crate::buffer::read_buffer;
use crate::context::Ctx;
use crate::encode::{Encoder, StreamState};
use crate::facts::Facts;
use crate::ops;
use crate::replay::{Recording, next_stream_id, same_buffer};
use crate::{lock, profile};

/// One stream on a device.
pub struct WebGpuStream {
    name: String,
    /// This stream's key in the device's recordings.
    id: u64,
    ctx: Arc<Ctx>,
    /// The device's facts with this stream's tuning.
    facts: Facts,
    state: Mutex<StreamState>,
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
        WebGpuStream {
            name,
            id: next_stream_id(),
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
        let flag = Arc::clone(&state.error_flag);
        let replay = self.facts.tuning.replay;
        let recording = replay
            .then(|| {
                self.ctx
                    .recordings
                    .find(self.id, graph, state.scratch.as_ref())
            })
            .flatten();
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
        let times = enc.times();
        drop(enc);
        let t1 = std::time::Instant::now();
        self.ctx.wait_idle().map_err(PluginError::other)?;
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
        if used_flag {
            let mut words = [0u8; 8];
            read_buffer(&self.ctx, &flag, 0, &mut words).map_err(PluginError::other)?;
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

    /// Plans and records every node of `graph` (fusing where it can).
    fn encode(&self, enc: &mut Encoder, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let mut result = Ok(());
        // Nodes up to this index were encoded by a fused kernel.
        let mut fused_through: Option<usize> = None;
        for (i, t) in graph.iter().enumerate() {
            if fused_through.is_some_and(|last| i <= last) {
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
                .then(|| ops::fusion::find(graph, i, self.facts.max_storage_buffers))
                .flatten();
            let encoded = match fusion {
                Some(f) => {
                    fused_through = Some(f.last());
                    f.nodes().into_iter().for_each(|n| enc.begin_node(n));
                    f.nodes()
                        .into_iter()
                        .try_for_each(check)
                        .and_then(|()| ops::fusion::encode(enc, &f))
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
