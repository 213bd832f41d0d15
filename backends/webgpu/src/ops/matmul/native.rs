//! MUL_MAT through the native kernels: which kernel a node gets from the
//! device's [`NativeFeatures`], the `native` option and the shape, or why
//! none ([`choose`]); then its encoding.
//!
//! - `mul_mat_vec` (`glsl/mul_mat_vec.comp`): 1..=8 columns, q4_0 / q8_0
//!   weights read as 16-byte words, activations quantized first as the
//!   WGSL integer mat-vec quantizes them (ggml's q8_1, `mul_mat_quantize`,
//!   the same copy), 4 x 8-bit integer dot products, subgroup reductions;
//!   q4_0 weights stored split ([`crate::split`]) read in place (`W_SPLIT`).
//!   Needs 16-bit storage, subgroup arithmetic (subgroups of 8 or more)
//!   and `shaderIntegerDotProduct`.
//! - `mul_mat_coopmat` (`glsl/mul_mat_coopmat.comp`): at least
//!   [`COOPMAT_MIN_N`] columns of f32 activations, f16 / q4_0 / q8_0
//!   weights staged as halves in workgroup memory, `VK_KHR_cooperative_matrix`
//!   products of a shape the device lists.
//! - `mul_mat_cm2` (`glsl/mul_mat_cm2.comp`): the same products for f16
//!   weights with `VK_NV_cooperative_matrix2` (workgroup-scope matrices
//!   loaded by tensor addressing), only when [`GEMM_CONFIG_ENV`] names one
//!   of [`CM2_CONFIGS`].
//!
//! Both come in several configurations ([`GEMM_CONFIGS`],
//! [`MATVEC_CONFIGS`]); the first of each runs unless
//! [`GEMM_CONFIG_ENV`] / [`MATVEC_CONFIG_ENV`] name another (for measuring
//! them on a GPU). Neither is measured faster than the WGSL kernels on
//! any device yet, so `native=auto` (the default) leaves every MUL_MAT to
//! WGSL and `native=on` runs them wherever they can run; `native=emulated`
//! runs the GEMM with plain code for the matrix calls (tests without
//! cooperative matrices).

use backplane_abi::{DType, Op};

use crate::encode::{Binding, Encoder};
use crate::native::configs::{
    CM2_CONFIGS, Cm2Config, GEMM_CONFIGS, GemmConfig, MATVEC_CONFIGS, MatVecConfig,
};
use crate::native::{CoopShape, NativeFeatures, NativeMode, kernels};
use crate::ops::matmul::plan::{self, Shape};
use crate::ops::matmul::quant_flag;
use crate::ops::{dtype, nb_elems, src_index};

/// Weight types of the native mat-vec.
pub const MATVEC_TYPES: &[DType] = &[DType::Q4_0, DType::Q8_0];

/// Most columns of the native mat-vec (one variant per count).
pub const MATVEC_MAX_N: u64 = crate::native::configs::MATVEC_MAX_COLS as u64;

/// Smallest subgroup the mat-vec's reduction is sized for.
pub const MATVEC_MIN_SUBGROUP: u32 = 8;

/// Weight types of the native cooperative-matrix GEMM.
pub const COOPMAT_TYPES: &[DType] = &[DType::F16, DType::Q4_0, DType::Q8_0];

/// Fewest columns for the cooperative-matrix GEMM.
pub const COOPMAT_MIN_N: u64 = 64;

/// Subgroup size the cooperative-matrix GEMM is written for (its tiles
/// are shared out to subgroups of exactly 32).
pub const COOPMAT_SUBGROUP: u32 = 32;

/// Environment variable naming the GEMM configuration (of
/// [`GEMM_CONFIGS`]) the native GEMM uses; unset: the first.
pub const GEMM_CONFIG_ENV: &str = "BACKPLANE_WEBGPU_NATIVE_GEMM";

