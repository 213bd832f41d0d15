//! NORM, RMS_NORM and L2_NORM of f32 rows of any length and strides, in
//! place when the destination is the source. One workgroup per row with a
//! workgroup-memory reduction. Kernel: `shaders/wgsl/norm.wgsl`.

use backplane_abi::{Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::{nb_elems, ne_u32, row_count, row_workgroup_size, same_memory, src, src_index};
use crate::pipelines::Checks;

/// Accepts f32 rows with strides in whole elements.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the types and shapes; what follows is
    // what the kernel indexes.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    for (what, t) in [("src0", a), ("dst", d)] {
        nb_elems(t, 4).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// Encodes one workgroup per row.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let variant = match d.op().map_err(|x| x.to_string())? {
        Op::Norm => "norm",
        Op::RmsNorm => "rms_norm",
        _ => "l2_norm",
    };
    let wg = row_workgroup_size(e.facts(), a.ne[0]);
    let inplace = same_memory(d, a);
    let mut key = PipelineKey::new("norm", variant).wg(wg);
    key.inplace = inplace;
    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    let params = Params::new()
        .u32x4(ne_u32(a)?)
        .u32(ba.elem_offset(4)?)
        .u32x4(nb_elems(a, 4)?)
        .u32(bd.elem_offset(4)?)
        .u32x4(nb_elems(d, 4)?)
        .f32(d.param_f32(0));
    let bindings: Vec<Binding> = if inplace { vec![ba] } else { vec![ba, bd] };
    e.dispatch_linear(&key, Checks::On, &bindings, &params, row_count(a))
}
