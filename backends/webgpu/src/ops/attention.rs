//! FLASH_ATTN_EXT: `softmax(scale * Q K^T + slope * mask) V` with an online
//! softmax, logit softcap, ALiBi, attention sinks and grouped-query K/V
//! broadcast, as ggml. Q f32; K and V f32, f16, bf16, q4_0, q4_1, q5_0,
//! q5_1 or q8_0 (each its own type); mask f16 (or f32); sinks f32; the
//! result f32 `[Dv, n_head, n_q, batch]`. Kernel: `shaders/wgsl/flash_attn.wgsl`.
//!
//! A workgroup takes a block of queries of one head and streams K/V tiles
//! through workgroup memory; [`plan`] sizes the blocks from the head sizes
//! and the device's workgroup memory and invocation limits.

use backplane_abi::{DType, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::{Facts, human_bytes};
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

/// K/V types the kernel decodes.
const KV_TYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
];

/// Queries per workgroup, largest first.
const QUERY_BLOCKS: [u32; 6] = [32, 16, 8, 4, 2, 1];

/// (keys per tile, workgroup size), preferred first.
const KEY_TILES: [(u32, u32); 7] = [
    (32, 128),
    (32, 64),
    (16, 64),
    (16, 32),
    (8, 32),
    (8, 16),
    (8, 8),
];

/// How one FLASH_ATTN_EXT kernel is tiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    /// Queries per workgroup.
    bq: u32,
    /// Keys per K/V tile.
    bk: u32,
    /// Workgroup size.
    wg: u32,
    /// Bytes per element of the Q and K/V tiles (4: f32, 2: half).
    tile_elem: u32,
    /// Score thread grid: `tqt` along queries x `tkt` along keys.
    tqt: u32,
    tkt: u32,
    /// Output thread grid: `oqt` along queries x `odt` along vec4 columns.
    oqt: u32,
    odt: u32,
}

/// Workgroup memory of a tiling: padded Q and K/V tiles, the padded
/// score tile and three per-row values.
fn workgroup_bytes(bq: u32, bk: u32, dk: u32, dv: u32, tile_elem: u32) -> u64 {
    let q_row = u64::from(dk / 4 + 1);
    let kv_row = u64::from(dk.max(dv) / 4 + 1);
    let tiles = (u64::from(bq) * q_row + u64::from(bk) * kv_row) * 4 * u64::from(tile_elem);
    tiles + u64::from(bq * (bk + 1) + 3 * bq) * 4
}

/// The score grid with the fewest tile loads per score: `(tqt, tkt)`.
fn score_grid(bq: u32, bk: u32, wg: u32) -> (u32, u32) {
    (0..=wg.trailing_zeros())
        .map(|s| 1u32 << s)
        .filter(|&tkt| tkt <= bk && wg / tkt <= bq)
        .map(|tkt| (wg / tkt, tkt))
        .min_by_key(|&(tqt, tkt)| (bq / tqt + bk / tkt, u32::MAX - tkt))
        .unwrap_or((1, wg))
}

/// The output grid with the fewest loads per useful multiply-add:
/// `(oqt, odt)`, columns in vec4 units.
fn output_grid(bq: u32, dv4: u32, wg: u32) -> (u32, u32) {
    let cost = |oqt: u32, odt: u32| {
        let (oq, od) = (u64::from(bq / oqt), u64::from(dv4.div_ceil(odt)));
        // loads per vec4 multiply-add, times the padding waste.
        ((oq + od) * od * u64::from(odt) * 1000) / (oq * od * u64::from(dv4))
    };
    (0..=wg.trailing_zeros())
        .map(|s| 1u32 << s)
        .filter(|&odt| wg / odt <= bq)
        .map(|odt| (wg / odt, odt))
        .min_by_key(|&(oqt, odt)| cost(oqt, odt))
        .unwrap_or((1, wg))
}

