//! The forward graph of the llama, qwen2 and qwen3 architectures, built
//! from the ops llama.cpp uses: GET_ROWS, RMS_NORM + MUL, MUL_MAT, ADD
//! (biases, residuals), ROPE, SET_ROWS into the KV cache, FLASH_ATTN_EXT
//! with a causal f16 mask, SwiGLU.

use backplane::{DType, GluOp, Graph, RopeParams, TensorId};

use crate::error::LlmError;
use crate::hparams::HParams;
use crate::weights::{EndLeaves, Weights};

/// The shape a forward graph is built for; graphs of one shape are reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Tokens in the batch.
    pub n_tokens: usize,
    /// KV cells attended to (a multiple of 256, or the whole cache).
    pub n_kv: usize,
    /// Rows of logits computed (1 for the last position, or `n_tokens`).
    pub n_outputs: usize,
}

/// A forward graph and its input and output tensors.
pub struct Forward {
    /// The graph, its weights and KV cache bound.
    pub graph: Graph,
    /// i32 [n_tokens]: token ids.
    pub tokens: TensorId,
    /// i32 [n_tokens]: positions.
    pub pos: TensorId,
    /// i64 [n_tokens]: the KV cell each token is stored in.
    pub kv_idx: TensorId,
    /// f16 [n_kv, n_tokens]: 0 where a token may attend a cell, -inf elsewhere.
    pub mask: TensorId,
    /// i32 [n_outputs]: the batch rows whose logits are computed (absent
    /// when every row is).
    pub out_ids: Option<TensorId>,
    /// f32 [n_vocab, n_outputs].
    pub logits: TensorId,
    /// The shape.
    pub shape: Shape,
}

/// Names of the KV cache leaves of one session.
pub fn kv_names(session: u64, layer: usize) -> (String, String) {
    (
        format!("cache_k.s{session}.l{layer}"),
        format!("cache_v.s{session}.l{layer}"),
    )
}

/// Builds the forward graph of `shape` over a cache of `kv_size` cells.
/// `ends` names the leaves of the embedding rows and the output projection
/// (one leaf for both when tied).
pub fn build(
    hp: &HParams,
    w: &Weights,
    ends: &EndLeaves,
    session: u64,
    kv_size: usize,
    shape: Shape,
) -> Result<Forward, LlmError> {
    let what = format!(
        "forward ({} tokens, {} KV cells, {} outputs)",
        shape.n_tokens, shape.n_kv, shape.n_outputs
    );
    build_inner(hp, w, ends, session, kv_size, shape).map_err(|e| LlmError::graph(what, e))
}

