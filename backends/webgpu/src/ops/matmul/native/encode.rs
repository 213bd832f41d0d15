//! Encoding MUL_MAT with the native kernel [`super::choice`] picked:
//! each kernel's parameters, bindings and dispatch.

use super::{NativeKernel, WeightBytes, choice, dense_vec4, f32_src1, graph_weights, words16};
use crate::encode::{Binding, Encoder, Params, split_groups};
use crate::native::configs::MatVecConfig;
use crate::ops::matmul::plan::{self, Shape};
use crate::ops::{nb_elems, src_index};

/// GEMM flag: weight rows, offset and strides are multiples of 16 bytes
/// (f16 weights read as 16-byte words). Bits as in the GLSL.
const FLAG_A_VEC4: u32 = 1;
/// GEMM flag: activation rows dense, offset and strides multiples of 16
/// bytes (read as vec4s).
const FLAG_B_VEC4: u32 = 2;
/// GEMM flag: dst rows dense, offset and strides multiples of 16 bytes
/// (whole accumulators stored straight to dst).
const FLAG_D_DIRECT: u32 = 4;
/// GEMM flag: workgroups in dispatch order take the column tiles of one
/// row tile together (the `matmul_colfirst` option).
const FLAG_COLUMNS_FIRST: u32 = 8;

/// Encodes MUL_MAT `node` with a native kernel when it gets one (true),
/// else leaves it to the WGSL paths (false; `matmul_trace` says why).
pub fn try_encode(e: &mut Encoder, node: usize) -> Result<bool, String> {
    let kernel = match choice(e, node) {
        Ok(k) => k,
        Err(why) => {
            if e.facts().tuning.matmul_trace {
                eprintln!("backplane-webgpu: MUL_MAT node {node}: WGSL path: {why}");
            }
            return Ok(false);
        }
    };
    if e.facts().tuning.matmul_trace {
        let converted = match kernel {
            NativeKernel::Cm2 {
                converted: Some(t), ..
            } => format!(" ({} weights converted to f16 rows first)", t.name()),
            _ => String::new(),
        };
        eprintln!(
            "backplane-webgpu: MUL_MAT node {node}: native {}{converted}",
            kernel.name()
        );
    }
    match kernel {
        NativeKernel::MatVec { config, .. } => encode_matvec(e, node, kernel, config)?,
        NativeKernel::CoopMat { config, .. } => {
            let tile = (config.bm, config.bn, config.workgroup_size(), config.b_half);
            encode_gemm(e, node, kernel, tile)?
        }
        NativeKernel::Cm2 { config, .. } => {
            let tile = (config.bm, config.bn, config.workgroup_size, config.b_half);
            encode_gemm(e, node, kernel, tile)?
        }
    }
    Ok(true)
}

/// A u32 parameter, or an error naming it.
fn word(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("native MUL_MAT: {what} = {v} does not fit u32"))
}

/// The parameters every native MUL_MAT kernel starts with: sizes, then
/// the weights' offset and strides in bytes (`w`), in the order of the
/// GLSL's `Params`.
fn head_params(s: &Shape, groups: u64, w: &WeightBytes) -> Result<Params, String> {
    let (_, off, nb) = w;
    let mut p = Params::new()
        .u32(word(s.k, "K")?)
        .u32(word(s.m, "M")?)
        .u32(word(s.ne12, "ne12")?)
        .u32(word(s.r2, "r2")?)
        .u32(word(s.r3, "r3")?)
        .u32(word(groups, "row groups")?)
        .u32(word(*off, "src0 offset")?);
    for (i, &nb) in nb.iter().enumerate() {
        p = p.u32(word(nb, &format!("src0 nb{}", i + 1))?);
    }
    Ok(p)
}

/// dst's offset and four strides in f32 elements.
fn dst_layout(e: &Encoder, node: usize) -> Result<(u32, [u32; 4]), String> {
    let off = e.binding(node)?.elem_offset(4)?;
    let nb = nb_elems(&e.graph[node], 4).map_err(|x| format!("dst: {x}"))?;
    Ok((off, nb))
}

fn encode_matvec(
    e: &mut Encoder,
    node: usize,
    kernel: NativeKernel,
    config: &MatVecConfig,
) -> Result<(), String> {
    let g = e.graph;
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    let row_groups = s.m.div_ceil(u64::from(config.rows));
    let (x, x_off, x_nb) = crate::ops::matmul::kernels::quantized_src1(e, ib)?;
    let (d_off, d_nb) = dst_layout(e, node)?;
    let split = matches!(kernel, NativeKernel::MatVec { split: true, .. });
    let (w, w_scales) = weights_read(e, node, split)?;
    let p = head_params(&s, row_groups, &w)?
        .u32(x_off)
        .u32(x_nb[0])
        .u32(x_nb[1])
        .u32(x_nb[2])
        .u32(d_off)
        .u32x4(d_nb)
        .u32(word(w_scales, "split heads")?);
    let max = e.facts().max_groups_per_dim;
    let [gx, gy, _] = split_groups(row_groups, max)
        .ok_or_else(|| format!("native mat-vec: {row_groups} row groups are too many"))?;
    let z = word(s.batches(), "batches")?;
    let bindings = [w.0, x, e.binding(node)?];
    dispatch(e, &kernel, config.workgroup_size, bindings, &p, [gx, gy, z])
}