/// Tiles for head sizes `dk`, `dv` and `n_q` queries on this device, or
/// the refusal naming the workgroup memory the smallest tiling needs.
fn plan(facts: &Facts, dk: u32, dv: u32, n_q: u32, kv_f32: bool) -> Result<Plan, String> {
    let elems: &[u32] = match (kv_f32, facts.f16) {
        (true, true) => &[4, 2],
        (false, true) => &[2],
        (_, false) => &[4],
    };
    let bq_cap = n_q.max(1).next_power_of_two().min(QUERY_BLOCKS[0]);
    let limit = u64::from(facts.workgroup_storage_bytes);
    let mut smallest = u64::MAX;
    for &tile_elem in elems {
        for bq in QUERY_BLOCKS.into_iter().filter(|&bq| bq <= bq_cap) {
            for (bk, wg) in KEY_TILES {
                if wg > facts.max_invocations || wg > bq * bk {
                    continue;
                }
                let bytes = workgroup_bytes(bq, bk, dk, dv, tile_elem);
                smallest = smallest.min(bytes);
                if bytes > limit {
                    continue;
                }
                let (tqt, tkt) = score_grid(bq, bk, wg);
                let (oqt, odt) = output_grid(bq, dv / 4, wg);
                return Ok(Plan {
                    bq,
                    bk,
                    wg,
                    tile_elem,
                    tqt,
                    tkt,
                    oqt,
                    odt,
                });
            }
        }
    }
    if smallest == u64::MAX {
        return Err(format!(
            "device allows only {} invocations per workgroup",
            facts.max_invocations
        ));
    }
    Err(format!(
        "head size {} needs {} of workgroup memory > device's {}",
        dk.max(dv),
        human_bytes(smallest),
        human_bytes(limit)
    ))
}

/// Byte alignment K/V rows of type `t` need (f32 words, else 16-bit units).
fn kv_alignment(t: DType) -> u64 {
    if t == DType::F32 { 4 } else { 2 }
}

/// The K/V byte strides of dims 1..3 as u32, checked for alignment.
fn kv_strides(what: &str, t: &TensorDesc) -> Result<[u32; 3], String> {
    let align = kv_alignment(dtype(t)?);
    let mut out = [0u32; 3];
    for (o, &nb) in out.iter_mut().zip(&t.nb[1..]) {
        if !nb.is_multiple_of(align) {
            return Err(format!(
                "{what} stride {nb} bytes is not a multiple of {align}"
            ));
        }
        *o = u32::try_from(nb).map_err(|_| format!("{what} stride {nb} does not fit u32"))?;
    }
    Ok(out)
}

/// Whether the kernel runs this node on this device; Err names the type,
/// shape or limit that stops it.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let (q, k, v) = (
        src(graph, node, 0)?,
        src(graph, node, 1)?,
        src(graph, node, 2)?,
    );
    want_type("q", q, &[DType::F32])?;
    let tk = want_type("k", k, KV_TYPES)?;
    let tv = want_type("v", v, KV_TYPES)?;
    want_type("dst", d, &[DType::F32])?;
    let fits = k.ne[0] == q.ne[0]
        && v.ne[1] == k.ne[1]
        && v.ne[2] == k.ne[2]
        && v.ne[3] == k.ne[3]
        && k.ne[2] > 0
        && k.ne[3] > 0
        && q.ne[2] % k.ne[2] == 0
        && q.ne[3] % k.ne[3] == 0
        && d.ne == [v.ne[0], q.ne[2], q.ne[1], q.ne[3]];
    if !fits {
        return Err(format!(
            "q {:?}, k {:?}, v {:?} and dst {:?} do not fit",
            q.ne, k.ne, v.ne, d.ne
        ));
    }
    let (dk, dv) = (k.ne[0], v.ne[0]);
    if dk % 4 != 0 || dv % 4 != 0 || dk == 0 || dv == 0 {
        return Err(format!(
            "head sizes {dk} and {dv} must be positive multiples of 4"
        ));
    }
    for (what, t) in [("k", k), ("v", v)] {
        if !t.is_contiguous_rows() {
            return Err(format!("{what} rows must be dense"));
        }
        kv_strides(what, t)?;
    }
    for (what, t) in [("q", q), ("dst", d)] {
        nb_elems(t, 4).map_err(|e| format!("{what}: {e}"))?;
    }
    for (what, t) in [("q", q), ("k", k), ("v", v), ("dst", d)] {
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    if graph[node].src(3).is_some() {
        let m = src(graph, node, 3)?;
        let tm = want_type("mask", m, &[DType::F16, DType::F32])?;
        if m.ne[0] < k.ne[1]
            || m.ne[1] < q.ne[1]
            || m.ne[2] <= 0
            || m.ne[3] <= 0
            || q.ne[2] % m.ne[2] != 0
            || q.ne[3] % m.ne[3] != 0
        {
            return Err(format!(
                "mask {:?} does not cover q {:?} x k {:?}",
                m.ne, q.ne, k.ne
            ));
        }
        let es = tm.type_size() as u64;
        if m.nb[0] != es {
            return Err("mask rows must be dense".into());
        }
        nb_elems(m, es).map_err(|e| format!("mask: {e}"))?;
    }
    if graph[node].src(4).is_some() {
        let s = src(graph, node, 4)?;
        want_type("sinks", s, &[DType::F32])?;
        if s.ne[0] < q.ne[2] {
            return Err(format!(
                "sinks {:?} need one value per head ({})",
                s.ne, q.ne[2]
            ));
        }
        nb_elems(s, 4).map_err(|e| format!("sinks: {e}"))?;
    }
    let [_, n_q, heads, batch] = ne_u32(q)?;
    let p = plan(
        facts,
        dk as u32,
        dv as u32,
        n_q,
        tk == DType::F32 && tv == DType::F32,
    )?;
    let groups = [n_q.div_ceil(p.bq), heads, batch];
    if groups.iter().any(|&g| g > facts.max_groups_per_dim) {
        return Err(format!(
            "{groups:?} workgroups exceed {} per dimension",
            facts.max_groups_per_dim
        ));
    }
    Ok(())
}