/// Environment variable naming the mat-vec configuration (of
/// [`MATVEC_CONFIGS`]) the native mat-vec uses; unset: the first.
pub const MATVEC_CONFIG_ENV: &str = "BACKPLANE_WEBGPU_NATIVE_MATVEC";

/// Why `native=auto` leaves the mat-vec to WGSL: alone it is faster for
/// q4_0 on an H100 and an H200, but a model's decode ran slower with it,
/// off the fused WGSL paths (docs/webgpu.md, "Native Vulkan kernels").
pub const MATVEC_NOT_FASTER: &str = "native mat-vec: a model's decode ran slower with it \
     (it leaves the fused WGSL paths; q8_0 is slower alone too): only with native=on";

/// Why `native=auto` leaves wide products to WGSL.
pub const GEMM_SLOWER: &str = "native GEMMs measured slower than the WGSL one (an H100: both; an H200: cm2): only with native=on";

/// A native MUL_MAT kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeKernel {
    /// `mul_mat_vec` for `cols` columns.
    MatVec {
        /// Weight type.
        weights: DType,
        /// Columns (1..=8).
        cols: u32,
        /// Rows per workgroup and workgroup size.
        config: &'static MatVecConfig,
        /// The weights stored split (q4_0 only; `W_SPLIT`).
        split: bool,
    },
    /// `mul_mat_coopmat` with matrices of `shape`.
    CoopMat {
        /// Weight type.
        weights: DType,
        /// Tiles and staging.
        config: &'static GemmConfig,
        /// The cooperative-matrix shape; `None`: the emulated variant
        /// (plain code for the matrix calls, `native=emulated`).
        shape: Option<CoopShape>,
        /// The variant whose loads skip K tests and alignment branches
        /// (`ALIGNED`): every K step whole, weight (f32 activation) rows
        /// 16-byte aligned ([`aligned_steps`]).
        aligned: bool,
        /// The weights stored split (q4_0 only; `W_SPLIT`).
        split: bool,
    },
    /// `mul_mat_cm2`: f16 weights, or weights of a block type converted
    /// to f16 rows first.
    Cm2 {
        /// Tiles.
        config: &'static Cm2Config,
        /// The block type converted first, if any.
        converted: Option<DType>,
    },
}

impl NativeKernel {
    /// The name of its SPIR-V variant (`build.rs` names them alike).
    pub fn name(&self) -> String {
        match *self {
            NativeKernel::MatVec {
                weights,
                cols,
                config,
                split,
            } => format!(
                "mul_mat_vec_{}{}_n{cols}_{}",
                weights.name(),
                if split { "_split" } else { "" },
                config.name
            ),
            NativeKernel::CoopMat {
                weights,
                config,
                shape,
                aligned,
                split,
            } => format!(
                "mul_mat_coopmat_{}{}_{}{}_{}",
                weights.name(),
                if split { "_split" } else { "" },
                config.name,
                if aligned { "_aligned" } else { "" },
                match shape {
                    Some(s) => format!("{}x{}x{}", s.m, s.n, s.k),
                    None => "emulated".into(),
                }
            ),
            NativeKernel::Cm2 { config, .. } => format!("mul_mat_{}_f16", config.name),
        }
    }

    /// Whether the kernel reads src1 quantized (the copy the WGSL integer
    /// mat-vec reads, which other kernels may leave for it).
    pub fn reads_quantized_src1(&self) -> bool {
        matches!(self, NativeKernel::MatVec { .. })
    }
}

/// The configuration of `table` named `wanted` (the first when `None`),
/// or why none.
fn config_named<T>(
    table: &'static [T],
    name: impl Fn(&T) -> &'static str,
    wanted: Option<&str>,
    var: &str,
) -> Result<&'static T, String> {
    let Some(wanted) = wanted else {
        return table
            .first()
            .ok_or_else(|| format!("{var}: no configuration built"));
    };
    table.iter().find(|c| name(c) == wanted).ok_or_else(|| {
        let known: Vec<&str> = table.iter().map(&name).collect();
        format!(
            "{var}={wanted} names no configuration (known: {})",
            known.join(", ")
        )
    })
}

