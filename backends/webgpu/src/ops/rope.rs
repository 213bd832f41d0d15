//! ROPE on f32 and f16 rows of any strides: normal, NeoX, multi-section
//! (MROPE, IMROPE) and vision modes, i32 positions, optional f32 frequency
//! factors, YaRN (ext_factor, attn_factor, beta_fast/slow, n_ctx_orig) as
//! ggml and the reference compute them. In place when the destination is
//! the source. Kernel: `shaders/wgsl/rope.wgsl`.

use backplane_abi::{TensorDesc, rope_mode};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::same_memory;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name};
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

/// Encodes one invocation per pair slot of every row.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
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
    key = key.define("BINDING_PARAMS", bindings.len().to_string());

    let ne = ne_u32(a)?;
    let [corr_low, corr_high] = r.corr_dims();
    let theta_scale = r.freq_base.powf(-2.0 / r.n_dims as f32);
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
        .u32(r.pairs(a.ne[0]) as u32)
        .f32(theta_scale)
        .f32(r.freq_scale)
        .f32(r.ext_factor)
        .f32(r.mscale())
        .f32(corr_low)
        .f32(corr_high)
        .u32x4(r.sections.map(|s| s as u32));
    let slots = (a.ne[0] as u64).div_ceil(2) * (a.nelements() as u64 / a.ne[0].max(1) as u64);
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        slots.div_ceil(u64::from(WG)),
    )
}