/// Below this many workgroups the keys are split over more workgroups
/// (flash decoding) so that a large device has enough to run.
const TARGET_WORKGROUPS: u64 = 1024;

/// Fewest key tiles one split takes.
const MIN_TILES_PER_SPLIT: u32 = 2;

/// How many workgroups share the keys of one query block, and how many
/// keys each takes: `(splits, chunk)`; `(1, n_kv)` when not split.
fn kv_splits(workgroups: u64, n_kv: u32, bk: u32) -> (u32, u32) {
    let tiles = n_kv.div_ceil(bk);
    let want = TARGET_WORKGROUPS
        .div_ceil(workgroups.max(1))
        .min(u64::from(u32::MAX)) as u32;
    let splits = want.min(tiles / MIN_TILES_PER_SPLIT);
    if splits <= 1 {
        return (1, n_kv.max(1));
    }
    let chunk_tiles = tiles.div_ceil(splits);
    (tiles.div_ceil(chunk_tiles), chunk_tiles * bk)
}

/// The pipeline key of the main kernel for plan `pl`.
fn kernel_key(pl: &Plan, dk: u32, dv: u32, tk: DType, tv: DType) -> PipelineKey {
    let (dk4, dv4) = (dk / 4, dv / 4);
    let (q_row4, kv_row4, s_row) = (dk4 + 1, dk4.max(dv4) + 1, pl.bk + 1);
    let (sq, sk) = (pl.bq / pl.tqt, pl.bk / pl.tkt);
    let (oq, od) = (pl.bq / pl.oqt, dv4.div_ceil(pl.odt));
    let mut key = PipelineKey::new("flash_attn", "")
        .ty("K", type_name(tk))
        .ty("V", type_name(tv))
        .wg(pl.wg)
        .define("TT", if pl.tile_elem == 2 { "f16" } else { "f32" });
    for (name, value) in [
        ("DK4", dk4),
        ("DV4", dv4),
        ("BQ", pl.bq),
        ("BK", pl.bk),
        ("TQT", pl.tqt),
        ("TKT", pl.tkt),
        ("SQ", sq),
        ("SK", sk),
        ("SQK", sq * sk),
        ("OQT", pl.oqt),
        ("ODT", pl.odt),
        ("OQ", oq),
        ("OD", od),
        ("OQD", oq * od),
        ("QROW4", q_row4),
        ("KVROW4", kv_row4),
        ("SROW", s_row),
        ("Q_TILE_LEN", pl.bq * q_row4),
        ("KV_TILE_LEN", pl.bk * kv_row4),
        ("S_TILE_LEN", pl.bq * s_row),
    ] {
        key = key.define(name, value.to_string());
    }
    key
}

