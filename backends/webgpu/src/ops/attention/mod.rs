//! FLASH_ATTN_EXT: `softmax(scale * Q K^T + slope * mask) V` with an online
//! softmax, logit softcap, ALiBi, attention sinks and grouped-query K/V
//! broadcast, as ggml. Q f32; K and V f32, f16, bf16, q4_0, q4_1, q5_0,
//! q5_1 or q8_0 (each its own type); mask f16 (or f32); sinks f32; the
//! result f32 `[Dv, n_head, n_q, batch]`. Kernels: `shaders/wgsl/flash_attn*.wgsl`.
//!
//! A workgroup takes a block of queries of one head and streams K/V tiles
//! through workgroup memory; [`plan`] picks the kernel (the
//! cooperative-matrix one, `flash_attn_coopmat.wgsl`, on devices that have
//! them; `flash_attn_vec.wgsl`, one query over one key per invocation, for
//! a decode on the others; else the tiled `flash_attn.wgsl`) and sizes its
//! blocks from the head sizes and the device's workgroup memory and
//! invocation limits. When the next node is a MUL_MAT that reads the result
//! through the integer mat-vec (the attention output projection of a
//! decode), the kernel that writes the result (the vector kernel, or the
//! combining pass of a split) also writes its quantized copy for it, as
//! `ops::fusion` describes.

mod native;
mod plan;

pub(crate) use native::runs as native_attention_runs;

use backplane_abi::{DType, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::bind_cache::Binding;
use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::kept::CopyOrigin;
use crate::ops::fusion;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, want_type};
use crate::pipelines::Checks;
use plan::{KV_TYPES, Kernel, choose, kv_splits, split_target};

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

/// The kernel for a node with Q `q`, V `v` (head counts as K's) and K/V
/// types `tk`, `tv`, with its grid's query blocks and head blocks:
/// `supports` checks that grid and `encode` dispatches it.
fn kernel_grid(
    facts: &Facts,
    q: &TensorDesc,
    v: &TensorDesc,
    tk: DType,
    tv: DType,
) -> Result<(Kernel, u32, u32), String> {
    let [dk, n_q, heads, _] = ne_u32(q)?;
    let [dv, _, heads_kv, _] = ne_u32(v)?;
    let kernel = choose(facts, (dk, dv), n_q, heads / heads_kv.max(1), tk, tv)?;
    Ok((
        kernel,
        n_q.div_ceil(kernel.queries()),
        heads / kernel.heads(),
    ))
}

/// Whether the kernel runs this node on this device; Err names the type,
/// shape or limit that stops it.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the types, shapes, mask and sinks; what
    // follows is what these kernels need.
    let d = &graph[node];
    let (q, k, v) = (
        src(graph, node, 0)?,
        src(graph, node, 1)?,
        src(graph, node, 2)?,
    );
    let tk = want_type("k", k, KV_TYPES)?;
    let tv = want_type("v", v, KV_TYPES)?;
    let (dk, dv) = (k.ne[0], v.ne[0]);
    if dk % 4 != 0 || dv % 4 != 0 {
        return Err(format!("head sizes {dk} and {dv} must be multiples of 4"));
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
        let es = dtype(m)?.type_size() as u64;
        nb_elems(m, es).map_err(|e| format!("mask: {e}"))?;
    }
    if graph[node].src(4).is_some() {
        let s = src(graph, node, 4)?;
        nb_elems(s, 4).map_err(|e| format!("sinks: {e}"))?;
    }
    let (_, q_blocks, head_blocks) = kernel_grid(facts, q, v, tk, tv)?;
    let groups = [q_blocks, head_blocks, ne_u32(q)?[3]];
    if groups.iter().any(|&g| g > facts.max_groups_per_dim) {
        return Err(format!(
            "{groups:?} workgroups exceed {} per dimension",
            facts.max_groups_per_dim
        ));
    }
    Ok(())
}

