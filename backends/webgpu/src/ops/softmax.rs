//! SOFT_MAX of f32 rows with scale, an optional f32/f16 mask (broadcast
//! over dims 2 and 3), ALiBi slopes (max_bias) and optional per-head sinks,
//! in place when the destination is the source. One workgroup per row.
//! Kernel: `shaders/wgsl/soft_max.wgsl`.

use backplane_abi::TensorDesc;
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name};
use crate::ops::{row_count, row_workgroup_size, same_memory};
use crate::pipelines::Checks;

/// The optional source `i` of `graph[node]` (mask 1, sinks 2).
fn optional(graph: &[TensorDesc], node: usize, i: usize) -> Option<usize> {
    graph[node].src(i).filter(|&s| s < graph.len())
}

/// Whether the kernel indexes these operands: element strides, u32 sizes.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the types, the mask's cover and the
    // sinks; what follows is what this kernel indexes.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    for (what, t) in [("src0", a), ("dst", d)] {
        nb_elems(t, 4).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    if let Some(im) = optional(graph, node, 1) {
        let m = &graph[im];
        let tm = dtype(m)?;
        nb_elems(m, tm.type_size() as u64).map_err(|e| format!("mask: {e}"))?;
        ne_u32(m).map_err(|e| format!("mask: {e}"))?;
    }
    if let Some(is) = optional(graph, node, 2) {
        nb_elems(&graph[is], 4).map_err(|e| format!("sinks: {e}"))?;
    }
    Ok(())
}

/// ALiBi constants as ggml: (n_head_log2, m0, m1) for `n_head` heads.
fn alibi(max_bias: f32, n_head: u32) -> (u32, f32, f32) {
    let n_head_log2 = 1u32 << n_head.max(1).ilog2();
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    (n_head_log2, m0, m1)
}

/// Encodes one workgroup per row.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let mask = optional(g, node, 1);
    let sinks = optional(g, node, 2);
    let inplace = same_memory(d, a);
    let wg = row_workgroup_size(e.facts(), a.ne[0]);
    let mut key = PipelineKey::new("soft_max", "").wg(wg);
    key.inplace = inplace;

    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    let mut bindings = vec![ba.clone()];
    let (mut off_m, mut nb_m, mut nm) = (0, [0; 4], [1, 1]);
    if let Some(im) = mask {
        let m = &g[im];
        let tm = dtype(m)?;
        let size = tm.type_size() as u64;
        let bm = e.binding(im)?;
        off_m = bm.elem_offset(size)?;
        nb_m = nb_elems(m, size)?;
        let ne = ne_u32(m)?;
        nm = [ne[2], ne[3]];
        key = key
            .ty("MASK", type_name(tm))
            .define("HAS_MASK", "")
            .define("BINDING_MASK", bindings.len().to_string());
        bindings.push(bm);
    }
    let (mut off_s, mut ss0) = (0, 0);
    if let Some(is) = sinks {
        let bs = e.binding(is)?;
        off_s = bs.elem_offset(4)?;
        ss0 = nb_elems(&g[is], 4)?[0];
        key = key
            .define("HAS_SINKS", "")
            .define("BINDING_SINKS", bindings.len().to_string());
        bindings.push(bs);
    }
    if !inplace {
        key = key.define("BINDING_DST", bindings.len().to_string());
        bindings.push(bd.clone());
    }
    key = key.define("BINDING_PARAMS", bindings.len().to_string());

    let ne = ne_u32(a)?;
    let (max_bias, scale) = (d.param_f32(1), d.param_f32(0));
    let (n_head_log2, m0, m1) = alibi(max_bias, ne[2]);
    let params = Params::new()
        .u32x4(ne)
        .u32(ba.elem_offset(4)?)
        .u32x4(nb_elems(a, 4)?)
        .u32(bd.elem_offset(4)?)
        .u32x4(nb_elems(d, 4)?)
        .u32(off_m)
        .u32x4(nb_m)
        .u32(nm[0])
        .u32(nm[1])
        .u32(off_s)
        .u32(ss0)
        .f32(scale)
        .f32(max_bias)
        .f32(m0)
        .f32(m1)
        .u32(n_head_log2);
    e.dispatch_linear(&key, Checks::On, &bindings, &params, row_count(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alibi_constants_follow_ggml() {
        let (n, m0, m1) = alibi(8.0, 12);
        assert_eq!(n, 8);
        assert_eq!(m0, 2f32.powf(-1.0));
        assert_eq!(m1, 2f32.powf(-0.5));
        assert_eq!(alibi(8.0, 1).0, 1);
    }
}