/// The GEMM configuration `wanted` names (the default when `None`).
pub fn gemm_config(wanted: Option<&str>) -> Result<&'static GemmConfig, String> {
    config_named(GEMM_CONFIGS, |c| c.name, wanted, GEMM_CONFIG_ENV).map_err(|why| {
        let cm2: Vec<&str> = CM2_CONFIGS.iter().map(|c| c.name).collect();
        format!("{why}; cm2: {}", cm2.join(", "))
    })
}

/// The cm2 GEMM configuration `wanted` names, if it names one.
pub fn cm2_config(wanted: Option<&str>) -> Option<&'static Cm2Config> {
    CM2_CONFIGS.iter().find(|c| Some(c.name) == wanted)
}

/// Whether the device can run the cm2 GEMM, or what it lacks.
pub fn cm2_device(f: &NativeFeatures) -> Result<(), String> {
    let what = "native f16 cm2 GEMM";
    if let Some(why) = &f.unavailable {
        return Err(format!("{what}: {why}"));
    }
    if !f.coopmat2 {
        return Err(format!("{what}: device lacks VK_NV_cooperative_matrix2"));
    }
    if !f.coopmat2_gemm {
        return Err(format!(
            "{what}: VK_NV_cooperative_matrix2 without workgroup scope, flexible dimensions, \
             tensor addressing or conversions"
        ));
    }
    if !f.float16 || !f.storage16 {
        return Err(format!(
            "{what}: device lacks shaderFloat16 or storageBuffer16BitAccess"
        ));
    }
    Ok(())
}

/// The mat-vec configuration `wanted` names (the default when `None`).
pub fn matvec_config(wanted: Option<&str>) -> Result<&'static MatVecConfig, String> {
    config_named(MATVEC_CONFIGS, |c| c.name, wanted, MATVEC_CONFIG_ENV)
}