/// Records the kernel(s) of `graph[node]`: the native kernel where it
/// runs ([`native`]), else one WGSL pass, or with the keys split, the
/// partial pass into scratch and `flash_attn_combine`.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    if native::try_encode(e, node)? {
        return Ok(());
    }
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
    let facts = e.facts();
    let (kernel, q_blocks, head_blocks) = kernel_grid(facts, q, v, tk, tv)?;
    let rows = Rows::new(n_q, heads, batch, dv);
    let (splits, chunk) = key_split(
        facts,
        u64::from(q_blocks) * u64::from(head_blocks) * u64::from(batch),
        (n_kv, kernel.keys()),
        split_target(facts, &kernel, dk, dv),
        &rows,
    );
    let mut key = kernel.key(dk, dv, tk, tv);

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
    // f16 K and V whose rows start on words: the cooperative-matrix kernel
    // fetches raw words without branches; on 16-byte boundaries (and head
    // sizes multiples of 8), 16 bytes at a time.
    let aligned = |to: u64| {
        [bk_.rem_bytes, bv_.rem_bytes]
            .into_iter()
            .chain([k_nb1, k_nb2, k_nb3, v_nb1, v_nb2, v_nb3].map(u64::from))
            .all(|b| b % to == 0)
    };
    if matches!(kernel, Kernel::CoopMat { .. }) && tk == DType::F16 && tv == DType::F16 {
        if aligned(4) {
            key = key.define("KV_RAW_F16", "");
        }
        if aligned(16) && dk % 8 == 0 && dv % 8 == 0 {
            key = key.define("KV_RAW_F16_X8", "");
        }
    }
    // q8_0 and q4_0 K and V likewise travel as raw words, decoded as they
    // are stored (blocks at any 2-byte boundary).
    if matches!(kernel, Kernel::CoopMat { .. }) && tk == tv {
        match tk {
            DType::Q8_0 => key = key.define("KV_RAW_Q8_0", ""),
            DType::Q4_0 => key = key.define("KV_RAW_Q4_0", ""),
            _ => {}
        }
    }
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
    let sink = sink_binding(e, sinks)?;
    let sink_words = sink.as_ref().map_or([0; 2], |s| s.1);
    let d_off = bd_.elem_offset(4)?;
    let ds = nb_elems(d, 4)?;
    let part = if splits > 1 {
        let scratch = e.scratch(rows.part_floats(splits) * 4)?;
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
    // The quantized copy the next MUL_MAT would make of dst, written by the
    // kernel that writes dst (the vector kernel, or the combining pass)
    // and kept for that MUL_MAT (see `ops::fusion`).
    let writer_quantizes = match part {
        Some(_) => true,
        None => {
            matches!(kernel, Kernel::Vector)
                && bindings.len() < e.facts().max_storage_buffers as usize
        }
    };
    let copy = if writer_quantizes {
        next_copy(e, node)?
    } else {
        None
    };
    if let (None, Some((_, q))) = (&part, &copy) {
        key = key.define("QUANTIZE", "");
        bindings.push(q.clone());
    }
    let ml_off = rows.ml_off(splits)?;

    let Softmax {
        q_scale,
        softcap,
        max_bias,
        m0,
        m1,
        n_head_log2,
    } = Softmax::of(d, heads);
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
        .u32x4([splits, chunk, rows.n_rows as u32, ml_off]);
    // Trusted: query rows, key tiles and head dims are bounded by the
    // tensor shapes before every access; conformance with guard regions
    // passes with and without runtime checks, which cost 5x on an H200.
    e.dispatch(
        &key,
        Checks::Trusted,
        &bindings,
        &params,
        [q_blocks, head_blocks, batch * splits],
    )?;

    let Some(part) = part else {
        if let Some((origin, q)) = copy {
            e.keep_copy(origin, q);
        }
        return Ok(());
    };
    combine(e, node, (&rows, splits), part, sink, bd_, copy)
}

/// How a node's keys are split: `(splits, chunk)` from [`kv_splits`] for
/// `groups` workgroups (before splitting), `n_kv` keys in tiles of `bk`,
/// toward `target` workgroups; `(1, n_kv)` where the split grid (batches
/// x splits) or the partial rows would not fit the device.
fn key_split(
    facts: &Facts,
    groups: u64,
    (n_kv, bk): (u32, u32),
    target: u64,
    rows: &Rows,
) -> (u32, u32) {
    let (splits, chunk) = kv_splits(facts.tuning.flash_attn_splits, groups, n_kv, bk, target);
    if u64::from(rows.batch) * u64::from(splits) > u64::from(facts.max_groups_per_dim)
        || !facts.fits_binding(rows.part_floats(splits) * 4)
    {
        return (1, n_kv.max(1));
    }
    (splits, chunk)
}

/// The sinks' binding and `[offset, stride]` in f32 elements, when the
/// node has sinks (source `sinks`).
fn sink_binding(
    e: &mut Encoder,
    sinks: Option<usize>,
) -> Result<Option<(Binding, [u32; 2])>, String> {
    let Some(is) = sinks else {
        return Ok(None);
    };
    let bs = e.binding(is)?;
    let words = [bs.elem_offset(4)?, nb_elems(&e.graph[is], 4)?[0]];
    Ok(Some((bs, words)))
}

