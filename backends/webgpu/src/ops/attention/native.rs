//! FLASH_ATTN_EXT through the native `VK_NV_cooperative_matrix2` kernel
//! (`glsl/flash_attn_cm2.comp`; docs/webgpu.md, "Native Vulkan kernels").
//! It is tried before the WGSL kernels: it runs when the `native` option
//! allows, the build has the kernel and the device and the node have what
//! it needs; otherwise the WGSL kernels run and `matmul_trace` prints why.
//! `supports_op` is unchanged: every node this kernel takes, the WGSL
//! kernels also run.

use backplane_abi::{DType, TensorDesc};

use super::plan::TARGET_WORKGROUPS;
use super::{Rows, Softmax, combine, key_split, kv_strides, next_copy, sink_binding};
use crate::bind_cache::Binding;
use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::native::configs::{FA_CM2_CONFIGS, FA_CM2_HEADS, FaCm2Config};
use crate::native::{NativeFeatures, NativeMode, kernels};
use crate::ops::{dtype, matmul, nb_elems, ne_u32, src_index};

/// Names a cm2 attention configuration to run instead of the default
/// (environment only: a kernel development switch).
pub const FA_CONFIG_ENV: &str = "BACKPLANE_WEBGPU_NATIVE_FA";

/// Fewest queries per head `native=auto` gives the cm2 attention: its
/// blocks are 64 or 128 query rows, and with fewer queries the WGSL
/// kernels (which pack the query heads sharing K/V into one block) waste
/// less of them.
pub const AUTO_MIN_QUERIES: u32 = 64;

/// Fewest queries per head `native=auto` gives the cm2 attention when K
/// or V is converted first: the conversion costs the same at any query
/// count. H200, head 128, 20,000 keys, us: q8_0 at 64 queries 121.3
/// converted against the WGSL kernel's 125.4-125.9 (parity); at 512
/// queries 497.7 against 749.0-758.0, q4_0 470.7 against 829.0-837.6.
pub const AUTO_MIN_QUERIES_CONVERTED: u32 = 128;

/// Storage bindings of the kernel: Q, K, V, mask, sinks, dst (or the
/// split rows).
const BINDINGS: usize = 6;

/// Flags of the kernel's `Params`.
const FLAG_MASK: u32 = 1;
const FLAG_SINKS: u32 = 2;
const FLAG_SPLIT: u32 = 4;

/// What the choice of kernel looks at in a node.
#[derive(Clone, Copy, Debug)]
pub struct Attention {
    /// K and V types.
    pub kv: (DType, DType),
    /// The mask's type and whether its rows are dense, when there is one.
    pub mask: Option<(DType, bool)>,
    /// K and V head sizes.
    pub heads: (u32, u32),
    /// Queries per head.
    pub queries: u32,
}

/// A chosen kernel: its configuration, head sizes rounded up to 16, and
/// whether K and V are converted to f16 rows first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub config: &'static FaCm2Config,
    pub padded: (u32, u32),
    pub converted: (bool, bool),
}

impl Chosen {
    /// The kernel's name in the build (`flash_attn_cm2_128x64w256r_256x256`).
    pub fn name(&self) -> String {
        format!(
            "flash_attn_cm2_{}_{}x{}",
            self.config.name, self.padded.0, self.padded.1
        )
    }
}

/// K and V types converted to f16 rows before the kernel (by the weights'
/// conversion, `mul_mat_dequant`): at prefill the conversion is a small
/// part of the work, and the kernel's loads stay plain f16 ones.
pub const CONVERTED_KV: [DType; 5] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
];

/// Whether the kernel reads K or V of type `t` converted first (`Some(true)`),
/// as it is (`Some(false)`, f16), or not at all.
fn converted(t: DType) -> Option<bool> {
    match t {
        DType::F16 => Some(false),
        t if CONVERTED_KV.contains(&t) => Some(true),
        _ => None,
    }
}

/// The configuration `wanted` names, or without a name the default for
/// head sizes `(dk, dv)`.
fn config(wanted: Option<&str>, (dk, dv): (u32, u32)) -> Result<&'static FaCm2Config, String> {
    match wanted {
        Some(name) => FA_CM2_CONFIGS
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = FA_CM2_CONFIGS.iter().map(|c| c.name).collect();
                format!(
                    "{FA_CONFIG_ENV}={name} names no configuration (known: {})",
                    names.join(", ")
                )
            }),
        None if dk.max(dv) > 128 => Ok(&FA_CM2_CONFIGS[0]),
        None => Ok(&FA_CM2_CONFIGS[1]),
    }
}

