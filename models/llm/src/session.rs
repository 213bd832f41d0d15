//! [`Session`]: a KV cache on the model's devices and the forward graphs
//! that fill and read it; prefill in ubatches, single-token decode.

use backplane::Graph;
use backplane::sched::SchedError;

use crate::error::LlmError;
use crate::graph::{self, Forward, Shape};
use crate::model::Model;
use crate::sample::{Sampler, SamplerState};

/// Most tokens one forward graph takes (llama.cpp's default ubatch).
pub const UBATCH: usize = 512;
/// KV lengths attended to are padded to a multiple of this, so a decode
/// graph keeps its shape (and its cached plan) for this many steps.
pub const KV_PAD: usize = 256;
/// Forward graphs kept per session (by shape).
const GRAPHS_KEPT: usize = 8;
/// f16 bit patterns of the mask.
const MASK_OPEN: u16 = 0x0000;
const MASK_CLOSED: u16 = 0xFC00; // -inf

/// Which positions' logits [`Session::eval`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// The last token's row only.
    Last,
    /// One row per token.
    All,
}

/// One conversation: a KV cache of `n_ctx` cells on the model's devices.
pub struct Session<'m> {
    model: &'m Model,
    id: u64,
    n_ctx: usize,
    kv_size: usize,
    n_past: usize,
    graphs: Vec<Forward>,
    logits: Vec<f32>,
    tokens: Vec<i32>,
    pos: Vec<i32>,
    kv_idx: Vec<i64>,
    mask: Vec<u16>,
    out_ids: Vec<i32>,
    /// Scheduler keys of the KV cache buffers, released on drop.
    kv_keys: Vec<u64>,
}

/// Frees the scheduler buffers `keys` (a session's KV cache).
fn release(sched: &mut backplane::sched::Scheduler, keys: &[u64]) {
    for &key in keys {
        sched.release_weights(key);
    }
}

impl Drop for Session<'_> {
    /// Frees the KV cache's device buffers.
    fn drop(&mut self) {
        release(&mut self.model.scheduler(), &self.kv_keys);
    }
}

/// True when `device` writes KV rows (SET_ROWS of f32 rows into an f16
/// cache of this shape); a layer on a device that does not keeps its KV
/// cache on the CPU, where the scheduler can write it.
fn can_store_kv(device: &backplane::registry::Device, hp: &crate::HParams, kv_size: usize) -> bool {
    let probe = || -> Result<(Graph, usize), backplane::GraphError> {
        let mut g = Graph::new();
        let width = hp.n_embd_k_gqa().max(hp.n_embd_v_gqa()) as i64;
        let cache = g.input("cache", backplane::DType::F16, &[width, kv_size as i64])?;
        let rows = g.input("rows", backplane::DType::F32, &[width, 1])?;
        let idx = g.input("idx", backplane::DType::I64, &[1])?;
        let t = g.set_rows(cache, rows, idx)?;
        Ok((g, t.index()))
    };
    probe().is_ok_and(|(g, node)| device.supports_op(g.tensors(), node).is_supported())
}

impl Model {
    /// A new session with a context of `n_ctx` tokens (0: the model's default).
    pub fn session(&self, n_ctx: usize) -> Result<Session<'_>, LlmError> {
        Session::with_context(self, n_ctx)
    }
}

