//! NORM, RMS_NORM and L2_NORM of f32 rows of any length and strides, in
//! place when the destination is the source. One workgroup per row with a
//! workgroup-memory reduction. Kernel: `shaders/wgsl/norm.wgsl`.

use backplane_abi::{Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::{nb_elems, ne_u32, src, src_index};
use crate::pipelines::Checks;

/// Largest workgroup the row kernels use.
const MAX_ROW_WG: u32 = 256;

/// Smallest workgroup the row kernels use.
const MIN_ROW_WG: u32 = 32;

/// Workgroup size of a kernel that runs one workgroup per row of `ne0`
/// elements: a power of two covering the row, between 32 and 256 and
/// within the device's invocation limit.
pub(crate) fn row_workgroup_size(facts: &Facts, ne0: i64) -> u32 {
    let limit = MAX_ROW_WG.min(facts.max_invocations.max(1));
    let limit = 1 << (31 - limit.leading_zeros());
    let want = u32::try_from(ne0.max(1))
        .unwrap_or(u32::MAX)
        .min(MAX_ROW_WG);
    want.next_power_of_two().clamp(MIN_ROW_WG.min(limit), limit)
}

/// Whether `d` and `a` are the same memory with the same layout, so the
/// kernel can bind them once.
pub(crate) fn same_memory(d: &TensorDesc, a: &TensorDesc) -> bool {
    d.buffer == a.buffer && d.offset == a.offset && d.nb == a.nb && d.ne == a.ne
}

/// Number of rows (dims 1..3) of `d`, as workgroups.
pub(crate) fn row_count(d: &TensorDesc) -> u64 {
    d.ne[1..].iter().map(|&n| n.max(0) as u64).product()
}

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
