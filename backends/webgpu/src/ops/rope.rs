//! ROPE on f32 and f16 rows of any strides: normal, NeoX, multi-section
//! (MROPE, IMROPE) and vision modes, i32 positions, optional f32 frequency
//! factors, YaRN (ext_factor, attn_factor, beta_fast/slow, n_ctx_orig) as
//! ggml and the reference compute them. In place when the destination is
//! the source. Kernel: `shaders/wgsl/rope.wgsl`.
//!
//! A ROPE whose result the next node stores into a cache (SET_ROWS of the
//! result as rows of all heads: a layer's K cache store) can run both in
//! one kernel ([`stores_rows`], `ops::fusion`): the rotated values go to
//! dst and to their cache row, so the store no longer waits for the ROPE.

use backplane_abi::{DType, Op, TensorDesc, rope_mode};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::layout::set_rows;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name};
use crate::ops::{overlaps, same_bytes, same_memory};
use crate::pipelines::Checks;

/// Workgroup size (one invocation per pair slot).
const WG: u32 = 256;

/// The op parameters of a ROPE node, as `ggml_rope_ext` stores them.
struct RopeOp {
    n_dims: i32,
    mode: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    beta_fast: f32,
    beta_slow: f32,
    sections: [i32; 4],
}

impl RopeOp {
    fn of(d: &TensorDesc) -> RopeOp {
        RopeOp {
            n_dims: d.param_i32(1),
            mode: d.param_i32(2),
            n_ctx_orig: d.param_i32(4),
            freq_base: d.param_f32(5),
            freq_scale: d.param_f32(6),
            ext_factor: d.param_f32(7),
            attn_factor: d.param_f32(8),
            beta_fast: d.param_f32(9),
            beta_slow: d.param_f32(10),
            sections: [11, 12, 13, 14].map(|i| d.param_i32(i)),
        }
    }

    /// The shader variant of the mode.
    fn variant(&self) -> Result<&'static str, String> {
        Ok(match self.mode {
            rope_mode::NORMAL => "normal",
            rope_mode::NEOX => "neox",
            rope_mode::MROPE => "mrope",
            rope_mode::IMROPE => "imrope",
            rope_mode::VISION => "vision",
            m => return Err(format!("rope mode {m} not implemented")),
        })
    }

    /// Number of rotated pairs in a row of `ne0` elements.
    fn pairs(&self, ne0: i64) -> i64 {
        if self.mode == rope_mode::VISION {
            ne0 / 2
        } else {
            i64::from(self.n_dims / 2)
        }
    }

    /// `ggml_rope_yarn_corr_dims`: where YaRN's ramp starts and ends.
    fn corr_dims(&self) -> [f32; 2] {
        let corr_dim = |n_rot: f32| -> f32 {
            self.n_dims as f32
                * (self.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * self.freq_base.ln())
        };
        let start = corr_dim(self.beta_fast).floor();
        let end = corr_dim(self.beta_slow).ceil();
        [start.max(0.0), end.min(self.n_dims as f32 - 1.0)]
    }

    /// The magnitude scale: attn_factor, times YaRN's when it mixes.
    fn mscale(&self) -> f32 {
        let mut m = f64::from(self.attn_factor);
        if self.ext_factor != 0.0 {
            m *= 1.0 + 0.1 * (1.0 / f64::from(self.freq_scale)).ln();
        }
        m as f32
    }
}

/// What `common/rope_angle.wgsl` reads of ROPE `d` over rows of `ne0`
/// values: the rotated pairs per row, then theta_scale, freq_scale,
/// ext_factor, mscale, corr_low and corr_high.
pub(crate) fn angle_params(d: &TensorDesc, ne0: i64) -> (u32, [f32; 6]) {
    let r = RopeOp::of(d);
    let [corr_low, corr_high] = r.corr_dims();
    let theta_scale = r.freq_base.powf(-2.0 / r.n_dims as f32);
    (
        r.pairs(ne0) as u32,
        [
            theta_scale,
            r.freq_scale,
            r.ext_factor,
            r.mscale(),
            corr_low,
            corr_high,
        ],
    )
}

