//! SET_ROWS: f32 rows of src0 written over rows of the destination (f32,
//! f16, bf16, or quantized to q4_0, q4_1, q5_0, q5_1, q8_0 as ggml's
//! reference quantizers) at i32/i64 indices from src1, broadcast over dims 2 and 3
//! as ggml. An index outside the destination writes nothing and raises the
//! stream's error flag (node + 1, the index), so `graph_compute` fails with
//! the node and the bad index. Kernels: `shaders/wgsl/set_rows.wgsl`,
//! `shaders/wgsl/set_rows_quant.wgsl`.

use backplane_abi::{DType, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{dtype, nb_elems, ne_u32, overlaps, src, src_index, type_name};
use crate::pipelines::Checks;

/// Workgroup size (one invocation per element or element pair).
const WG: u32 = 256;

/// Destination types with a kernel.
const DST_TYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
];

/// Weights per block of the quantized destination types.
const QK: i64 = 32;

/// How a destination type is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One invocation per element of a WGSL type (f32, f16).
    Elements,
    /// Two 16-bit elements per u32 word (bf16, which WGSL lacks).
    Pairs,
    /// One invocation per 32-weight block, written as bytes.
    Blocks,
}

impl Layout {
    fn of(t: DType) -> Layout {
        match t {
            DType::BF16 => Layout::Pairs,
            t if t.is_quantized() => Layout::Blocks,
            _ => Layout::Elements,
        }
    }
}

/// Strides of a packed-pair destination in u32 words: one word per pair
/// along dim 0, the row strides in whole words.
fn pair_strides(d: &TensorDesc) -> Result<[u32; 4], String> {
    let mut nb = [1u32; 4];
    for (out, &bytes) in nb.iter_mut().zip(&d.nb).skip(1) {
        if !bytes.is_multiple_of(4) {
            return Err(format!(
                "dst stride {bytes} bytes is not a whole number of words"
            ));
        }
        *out =
            u32::try_from(bytes / 4).map_err(|_| format!("dst stride {bytes} does not fit u32"))?;
    }
    Ok(nb)
}

/// Byte strides of a block destination as u32.
fn byte_strides(d: &TensorDesc) -> Result<[u32; 4], String> {
    let mut nb = [0u32; 4];
    for (out, &bytes) in nb.iter_mut().zip(&d.nb) {
        *out = u32::try_from(bytes).map_err(|_| format!("dst stride {bytes} does not fit u32"))?;
    }
    Ok(nb)
}

/// Accepts the destination types of [`DST_TYPES`] with rows the kernels
/// can address (the op contract has checked the operand types and shapes).
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let s = src(graph, node, 0)?;
    let i = src(graph, node, 1)?;
    let td = dtype(d)?;
    if !DST_TYPES.contains(&td) {
        return Err(backplane_abi::support::implemented_types(
            "result", td, DST_TYPES,
        ));
    }
    nb_elems(s, 4).map_err(|e| format!("src0: {e}"))?;
    nb_elems(i, 4).map_err(|e| format!("indices: {e}"))?;
    ne_u32(s).map_err(|e| format!("src0: {e}"))?;
    ne_u32(d).map_err(|e| format!("dst: {e}"))?;
    match Layout::of(td) {
        Layout::Pairs => {
            if d.ne[0] % 2 != 0 || d.nb[0] != 2 || !d.offset.is_multiple_of(4) {
                return Err(format!(
                    "{} dst needs even rows of contiguous elements at a 4-byte offset",
                    td.name()
                ));
            }
            pair_strides(d)?;
        }
        Layout::Blocks => {
            if d.ne[0] % QK != 0 || d.nb[0] != td.type_size() as u64 {
                return Err(format!(
                    "{} dst needs rows of whole, contiguous {QK}-weight blocks (ne0 {})",
                    td.name(),
                    d.ne[0]
                ));
            }
            byte_strides(d)?;
        }
        Layout::Elements => {
            nb_elems(d, td.type_size() as u64).map_err(|e| format!("dst: {e}"))?;
        }
    }
    Ok(())
}

/// Encodes one invocation per element (per element pair for bf16, per
/// block for the quantized types).
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    encode_nodes(e, node, None)
}

/// Whether SET_ROWS nodes `a` and then `b` can run as one dispatch: the
/// same indices, f32 rows into f16 or f32 elements of as many rows, and
/// neither writing what the other reads or writes (a layer's K and V
/// cache stores).
pub(crate) fn pairs(graph: &[TensorDesc], a: usize, b: usize) -> bool {
    let (da, db) = (&graph[a], &graph[b]);
    let (Some(ia), Some(ib)) = (da.src(1), db.src(1)) else {
        return false;
    };
    let (Some(sa), Some(sb)) = (da.src(0), db.src(0)) else {
        return false;
    };
    if ia != ib || ia >= graph.len() || sa >= graph.len() || sb >= graph.len() {
        return false;
    }
    let (src_a, src_b, idx) = (&graph[sa], &graph[sb], &graph[ia]);
    da.dtype == db.dtype
        && element_rows(da)
        && da.ne[1] == db.ne[1]
        && [src_a, src_b]
            .iter()
            .all(|t| dtype(t) == Ok(DType::F32) && nb_elems(t, 4).is_ok())
        && ![src_b, idx, db].iter().any(|t| overlaps(da, t))
        && ![src_a, idx].iter().any(|t| overlaps(db, t))
}