/// The value of environment variable `var`, if set and valid text.
fn env_word(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Whether the device can run the native mat-vec for weights `t`, or the
/// first thing it lacks.
pub fn matvec_device(f: &NativeFeatures, t: DType) -> Result<(), String> {
    let what = format!("native {} mat-vec", t.name());
    if let Some(why) = &f.unavailable {
        return Err(format!("{what}: {why}"));
    }
    if !f.storage16 {
        return Err(format!("{what}: device lacks storageBuffer16BitAccess"));
    }
    if !f.subgroup_arithmetic {
        return Err(format!(
            "{what}: device lacks subgroup arithmetic in compute shaders"
        ));
    }
    if f.subgroup_size.0 < MATVEC_MIN_SUBGROUP {
        return Err(format!(
            "{what}: subgroups of {} invocations (needs {MATVEC_MIN_SUBGROUP} or more)",
            f.subgroup_size.0
        ));
    }
    if !f.integer_dot_product {
        return Err(format!(
            "{what}: device lacks shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product)"
        ));
    }
    Ok(())
}

/// The cooperative-matrix shape the native GEMM uses for weights `t` on
/// this device with `config` (of the shapes the device lists and this
/// build has a kernel for, the largest M x N x K: fewest matrix
/// operations per tile), or the first thing missing.
pub fn coopmat_device(
    f: &NativeFeatures,
    t: DType,
    config: &'static GemmConfig,
) -> Result<CoopShape, String> {
    let what = format!("native {} cooperative-matrix GEMM", t.name());
    if let Some(why) = &f.unavailable {
        return Err(format!("{what}: {why}"));
    }
    if !f.coopmat {
        return Err(format!(
            "{what}: device lacks VK_KHR_cooperative_matrix (or no_coopmat is on)"
        ));
    }
    if !f.float16 || !f.storage16 {
        return Err(format!(
            "{what}: device lacks shaderFloat16 or storageBuffer16BitAccess"
        ));
    }
    let (lo, hi) = f.subgroup_size;
    if (lo, hi) != (COOPMAT_SUBGROUP, COOPMAT_SUBGROUP) {
        return Err(format!(
            "{what}: needs subgroups of exactly {COOPMAT_SUBGROUP} invocations (device: {lo}..{hi})"
        ));
    }
    let mut shapes = f.coopmat_shapes.clone();
    shapes.sort_by_key(|s| std::cmp::Reverse(u64::from(s.m) * u64::from(s.n) * u64::from(s.k)));
    let mut missing = Vec::new();
    for shape in shapes {
        // The split variants are built for the same shapes.
        let k = NativeKernel::CoopMat {
            weights: t,
            config,
            shape: Some(shape),
            aligned: false,
            split: false,
        };
        match kernels::available(&k.name()) {
            Ok(()) => return Ok(shape),
            Err(why) => missing.push(why),
        }
    }
    if f.coopmat_shapes.is_empty() {
        return Err(format!(
            "{what}: device lists no f16 x f16 -> f32 cooperative-matrix shape"
        ));
    }
    Err(format!("{what}: {}", missing.join("; ")))
}

/// The native MUL_MAT kernels the device can run, in a few words for its
/// description (`native=on: mat-vec q4_0/q8_0, GEMM f16/q4_0/q8_0
/// 16x16x16`), or why it has none (the first reason).
pub fn description(f: &NativeFeatures) -> String {
    if let Some(why) = &f.unavailable {
        return format!("no native kernels: {why}");
    }
    let names = |ok: &[DType]| ok.iter().map(|t| t.name()).collect::<Vec<_>>().join("/");
    let mut parts = Vec::new();
    let matvec: Vec<DType> = MATVEC_TYPES
        .iter()
        .copied()
        .filter(|&t| matvec_device(f, t).is_ok())
        .collect();
    if !matvec.is_empty() {
        parts.push(format!("mat-vec {}", names(&matvec)));
    }
    let gemm: Vec<(DType, CoopShape)> = COOPMAT_TYPES
        .iter()
        .filter_map(|&t| coopmat_device(f, t, &GEMM_CONFIGS[0]).ok().map(|s| (t, s)))
        .collect();
    if let Some(&(_, s)) = gemm.first() {
        let types: Vec<DType> = gemm.iter().map(|&(t, _)| t).collect();
        parts.push(format!("GEMM {} {}x{}x{}", names(&types), s.m, s.n, s.k));
    }
    if parts.is_empty() {
        let why = matvec_device(f, DType::Q4_0).err().unwrap_or_default();
        return format!("no native kernels: {why}");
    }
    format!("native=on: {}", parts.join(", "))
}

/// Whether the device can run the emulated GEMM (f16 arithmetic and
/// 16-bit storage), or what it lacks.
pub fn emulated_device(f: &NativeFeatures, t: DType) -> Result<(), String> {
    let what = format!("emulated native {} GEMM", t.name());
    if let Some(why) = &f.unavailable {
        return Err(format!("{what}: {why}"));
    }
    if !f.float16 || !f.storage16 {
        return Err(format!(
            "{what}: device lacks shaderFloat16 or storageBuffer16BitAccess"
        ));
    }
    Ok(())
}

/// What [`choose`] needs to know of a MUL_MAT besides its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operands {
    /// Weight type.
    pub ta: DType,
    /// Activation type.
    pub tb: DType,
    /// Weights stored split ([`crate::split`]).
    pub split: bool,
}

/// The configurations `choose` picks from: the names in the environment
/// variables, `None` for the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configs {
    /// GEMM configuration name.
    pub gemm: Option<String>,
    /// Mat-vec configuration name.
    pub matvec: Option<String>,
}

impl Configs {
    /// The names in [`GEMM_CONFIG_ENV`] and [`MATVEC_CONFIG_ENV`].
    pub fn from_env() -> Configs {
        Configs {
            gemm: env_word(GEMM_CONFIG_ENV),
            matvec: env_word(MATVEC_CONFIG_ENV),
        }
    }
}