/// Whether ROPE `rope` rotates, in place and in normal mode, the f32
/// product `product` (one column) as rows of an even number of values for
/// one token, with i32 positions and f32 frequency factors the kernels
/// index: what the mat-vec rotating its own rows
/// (`ops::matmul` epilogue) computes.
pub(crate) fn rotates_product(graph: &[TensorDesc], rope: usize, product: &TensorDesc) -> bool {
    let d = &graph[rope];
    let get = |k: usize| d.src(k).filter(|&i| i < graph.len()).map(|i| &graph[i]);
    let (Some(a), Some(pos)) = (get(0), get(1)) else {
        return false;
    };
    let ff_ok = get(2)
        .is_none_or(|f| dtype(f) == Ok(DType::F32) && nb_elems(f, 4).is_ok() && ne_u32(f).is_ok());
    d.op() == Ok(Op::Rope)
        && RopeOp::of(d).mode == rope_mode::NORMAL
        && [a, d]
            .iter()
            .all(|t| dtype(t) == Ok(DType::F32) && t.is_contiguous() && same_bytes(t, product))
        && d.ne[0] > 0
        && d.ne[0] % 2 == 0
        && d.ne[2] == 1
        && d.ne[3] == 1
        && d.ne[0] * d.ne[1] == product.ne[0]
        && dtype(pos) == Ok(DType::I32)
        && pos.nb[0] == 4
        && ff_ok
}

/// Accepts every mode the reference knows on f32/f16 rows with strides in
/// whole elements, a contiguous i32 position vector and f32 factors.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the types, shapes, n_dims, mode and
    // sections; what follows is what the kernel implements and indexes.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    let pos = src(graph, node, 1)?;
    let ta = dtype(a)?;
    for (what, t) in [("src0", a), ("dst", d)] {
        nb_elems(t, ta.type_size() as u64).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    RopeOp::of(d).variant()?;
    if pos.nb[0] != 4 {
        return Err(format!("positions must be contiguous (nb {:?})", pos.nb));
    }
    if let Some(f) = graph[node].src(2).and_then(|i| graph.get(i)) {
        nb_elems(f, 4).map_err(|e| format!("freq_factors: {e}"))?;
        ne_u32(f).map_err(|e| format!("freq_factors: {e}"))?;
    }
    Ok(())
}

/// Storage bindings the store adds: the cache, the indices, the flag.
const STORE_BINDINGS: usize = 3;

/// Whether ROPE `rope` and SET_ROWS `store` (the next compute node) run
/// as one kernel within `max_storage` storage bindings: the ROPE's f32
/// result [ne0, ne1, ne2, 1] (contiguous) is exactly the bytes the store
/// reads as rows of ne0 * ne1, the indices are one i32 or i64 per row,
/// the cache holds f32 or f16 elements, and the cache overlaps nothing
/// else the kernel touches.
pub(crate) fn stores_rows(
    graph: &[TensorDesc],
    rope: usize,
    store: usize,
    max_storage: u32,
) -> bool {
    let (d, st) = (&graph[rope], &graph[store]);
    if d.op() != Ok(Op::Rope) || st.op() != Ok(Op::SetRows) {
        return false;
    }
    let get = |t: &TensorDesc, k: usize| t.src(k).filter(|&i| i < graph.len());
    let (Some(ia), Some(ip), Some(is), Some(ii)) = (get(d, 0), get(d, 1), get(st, 0), get(st, 1))
    else {
        return false;
    };
    let (a, rows, idx) = (&graph[ia], &graph[is], &graph[ii]);
    let ff = get(d, 2);
    let f32_dense = |t: &TensorDesc| dtype(t) == Ok(DType::F32) && t.is_contiguous();
    let shapes = f32_dense(d)
        && dtype(a) == Ok(DType::F32)
        && f32_dense(rows)
        && d.ne[3] == 1
        && rows.ne == [d.ne[0] * d.ne[1], d.ne[2], 1, 1]
        && rows.buffer == d.buffer
        && rows.offset == d.offset
        && matches!(dtype(idx), Ok(DType::I32 | DType::I64))
        && idx.ne == [d.ne[2], 1, 1, 1]
        && idx.nb[0] == idx.dtype().map_or(0, |t| t.type_size() as u64)
        && set_rows::element_rows(st)
        && st.ne[0] == rows.ne[0]
        && st.ne[2] == 1
        && st.ne[3] == 1;
    let apart = [Some(ia), Some(ip), ff, Some(rope), Some(ii)]
        .into_iter()
        .flatten()
        .all(|t| !overlaps(st, &graph[t]))
        && !overlaps(idx, d);
    let bindings = 2 + usize::from(ff.is_some()) + usize::from(!same_memory(d, a));
    shapes && apart && bindings + STORE_BINDINGS <= max_storage as usize
}

