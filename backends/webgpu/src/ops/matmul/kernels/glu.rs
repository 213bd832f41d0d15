//! A layer's gate and up mat-vecs with the GLU of their products in one
//! kernel (`shaders/wgsl/mul_mat_vec_glu.wgsl`): `MUL_MAT → MUL_MAT → GLU`,
//! consecutive compute nodes, both products of one column over the same
//! activations with weights of one type in one buffer, the GLU taking
//! both products (split form, either order). The GLU then no longer waits
//! for both products in a kernel of its own: one dependent step less per
//! decode layer.
//!
//! The fused kernel writes all three results (a later split or the host
//! may read the products) with the bits of the separate kernels: each
//! product is shared out and reduced as the separate mat-vec's workgroup
//! does. When the next node is a MUL_MAT reading the GLU result through
//! the integer mat-vec, the kernel also writes its quantized copy, as the
//! GLU kernel would (`ops::fusion::quantized_copy_for_next`).
//!
//! Layouts: integer units (legacy block types, q4_K, q6_K; q4_0 and q4_K
//! stored split too, read in place) and f16 rows read in units of 8
//! halves. Anything else (other layouts, more than one column, rows not a
//! multiple of 32, no subgroups, weights taken by a native kernel, weights
//! or results too far apart for one binding) is encoded node by node.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use super::{Activations, Weights, u32_of};
use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::kept::CopyOrigin;
use crate::ops::matmul::plan::{self, Path, Shape, WeightLayout};
use crate::ops::{dtype, glu_op, glu_variant, is_op, next_compute, overlaps, src_index};
use crate::pipelines::Checks;
use crate::split::Split;

/// Rows of each product per workgroup: one quantized run of the result.
const RUN: u64 = 32;

/// Most invocations of a fused workgroup.
const MAX_WG: u32 = 512;

/// The nodes of a fused gate/up/GLU (graph indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GluPair {
    /// The first MUL_MAT in graph order, and the second.
    pub first: usize,
    pub second: usize,
    /// The GLU.
    pub glu: usize,
}

impl GluPair {
    /// The fused nodes in graph order.
    pub fn nodes(&self) -> [usize; 3] {
        [self.first, self.second, self.glu]
    }
}

/// The fusion starting at MUL_MAT `i`, if one applies (see the module doc).
pub fn find(graph: &[TensorDesc], i: usize, facts: &Facts) -> Option<GluPair> {
    let j = next_compute(graph, i)?;
    let k = next_compute(graph, j)?;
    if !(is_op(graph, i, Op::MulMat) && is_op(graph, j, Op::MulMat) && is_op(graph, k, Op::Glu)) {
        return None;
    }
    let (s0, s1) = (graph[k].src(0)?, graph[k].src(1)?);
    if !((s0 == i && s1 == j) || (s0 == j && s1 == i)) {
        return None;
    }
    let (wa, wb) = (graph.get(graph[i].src(0)?)?, graph.get(graph[j].src(0)?)?);
    let xi = graph[i].src(1)?;
    let x = graph.get(xi)?;
    if graph[j].src(1)? != xi {
        return None;
    }
    let t = wa.dtype().ok()?;
    let same_weights = wb.dtype().ok()? == t
        && wa.ne == wb.ne
        && wa.nb == wb.nb
        && wa.buffer == wb.buffer
        && wa.ne[2] == 1
        && wa.ne[3] == 1;
    let s = Shape::of(wa, x).ok()?;
    if !same_weights || s.n != 1 || s.batches() != 1 || s.m % RUN != 0 {
        return None;
    }
    if !matches!(
        plan::choose_path(facts, t, &s, true, facts.tuning.matmul_path),
        Path::MatVec { .. }
    ) {
        return None;
    }
    let units = units(facts, wa, t, s.k)?;
    config(facts, t, units)?;
    let results = [&graph[i], &graph[j], &graph[k]];
    let vectors = results.iter().all(|d| {
        d.dtype().ok() == Some(DType::F32)
            && d.is_contiguous()
            && d.ne == [s.m as i64, 1, 1, 1]
            && d.buffer == graph[i].buffer
    });
    // Every result apart from the others (the GLU kernel does not run in
    // place either) and from what the kernel reads: the weights, and the
    // activations unless it reads their quantized copy (made before it
    // runs; the allocator may give the GLU result the activations'
    // memory, as they die with the second product).
    let (gi, gj, gk) = (results[0], results[1], results[2]);
    let glu_ok = !(overlaps(gk, gi) || overlaps(gk, gj));
    let read_in_place: &[&TensorDesc] = if plan::matvec_int8(&facts.tuning, t) {
        &[wa, wb]
    } else {
        &[wa, wb, x]
    };
    let inputs_apart = read_in_place
        .iter()
        .all(|a| results.iter().all(|d| !overlaps(a, d)));
    // Both weights, and the three results, each fit one binding.
    let bindable = |ts: &[&TensorDesc]| {
        let lo = ts.iter().map(|t| t.offset).min().unwrap_or(0);
        let hi = ts.iter().map(|t| t.offset + t.nbytes()).max().unwrap_or(0);
        facts.fits_binding(hi - lo + facts.offset_alignment)
    };
    let fits = bindable(&[wa, wb]) && bindable(&results);
    (vectors && !overlaps(gi, gj) && glu_ok && inputs_apart && fits).then_some(GluPair {
        first: i,
        second: j,
        glu: k,
    })
}