/// The native kernel for a MUL_MAT of `o` and shape `s`, or why none.
pub fn choose(
    f: &NativeFeatures,
    mode: NativeMode,
    o: Operands,
    s: &Shape,
    configs: &Configs,
) -> Result<NativeKernel, String> {
    let Operands { ta, tb, split } = o;
    if mode == NativeMode::Off {
        return Err("native=off".into());
    }
    if let Some(why) = &f.unavailable {
        return Err(why.clone());
    }
    if (1..=MATVEC_MAX_N).contains(&s.n) {
        if !MATVEC_TYPES.contains(&ta) {
            return Err(format!("no native mat-vec for {} weights", ta.name()));
        }
        if !plan::ACTIVATION_TYPES.contains(&tb) {
            return Err(format!(
                "src1 is {} (the native mat-vec quantizes f32 or f16)",
                tb.name()
            ));
        }
        split_readable(split, ta, "mat-vec")?;
        matvec_device(f, ta)?;
        let k = NativeKernel::MatVec {
            weights: ta,
            cols: s.n as u32,
            config: matvec_config(configs.matvec.as_deref())?,
            split,
        };
        kernels::available(&k.name())?;
        if mode == NativeMode::Auto {
            return Err(MATVEC_NOT_FASTER.into());
        }
        return Ok(k);
    }
    if tb != DType::F32 {
        return Err(format!("src1 is {} (the native GEMM reads f32)", tb.name()));
    }
    if s.n >= COOPMAT_MIN_N {
        if let Some(config) = cm2_config(configs.gemm.as_deref()) {
            let converted = match ta {
                DType::F16 => None,
                t if quant_flag(t).is_some() => Some(t),
                t => {
                    return Err(format!(
                        "{GEMM_CONFIG_ENV}={}: the cm2 GEMM takes f16 weights or block types \
                         converted to f16 rows, not {}",
                        config.name,
                        t.name()
                    ));
                }
            };
            if mode == NativeMode::Emulated {
                return Err("the cm2 GEMM has no emulated variant".into());
            }
            cm2_device(f)?;
            crate::native::cm2_workgroup_fits(
                f,
                &format!("cm2 GEMM {}", config.name),
                config.workgroup_size,
            )?;
            let k = NativeKernel::Cm2 { config, converted };
            kernels::available(&k.name())?;
            if mode == NativeMode::Auto {
                return Err(GEMM_SLOWER.into());
            }
            return Ok(k);
        }
        if !COOPMAT_TYPES.contains(&ta) {
            return Err(format!(
                "no native cooperative-matrix GEMM for {} weights",
                ta.name()
            ));
        }
        split_readable(split, ta, "GEMM")?;
        let config = gemm_config(configs.gemm.as_deref())?;
        let shape = if mode == NativeMode::Emulated {
            emulated_device(f, ta)?;
            None
        } else {
            Some(coopmat_device(f, ta, config)?)
        };
        let k = NativeKernel::CoopMat {
            weights: ta,
            config,
            shape,
            aligned: false,
            split,
        };
        kernels::available(&k.name())?;
        if mode == NativeMode::Auto {
            return Err(GEMM_SLOWER.into());
        }
        return Ok(k);
    }
    Err(format!("no native kernel for {} columns", s.n))
}

/// Whether the native `kernel` (mat-vec or KHR GEMM, whose `W_SPLIT`
/// reads q4_0) can read `ta` weights, stored split when `split`.
fn split_readable(split: bool, ta: DType, kernel: &str) -> Result<(), String> {
    if split && ta != DType::Q4_0 {
        return Err(format!(
            "{} weights stored split (the native {kernel} reads split q4_0 only)",
            ta.name()
        ));
    }
    Ok(())
}