/// MUL_MAT `node`'s weights as a kernel reads them in place, and the byte
/// offset of their heads in the binding: split (one matrix of quants
/// rows, then the heads) or as they are in the graph (0).
fn weights_read(e: &Encoder, node: usize, split: bool) -> Result<(WeightBytes, u64), String> {
    if !split {
        return Ok((graph_weights(e, node)?, 0));
    }
    let ia = src_index(e.graph, node, 0)?;
    let r = crate::ops::matmul::kernels::SplitRows::of(e, ia)?;
    let off = r.binding.rem_bytes;
    Ok(((r.binding, off, [r.row, 0, 0]), r.heads))
}

/// Encodes a GEMM kernel (`mul_mat_coopmat` or `mul_mat_cm2`, the same
/// parameters) with output tiles of `bm` x `bn` and workgroups of `wg`;
/// `b_half`: the activations converted to f16 rows first (`B_F16`).
/// Too few tiles to fill the GPU split K as the WGSL GEMM splits it
/// ([`plan::coopmat_split`], the `matmul_splitk` option): each split
/// stores partial sums in its own dense plane of scratch memory, which
/// `mul_mat_split_sum` then adds into dst (dst rows dense; otherwise no
/// split).
fn encode_gemm(
    e: &mut Encoder,
    node: usize,
    kernel: NativeKernel,
    (bm, bn, wg, b_half): (u32, u32, u32, bool),
) -> Result<(), String> {
    let g = e.graph;
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    let tiles_m = s.m.div_ceil(u64::from(bm));
    let tiles_n = s.n.div_ceil(u64::from(bn));
    // The converted copy takes scratch memory first, so a copy kept for
    // the next nodes sits at its start (as on the WGSL path); converted
    // weights come after it.
    let (bb, b_off, b_nb) = if b_half {
        let (bb, off, [s1, s2, s3]) = crate::ops::matmul::kernels::half_src1(e, ib)?;
        (bb, off, [1, s1, s2, s3])
    } else {
        f32_src1(e, ib)?
    };
    let (w, w_scales) = match kernel {
        NativeKernel::Cm2 {
            converted: Some(_), ..
        } => {
            let (bw, halves) = crate::ops::matmul::half_rows(e, ia)?;
            let off = bw.rem_bytes;
            ((bw, off, halves.map(|h| h * 2)), 0)
        }
        NativeKernel::CoopMat { split, .. } => weights_read(e, node, split)?,
        _ => weights_read(e, node, false)?,
    };
    let (mut d_off, mut d_nb) = dst_layout(e, node)?;
    let batches = s.batches();
    let plane = s.m * s.n * batches;
    let (splits, k_chunk) = match plan::coopmat_split(
        e.facts().tuning.matmul_splitk,
        tiles_m * tiles_n * batches,
        s.k,
        plan::coopmat_groups_target(e.facts()),
    ) {
        (n, chunk) if n > 1 && d_nb[0] == 1 && e.facts().fits_binding(4 * plane * n) => (n, chunk),
        _ => (1, s.k),
    };
    let dst = e.binding(node)?;
    let mut out = dst.clone();
    if splits > 1 {
        out = e.scratch(4 * plane * splits)?;
        d_off = 0;
        d_nb = [
            1,
            word(s.m, "M")?,
            word(s.m * s.n, "split plane row")?,
            word(s.m * s.n * s.ne12, "split plane batch")?,
        ];
    }
    let mut flags = 0;
    if words16(w.1, &w.2) {
        flags |= FLAG_A_VEC4;
    }
    if dense_vec4(b_off, b_nb) {
        flags |= FLAG_B_VEC4;
    }
    if dense_vec4(d_off, d_nb) {
        flags |= FLAG_D_DIRECT;
    }
    if e.facts().tuning.matmul_colfirst {
        flags |= FLAG_COLUMNS_FIRST;
    }
    let p = head_params(&s, tiles_m, &w)?
        .u32(b_off)
        .u32x4(b_nb)
        .u32(d_off)
        .u32x4(d_nb)
        .u32(word(s.n, "N")?)
        .u32(flags)
        .u32(word(batches, "batches")?)
        .u32(word(k_chunk, "K split")?)
        .u32(word(if splits > 1 { plane } else { 0 }, "split plane")?)
        .u32(word(w_scales, "split heads")?);
    let groups = [
        word(tiles_m, "row tiles")?,
        word(tiles_n, "column tiles")?,
        word(batches * splits, "batches x K splits")?,
    ];
    dispatch(e, &kernel, wg, [w.0, bb, out.clone()], &p, groups)?;
    if splits == 1 {
        return Ok(());
    }
    if e.facts().tuning.matmul_trace {
        eprintln!("backplane-webgpu: MUL_MAT node {node}: K split {splits} ways of {k_chunk}");
    }
    let (d_off, d_nb) = dst_layout(e, node)?;
    crate::ops::matmul::kernels::sum_split_planes(
        e,
        [out, dst],
        [s.m, s.n, s.ne12, batches],
        splits,
        (d_off, [d_nb[1], d_nb[2], d_nb[3]]),
    )
}

/// Dispatches native `kernel` (workgroups of `wg`) on weights, activations
/// and dst (`bindings`) with parameters `p`.
fn dispatch(
    e: &mut Encoder,
    kernel: &NativeKernel,
    wg: u32,
    bindings: [Binding; 3],
    p: &Params,
    groups: [u32; 3],
) -> Result<(), String> {
    let ctx = e.ctx();
    let pipeline = ctx.native.pipelines.get(
        &ctx.device,
        &ctx.pipelines,
        &kernel.name(),
        (wg, 1, 1),
        bindings.len(),
    )?;
    e.dispatch_pipeline(pipeline, &bindings, p, groups)
}