/// Units per row the mat-vec reads for weights `w` of type `t`, when the
/// fused kernel reads that layout (integer units, or 8 halves).
fn units(facts: &Facts, w: &TensorDesc, t: DType, k: u64) -> Option<u64> {
    let layout = plan::matvec_weight_layout(facts, w, t);
    let q8 = plan::matvec_int8(&facts.tuning, t);
    let read = if q8 {
        matches!(layout, WeightLayout::Quant | WeightLayout::Quant16)
    } else {
        layout == WeightLayout::Half8
    };
    read.then(|| plan::matvec_units(t, layout, q8, k))
}

/// `(WGU, GROUPS)`: the separate mat-vec's workgroup size for rows of
/// `units` units, and how many such groups a fused workgroup holds; `None`
/// without subgroups, or when a subgroup could span two groups.
fn config(facts: &Facts, t: DType, units: u64) -> Option<(u32, u32)> {
    if !plan::matvec_subgroups(facts) {
        return None;
    }
    let wgu = plan::matvec_wg(facts, true, t, units);
    let widest = facts.subgroup_size.1;
    if widest == 0 || !wgu.is_multiple_of(widest) {
        return None;
    }
    let cap = facts.max_invocations.min(MAX_WG);
    let groups = [32, 16, 8, 4, 2, 1].into_iter().find(|g| g * wgu <= cap)?;
    Some((wgu, groups))
}

/// One binding over tensors `ids` (one buffer), its end rounded up to
/// `align` bytes, and each one's offset in it, a multiple of `align`, in
/// units of `unit` bytes (`align` a multiple of `unit`).
fn span<const N: usize>(
    e: &Encoder,
    ids: [usize; N],
    unit: u64,
    align: u64,
) -> Result<(Binding, [u32; N]), String> {
    let g = e.graph;
    let lo = *ids.iter().min_by_key(|&&i| g[i].offset).expect("tensors");
    let end = ids
        .iter()
        .map(|&i| g[i].offset + g[i].nbytes())
        .max()
        .unwrap_or(0);
    let binding = e.binding_span(lo, end.next_multiple_of(align) - g[lo].offset)?;
    let mut offsets = [0u32; N];
    for (o, &i) in offsets.iter_mut().zip(&ids) {
        let rel = g[i].offset - binding.offset;
        if !rel.is_multiple_of(align) {
            return Err(format!(
                "tensor {i}: offset not a multiple of {align} bytes"
            ));
        }
        *o = u32_of(rel / unit, "offset")?;
    }
    Ok((binding, offsets))
}