/// Records the kernel(s) of `graph[node]`: one pass, or with the keys
/// split, the partial pass into scratch and `flash_attn_combine`.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (iq, ik, iv) = (
        src_index(g, node, 0)?,
        src_index(g, node, 1)?,
        src_index(g, node, 2)?,
    );
    let (q, k, v) = (&g[iq], &g[ik], &g[iv]);
    let (tk, tv) = (dtype(k)?, dtype(v)?);
    let mask = d.src(3).map(|_| src_index(g, node, 3)).transpose()?;
    let sinks = d.src(4).map(|_| src_index(g, node, 4)).transpose()?;
    let [dk, n_q, heads, batch] = ne_u32(q)?;
    let [dv, n_kv, heads_kv, batch_kv] = ne_u32(v)?;
    let facts = &e.ctx().facts;
    let pl = plan(facts, dk, dv, n_q, tk == DType::F32 && tv == DType::F32)?;
    let q_blocks = n_q.div_ceil(pl.bq);
    let n_rows = u64::from(n_q) * u64::from(heads) * u64::from(batch);
    let (mut splits, mut chunk) = kv_splits(
        u64::from(q_blocks) * u64::from(heads) * u64::from(batch),
        n_kv,
        pl.bk,
    );
    let part_floats = |splits: u32| u64::from(splits) * n_rows * (u64::from(dv) + 2);
    if u64::from(batch) * u64::from(splits) > u64::from(facts.max_groups_per_dim)
        || !facts.fits_binding(part_floats(splits) * 4)
    {
        (splits, chunk) = (1, n_kv.max(1));
    }
    let mut key = kernel_key(&pl, dk, dv, tk, tv);

    let bq_ = e.binding(iq)?;
    let bk_ = e.binding(ik)?;
    let bv_ = e.binding(iv)?;
    let bd_ = e.binding(node)?;
    for (what, b, t) in [("k", &bk_, tk), ("v", &bv_, tv)] {
        if !b.rem_bytes.is_multiple_of(kv_alignment(t)) {
            return Err(format!(
                "{what} offset remainder {} is misaligned",
                b.rem_bytes
            ));
        }
    }
    let qs = nb_elems(q, 4)?;
    let [k_nb1, k_nb2, k_nb3] = kv_strides("k", k)?;
    let [v_nb1, v_nb2, v_nb3] = kv_strides("v", v)?;
    let mut bindings = vec![bq_.clone(), bk_.clone(), bv_.clone()];
    let mut mask_words = [0u32; 6];
    if let Some(im) = mask {
        let m = &g[im];
        let bm = e.binding(im)?;
        if dtype(m)? == DType::F32 {
            key = key.define("MASK_F32", "");
        }
        if !bm.rem_bytes.is_multiple_of(2) {
            return Err(format!(
                "mask offset remainder {} is misaligned",
                bm.rem_bytes
            ));
        }
        let nb = |i: usize| {
            u32::try_from(m.nb[i]).map_err(|_| format!("mask stride {} does not fit u32", m.nb[i]))
        };
        mask_words = [
            bm.rem_bytes as u32,
            nb(1)?,
            nb(2)?,
            nb(3)?,
            m.ne[2] as u32,
            m.ne[3] as u32,
        ];
        key = key.define("HAS_MASK", "");
        bindings.push(bm);
    }
    let sink = match sinks {
        Some(is) => {
            let bs = e.binding(is)?;
            let words = [bs.elem_offset(4)?, nb_elems(&g[is], 4)?[0]];
            Some((bs, words))
        }
        None => None,
    };
    let sink_words = sink.as_ref().map_or([0; 2], |s| s.1);
    let d_off = bd_.elem_offset(4)?;
    let ds = nb_elems(d, 4)?;
    let part = if splits > 1 {
        let scratch = e.scratch(part_floats(splits) * 4)?;
        key = key.define("SPLIT_KV", "");
        bindings.push(scratch.clone());
        Some(scratch)
    } else {
        if let Some((bs, _)) = &sink {
            key = key.define("HAS_SINKS", "");
            bindings.push(bs.clone());
        }
        bindings.push(bd_.clone());
        None
    };
    // The (max, sum) pairs follow every split's partial rows.
    let ml_off = u32::try_from(u64::from(splits) * n_rows * u64::from(dv))
        .map_err(|_| "partial rows do not fit u32 indices".to_string())?;

    let scale = d.param_f32(0);
    let max_bias = d.param_f32(1);
    let softcap = d.param_f32(2);
    let q_scale = if softcap != 0.0 {
        scale / softcap
    } else {
        scale
    };
    let n_head_log2 = 1u32 << heads.max(1).ilog2();
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    let params = Params::new()
        .u32(n_q)
        .u32(n_kv)
        .u32(heads)
        .u32(heads / heads_kv)
        .u32(batch / batch_kv)
        .u32(bq_.elem_offset(4)?)
        .u32x4(qs)
        .u32x4([bk_.rem_bytes as u32, k_nb1, k_nb2, k_nb3])
        .u32x4([bv_.rem_bytes as u32, v_nb1, v_nb2, v_nb3])
        .u32x4([mask_words[0], mask_words[1], mask_words[2], mask_words[3]])
        .u32(mask_words[4])
        .u32(mask_words[5])
        .u32(sink_words[0])
        .u32(sink_words[1])
        .u32(d_off)
        .u32x4(ds)
        .f32(q_scale)
        .f32(softcap)
        .f32(max_bias)
        .f32(m0)
        .f32(m1)
        .u32(n_head_log2)
        .u32x4([splits, chunk, n_rows as u32, ml_off]);
    // Trusted: query rows, key tiles and head dims are bounded by the
    // tensor shapes before every access; conformance with guard regions
    // passes with and without runtime checks, which cost 5x on an H200.
    e.dispatch(
        &key,
        Checks::Trusted,
        &bindings,
        &params,
        [q_blocks, heads, batch * splits],
    )?;

    let Some(part) = part else { return Ok(()) };
    let mut key = PipelineKey::new("flash_attn_combine", "").wg(COMBINE_WG);
    let mut bindings = vec![part];
    if let Some((bs, _)) = sink {
        key = key.define("HAS_SINKS", "");
        bindings.push(bs);
    }
    bindings.push(bd_);
    let params = Params::new()
        .u32x4([n_rows as u32, dv / 4, splits, n_q])
        .u32x4([heads, ml_off, sink_words[0], sink_words[1]])
        .u32(d_off)
        .u32x4(ds);
    let total = n_rows * u64::from(dv / 4);
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        total.div_ceil(u64::from(COMBINE_WG)),
    )
}

