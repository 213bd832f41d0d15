//! Ops that move data: CPY and CONT between f32, f16 and i32 (kernel
//! `shaders/wgsl/cpy.wgsl`), CPY from f32 to q8_0, q4_0, q4_1, q5_0 and
//! q5_1 (`cpy_quant.wgsl`), CONCAT (`concat.wgsl`), REPEAT (`repeat.wgsl`)
//! and PAD (`pad.wgsl`). The plain kernels run one invocation per
//! destination element and index both sides through their strides, so
//! sources and destinations may be any (element-aligned) views; quantized
//! destinations must be contiguous. GET_ROWS is in [`get_rows`], SET_ROWS
//! in [`set_rows`].

pub(crate) mod get_rows;
pub(crate) mod set_rows;

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::{dtype, nb_elems, ne_u32, overlaps, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

/// Plain types the copy kernels move.
const PLAIN: &[DType] = &[DType::F32, DType::F16, DType::I32];

/// Workgroup size of every kernel here.
const WG: u32 = 256;

/// Whether CPY, CONT, CONCAT, REPEAT or PAD `graph[node]` runs on this
/// backend; Err names the type, shape or parameter that does not.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    match d.op().map_err(|e| e.to_string())? {
        Op::Cpy | Op::Cont => supports_cpy(a, d)?,
        // The op contract has checked the shapes, the dim and the pads;
        // what follows is what the kernels implement and index.
        Op::Concat => {
            want_type("src0", a, PLAIN)?;
            concat_dim(d)?;
            check_indexable("src1", src(graph, node, 1)?)?;
        }
        Op::Repeat => {
            want_type("src0", a, PLAIN)?;
        }
        Op::Pad => {}
        other => return Err(format!("{other} is not a layout op")),
    }
    check_indexable("src0", a)?;
    check_indexable("dst", d)?;
    u32::try_from(d.nelements())
        .map_err(|_| format!("{} elements do not fit u32", d.nelements()))?;
    Ok(())
}

/// Records the kernel of `graph[node]` (supported).
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::Cpy | Op::Cont => encode_cpy(e, node),
        Op::Concat => encode_concat(e, node),
        Op::Repeat => encode_repeat(e, node),
        _ => encode_pad(e, node),
    }
}

/// Quantized types CPY writes from f32 (blocks of 32, ggml's reference
/// quantizers), with the number of blocks one invocation stores so that
/// it ends on a u32 boundary.
const QUANT_DSTS: &[(DType, u32)] = &[
    (DType::Q8_0, 2),
    (DType::Q4_0, 2),
    (DType::Q4_1, 1),
    (DType::Q5_0, 2),
    (DType::Q5_1, 1),
];

/// Elements per block of the [`QUANT_DSTS`] types.
const QK: i64 = 32;

/// CPY/CONT type pairs: float to float or i32, i32 to f32 or i32, f32 to
/// the [`QUANT_DSTS`] types.
fn supports_cpy(a: &TensorDesc, d: &TensorDesc) -> Result<(), String> {
    let ta = want_type("src0", a, PLAIN)?;
    if a.nelements() != d.nelements() {
        return Err(format!(
            "src0 has {} elements, dst {}",
            a.nelements(),
            d.nelements()
        ));
    }
    let td = dtype(d)?;
    if td.is_quantized() {
        if !QUANT_DSTS.iter().any(|&(t, _)| t == td) {
            let names: Vec<&str> = QUANT_DSTS.iter().map(|(t, _)| t.name()).collect();
            return Err(format!(
                "copy to quantized {} not implemented (have {})",
                td.name(),
                names.join(", ")
            ));
        }
        if ta != DType::F32 {
            return Err(format!(
                "copy from {} to {} not implemented (only from f32)",
                ta.name(),
                td.name()
            ));
        }
        if !d.is_contiguous() || d.ne[0] % QK != 0 || a.ne[0] % QK != 0 {
            return Err(format!(
                "copy to {} needs a contiguous dst and rows of whole 32-blocks",
                td.name()
            ));
        }
        if !d.view_offset.is_multiple_of(4) {
            return Err(format!(
                "copy to {} needs a 4-byte aligned dst view",
                td.name()
            ));
        }
        return Ok(());
    }
    let td = want_type("dst", d, PLAIN)?;
    if ta == DType::I32 && td == DType::F16 {
        return Err("copy from i32 to f16 not implemented (i32 copies to f32 or i32)".into());
    }
    Ok(())
}

/// Strides in whole elements and dims that fit u32.
fn check_indexable(what: &str, t: &TensorDesc) -> Result<(), String> {
    let elem = dtype(t)?.type_size() as u64;
    nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
    ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    Ok(())
}

/// The CONCAT dimension (op_params[0]).
fn concat_dim(d: &TensorDesc) -> Result<usize, String> {
    let dim = d.param_i32(0);
    usize::try_from(dim)
        .ok()
        .filter(|&k| k < 4)
        .ok_or_else(|| format!("concat dim {dim} out of range 0..4"))
}

/// PAD's padding before each dim (op_params[0, 2, 4, 6]; the op contract
/// has checked them against the shapes and refused circular padding).
fn pad_amounts(d: &TensorDesc) -> [u32; 4] {
    [0, 2, 4, 6].map(|i| u32::try_from(d.param_i32(i)).unwrap_or(0))
}