/// A SET_ROWS that another kernel runs (a ROPE's, a mat-vec's) as that
/// kernel binds it.
pub(crate) struct RowStore {
    pub cache: Binding,
    pub idx: Binding,
    /// The cache's offset, element and row strides (in elements) and
    /// rows; the indices' offset in 4-byte words.
    pub words: [u32; 5],
    /// The cache's and the indices' types.
    pub types: [DType; 2],
}

impl RowStore {
    /// SET_ROWS `st` of the encoder's graph.
    pub(crate) fn of(e: &Encoder, st: usize) -> Result<RowStore, String> {
        let g = e.graph;
        let (cache, ii) = (&g[st], src_index(g, st, 1)?);
        let (tc, ti) = (dtype(cache)?, dtype(&g[ii])?);
        let csize = tc.type_size() as u64;
        let (bc, bi) = (e.binding(st)?, e.binding(ii)?);
        let cs = nb_elems(cache, csize)?;
        Ok(RowStore {
            words: [
                bc.elem_offset(csize)?,
                cs[0],
                cs[1],
                ne_u32(cache)?[1],
                bi.elem_offset(4)?,
            ],
            cache: bc,
            idx: bi,
            types: [tc, ti],
        })
    }
}

/// Encodes one invocation per pair slot of every row.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    encode_rope(e, node, None)
}

/// Encodes ROPE `node` with the SET_ROWS `store` that stores its result
/// ([`stores_rows`]) as one kernel.
pub(crate) fn encode_with_store(e: &mut Encoder, node: usize, store: usize) -> Result<(), String> {
    encode_rope(e, node, Some(store))
}