/// Whether the device can run the cm2 attention, or what it lacks.
pub fn device(f: &NativeFeatures) -> Result<(), String> {
    let what = "native cm2 attention";
    if let Some(why) = &f.unavailable {
        return Err(format!("{what}: {why}"));
    }
    if !f.coopmat2 {
        return Err(format!("{what}: device lacks VK_NV_cooperative_matrix2"));
    }
    if !f.coopmat2_attention {
        return Err(format!(
            "{what}: VK_NV_cooperative_matrix2 without workgroup scope, flexible dimensions, \
             tensor addressing, conversions, reductions or per-element operations"
        ));
    }
    if !f.float16 || !f.storage16 {
        return Err(format!(
            "{what}: device lacks shaderFloat16 or storageBuffer16BitAccess"
        ));
    }
    Ok(())
}

/// Whether this build and a device with `f` run the cm2 attention (for
/// the device's description).
pub fn runs(f: &NativeFeatures) -> bool {
    let default = Chosen {
        config: &FA_CM2_CONFIGS[0],
        padded: (128, 128),
        converted: (false, false),
    };
    device(f).is_ok() && kernels::available(&default.name()).is_ok()
}

/// The native kernel for attention `a` on a device with `f`, or why none.
pub fn choose(
    f: &NativeFeatures,
    mode: NativeMode,
    a: &Attention,
    wanted: Option<&str>,
) -> Result<Chosen, String> {
    match mode {
        NativeMode::Off => return Err("native=off".into()),
        NativeMode::Emulated => return Err("the cm2 attention has no emulated variant".into()),
        NativeMode::Auto | NativeMode::On => {}
    }
    let converted = match (converted(a.kv.0), converted(a.kv.1)) {
        (Some(k), Some(v)) => (k, v),
        _ => {
            let names: Vec<&str> = CONVERTED_KV.iter().map(|t| t.name()).collect();
            return Err(format!(
                "the cm2 attention takes f16 K and V (or {} converted to f16 first), not {} and {}",
                names.join(", "),
                a.kv.0.name(),
                a.kv.1.name()
            ));
        }
    };
    match a.mask {
        Some((t, _)) if t != DType::F16 => {
            return Err(format!(
                "the cm2 attention takes an f16 mask, not {}",
                t.name()
            ));
        }
        Some((_, false)) => return Err("the cm2 attention takes a mask with dense rows".into()),
        _ => {}
    }
    let (dk, dv) = a.heads;
    let padded = (dk.next_multiple_of(16), dv.next_multiple_of(16));
    if !FA_CM2_HEADS.contains(&padded) {
        return Err(format!(
            "no cm2 attention built for head sizes {dk} and {dv}"
        ));
    }
    device(f)?;
    let chosen = Chosen {
        config: config(wanted, (dk, dv))?,
        padded,
        converted,
    };
    crate::native::cm2_workgroup_fits(
        f,
        &format!("cm2 attention {}", chosen.config.name),
        chosen.config.workgroup_size,
    )?;
    kernels::available(&chosen.name())?;
    let (min, converting) = match converted {
        (false, false) => (AUTO_MIN_QUERIES, ""),
        _ => (AUTO_MIN_QUERIES_CONVERTED, " with K or V converted"),
    };
    if mode == NativeMode::Auto && a.queries < min {
        return Err(format!(
            "native=auto takes the cm2 attention{converting} from {min} queries per head, not {}",
            a.queries
        ));
    }
    Ok(chosen)
}

/// The native kernel FLASH_ATTN_EXT `node` gets on this encoder's device,
/// or why none.
fn choice(e: &Encoder, node: usize) -> Result<Chosen, String> {
    let g = e.graph;
    let d = &g[node];
    let (k, v) = (&g[src_index(g, node, 1)?], &g[src_index(g, node, 2)?]);
    let mask = match d.src(3) {
        Some(_) => {
            let m = &g[src_index(g, node, 3)?];
            let t = dtype(m)?;
            Some((t, m.nb[0] == t.type_size() as u64))
        }
        None => None,
    };
    let q = &g[src_index(g, node, 0)?];
    let a = Attention {
        kv: (dtype(k)?, dtype(v)?),
        mask,
        heads: (k.ne[0] as u32, v.ne[0] as u32),
        queries: q.ne[1] as u32,
    };
    let wanted = std::env::var(FA_CONFIG_ENV)
        .ok()
        .filter(|w| !w.trim().is_empty());
    let chosen = choose(
        &e.ctx().native.features,
        e.facts().tuning.native,
        &a,
        wanted.as_deref(),
    )?;
    for (what, t, conv) in [("K", k, chosen.converted.0), ("V", v, chosen.converted.1)] {
        if conv {
            matmul::converts_to_half_rows(t).map_err(|why| format!("{what}: {why}"))?;
            let bytes = u64::try_from(t.nelements())
                .unwrap_or(u64::MAX)
                .saturating_mul(2);
            if !e.facts().fits_binding(bytes) {
                return Err(e
                    .facts()
                    .binding_refusal(&format!("{what} converted to f16"), bytes));
            }
        }
    }
    Ok(chosen)
}

