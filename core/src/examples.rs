//! Built-in example graphs: a Llama-style transformer, for `backplane
//! explain` (planned over the devices found, [`explain_example`]), the
//! scheduler's tests and benchmarks.

use backplane_abi::{DType, GluOp, rope_mode};
use backplane_runtime::registry::Device;
use backplane_runtime::sched::{
    DevicePlacement, Placement, Planner, SchedError, SchedOptions, set_placement,
};
use backplane_runtime::{Graph, GraphError, RopeParams, TensorId};

/// Shape of the example transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockConfig {
    /// Embedding width.
    pub n_embd: i64,
    /// Query heads.
    pub n_head: i64,
    /// Key/value heads (divides `n_head`).
    pub n_head_kv: i64,
    /// Feed-forward width.
    pub n_ff: i64,
    /// Tokens in the batch.
    pub n_tokens: i64,
    /// Fused FLASH_ATTN_EXT attention (else mul_mat + SOFT_MAX + mul_mat).
    pub flash_attn: bool,
    /// Type of the mat-mul weights.
    pub weight_type: DType,
    /// RMS norm epsilon.
    pub eps: f32,
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            n_embd: 256,
            n_head: 4,
            n_head_kv: 2,
            n_ff: 512,
            n_tokens: 8,
            flash_attn: true,
            weight_type: DType::F32,
            eps: 1e-5,
        }
    }
}

/// One Llama-style transformer block: attention norm, q/k/v projections,
/// rope, attention (flash or soft_max), output projection, residual add,
/// ffn norm, gate/up projections, SwiGLU, down projection, residual add.
/// Inputs `x` [n_embd, n_tokens], `pos`, `kq_mask`; the result is marked
/// as the output.
pub fn llama_block(cfg: &BlockConfig) -> Result<Graph, GraphError> {
    llama_layers(cfg, 1)
}

/// `n_layers` stacked blocks (weights named `blk.{l}.attn_q.weight`, ...);
/// the last block's result is the output.
pub fn llama_layers(cfg: &BlockConfig, n_layers: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new();
    let t = cfg.n_tokens;
    let x = g.input("x", DType::F32, &[cfg.n_embd, t])?;
    let pos = g.input("pos", DType::I32, &[t])?;
    let mask_type = if cfg.flash_attn {
        DType::F16
    } else {
        DType::F32
    };
    let mask = g.input("kq_mask", mask_type, &[t, t])?;
    let mut cur = x;
    for l in 0..n_layers {
        cur = block(&mut g, cfg, l, cur, pos, mask)?;
    }
    g.set_name(cur, "result");
    g.mark_output(cur)?;
    Ok(g)
}

fn weight(
    g: &mut Graph,
    cfg: &BlockConfig,
    name: String,
    ne: &[i64],
) -> Result<TensorId, GraphError> {
    g.weight(&name, cfg.weight_type, ne)
}