fn encode_rope(e: &mut Encoder, node: usize, store: Option<usize>) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ia, ip) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let ff = g[node].src(2).filter(|&i| i < g.len());
    let a = &g[ia];
    let ta = dtype(a)?;
    let size = ta.type_size() as u64;
    let r = RopeOp::of(d);
    let inplace = same_memory(d, a);
    let mut key = PipelineKey::new("rope", r.variant()?)
        .ty("SRC0", type_name(ta))
        .ty("DST", type_name(ta))
        .wg(WG);
    key.inplace = inplace;

    let ba = e.binding(ia)?;
    let bp = e.binding(ip)?;
    let bd = e.binding(node)?;
    let mut bindings = vec![ba.clone(), bp.clone()];
    let (mut off_ff, mut sff, mut n_ff) = (0, 0, 0);
    if let Some(i_ff) = ff {
        let bf = e.binding(i_ff)?;
        off_ff = bf.elem_offset(4)?;
        sff = nb_elems(&g[i_ff], 4)?[0];
        n_ff = ne_u32(&g[i_ff])?[0];
        key = key.define("HAS_FF", "");
        bindings.push(bf);
    }
    if !inplace {
        key = key.define("BINDING_DST", bindings.len().to_string());
        bindings.push(bd.clone());
    }
    // The store's cache, indices and error flag, and its parameter words.
    let mut store_words = [0u32; 7];
    if let Some(st) = store {
        let RowStore {
            cache: bc,
            idx: bi,
            words,
            types,
        } = RowStore::of(e, st)?;
        let idx_words = if types[1] == DType::I64 { 2 } else { 1 };
        let [c_off, c_s0, c_s1, c_rows, i_off] = words;
        store_words = [c_off, c_s0, c_s1, c_rows, i_off, idx_words, st as u32 + 1];
        key = key
            .define("STORE_ROWS", "")
            .ty("CACHE", type_name(types[0]))
            .ty("SRC1", type_name(types[1]));
        for (name, b) in [("BINDING_CACHE", bc), ("BINDING_IDX", bi)] {
            key = key.define(name, bindings.len().to_string());
            bindings.push(b);
        }
        key = key.define("BINDING_FLAG", bindings.len().to_string());
        bindings.push(e.error_flag());
    }
    key = key.define("BINDING_PARAMS", bindings.len().to_string());

    let ne = ne_u32(a)?;
    let (n_pairs, angles) = angle_params(d, a.ne[0]);
    let params = Params::new()
        .u32x4(ne)
        .u32(ba.elem_offset(size)?)
        .u32x4(nb_elems(a, size)?)
        .u32(bd.elem_offset(size)?)
        .u32x4(nb_elems(d, size)?)
        .u32(bp.elem_offset(4)?)
        .u32(off_ff)
        .u32(sff)
        .u32(n_ff)
        .u32(r.n_dims as u32)
        .u32(n_pairs)
        .f32(angles[0])
        .f32(angles[1])
        .f32(angles[2])
        .f32(angles[3])
        .f32(angles[4])
        .f32(angles[5])
        .u32x4(r.sections.map(|s| s as u32))
        .u32x4([
            store_words[0],
            store_words[1],
            store_words[2],
            store_words[3],
        ])
        .u32(store_words[4])
        .u32(store_words[5])
        .u32(store_words[6]);
    let slots = (a.ne[0] as u64).div_ceil(2) * (a.nelements() as u64 / a.ne[0].max(1) as u64);
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        slots.div_ceil(u64::from(WG)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::shader_check;

    #[test]
    fn rope_storing_its_rows_validates() {
        for (cache, idx, inplace, ff) in [
            ("f16", "i64", false, false),
            ("f32", "i32", true, false),
            ("f16", "i32", false, true),
            ("f16", "i64", true, true),
        ] {
            for variant in ["normal", "neox"] {
                let mut key = PipelineKey::new("rope", variant)
                    .ty("SRC0", "f32")
                    .ty("DST", "f32")
                    .ty("CACHE", cache)
                    .ty("SRC1", idx)
                    .define("STORE_ROWS", "")
                    .wg(WG);
                key.inplace = inplace;
                let mut n = 2;
                if ff {
                    key = key.define("HAS_FF", "");
                    n += 1;
                }
                if !inplace {
                    key = key.define("BINDING_DST", n.to_string());
                    n += 1;
                }
                for name in [
                    "BINDING_CACHE",
                    "BINDING_IDX",
                    "BINDING_FLAG",
                    "BINDING_PARAMS",
                ] {
                    key = key.define(name, n.to_string());
                    n += 1;
                }
                shader_check::check(&key);
            }
        }
    }

    /// x [64, 2, 3]; ROPE -> d; rows over d's bytes [128, 3]; indices [3];
    /// a cache [128, 8]; SET_ROWS of rows into the cache.
    fn k_store(cache: DType, idx: DType) -> Vec<TensorDesc> {
        let at = |mut t: TensorDesc, offset: u64, op: Op, srcs: &[i32]| {
            t.buffer = 1;
            t.offset = offset;
            t.op = op.code();
            t.src[..srcs.len()].copy_from_slice(srcs);
            t
        };
        let f32s = |ne| TensorDesc::new(DType::F32, ne);
        vec![
            at(f32s([64, 2, 3, 1]), 0, Op::None, &[]),
            at(
                TensorDesc::new(DType::I32, [3, 1, 1, 1]),
                4096,
                Op::None,
                &[],
            ),
            at(TensorDesc::new(idx, [3, 1, 1, 1]), 8192, Op::None, &[]),
            at(TensorDesc::new(cache, [128, 8, 1, 1]), 12288, Op::None, &[]),
            at(f32s([64, 2, 3, 1]), 20480, Op::Rope, &[0, 1]),
            at(f32s([128, 3, 1, 1]), 20480, Op::None, &[]),
            at(
                TensorDesc::new(cache, [128, 8, 1, 1]),
                12288,
                Op::SetRows,
                &[5, 2],
            ),
        ]
    }

    #[test]
    fn a_rope_and_the_store_of_its_rows_run_as_one_kernel_only_when_they_fit() {
        for (cache, idx) in [(DType::F16, DType::I64), (DType::F32, DType::I32)] {
            assert!(stores_rows(&k_store(cache, idx), 4, 6, 8));
        }
        let g = k_store(DType::F16, DType::I64);
        assert!(!stores_rows(&g, 4, 6, 5), "six storage bindings");
        // Rows elsewhere than the ROPE's result; a bf16 or quantized cache;
        // a cache over the source; indices broadcast over more dims.
        let mut other = g.clone();
        other[5].offset = 24576;
        let mut bf16 = g.clone();
        bf16[6].dtype = DType::BF16.code();
        let mut over = g.clone();
        over[6].offset = 0;
        let mut broadcast = g.clone();
        broadcast[2].ne = [3, 2, 1, 1];
        for (what, g) in [
            ("rows", other),
            ("bf16", bf16),
            ("over", over),
            ("broadcast", broadcast),
        ] {
            assert!(!stores_rows(&g, 4, 6, 8), "{what}");
        }
    }
}
