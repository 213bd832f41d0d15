//! State-space ops (Mamba-1 and Mamba-2, f32), as ggml: SSM_CONV, the
//! causal depthwise convolution, and SSM_SCAN, the selective scan.
//! Kernels: `shaders/wgsl/{ssm_conv,ssm_scan}.wgsl`.

use backplane_abi::{Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{check_layout, elem_layout, ne_u32, src, src_index};
use crate::pipelines::Checks;

/// Workgroup size of SSM_CONV (one invocation per output).
const WG: u32 = 256;

/// Largest workgroup of the scan.
const SCAN_WG: u32 = 128;

/// Lanes summing one channel's state in the scan, at most.
const SCAN_LANES: u32 = 32;

/// Whether the kernels run this node: element strides and u32 sizes (the
/// op contract has checked the types and shapes).
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    match d.op().map_err(|e| e.to_string())? {
        Op::SsmConv => {
            let (x, c) = (src(graph, node, 0)?, src(graph, node, 1)?);
            check_layout(&[("sx", x), ("c", c), ("dst", d)])
        }
        Op::SsmScan => supports_scan(graph, node),
        op => Err(format!("{op} is not a state-space op")),
    }
}

/// SSM_SCAN: dense result of u32-indexable size, element strides.
fn supports_scan(graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let names = ["s", "x", "dt", "A", "B", "C", "ids"];
    let mut all: Vec<(&str, &TensorDesc)> = Vec::with_capacity(8);
    for (i, name) in names.iter().enumerate() {
        all.push((name, src(graph, node, i)?));
    }
    if !d.is_contiguous() {
        return Err(format!("dst {:?} must be dense", d.ne));
    }
    all.push(("dst", d));
    check_layout(&all)?;
    u32::try_from(d.nelements())
        .map_err(|_| format!("dst of {} values does not fit u32 indices", d.nelements()))?;
    Ok(())
}

/// Records the kernel of `graph[node]`.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::SsmConv => encode_ssm_conv(e, node),
        Op::SsmScan => encode_ssm_scan(e, node),
        op => Err(format!("{op} is not a state-space op")),
    }
}

fn encode_ssm_conv(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let (ix, ic) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (bx, x_off, xs) = elem_layout(e, ix)?;
    let (bc, c_off, cs) = elem_layout(e, ic)?;
    let (bd, d_off, ds) = elem_layout(e, node)?;
    let [n_r, n_t, n_s, _] = ne_u32(&g[node])?;
    let params = Params::new()
        .u32x4([n_r, n_t, n_s, g[ic].ne[0] as u32])
        .u32x4([x_off, xs[0], xs[1], xs[2]])
        .u32(c_off)
        .u32(cs[0])
        .u32(cs[1])
        .u32x4([d_off, ds[0], ds[1], ds[2]]);
    let key = PipelineKey::new("ssm_conv", "").wg(WG);
    let n = u64::from(n_r) * u64::from(n_t) * u64::from(n_s);
    e.dispatch_linear(
        &key,
        Checks::On,
        &[bx, bc, bd],
        &params,
        n.div_ceil(u64::from(WG)),
    )
}

fn encode_ssm_scan(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let idx: Vec<usize> = (0..7)
        .map(|i| src_index(g, node, i))
        .collect::<Result<_, _>>()?;
    let mut bindings = Vec::with_capacity(9);
    let mut lay = Vec::with_capacity(8);
    for &i in idx.iter().chain(std::iter::once(&node)) {
        let (b, off, st) = elem_layout(e, i)?;
        bindings.push(b);
        lay.push((off, st));
    }
    let (s, x, a, b) = (&g[idx[0]], &g[idx[1]], &g[idx[3]], &g[idx[4]]);
    let [d_state, head_dim, n_head, n_slots] = ne_u32(s)?;
    let [_, _, n_tok, n_seqs] = ne_u32(x)?;
    let n_group = b.ne[1] as u32;
    let y_len = x.nelements() as u32;
    let lanes = d_state.next_power_of_two().min(SCAN_LANES);
    let jper = d_state.div_ceil(lanes);
    let wg_max = SCAN_WG.min(e.facts().max_invocations.max(lanes));
    let rows = (wg_max / lanes).min(head_dim.next_power_of_two()).max(1);
    let (ls, lx, ldt, la, lb, lc, lids, ld) = (
        lay[0], lay[1], lay[2], lay[3], lay[4], lay[5], lay[6], lay[7],
    );
    let a_s0 = if a.ne[0] == 1 { 0 } else { la.1[0] };
    let mut key = PipelineKey::new("ssm_scan", "")
        .wg(rows * lanes)
        .define("TJ", lanes.to_string())
        .define("JPER", jper.to_string())
        .define("ROWS", rows.to_string());
    // The error flag is one binding more; without room, a bad id reads slot 0.
    if bindings.len() < e.facts().max_storage_buffers as usize {
        key = key.define("HAS_ERROR_FLAG", "");
        bindings.push(e.error_flag());
    }
    let params = Params::new()
        .u32x4([d_state, head_dim, n_head, n_tok])
        .u32x4([n_head / n_group, n_slots, node as u32 + 1, y_len])
        .u32(ls.0)
        .u32x4(ls.1)
        .u32(lx.0)
        .u32x4(lx.1)
        .u32x4([ldt.0, ldt.1[0], ldt.1[1], ldt.1[2]])
        .u32(la.0)
        .u32(a_s0)
        .u32(la.1[1])
        .u32(lb.0)
        .u32x4(lb.1)
        .u32(lc.0)
        .u32x4(lc.1)
        .u32(lids.0)
        .u32(lids.1[0])
        .u32(ld.0);
    let groups = [head_dim.div_ceil(rows), n_head, n_seqs];
    e.dispatch(&key, Checks::On, &bindings, &params, groups)
}