/// Workgroup size of the combining pass.
const COMBINE_WG: u32 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(wg_bytes: u32, f16: bool) -> Facts {
        Facts {
            adapter: String::new(),
            api: String::new(),
            driver: String::new(),
            vendor: 0,
            is_cpu: true,
            is_integrated: false,
            max_binding_bytes: 1 << 30,
            max_buffer_bytes: 1 << 30,
            offset_alignment: 256,
            max_groups_per_dim: 65535,
            max_invocations: 1024,
            workgroup_storage_bytes: wg_bytes,
            max_storage_buffers: 8,
            f16,
            subgroups: false,
            subgroup_size: (8, 8),
            timestamps: false,
            coopmat_f16_16: false,
        }
    }

    #[test]
    fn plans_fit_the_device_and_grids_cover_the_tiles() {
        for (limit, f16) in [(32 << 10, true), (48 << 10, true), (16 << 10, false)] {
            let f = facts(limit, f16);
            for d in [40, 64, 128, 256, 576] {
                for n_q in [1, 7, 512] {
                    for kv_f32 in [true, false] {
                        let Ok(p) = plan(&f, d, d, n_q, kv_f32) else {
                            continue;
                        };
                        assert!(workgroup_bytes(p.bq, p.bk, d, d, p.tile_elem) <= u64::from(limit));
                        assert_eq!(p.tqt * p.tkt, p.wg);
                        assert_eq!(p.oqt * p.odt, p.wg);
                        assert!(p.tqt <= p.bq && p.tkt <= p.bk && p.oqt <= p.bq);
                    }
                }
            }
        }
    }

    #[test]
    fn few_workgroups_split_the_keys() {
        assert_eq!(kv_splits(16, 512, 32), (8, 64));
        assert_eq!(kv_splits(128, 20000, 32), (8, 2528));
        assert_eq!(kv_splits(2048, 20000, 32), (1, 20000));
        assert_eq!(kv_splits(4, 113, 32), (2, 64));
        assert_eq!(kv_splits(4, 63, 32), (1, 63));
        let (splits, chunk) = kv_splits(1, 1000, 16);
        assert!(splits * chunk >= 1000 && (splits - 1) * chunk < 1000);
    }

    #[test]
    fn refusal_names_both_sizes() {
        let e = plan(&facts(16 << 10, false), 576, 576, 512, true).unwrap_err();
        assert!(
            e.starts_with("head size 576 needs ") && e.ends_with("> device's 16 KiB"),
            "{e}"
        );
        assert!(plan(&facts(32 << 10, true), 256, 256, 512, false).is_ok_and(|p| p.bq >= 16));
    }
}