fn build_inner(
    hp: &HParams,
    w: &Weights,
    ends: &EndLeaves,
    session: u64,
    kv_size: usize,
    shape: Shape,
) -> Result<Forward, backplane::GraphError> {
    let mut g = Graph::new();
    let t = shape.n_tokens as i64;
    let n_kv = shape.n_kv as i64;
    let (hd, hdv) = (hp.head_dim as i64, hp.head_dim_v as i64);
    let (nh, nhkv) = (hp.n_head as i64, hp.n_head_kv as i64);
    let k_gqa = hp.n_embd_k_gqa() as i64;
    let v_gqa = hp.n_embd_v_gqa() as i64;

    let tokens = g.input("inp_tokens", DType::I32, &[t])?;
    let pos = g.input("inp_pos", DType::I32, &[t])?;
    let kv_idx = g.input("inp_kv_idxs", DType::I64, &[t])?;
    let mask = g.input("inp_kq_mask", DType::F16, &[n_kv, t])?;
    let out_ids = if shape.n_outputs < shape.n_tokens {
        Some(g.input("inp_out_ids", DType::I32, &[shape.n_outputs as i64])?)
    } else {
        None
    };
    let wt = |g: &mut Graph, name: &str| -> Result<TensorId, backplane::GraphError> {
        let spec = w.get(name);
        let (dtype, ne) = spec.map_or((DType::F32, [1, 1, 1, 1]), |s| (s.dtype, s.ne));
        g.weight(name, dtype, &ne)
    };
    let freq_factors = if w.rope_freqs {
        Some(wt(&mut g, "rope_freqs.weight")?)
    } else {
        None
    };
    let rope = RopeParams {
        freq_base: hp.rope_freq_base,
        freq_scale: hp.rope_freq_scale,
        n_ctx_orig: hp.n_ctx_train as i32,
        ..RopeParams::new(hp.rope_dims as i32, hp.arch.rope_mode())
    };
    let scale = 1.0 / (hd as f32).sqrt();

    let embd = wt(&mut g, &ends.embed)?;
    let mut x = g.get_rows(embd, tokens)?; // [e, t]
    for l in 0..hp.n_layer {
        let p = |s: &str| format!("blk.{l}.{s}");
        let residual = x;
        let norm_w = wt(&mut g, &p("attn_norm.weight"))?;
        let cur = g.rms_norm(x, hp.rms_eps)?;
        let cur = g.mul(cur, norm_w)?;
        let proj = |g: &mut Graph, which: &str| -> Result<TensorId, backplane::GraphError> {
            let m = wt(g, &p(&format!("attn_{which}.weight")))?;
            let y = g.mul_mat(m, cur)?;
            if hp.arch.has_qkv_bias() {
                let b = wt(g, &p(&format!("attn_{which}.bias")))?;
                g.add(y, b)
            } else {
                Ok(y)
            }
        };
        let q = proj(&mut g, "q")?;
        let k = proj(&mut g, "k")?;
        let v = proj(&mut g, "v")?;
        let mut q = g.reshape(q, &[hd, nh, t])?;
        let mut k = g.reshape(k, &[hd, nhkv, t])?;
        if hp.arch.has_qk_norm() {
            let qn = wt(&mut g, &p("attn_q_norm.weight"))?;
            let kn = wt(&mut g, &p("attn_k_norm.weight"))?;
            q = g.rms_norm(q, hp.rms_eps)?;
            q = g.mul(q, qn)?;
            k = g.rms_norm(k, hp.rms_eps)?;
            k = g.mul(k, kn)?;
        }
        let q = g.rope(q, pos, freq_factors, rope)?;
        let k = g.rope(k, pos, freq_factors, rope)?;

        // Store this batch's keys and values in the cache, then attend over
        // the first n_kv cells (the views read the stored cache, so they
        // come after the stores).
        let (k_name, v_name) = kv_names(session, l);
        let cache_k = g.input(&k_name, DType::F16, &[k_gqa, kv_size as i64])?;
        let cache_v = g.input(&v_name, DType::F16, &[v_gqa, kv_size as i64])?;
        let k_rows = g.reshape(k, &[k_gqa, t])?;
        let v_rows = g.reshape(v, &[v_gqa, t])?;
        let k_stored = g.set_rows(cache_k, k_rows, kv_idx)?;
        let v_stored = g.set_rows(cache_v, v_rows, kv_idx)?;
        let f16 = DType::F16.type_size() as u64;
        let k_view = g.view(
            k_stored,
            &[hd, nhkv, n_kv],
            &[hd as u64 * f16, k_gqa as u64 * f16],
            0,
        )?;
        let v_view = g.view(
            v_stored,
            &[hdv, nhkv, n_kv],
            &[hdv as u64 * f16, v_gqa as u64 * f16],
            0,
        )?;
        let qp = g.permute(q, [0, 2, 1, 3])?; // [hd, t, nh]
        let kp = g.permute(k_view, [0, 2, 1, 3])?; // [hd, n_kv, nhkv]
        let vp = g.permute(v_view, [0, 2, 1, 3])?; // [hdv, n_kv, nhkv]
        let attn = g.flash_attn_ext(qp, kp, vp, Some(mask), None, scale, 0.0, 0.0)?; // [hdv, nh, t]
        let attn = g.reshape(attn, &[hdv * nh, t])?;
        let wo = wt(&mut g, &p("attn_output.weight"))?;
        let mut cur = g.mul_mat(wo, attn)?;
        let mut residual = residual;
        if l + 1 == hp.n_layer
            && let Some(ids) = out_ids
        {
            cur = g.get_rows(cur, ids)?;
            residual = g.get_rows(residual, ids)?;
        }
        let x_attn = g.add(cur, residual)?;

        let ffn_norm = wt(&mut g, &p("ffn_norm.weight"))?;
        let cur = g.rms_norm(x_attn, hp.rms_eps)?;
        let cur = g.mul(cur, ffn_norm)?;
        let gate_w = wt(&mut g, &p("ffn_gate.weight"))?;
        let up_w = wt(&mut g, &p("ffn_up.weight"))?;
        let down_w = wt(&mut g, &p("ffn_down.weight"))?;
        let gate = g.mul_mat(gate_w, cur)?;
        let up = g.mul_mat(up_w, cur)?;
        let act = g.glu(gate, up, GluOp::Swiglu)?;
        let down = g.mul_mat(down_w, act)?;
        x = g.add(down, x_attn)?;
        g.set_name(x, p("out"));
    }
    let norm_w = wt(&mut g, "output_norm.weight")?;
    let cur = g.rms_norm(x, hp.rms_eps)?;
    let cur = g.mul(cur, norm_w)?;
    let out_w = if ends.output == ends.embed {
        embd
    } else {
        wt(&mut g, &ends.output)?
    };
    let logits = g.mul_mat(out_w, cur)?;
    g.set_name(logits, "result_output");
    g.mark_output(logits)?;
    Ok(Forward {
        graph: g,
        tokens,
        pos,
        kv_idx,
        mask,
        out_ids,
        logits,
        shape,
    })
}