/// Fails when the destination shares bytes with a source: one invocation
/// would read what another writes.
fn refuse_overlap(what: &str, src: &TensorDesc, d: &TensorDesc) -> Result<(), String> {
    if overlaps(src, d) {
        return Err(format!(
            "dst overlaps {what}; copying in place is not supported"
        ));
    }
    Ok(())
}

/// Parameters shared by the kernels' tails: a tensor's element offset in
/// its binding and its strides in elements.
fn offset_and_strides(
    e: &Encoder,
    index: usize,
    params: Params,
) -> Result<(Params, Binding), String> {
    let t = e.tensor(index);
    let elem = dtype(t)?.type_size() as u64;
    let b = e.binding(index)?;
    let params = params.u32(b.elem_offset(elem)?).u32x4(nb_elems(t, elem)?);
    Ok((params, b))
}

/// The element count and the first three dims of `d`.
fn count_and_dims(d: &TensorDesc) -> Result<Params, String> {
    let ne = ne_u32(d)?;
    Ok(Params::new()
        .u32(d.nelements() as u32)
        .u32(ne[0])
        .u32(ne[1])
        .u32(ne[2]))
}

fn encode_cpy(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let (ta, td) = (dtype(a)?, dtype(d)?);
    if ta == td && a.buffer == d.buffer && a.offset == d.offset && a.nb == d.nb && a.ne == d.ne {
        return Ok(()); // copying a tensor onto itself
    }
    refuse_overlap("src0", a, d)?;
    if td.is_quantized() {
        return encode_cpy_quant(e, node, ia);
    }
    let (params, ba) = offset_and_strides(e, ia, count_and_dims(a)?)?;
    let nd = ne_u32(d)?;
    let params = params.u32(nd[0]).u32(nd[1]).u32(nd[2]);
    let (params, bd) = offset_and_strides(e, node, params)?;
    let key = PipelineKey::new("cpy", "")
        .ty("SRC0", type_name(ta))
        .ty("DST", type_name(td))
        .wg(WG);
    let groups = (d.nelements() as u64).div_ceil(u64::from(WG));
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, groups)
}

/// f32 to a [`QUANT_DSTS`] type: one invocation per group of blocks.
fn encode_cpy_quant(e: &mut Encoder, node: usize, ia: usize) -> Result<(), String> {
    /// Workgroup size of the quantizing kernel (each invocation does 32 or 64 values).
    const WG_QUANT: u32 = 64;
    let d = e.tensor(node);
    let a = e.tensor(ia);
    let td = dtype(d)?;
    let &(_, per_group) = QUANT_DSTS
        .iter()
        .find(|&&(t, _)| t == td)
        .ok_or_else(|| format!("copy to {} not implemented", td.name()))?;
    let n_blocks = u32::try_from(d.nelements() / QK).map_err(|_| "too many blocks".to_string())?;
    let bd = e.binding(node)?;
    let offd_words = bd.elem_offset(4)?;
    let na = ne_u32(a)?;
    let params = Params::new().u32(n_blocks).u32(na[0]).u32(na[1]).u32(na[2]);
    let (params, ba) = offset_and_strides(e, ia, params)?;
    let params = params.u32(offd_words);
    let key = PipelineKey::new("cpy_quant", "")
        .ty("SRC0", "f32")
        .ty("DST", type_name(td))
        .wg(WG_QUANT);
    let groups = u64::from(n_blocks.div_ceil(per_group)).div_ceil(u64::from(WG_QUANT));
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, groups)
}

fn encode_concat(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (a, b) = (&g[ia], &g[ib]);
    refuse_overlap("src0", a, d)?;
    refuse_overlap("src1", b, d)?;
    let dim = concat_dim(d)?;
    let t = type_name(dtype(d)?);
    let params = count_and_dims(d)?.u32(dim as u32).u32(ne_u32(a)?[dim]);
    let (params, ba) = offset_and_strides(e, ia, params)?;
    let (params, bb) = offset_and_strides(e, ib, params)?;
    let (params, bd) = offset_and_strides(e, node, params)?;
    let key = PipelineKey::new("concat", "")
        .ty("SRC0", t)
        .ty("SRC1", t)
        .ty("DST", t)
        .wg(WG);
    let groups = (d.nelements() as u64).div_ceil(u64::from(WG));
    e.dispatch_linear(&key, Checks::On, &[ba, bb, bd], &params, groups)
}

fn encode_repeat(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    refuse_overlap("src0", a, d)?;
    let t = type_name(dtype(d)?);
    let params = count_and_dims(d)?.u32x4(ne_u32(a)?);
    let (params, ba) = offset_and_strides(e, ia, params)?;
    let (params, bd) = offset_and_strides(e, node, params)?;
    let key = PipelineKey::new("repeat", "")
        .ty("SRC0", t)
        .ty("DST", t)
        .wg(WG);
    let groups = (d.nelements() as u64).div_ceil(u64::from(WG));
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, groups)
}

fn encode_pad(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    refuse_overlap("src0", a, d)?;
    let params = count_and_dims(d)?.u32x4(pad_amounts(d)).u32x4(ne_u32(a)?);
    let (params, ba) = offset_and_strides(e, ia, params)?;
    let (params, bd) = offset_and_strides(e, node, params)?;
    let key = PipelineKey::new("pad", "")
        .ty("SRC0", "f32")
        .ty("DST", "f32")
        .wg(WG);
    let groups = (d.nelements() as u64).div_ceil(u64::from(WG));
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, groups)
}