/// Encodes the three nodes of `f` as one kernel; `quantized` is the GLU
/// result's quantized copy for the next MUL_MAT, if it reads one
/// (`ops::fusion::quantized_copy_for_next`). `Ok(false)`: the weights or
/// results span more than one binding may, and nothing was encoded.
pub fn encode(
    e: &mut Encoder,
    f: &GluPair,
    quantized: Option<(u64, CopyOrigin)>,
) -> Result<bool, String> {
    let g = e.graph;
    let glu = &g[f.glu];
    let (x_node, g_node) = (
        glu.src(0).unwrap_or(f.first),
        glu.src(1).unwrap_or(f.second),
    );
    let (w_x, w_g) = (src_index(g, x_node, 0)?, src_index(g, g_node, 0)?);
    let ib = src_index(g, x_node, 1)?;
    let t = dtype(&g[w_x])?;
    let s = Shape::of(&g[w_x], &g[ib])?;
    // Weights stored split (both: `find` wants one buffer) are read in
    // place, their heads after their quants (whole 16-byte words).
    let split = e.ctx().is_split(g[w_x].buffer);
    let w = if split {
        Weights::split(e, w_x)?
    } else {
        Weights::for_matvec(e, w_x)?
    };
    let (unit, align) = match w.layout {
        WeightLayout::Half8 => (16, 16),
        WeightLayout::Split => (1, 16),
        _ => (1, 1),
    };
    // Both weights, and the three results, each in one binding: when
    // either span is over the device's binding limit (large weights far
    // apart), node by node.
    let spans = span(e, [w_x, w_g], unit, align)
        .and_then(|w| Ok((w, span(e, [x_node, g_node, f.glu], 4, 4)?)));
    let Ok(((weights, [off_x, off_g]), (results, [d_x, d_g, d_glu]))) = spans else {
        return Ok(false);
    };
    let x = Activations::for_matvec(e, ib, t)?;
    let n_units = w.units(s.k, &x);
    let (wgu, groups) = config(e.facts(), t, n_units)
        .ok_or("the fused gate/up/GLU kernel does not fit this device")?;
    let op = glu_op(glu)?;
    let wg = groups * wgu;
    let mut key = w
        .key(PipelineKey::new("mul_mat_vec_glu", glu_variant(op)))
        .wg(wg)
        .define("WGU", wgu.to_string())
        .define("GROUPS", groups.to_string())
        .define(
            "MAX_SUBGROUPS",
            (wg / e.facts().subgroup_size.0.clamp(1, wg)).to_string(),
        );
    if x.q8 {
        key = key.define("X_Q8", "");
    }
    let row_groups = s.m / RUN;
    let params = Params::new()
        .u32(u32_of(s.k, "K")?)
        .u32(u32_of(s.m, "M")?)
        .u32(u32_of(n_units, "units")?)
        .u32(u32_of(row_groups, "workgroups")?)
        .u32(off_x)
        .u32(off_g)
        .u32(w.strides[0])
        .u32(x.off)
        .u32(d_x)
        .u32(d_g)
        .u32(d_glu)
        .f32(glu.param_f32(2))
        .f32(glu.param_f32(3));
    let params = if split {
        let heads = |off: u32, w: usize| {
            let at = u64::from(off) + Split::for_tensor(&g[w])?.heads_at() as u64;
            u32_of(at, "split heads")
        };
        params.u32(heads(off_x, w_x)?).u32(heads(off_g, w_g)?)
    } else {
        params
    };
    let mut bindings = vec![weights, x.binding.clone(), results];
    // The quantized copy the next MUL_MAT would make of the GLU result,
    // taken after the activations' copy, which the kernel still reads.
    let kept = match quantized {
        Some((bytes, origin)) => {
            let copy = e.scratch(bytes)?;
            e.forget_kept_copy();
            key = key.define("QUANTIZE", "");
            bindings.push(copy.clone());
            Some((origin, copy))
        }
        None => None,
    };
    // Trusted: every row exists (M is a multiple of 32) and units stay
    // within the rows, as in the separate mat-vec.
    e.dispatch_linear(&key, Checks::Trusted, &bindings, &params, row_groups)?;
    // The GLU result may be over the activations (they die with the
    // products): their copy, read above, is stale for later nodes.
    e.forget_copies_of(f.glu);
    if let Some((origin, copy)) = kept {
        e.keep_copy(origin, copy);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::test_gpu;
    use crate::ops::shader_check;

    /// x [k]; two weights [k, m] of type `t`; gate, up; GLU(gate, up).
    fn graph(t: DType, k: i64, m: i64) -> Vec<TensorDesc> {
        let at = |mut d: TensorDesc, offset: u64| {
            d.offset = offset;
            d
        };
        let node = |op: Op, ne: [i64; 4], offset: u64, srcs: &[usize]| {
            let mut d = at(TensorDesc::new(DType::F32, ne), offset);
            d.op = op.code();
            for (k, &s) in srcs.iter().enumerate() {
                d.src[k] = s as i32;
            }
            d
        };
        let slot = 1 << 26;
        vec![
            at(TensorDesc::new(DType::F32, [k, 1, 1, 1]), 0),
            at(TensorDesc::new(t, [k, m, 1, 1]), slot),
            at(TensorDesc::new(t, [k, m, 1, 1]), 2 * slot),
            node(Op::MulMat, [m, 1, 1, 1], 3 * slot, &[1, 0]),
            node(Op::MulMat, [m, 1, 1, 1], 4 * slot, &[2, 0]),
            node(Op::Glu, [m, 1, 1, 1], 5 * slot, &[3, 4]),
        ]
    }

    #[test]
    fn gate_up_and_glu_fuse_only_where_the_kernel_reads_them() {
        let facts = test_gpu();
        let pair = GluPair {
            first: 3,
            second: 4,
            glu: 5,
        };
        for t in [
            DType::Q4_0,
            DType::Q8_0,
            DType::Q4_K,
            DType::Q6_K,
            DType::F16,
        ] {
            assert_eq!(find(&graph(t, 2048, 8192), 3, &facts), Some(pair), "{t:?}");
        }
        // f32 weights (no integer or half units); rows not a multiple of 32.
        assert_eq!(find(&graph(DType::F32, 2048, 8192), 3, &facts), None);
        assert_eq!(find(&graph(DType::Q4_0, 2048, 8200), 3, &facts), None);
        // Different activations; a GLU of other nodes; up over gate.
        let mut g = graph(DType::Q4_0, 2048, 8192);
        g.push(g[0]);
        g[4].src[1] = 6;
        assert_eq!(find(&g, 3, &facts), None);
        let mut g = graph(DType::Q4_0, 2048, 8192);
        g[5].src[1] = 0;
        assert_eq!(find(&g, 3, &facts), None);
        let mut g = graph(DType::Q4_0, 2048, 8192);
        g[4].offset = g[3].offset;
        assert_eq!(find(&g, 3, &facts), None);
        // The GLU result over the activations: read through their
        // quantized copy (q4_0), not in place (f16).
        for (t, fused) in [(DType::Q4_0, Some(pair)), (DType::F16, None)] {
            let mut g = graph(t, 2048, 8192);
            g[5].offset = 0;
            assert_eq!(find(&g, 3, &facts), fused, "{t:?} over x");
        }
        // Weights too far apart for one binding.
        let mut g = graph(DType::Q4_0, 2048, 8192);
        g[2].offset = 2 * facts.max_binding_bytes;
        assert_eq!(find(&g, 3, &facts), None);
        // No subgroups; subgroups wider than the separate workgroup.
        let plain = Facts {
            subgroups: false,
            ..test_gpu()
        };
        assert_eq!(find(&graph(DType::Q4_0, 2048, 8192), 3, &plain), None);
        let wide = Facts {
            subgroup_size: (128, 128),
            ..test_gpu()
        };
        assert_eq!(find(&graph(DType::Q4_0, 2048, 8192), 3, &wide), None);
    }

    #[test]
    fn groups_fill_the_workgroup_within_the_cap() {
        let facts = test_gpu();
        // q4_0 at k = 2048: 64 units, so 64 invocations per group.
        assert_eq!(config(&facts, DType::Q4_0, 64), Some((64, 8)));
        let small = Facts {
            max_invocations: 256,
            ..test_gpu()
        };
        assert_eq!(config(&small, DType::Q4_0, 64), Some((64, 4)));
        assert_eq!(config(&small, DType::Q4_0, 4096), Some((128, 2)));
    }

    #[test]
    fn every_fused_variant_validates() {
        let split = |flag| {
            [
                ("W_QUANT", ""),
                (flag, ""),
                ("QUANT_BUF_VEC4", ""),
                ("W_SPLIT", ""),
                ("X_Q8", ""),
            ]
        };
        let layouts: [&[(&'static str, &str)]; 6] = [
            &split("QUANT_Q4_0"),
            &split("QUANT_Q4_K"),
            &[("W_QUANT", ""), ("QUANT_Q4_0", ""), ("X_Q8", "")],
            &[("W_QUANT", ""), ("QUANT_Q8_0", ""), ("X_Q8", "")],
            &[
                ("W_QUANT", ""),
                ("QUANT_Q4_K", ""),
                ("QUANT_BUF_VEC4", ""),
                ("X_Q8", ""),
            ],
            &[("W_HALF8", "")],
        ];
        for layout in layouts {
            for quantize in [false, true] {
                for op in ["swiglu", "swiglu_oai"] {
                    let mut key = PipelineKey::new("mul_mat_vec_glu", op)
                        .ty("SRC0", "u32")
                        .wg(512)
                        .define("WGU", "64")
                        .define("GROUPS", "8")
                        .define("MAX_SUBGROUPS", "16");
                    for (name, value) in layout {
                        key = key.define(name, *value);
                    }
                    if quantize {
                        key = key.define("QUANTIZE", "");
                    }
                    shader_check::check(&key);
                }
            }
        }
    }
}