fn block(
    g: &mut Graph,
    cfg: &BlockConfig,
    l: usize,
    x: TensorId,
    pos: TensorId,
    mask: TensorId,
) -> Result<TensorId, GraphError> {
    let (e, t, h, hkv) = (cfg.n_embd, cfg.n_tokens, cfg.n_head, cfg.n_head_kv);
    let hd = e / h;
    let p = |s: &str| format!("blk.{l}.{s}");

    let attn_norm = g.weight(&p("attn_norm.weight"), DType::F32, &[e])?;
    let wq = weight(g, cfg, p("attn_q.weight"), &[e, e])?;
    let wk = weight(g, cfg, p("attn_k.weight"), &[e, hkv * hd])?;
    let wv = weight(g, cfg, p("attn_v.weight"), &[e, hkv * hd])?;
    let wo = weight(g, cfg, p("attn_output.weight"), &[e, e])?;
    let ffn_norm = g.weight(&p("ffn_norm.weight"), DType::F32, &[e])?;
    let w_gate = weight(g, cfg, p("ffn_gate.weight"), &[e, cfg.n_ff])?;
    let w_up = weight(g, cfg, p("ffn_up.weight"), &[e, cfg.n_ff])?;
    let w_down = weight(g, cfg, p("ffn_down.weight"), &[cfg.n_ff, e])?;

    let normed = g.rms_norm(x, cfg.eps)?;
    let cur = g.mul(normed, attn_norm)?;
    let q = g.mul_mat(wq, cur)?;
    let k = g.mul_mat(wk, cur)?;
    let v = g.mul_mat(wv, cur)?;
    let q = g.reshape(q, &[hd, h, t])?;
    let k = g.reshape(k, &[hd, hkv, t])?;
    let v = g.reshape(v, &[hd, hkv, t])?;
    let rope = RopeParams::new(hd as i32, rope_mode::NEOX);
    let q = g.rope(q, pos, None, rope)?;
    let k = g.rope(k, pos, None, rope)?;
    let qp = g.permute(q, [0, 2, 1, 3])?; // [hd, t, h]
    let kp = g.permute(k, [0, 2, 1, 3])?; // [hd, t, hkv]
    let vp = g.permute(v, [0, 2, 1, 3])?; // [hd, t, hkv]
    let scale = 1.0 / (hd as f32).sqrt();
    let attn = if cfg.flash_attn {
        let o = g.flash_attn_ext(qp, kp, vp, Some(mask), None, scale, 0.0, 0.0)?; // [hd, h, t]
        g.reshape(o, &[e, t])?
    } else {
        let kq = g.mul_mat(kp, qp)?; // [t_kv, t, h]
        let kq = g.soft_max(kq, Some(mask), None, scale, 0.0)?;
        let vt = g.transpose(vp)?; // [t_kv, hd, hkv]
        let vt = g.cont(vt)?;
        let kqv = g.mul_mat(vt, kq)?; // [hd, t, h]
        let merged = g.permute(kqv, [0, 2, 1, 3])?; // [hd, h, t]
        let merged = g.cont(merged)?;
        g.reshape(merged, &[e, t])?
    };
    let out = g.mul_mat(wo, attn)?;
    let x = g.add(out, x)?;

    let normed = g.rms_norm(x, cfg.eps)?;
    let cur = g.mul(normed, ffn_norm)?;
    let gate = g.mul_mat(w_gate, cur)?;
    let up = g.mul_mat(w_up, cur)?;
    let act = g.glu(gate, up, GluOp::Swiglu)?;
    let down = g.mul_mat(w_down, act)?;
    let x = g.add(down, x)?;
    g.set_name(x, p("out"));
    Ok(x)
}

/// Weight leaves of `graph` (flagged WEIGHT), in order.
pub fn weights(graph: &Graph) -> Vec<TensorId> {
    graph
        .ids()
        .filter(|&t| graph.desc(t).has_flag(backplane_abi::flags::WEIGHT))
        .collect()
}

/// Buffer id standing for "the weights are in backend 0's memory" in
/// [`explain_example`], which plans without allocating anything.
const EXAMPLE_WEIGHTS_BUFFER: u64 = u64::MAX - 1;

/// The example transformer block ([`llama_block`]) planned
/// over `devices` (priority order, CPU last) with its weights in the first
/// device's memory, as an offloading application would place them.
pub fn example_plan(devices: &[Device]) -> Result<(Planner, Graph), SchedError> {
    let placements = devices
        .iter()
        .map(|d| Box::new(DevicePlacement::new(d.clone())) as Box<dyn Placement + Send + Sync>)
        .collect();
    let mut planner = Planner::new(placements, SchedOptions::default())?;
    let mut graph = llama_block(&BlockConfig::default()).map_err(|e| SchedError::InvalidGraph {
        node: 0,
        reason: e.to_string(),
    })?;
    planner.register_buffer(EXAMPLE_WEIGHTS_BUFFER, 0)?;
    let mut offset = 0;
    for t in weights(&graph) {
        set_placement(&mut graph, t, EXAMPLE_WEIGHTS_BUFFER, offset)?;
        offset += graph.desc(t).nbytes().div_ceil(256) * 256;
    }
    Ok((planner, graph))
}

/// What `backplane explain` prints: the routing of the example transformer
/// block over `devices` (priority order, CPU last), with every refusal's reason.
pub fn explain_example(devices: &[Device]) -> Result<String, SchedError> {
    let (mut planner, graph) = example_plan(devices)?;
    let explanation = planner.explain(&graph)?;
    Ok(format!(
        "Example: one Llama-style transformer block (weights in {}'s memory)\n{explanation}",
        planner.backend_names()[0]
    ))
}

/// The example's schedule as Graphviz DOT (`backplane explain --dot`).
pub fn explain_example_dot(devices: &[Device]) -> Result<String, SchedError> {
    let (mut planner, graph) = example_plan(devices)?;
    planner.dot(&graph)
}