impl<'m> Session<'m> {
    /// A new session with the model's default context size.
    pub fn new(model: &'m Model) -> Result<Session<'m>, LlmError> {
        Session::with_context(model, 0)
    }

    /// A new session whose KV cache holds `n_ctx` tokens (0: the model's
    /// default), each layer's cache on that layer's device, f16, zeroed.
    pub fn with_context(model: &'m Model, n_ctx: usize) -> Result<Session<'m>, LlmError> {
        let n_ctx = if n_ctx == 0 { model.n_ctx() } else { n_ctx };
        let kv_size = n_ctx.div_ceil(KV_PAD) * KV_PAD;
        let id = model.new_session_id();
        let hp = model.hparams();
        let mut g = Graph::new();
        let placement = model.placement();
        let n_backends = placement.cpu_backend + 1;
        let mut sched = model.scheduler();
        let writable: Vec<bool> = (0..n_backends)
            .map(|b| b == placement.cpu_backend || can_store_kv(&sched.devices()[b], hp, kv_size))
            .collect();
        let mut by_backend = vec![Vec::new(); n_backends];
        let mut kv_keys = Vec::new();
        for l in 0..hp.n_layer {
            let (k, v) = graph::kv_names(id, l);
            let leaf = |g: &mut Graph, name: &str, width: usize| {
                g.input(name, backplane::DType::F16, &[width as i64, kv_size as i64])
                    .map_err(|e| LlmError::graph("KV cache", e))
            };
            let kt = leaf(&mut g, &k, hp.n_embd_k_gqa())?;
            let vt = leaf(&mut g, &v, hp.n_embd_v_gqa())?;
            let b = placement.layer_backend[l];
            let b = if writable[b] {
                b
            } else {
                placement.cpu_backend
            };
            by_backend[b].extend([kt, vt]);
        }
        for (b, ids) in by_backend.iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            let what = || format!("KV cache of {kv_size} cells on backend {b}");
            let block = match sched.place_weights(&mut g, b, ids) {
                Ok(block) => block,
                Err(e) => {
                    release(&mut sched, &kv_keys);
                    return Err(LlmError::sched(what(), e));
                }
            };
            let key = block.key();
            let cleared = block.clear(0);
            kv_keys.push(key);
            cleared.map_err(|e| {
                release(&mut sched, &kv_keys);
                LlmError::sched(
                    what(),
                    SchedError::Backend {
                        backend: b.to_string(),
                        call: "clearing the KV cache".into(),
                        message: e.to_string(),
                    },
                )
            })?;
        }
        drop(sched);
        Ok(Session {
            model,
            id,
            n_ctx,
            kv_size,
            n_past: 0,
            graphs: Vec::new(),
            logits: Vec::new(),
            tokens: Vec::new(),
            pos: Vec::new(),
            kv_idx: Vec::new(),
            mask: Vec::new(),
            out_ids: Vec::new(),
            kv_keys,
        })
    }

    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Tokens in the KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Tokens the cache holds at most.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Forgets every token (the cache cells are overwritten as new tokens
    /// come; the mask hides the stale ones).
    pub fn reset(&mut self) {
        self.n_past = 0;
    }

    /// The logits of the last [`Session::eval`]: `n_vocab` per row.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Appends `tokens` to the cache, in ubatches of up to [`UBATCH`], and
    /// returns the logits (`n_vocab` f32 per row) of the last token or of
    /// every token.
    pub fn eval(&mut self, tokens: &[u32], which: Logits) -> Result<&[f32], LlmError> {
        if tokens.is_empty() {
            return Err(LlmError::Input("eval of an empty batch".into()));
        }
        let n_vocab = self.model.n_vocab();
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(LlmError::Input(format!(
                "token id {bad} is out of the vocabulary (n_vocab = {n_vocab})"
            )));
        }
        self.room_for(tokens.len())?;
        let rows = match which {
            Logits::Last => 1,
            Logits::All => tokens.len(),
        };
        // Every row is written below: resized only when the count changes,
        // so a decode step does not clear half a megabyte first.
        self.logits.resize(rows * n_vocab, 0.0);
        // Chunks before the last one write their one row (Logits::Last)
        // where the last one's goes.
        let mut row = 0;
        for chunk in tokens.chunks(UBATCH) {
            let n_outputs = match which {
                Logits::All => chunk.len(),
                Logits::Last => 1,
            };
            if let Err(e) = self.ubatch(chunk, n_outputs, row) {
                self.logits.clear();
                return Err(e);
            }
            if which == Logits::All {
                row += n_outputs;
            }
        }
        Ok(&self.logits)
    }

    /// One forward graph over `chunk`; writes its `n_outputs` rows of
    /// logits from row `row` on.
    fn ubatch(&mut self, chunk: &[u32], n_outputs: usize, row: usize) -> Result<(), LlmError> {
        let n = chunk.len();
        let used = self.n_past + n;
        let shape = self.shape(n, n_outputs);
        let n_kv = shape.n_kv;
        let gi = self.graph_for(shape)?;
        self.tokens.clear();
        self.tokens.extend(chunk.iter().map(|&t| t as i32));
        self.pos.clear();
        self.pos.extend((self.n_past..used).map(|p| p as i32));
        self.kv_idx.clear();
        self.kv_idx.extend((self.n_past..used).map(|p| p as i64));
        self.mask.clear();
        for i in 0..n {
            let visible = self.n_past + i + 1;
            self.mask
                .extend((0..n_kv).map(|j| if j < visible { MASK_OPEN } else { MASK_CLOSED }));
        }
        self.out_ids.clear();
        self.out_ids.extend((n - n_outputs..n).map(|i| i as i32));
        let n_vocab = self.model.n_vocab();
        let start = row * n_vocab;
        let fwd = &self.graphs[gi];
        let mut inputs: Vec<(backplane::TensorId, &[u8])> = vec![
            (fwd.tokens, bytemuck::cast_slice(&self.tokens)),
            (fwd.pos, bytemuck::cast_slice(&self.pos)),
            (fwd.kv_idx, bytemuck::cast_slice(&self.kv_idx)),
            (fwd.mask, bytemuck::cast_slice(&self.mask)),
        ];
        if let Some(ids) = fwd.out_ids {
            inputs.push((ids, bytemuck::cast_slice(&self.out_ids)));
        }
        let out: &mut [u8] =
            bytemuck::cast_slice_mut(&mut self.logits[start..start + n_outputs * n_vocab]);
        let mut outputs = [(fwd.logits, out)];
        self.model
            .scheduler()
            .run(&fwd.graph, &inputs, &mut outputs)
            .map_err(|e| {
                LlmError::sched(
                    format!(
                        "forward pass of {n} tokens at position {} ({n_kv} KV cells)",
                        self.n_past
                    ),
                    e,
                )
            })?;
        self.n_past = used;
        Ok(())
    }

    /// How the scheduler routes the forward graph of `n_tokens` new tokens
    /// after the tokens already in the cache (1: a decode step), the graph
    /// whose output is the last token's logits: every node's backend and
    /// why, the copies between backends and the input writes (`backplane
    /// explain-model`).
    pub fn explain(&mut self, n_tokens: usize) -> Result<backplane::sched::Explanation, LlmError> {
        let (gi, what) = self.graph_of(n_tokens)?;
        let graph = &self.graphs[gi].graph;
        let r = self.model.scheduler().explain(graph);
        r.map_err(|e| LlmError::sched(what, e))
    }

    /// The same routing as Graphviz DOT, coloured by backend.
    pub fn dot(&mut self, n_tokens: usize) -> Result<String, LlmError> {
        let (gi, what) = self.graph_of(n_tokens)?;
        let graph = &self.graphs[gi].graph;
        let r = self.model.scheduler().dot(graph);
        r.map_err(|e| LlmError::sched(what, e))
    }

    /// The forward graph [`Session::eval`] would run for `n_tokens` new
    /// tokens (one ubatch, the last token's logits), and its description.
    fn graph_of(&mut self, n_tokens: usize) -> Result<(usize, String), LlmError> {
        if n_tokens == 0 || n_tokens > UBATCH {
            return Err(LlmError::Input(format!(
                "a forward graph takes 1 to {UBATCH} tokens, not {n_tokens}"
            )));
        }
        self.room_for(n_tokens)?;
        let shape = self.shape(n_tokens, 1);
        let what = format!(
            "planning the forward pass of {n_tokens} tokens ({} KV cells)",
            shape.n_kv
        );
        Ok((self.graph_for(shape)?, what))
    }

    /// Fails when `adding` more tokens would not fit in the cache.
    fn room_for(&self, adding: usize) -> Result<(), LlmError> {
        if self.n_past + adding > self.n_ctx {
            return Err(LlmError::ContextFull {
                used: self.n_past,
                adding,
                n_ctx: self.n_ctx,
            });
        }
        Ok(())
    }

    /// The graph shape of `n_tokens` new tokens after the cached ones: the
    /// KV length attended to padded to [`KV_PAD`], so a decode graph keeps
    /// its shape (and its cached plan) for that many steps.
    fn shape(&self, n_tokens: usize, n_outputs: usize) -> Shape {
        let used = self.n_past + n_tokens;
        Shape {
            n_tokens,
            n_kv: (used.div_ceil(KV_PAD) * KV_PAD).min(self.kv_size),
            n_outputs,
        }
    }

    /// Index of the forward graph of `shape`, built and bound on first use.
    fn graph_for(&mut self, shape: Shape) -> Result<usize, LlmError> {
        if let Some(i) = self.graphs.iter().position(|f| f.shape == shape) {
            return Ok(i);
        }
        let m = self.model;
        let mut fwd = graph::build(
            &m.hparams,
            &m.weights,
            &m.ends,
            self.id,
            self.kv_size,
            shape,
        )?;
        m.scheduler().bind_weights(&mut fwd.graph);
        if self.graphs.len() >= GRAPHS_KEPT {
            // Keep decode graphs (one token) longest: drop the oldest other.
            let drop = self
                .graphs
                .iter()
                .position(|f| f.shape.n_tokens > 1)
                .unwrap_or(0);
            self.graphs.remove(drop);
        }
        self.graphs.push(fwd);
        Ok(self.graphs.len() - 1)
    }

    /// Evaluates `prompt` then samples up to `n` tokens, feeding each back;
    /// `on_token` sees each one as it comes and stops the generation by
    /// returning false. Stops early at an end-of-generation token when
    /// `sampler.stop_at_eog`. Returns the generated tokens.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        n: usize,
        sampler: &Sampler,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, LlmError> {
        let mut state = SamplerState::new(sampler);
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        self.eval(prompt, Logits::Last)?;
        loop {
            let tok = state.sample(&self.logits);
            out.push(tok);
            let stop = sampler.stop_at_eog && self.model.is_eog(tok);
            if !on_token(tok) || stop || out.len() == n {
                return Ok(out);
            }
            self.eval(&[tok], Logits::Last)?;
        }
    }
}