/// K or V (graph index `index`) as the kernel reads it: the binding and
/// its offset and strides of dims 1..3 in halves, converted to f16 rows
/// first when `convert`.
fn kv_operand(
    e: &mut Encoder,
    what: &str,
    index: usize,
    convert: bool,
) -> Result<(Binding, [u32; 4]), String> {
    if convert {
        let (b, [s1, s2, s3]) = matmul::half_rows(e, index)?;
        let words = [b.rem_bytes / 2, s1, s2, s3].map(|x| word(x, what));
        let [off, s1, s2, s3] = words;
        return Ok((b, [off?, s1?, s2?, s3?]));
    }
    let b = e.binding(index)?;
    let layout = half_layout(what, &b, e.tensor(index))?;
    Ok((b, layout))
}

/// Invocations of the native cm2 attention  one
/// multiprocessor is given when the keys are split. Measured on an H100
/// (132 multiprocessors) at 512 queries and 20,000 keys: blocks of 256
/// invocations at head 256 (32 workgroups before splitting) ran 759 us
/// split 4 ways, 790 split 8 and 860 split 16; blocks of 128 at head 128
/// (64 workgroups) 421-425 us split 4 ways, 463 split 8 and 737 split 2.
const NATIVE_INVOCATIONS_PER_UNIT: u64 = 256;

/// Most workgroups of `workgroup_size` invocations the native cm2
/// attention should be split into: one wave of
/// [`NATIVE_INVOCATIONS_PER_UNIT`] per multiprocessor where the device
/// reports them, otherwise [`TARGET_WORKGROUPS`].
fn native_split_target(facts: &Facts, workgroup_size: u32) -> u64 {
    facts.compute_units.map_or(TARGET_WORKGROUPS, |units| {
        u64::from(units) * NATIVE_INVOCATIONS_PER_UNIT / u64::from(workgroup_size.max(1))
    })
}

/// Encodes FLASH_ATTN_EXT `node` with the native kernel when it gets one
/// (true), else leaves it to the WGSL kernels (false; `matmul_trace` says
/// why).
pub fn try_encode(e: &mut Encoder, node: usize) -> Result<bool, String> {
    let trace = e.facts().tuning.matmul_trace;
    let chosen = match choice(e, node) {
        Ok(c) => c,
        Err(why) => {
            if trace {
                eprintln!("backplane-webgpu: FLASH_ATTN_EXT node {node}: WGSL kernels: {why}");
            }
            return Ok(false);
        }
    };
    if trace {
        let g = e.graph;
        let kv = (
            dtype(&g[src_index(g, node, 1)?])?,
            dtype(&g[src_index(g, node, 2)?])?,
        );
        let conversion = match chosen.converted {
            (false, false) => String::new(),
            _ => format!(
                " ({} and {} K and V, the block types converted to f16 rows first)",
                kv.0.name(),
                kv.1.name()
            ),
        };
        eprintln!(
            "backplane-webgpu: FLASH_ATTN_EXT node {node}: native {}{conversion}",
            chosen.name()
        );
    }
    encode(e, node, chosen)?;
    Ok(true)
}

/// A u32 parameter, or an error naming it.
fn word(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("native attention: {what} = {v} does not fit u32"))
}

/// Offset and strides of dims 1..3 of an f16 tensor in halves.
fn half_layout(what: &str, b: &Binding, t: &TensorDesc) -> Result<[u32; 4], String> {
    let [s1, s2, s3] = kv_strides(what, t)?;
    if !b.rem_bytes.is_multiple_of(2) {
        return Err(format!("{what} offset remainder {} is odd", b.rem_bytes));
    }
    Ok([word(b.rem_bytes / 2, what)?, s1 / 2, s2 / 2, s3 / 2])
}

