//! GET_ROWS: rows of src0 picked by i32 indices, as f32 (f32, f16, bf16
//! and the block formats q4_0..q8_0, q2_K..q6_K, dequantized with
//! `common/quant.wgsl`) or as i32 (i32 rows). ggml's shapes: src0
//! [ne00, ne01, ne02, ne03], indices [ne10, ne11, ne12] with ne11 = ne02
//! and ne12 = ne03 (or src0 broadcast when those are 1), dst [ne00, ne10,
//! ne11, ne12]. An index outside 0..ne01 fails the graph (error flag).
//! Kernel: `shaders/wgsl/get_rows.wgsl`.

use backplane_abi::{DType, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::matmul::quant_flag;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

/// Row types with a kernel.
const SOURCE_TYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

/// Workgroup size.
const WG: u32 = 256;

/// Bytes per unit of src0's offsets and strides in the kernel: bytes for
/// block formats, elements otherwise.
fn src_unit(t: DType) -> u64 {
    if t.is_quantized() {
        1
    } else {
        t.type_size() as u64
    }
}

/// Elements each invocation writes: a run of 4 for block formats.
fn per_item(t: DType) -> u64 {
    if t.is_quantized() { 4 } else { 1 }
}

/// Accepts GET_ROWS nodes of the types above, or says why not.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    let idx = src(graph, node, 1)?;
    // The op contract has checked the shapes and the result type; what
    // follows is what the kernel implements and indexes.
    let ta = want_type("src0", a, SOURCE_TYPES)?;
    let td = dtype(d)?;
    if ta.is_quantized() {
        if a.ne[0] != ta.block_size() as i64 && a.nb[0] != ta.type_size() as u64 {
            return Err(format!("src0 {} rows are not dense", ta.name()));
        }
        if !a.offset.is_multiple_of(2) || a.nb[1..].iter().any(|&s| !s.is_multiple_of(2)) {
            return Err("src0 offset or strides are odd".into());
        }
    }
    nb_elems(a, src_unit(ta)).map_err(|e| format!("src0: {e}"))?;
    nb_elems(idx, 4).map_err(|e| format!("indices: {e}"))?;
    nb_elems(d, td.type_size() as u64).map_err(|e| format!("dst: {e}"))?;
    ne_u32(a)?;
    let items = (a.ne[0] as u64 / per_item(ta)) * (d.nelements() as u64 / a.ne[0].max(1) as u64);
    let max = u64::from(facts.max_groups_per_dim);
    if items > u64::from(u32::MAX) || items.div_ceil(u64::from(WG)) > max * max {
        return Err(format!("{items} invocations are too many"));
    }
    if facts.max_storage_buffers < 4 {
        return Err(format!(
            "needs 4 storage buffers, device has {}",
            facts.max_storage_buffers
        ));
    }
    Ok(())
}

/// Encodes a supported GET_ROWS node: one invocation per element (per run
/// of 4 for block formats).
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ia, ii) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (a, idx) = (&g[ia], &g[ii]);
    let (ta, td) = (dtype(a)?, dtype(d)?);
    if d.nelements() == 0 {
        return Ok(());
    }
    let ba = e.binding(ia)?;
    let bi = e.binding(ii)?;
    let bd = e.binding(node)?;
    let flag = e.error_flag();
    let mut key = PipelineKey::new("get_rows", "")
        .ty("SRC0", type_name(ta))
        .ty("DST", type_name(td))
        .wg(WG);
    if let Some(q) = quant_flag(ta) {
        key = key.define("SRC0_QUANT", "").define(q, "");
    }
    let unit = src_unit(ta);
    let nb_a = nb_elems(a, unit)?;
    let nb_i = nb_elems(idx, 4)?;
    let size_d = td.type_size() as u64;
    let nb_d = nb_elems(d, size_d)?;
    let ne_a = ne_u32(a)?;
    let ne_i = ne_u32(idx)?;
    let items = ne_a[0] / per_item(ta) as u32;
    let total = u64::from(items) * u64::from(ne_i[0]) * u64::from(ne_i[1]) * u64::from(ne_i[2]);
    let params = Params::new()
        .u32(ne_a[0])
        .u32(items)
        .u32(ne_i[0])
        .u32(ne_i[1])
        .u32(total as u32)
        .u32(ne_a[1])
        .u32(ne_a[2])
        .u32(ne_a[3])
        .u32((ba.rem_bytes / unit) as u32)
        .u32(nb_a[1])
        .u32(nb_a[2])
        .u32(nb_a[3])
        .u32(bi.elem_offset(4)?)
        .u32(nb_i[0])
        .u32(nb_i[1])
        .u32(nb_i[2])
        .u32(bd.elem_offset(size_d)?)
        .u32x4(nb_d)
        .u32(e.node as u32 + 1);
    e.dispatch_linear(
        &key,
        Checks::On,
        &[ba, bi, bd, flag],
        &params,
        total.div_ceil(u64::from(WG)),
    )
}