/// Scale, softcap and ALiBi parameters of a FLASH_ATTN_EXT over `heads`
/// query heads, as the kernels take them.
struct Softmax {
    /// The scale, divided by the softcap when there is one (the kernels
    /// then take `softcap * tanh(q k)`).
    q_scale: f32,
    softcap: f32,
    max_bias: f32,
    m0: f32,
    m1: f32,
    n_head_log2: u32,
}

impl Softmax {
    fn of(d: &TensorDesc, heads: u32) -> Softmax {
        let scale = d.param_f32(0);
        let max_bias = d.param_f32(1);
        let softcap = d.param_f32(2);
        let q_scale = if softcap != 0.0 {
            scale / softcap
        } else {
            scale
        };
        let n_head_log2 = 1u32 << heads.max(1).ilog2();
        Softmax {
            q_scale,
            softcap,
            max_bias,
            m0: 2f32.powf(-max_bias / n_head_log2 as f32),
            m1: 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32),
            n_head_log2,
        }
    }
}

/// The quantized copy the MUL_MAT after `node` would make of its result,
/// in fresh scratch memory, for the kernel that writes the result to fill
/// (see `ops::fusion`); `None` when no such MUL_MAT follows.
fn next_copy(e: &mut Encoder, node: usize) -> Result<Option<(CopyOrigin, Binding)>, String> {
    if !e.graph[node].is_contiguous() {
        return Ok(None);
    }
    match fusion::quantized_copy_for_next(e, node)? {
        Some((bytes, origin)) => {
            e.forget_kept_copy();
            Ok(Some((origin, e.scratch(bytes)?)))
        }
        None => Ok(None),
    }
}

/// The output rows of a node, as the split passes lay them out: per
/// split, `n_rows` rows (query, head, batch) of `dv` values; after every
/// split's rows, each row's (max, sum) pair.
struct Rows {
    n_rows: u64,
    dv: u32,
    n_q: u32,
    heads: u32,
    batch: u32,
}

impl Rows {
    fn new(n_q: u32, heads: u32, batch: u32, dv: u32) -> Rows {
        Rows {
            n_rows: u64::from(n_q) * u64::from(heads) * u64::from(batch),
            dv,
            n_q,
            heads,
            batch,
        }
    }

    /// Floats of `splits` splits' partial rows and their (max, sum) pairs.
    fn part_floats(&self, splits: u32) -> u64 {
        u64::from(splits) * self.n_rows * (u64::from(self.dv) + 2)
    }

    /// Where the (max, sum) pairs start, in floats: after every split's
    /// partial rows.
    fn ml_off(&self, splits: u32) -> Result<u32, String> {
        u32::try_from(u64::from(splits) * self.n_rows * u64::from(self.dv))
            .map_err(|_| "partial rows do not fit u32 indices".to_string())
    }
}

/// Records `flash_attn_combine` for `node`: merges the splits' partial rows in
/// `part` (with the sinks, when given: binding and `[offset, stride]`)
/// into dst (`bd`), filling `copy` for the next MUL_MAT when given.
fn combine(
    e: &mut Encoder,
    node: usize,
    (r, splits): (&Rows, u32),
    part: Binding,
    sink: Option<(Binding, [u32; 2])>,
    bd: Binding,
    copy: Option<(CopyOrigin, Binding)>,
) -> Result<(), String> {
    let sink_words = sink.as_ref().map_or([0; 2], |s| s.1);
    let d_off = bd.elem_offset(4)?;
    let ds = nb_elems(&e.graph[node], 4)?;
    let mut key = PipelineKey::new("flash_attn_combine", "").wg(COMBINE_WG);
    let mut bindings = vec![part];
    if let Some((bs, _)) = sink {
        key = key.define("HAS_SINKS", "");
        bindings.push(bs);
    }
    bindings.push(bd);
    if let Some((_, q)) = &copy {
        key = key.define("QUANTIZE", "");
        bindings.push(q.clone());
    }
    let params = Params::new()
        .u32x4([r.n_rows as u32, r.dv / 4, splits, r.n_q])
        .u32x4([r.heads, r.ml_off(splits)?, sink_words[0], sink_words[1]])
        .u32(d_off)
        .u32x4(ds);
    let total = r.n_rows * u64::from(r.dv / 4);
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        total.div_ceil(u64::from(COMBINE_WG)),
    )?;
    if let Some((origin, q)) = copy {
        e.keep_copy(origin, q);
    }
    Ok(())
}

/// Workgroup size of the combining pass.
const COMBINE_WG: u32 = 256;