fn encode(e: &mut Encoder, node: usize, chosen: Chosen) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (iq, ik, iv) = (
        src_index(g, node, 0)?,
        src_index(g, node, 1)?,
        src_index(g, node, 2)?,
    );
    let mask = d.src(3).map(|_| src_index(g, node, 3)).transpose()?;
    let sinks = d.src(4).map(|_| src_index(g, node, 4)).transpose()?;
    let [dk, n_q, heads, batch] = ne_u32(&g[iq])?;
    let [dv, n_kv, heads_kv, batch_kv] = ne_u32(&g[iv])?;
    let config = chosen.config;
    let q_blocks = n_q.div_ceil(config.br);
    let facts = e.facts();
    let rows = Rows::new(n_q, heads, batch, dv);
    let (splits, chunk) = key_split(
        facts,
        u64::from(q_blocks) * u64::from(heads) * u64::from(batch),
        (n_kv, config.bc),
        native_split_target(facts, config.workgroup_size),
        &rows,
    );

    // The quantized copy for the next MUL_MAT (kept for later nodes) takes
    // scratch memory first, then the conversions, then the split rows.
    let copy = if splits > 1 {
        next_copy(e, node)?
    } else {
        None
    };
    let (bk, k) = kv_operand(e, "k", ik, chosen.converted.0)?;
    let (bv, v) = kv_operand(e, "v", iv, chosen.converted.1)?;
    let (bq, bd) = (e.binding(iq)?, e.binding(node)?);
    let qs = nb_elems(&g[iq], 4).map_err(|x| format!("q: {x}"))?;
    let mut flags = 0;
    // Absent mask and sinks are bound as Q (never read).
    let (bm, m_words) = match mask {
        Some(im) => {
            flags |= FLAG_MASK;
            let bm = e.binding(im)?;
            let m = &g[im];
            let ms = nb_elems(m, 2).map_err(|x| format!("mask: {x}"))?;
            let words = [
                bm.elem_offset(2)?,
                ms[1],
                ms[2],
                ms[3],
                m.ne[1] as u32,
                m.ne[2] as u32,
                m.ne[3] as u32,
            ];
            (bm, words)
        }
        None => (bq.clone(), [0, 0, 0, 0, 1, 1, 1]),
    };
    let sink = sink_binding(e, sinks)?;
    let s_words = sink.as_ref().map_or([0; 2], |s| s.1);
    let bs = sink.as_ref().map_or_else(|| bq.clone(), |s| s.0.clone());
    let (out, copy) = if splits > 1 {
        flags |= FLAG_SPLIT;
        (e.scratch(rows.part_floats(splits) * 4)?, copy)
    } else {
        if sink.is_some() {
            flags |= FLAG_SINKS;
        }
        (bd.clone(), None)
    };
    let ds = nb_elems(d, 4).map_err(|x| format!("dst: {x}"))?;
    let ml_off = rows.ml_off(splits)?;
    let sm = Softmax::of(d, heads);
    let mut p = Params::new()
        .u32(n_q)
        .u32(n_kv)
        .u32(heads)
        .u32(heads / heads_kv.max(1))
        .u32(batch / batch_kv.max(1))
        .u32(flags)
        .u32(bq.elem_offset(4)?)
        .u32x4(qs)
        .u32x4(k)
        .u32x4(v);
    for w in m_words.into_iter().chain(s_words) {
        p = p.u32(w);
    }
    let p = p
        .u32(bd.elem_offset(4)?)
        .u32x4(ds)
        .u32(dk)
        .u32(dv)
        .f32(sm.q_scale)
        .f32(sm.softcap)
        .f32(sm.max_bias)
        .f32(sm.m0)
        .f32(sm.m1)
        .u32(sm.n_head_log2)
        .u32(splits)
        .u32(chunk)
        .u32(word(rows.n_rows, "rows")?)
        .u32(ml_off);
    let ctx = e.ctx();
    let pipeline = ctx.native.pipelines.get(
        &ctx.device,
        &ctx.pipelines,
        &chosen.name(),
        (config.workgroup_size, 1, 1),
        BINDINGS,
    )?;
    let bindings = [bq, bk, bv, bm, bs, out.clone()];
    let groups = [
        q_blocks,
        heads,
        word(u64::from(batch) * u64::from(splits), "groups")?,
    ];
    e.dispatch_pipeline(pipeline, &bindings, &p, groups)?;
    if splits == 1 {
        return Ok(());
    }
    if e.facts().tuning.matmul_trace {
        eprintln!(
            "backplane-webgpu: FLASH_ATTN_EXT node {node}: keys split {splits} ways of {chunk}"
        );
    }
    combine(e, node, (&rows, splits), out, sink, bd, copy)
}

#[cfg(test)]
mod tests;