/// Whether SET_ROWS destination `t` holds f16 or f32 elements with strides
/// and sizes the element kernel indexes (what a store written by another
/// kernel, a pair or a ROPE, needs).
pub(crate) fn element_rows(t: &TensorDesc) -> bool {
    dtype(t).is_ok_and(|t| matches!(t, DType::F16 | DType::F32))
        && nb_elems(t, dtype(t).map_or(4, |t| t.type_size() as u64)).is_ok()
        && ne_u32(t).is_ok()
}

/// Encodes SET_ROWS `a` and `b` (see [`pairs`]) as one dispatch.
pub(crate) fn encode_pair(e: &mut Encoder, a: usize, b: usize) -> Result<(), String> {
    encode_nodes(e, a, Some(b))
}

fn encode_nodes(e: &mut Encoder, node: usize, second: Option<usize>) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (is, ii) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (s, i) = (&g[is], &g[ii]);
    let (ti, td) = (dtype(i)?, dtype(d)?);
    let layout = Layout::of(td);
    let shader = if layout == Layout::Blocks {
        "set_rows_quant"
    } else {
        "set_rows"
    };
    let mut key = PipelineKey::new(shader, "")
        .ty("SRC1", type_name(ti))
        .ty("DST", type_name(td))
        .wg(WG);
    if layout == Layout::Pairs {
        key.path = "pairs";
    }
    let bs = e.binding(is)?;
    let bi = e.binding(ii)?;
    let bd = e.binding(node)?;
    let flag = e.error_flag();

    let ne = ne_u32(s)?;
    let ni = ne_u32(i)?;
    let nb_i = nb_elems(i, 4)?;
    // Destination offset and strides in the kernel's units, and the
    // invocations per source row.
    let (off_d, nb_d, width) = match layout {
        Layout::Pairs => (bd.elem_offset(4)?, pair_strides(d)?, ne[0] / 2),
        Layout::Blocks => (bd.elem_offset(1)?, byte_strides(d)?, ne[0] / QK as u32),
        Layout::Elements => {
            let size = td.type_size() as u64;
            (bd.elem_offset(size)?, nb_elems(d, size)?, ne[0])
        }
    };
    let mut params = Params::new()
        .u32x4(ne)
        .u32(bs.elem_offset(4)?)
        .u32x4(nb_elems(s, 4)?)
        .u32(bi.elem_offset(4)?)
        .u32(nb_i[0])
        .u32(nb_i[1])
        .u32(nb_i[2])
        .u32(ni[1])
        .u32(ni[2])
        .u32(off_d)
        .u32x4(nb_d)
        .u32(ne_u32(d)?[1])
        .u32(node as u32 + 1);
    let rows = |t: &TensorDesc| t.ne[1..].iter().map(|&x| x as u64).product::<u64>();
    let mut n = u64::from(width) * rows(s);
    let mut bindings = vec![bs, bi, bd, flag];
    if let Some(b) = second {
        if layout != Layout::Elements {
            return Err("only element rows are stored in pairs".into());
        }
        let sb = src_index(g, b, 0)?;
        let (src_b, dst_b) = (&g[sb], &g[b]);
        let size = td.type_size() as u64;
        let (bsb, bdb) = (e.binding(sb)?, e.binding(b)?);
        params = params
            .u32x4(ne_u32(src_b)?)
            .u32(bsb.elem_offset(4)?)
            .u32x4(nb_elems(src_b, 4)?)
            .u32(bdb.elem_offset(size)?)
            .u32x4(nb_elems(dst_b, size)?);
        key = key.define("PAIR", "");
        bindings.extend([bsb, bdb]);
        n += u64::from(ne_u32(src_b)?[0]) * rows(src_b);
    }
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        n.div_ceil(u64::from(WG)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_strides_by_type() {
        assert!(Layout::of(DType::F16) == Layout::Elements);
        assert!(Layout::of(DType::BF16) == Layout::Pairs);
        assert!(Layout::of(DType::Q5_1) == Layout::Blocks);
        let mut d = TensorDesc::new(DType::BF16, [40, 3, 1, 1]);
        assert_eq!(pair_strides(&d).unwrap(), [1, 20, 60, 60]);
        d.nb[1] = 82;
        assert!(pair_strides(&d).is_err());
    }
}