/// The native kernel MUL_MAT `node` gets on this encoder's device, or why
/// none.
pub fn choice(e: &Encoder, node: usize) -> Result<NativeKernel, String> {
    let g = e.graph;
    if g[node].op().map_err(|x| x.to_string())? != Op::MulMat {
        return Err("not a MUL_MAT".into());
    }
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    let o = Operands {
        ta: dtype(&g[ia])?,
        tb: dtype(&g[ib])?,
        split: e.ctx().is_split(g[ia].buffer),
    };
    let mut kernel = choose(
        &e.ctx().native.features,
        e.facts().tuning.native,
        o,
        &s,
        &Configs::from_env(),
    )?;
    if let NativeKernel::CoopMat {
        weights,
        config,
        shape,
        aligned: false,
        split,
    } = kernel
    {
        let fast = NativeKernel::CoopMat {
            weights,
            config,
            shape,
            aligned: true,
            split,
        };
        if aligned_steps(e, node, ib, &s, weights, config)
            && kernels::available(&fast.name()).is_ok()
        {
            kernel = fast;
        }
    }
    if let NativeKernel::Cm2 {
        converted: Some(_), ..
    } = kernel
    {
        super::converts_to_half_rows(&g[ia]).map_err(|why| format!("cm2 GEMM: {why}"))?;
        let bytes = s.m * s.k * s.batches() * 2;
        if !e.facts().fits_binding(bytes) {
            return Err(e.facts().binding_refusal("src0 converted to f16", bytes));
        }
    }
    Ok(kernel)
}

/// Whether MUL_MAT `node` (activations `ib`, shape `s`, `weights`) can
/// take the GEMM variant with unchecked loads of `config`: K a multiple of its step
/// (so every step of every K split is whole: splits are multiples of the
/// WGSL step, itself a multiple of each configuration's), f16 weights as
/// 16-byte words, and f32 activations (when not converted to f16 rows
/// first) as vec4s.
fn aligned_steps(
    e: &Encoder,
    node: usize,
    ib: usize,
    s: &Shape,
    weights: DType,
    config: &GemmConfig,
) -> bool {
    if !s.k.is_multiple_of(u64::from(config.bk))
        || !plan::COOPMAT_BK.is_multiple_of(u64::from(config.bk))
    {
        return false;
    }
    if weights == DType::F16 {
        match graph_weights(e, node) {
            Ok((_, off, nb)) if words16(off, &nb) => {}
            _ => return false,
        }
    }
    if config.b_half {
        return true;
    }
    matches!(f32_src1(e, ib), Ok((_, off, nb)) if dense_vec4(off, nb))
}

/// The f32 activations `ib` as the GEMM reads them when it stages them
/// directly: their binding, offset and strides in elements.
fn f32_src1(e: &Encoder, ib: usize) -> Result<(Binding, u32, [u32; 4]), String> {
    let bb = e.binding(ib)?;
    let off = bb.elem_offset(4)?;
    let nb = nb_elems(&e.graph[ib], 4).map_err(|x| format!("src1: {x}"))?;
    Ok((bb, off, nb))
}

/// Whether a byte offset and strides are all multiples of 16 (rows read
/// as 16-byte words).
fn words16(off: u64, nb: &[u64]) -> bool {
    off.is_multiple_of(16) && nb.iter().all(|n| n.is_multiple_of(16))
}

/// Whether 4-byte elements at offset `off` with strides `nb` lie in
/// dense rows readable as vec4s.
fn dense_vec4(off: u32, nb: [u32; 4]) -> bool {
    nb[0] == 1 && off.is_multiple_of(4) && nb[1..].iter().all(|n| n.is_multiple_of(4))
}

/// The weights' binding, and their offset in it and strides of dims 1..3
/// in bytes.
type WeightBytes = (Binding, u64, [u64; 3]);

/// MUL_MAT `node`'s weights as they are in the graph.
fn graph_weights(e: &Encoder, node: usize) -> Result<WeightBytes, String> {
    let g = e.graph;
    let ia = src_index(g, node, 0)?;
    let ba = e.binding(ia)?;
    let off = ba.rem_bytes;
    Ok((ba, off, [g[ia].nb[1], g[ia].nb[2], g[ia].nb[3]]))
}

mod encode;
pub use encode::try_encode;

#[cfg(test)]
mod tests;
