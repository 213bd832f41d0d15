//! MUL_MAT through the native kernels: which kernel a node gets from the
//! device's [`NativeFeatures`], the `native` option and the shape, or why
//! none ([`choose`]); then its encoding.
//!
//! - `mul_mat_vec` (`glsl/mul_mat_vec.comp`): 1..=8 columns of f32
//!   activations, q4_0 / q8_0 weights read as 16-bit and 8-bit storage
//!   values, subgroup reductions; any src1 and dst strides, src0 batches
//!   broadcast over src1's. Needs 16-bit storage (and 8-bit for q8_0) and
//!   subgroup arithmetic.
//! - `mul_mat_coopmat` (`glsl/mul_mat_coopmat.comp`): at least
//!   [`COOPMAT_MIN_N`] columns, f16 / q4_0 / q8_0 weights staged as halves
//!   in workgroup memory, `VK_KHR_cooperative_matrix` products of a shape
//!   the device lists.
//!
//! Neither is measured faster than the WGSL kernels on any device yet, so
//! `native=auto` (the default) leaves every MUL_MAT to WGSL and
//! `native=on` runs them wherever they can run; `native=emulated` runs the
//! GEMM with plain code for the matrix calls (tests without cooperative
//! matrices).

use backplane_abi::{DType, Op};

use crate::encode::{Encoder, Params, split_groups};
use crate::native::{CoopShape, NativeFeatures, NativeMode, kernels};
use crate::ops::matmul::plan::Shape;
use crate::ops::{dtype, nb_elems, src_index};

/// Weight types of the native mat-vec.
pub const MATVEC_TYPES: &[DType] = &[DType::Q4_0, DType::Q8_0];

/// Most columns of the native mat-vec (one variant per count).
pub const MATVEC_MAX_N: u64 = 8;

/// Rows of dst per mat-vec workgroup (`NROWS` in `build.rs`).
pub const MATVEC_ROWS: u32 = 2;

/// Invocations of a mat-vec workgroup (`WG_SIZE` in `build.rs`).
pub const MATVEC_WG: u32 = 128;

/// Weight types of the native cooperative-matrix GEMM.
pub const COOPMAT_TYPES: &[DType] = &[DType::F16, DType::Q4_0, DType::Q8_0];

/// Fewest columns for the cooperative-matrix GEMM.
pub const COOPMAT_MIN_N: u64 = 64;

/// Output tile of a cooperative-matrix workgroup (`BM` x `BN` in the
/// GLSL).
pub const COOPMAT_TILE: (u64, u64) = (64, 64);

/// Invocations of a cooperative-matrix workgroup (`WG_SIZE` in the GLSL).
pub const COOPMAT_WG: u32 = 128;

/// Subgroup size the cooperative-matrix GEMM is written for: its 128
/// invocations are 4 subgroups, each a 32 x 32 quarter of the tile.
pub const COOPMAT_SUBGROUP: u32 = 32;

/// Why `native=auto` leaves the mat-vec to WGSL: on lavapipe it measured
/// slower than the WGSL integer mat-vec (docs/webgpu.md, "Native Vulkan
/// kernels"), and no GPU has measured it yet.
pub const MATVEC_NOT_FASTER: &str =
    "native mat-vec not measured faster than the WGSL one on any device yet: only with native=on";

/// Why `native=auto` leaves wide products to WGSL.
pub const COOPMAT_NOT_MEASURED: &str =
    "native cooperative-matrix GEMM not measured yet: only with native=on";

/// A native MUL_MAT kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeKernel {
    /// `mul_mat_vec` for `cols` columns.
    MatVec {
        /// Weight type.
        weights: DType,
        /// Columns (1..=8).
        cols: u32,
        /// Activations read as vec4 rows, whole blocks per invocation
        /// (rows dense, offsets and strides multiples of 16 bytes).
        x_vec4: bool,
    },
    /// `mul_mat_coopmat` with matrices of `shape`.
    CoopMat {
        /// Weight type.
        weights: DType,
        /// The cooperative-matrix shape; `None`: the emulated variant
        /// (plain code for the matrix calls, `native=emulated`).
        shape: Option<CoopShape>,
    },
}

impl NativeKernel {
    /// The name of its SPIR-V variant (`build.rs` names them alike).
    pub fn name(&self) -> String {
        match *self {
            NativeKernel::MatVec {
                weights,
                cols,
                x_vec4,
            } => format!(
                "mul_mat_vec_{}_n{cols}{}",
                weights.name(),
                if x_vec4 { "_x4" } else { "" }
            ),
            NativeKernel::CoopMat {
                weights,
                shape: Some(shape),
            } => format!(
                "mul_mat_coopmat_{}_{}x{}x{}",
                weights.name(),
                shape.m,
                shape.n,
                shape.k
            ),
            NativeKernel::CoopMat {
                weights,
                shape: None,
            } => format!("mul_mat_coopmat_{}_emulated", weights.name()),
        }
    }
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
    if t == DType::Q8_0 && !f.storage8 {
        return Err(format!(
            "{what}: device lacks storageBuffer8BitAccess (VK_KHR_8bit_storage)"
        ));
    }
    if !f.subgroup_arithmetic {
        return Err(format!(
            "{what}: device lacks subgroup arithmetic in compute shaders"
        ));
    }
    Ok(())
}

/// The cooperative-matrix shape the native GEMM uses for weights `t` on
/// this device (of the shapes the device lists and this build has a
/// kernel for, the largest M x N x K: fewest matrix operations per tile),
/// or the first thing missing.
pub fn coopmat_device(f: &NativeFeatures, t: DType) -> Result<CoopShape, String> {
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
    if t == DType::Q8_0 && !f.storage8 {
        return Err(format!("{what}: device lacks storageBuffer8BitAccess"));
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
        let k = NativeKernel::CoopMat {
            weights: t,
            shape: Some(shape),
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
        .filter_map(|&t| coopmat_device(f, t).ok().map(|s| (t, s)))
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

/// Whether the device can run the emulated GEMM for weights `t` (f16
/// arithmetic and 16-bit storage, 8-bit for q8_0), or what it lacks.
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
    if t == DType::Q8_0 && !f.storage8 {
        return Err(format!("{what}: device lacks storageBuffer8BitAccess"));
    }
    Ok(())
}

/// How the activations of a MUL_MAT lie, as [`choose`] needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operands {
    /// Weight type.
    pub ta: DType,
    /// Activation type.
    pub tb: DType,
    /// Weights stored split ([`crate::split`]).
    pub split: bool,
    /// Activation rows dense with offset and strides multiples of 16
    /// bytes (read as vec4s).
    pub x_vec4: bool,
}

/// The native kernel for a MUL_MAT of `o` and shape `s`, or why none.
pub fn choose(
    f: &NativeFeatures,
    mode: NativeMode,
    o: Operands,
    s: &Shape,
) -> Result<NativeKernel, String> {
    let Operands {
        ta,
        tb,
        split,
        x_vec4,
    } = o;
    if mode == NativeMode::Off {
        return Err("native=off".into());
    }
    if let Some(why) = &f.unavailable {
        return Err(why.clone());
    }
    if tb != DType::F32 {
        return Err(format!(
            "src1 is {} (the native kernels read f32)",
            tb.name()
        ));
    }
    if split {
        return Err("weights stored split (the native kernels read ggml's blocks)".into());
    }
    if (1..=MATVEC_MAX_N).contains(&s.n) {
        if !MATVEC_TYPES.contains(&ta) {
            return Err(format!("no native mat-vec for {} weights", ta.name()));
        }
        matvec_device(f, ta)?;
        let k = NativeKernel::MatVec {
            weights: ta,
            cols: s.n as u32,
            x_vec4,
        };
        kernels::available(&k.name())?;
        if mode == NativeMode::Auto {
            return Err(MATVEC_NOT_FASTER.into());
        }
        return Ok(k);
    }
    if s.n >= COOPMAT_MIN_N {
        if !COOPMAT_TYPES.contains(&ta) {
            return Err(format!(
                "no native cooperative-matrix GEMM for {} weights",
                ta.name()
            ));
        }
        if mode == NativeMode::Emulated {
            emulated_device(f, ta)?;
            let k = NativeKernel::CoopMat {
                weights: ta,
                shape: None,
            };
            kernels::available(&k.name())?;
            return Ok(k);
        }
        let shape = coopmat_device(f, ta)?;
        if mode == NativeMode::Auto {
            return Err(COOPMAT_NOT_MEASURED.into());
        }
        return Ok(NativeKernel::CoopMat {
            weights: ta,
            shape: Some(shape),
        });
    }
    Err(format!("no native kernel for {} columns", s.n))
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
    let b = &g[ib];
    let rem = b.offset % e.facts().offset_alignment.max(1);
    let o = Operands {
        ta: dtype(&g[ia])?,
        tb: dtype(b)?,
        split: e.ctx().is_split(g[ia].buffer),
        x_vec4: b.nb[0] == 4
            && rem.is_multiple_of(16)
            && b.nb[1..].iter().all(|n| n.is_multiple_of(16)),
    };
    choose(&e.ctx().native.features, e.facts().tuning.native, o, &s)
}

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
        eprintln!(
            "backplane-webgpu: MUL_MAT node {node}: native {}",
            kernel.name()
        );
    }
    match kernel {
        NativeKernel::MatVec { .. } => encode_matvec(e, node, kernel)?,
        NativeKernel::CoopMat { .. } => encode_coopmat(e, node, kernel)?,
    }
    Ok(true)
}

/// A u32 parameter, or an error naming it.
fn word(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("native MUL_MAT: {what} = {v} does not fit u32"))
}

/// The parameters every native MUL_MAT kernel starts with: sizes, then
/// each tensor's offset and strides (weights in bytes, the others in
/// f32 elements), in the order of the GLSL's `Params`.
fn layout_params(e: &Encoder, node: usize, s: &Shape, groups: u64) -> Result<Params, String> {
    let g = e.graph;
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (a, b, d) = (&g[ia], &g[ib], &g[node]);
    let (ba, bb, bd) = (e.binding(ia)?, e.binding(ib)?, e.binding(node)?);
    let b_nb = nb_elems(b, 4).map_err(|x| format!("src1: {x}"))?;
    let d_nb = nb_elems(d, 4).map_err(|x| format!("dst: {x}"))?;
    let mut p = Params::new()
        .u32(word(s.k, "K")?)
        .u32(word(s.m, "M")?)
        .u32(word(s.ne12, "ne12")?)
        .u32(word(s.r2, "r2")?)
        .u32(word(s.r3, "r3")?)
        .u32(word(groups, "row groups")?)
        .u32(word(ba.rem_bytes, "src0 offset")?);
    for (i, &nb) in a.nb[1..].iter().enumerate() {
        p = p.u32(word(nb, &format!("src0 nb{}", i + 1))?);
    }
    Ok(p.u32(bb.elem_offset(4)?)
        .u32x4(b_nb)
        .u32(bd.elem_offset(4)?)
        .u32x4(d_nb))
}

fn encode_matvec(e: &mut Encoder, node: usize, kernel: NativeKernel) -> Result<(), String> {
    let g = e.graph;
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    let row_groups = s.m.div_ceil(u64::from(MATVEC_ROWS));
    let p = layout_params(e, node, &s, row_groups)?;
    let max = e.facts().max_groups_per_dim;
    let [x, y, _] = split_groups(row_groups, max)
        .ok_or_else(|| format!("native mat-vec: {row_groups} row groups are too many"))?;
    let z = word(s.batches(), "batches")?;
    dispatch(e, node, [ia, ib], &kernel, MATVEC_WG, &p, [x, y, z])
}

fn encode_coopmat(e: &mut Encoder, node: usize, kernel: NativeKernel) -> Result<(), String> {
    let g = e.graph;
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    let tiles_m = s.m.div_ceil(COOPMAT_TILE.0);
    let tiles_n = s.n.div_ceil(COOPMAT_TILE.1);
    let p = layout_params(e, node, &s, tiles_m)?.u32(word(s.n, "N")?);
    let z = word(s.batches(), "batches")?;
    let groups = [
        word(tiles_m, "row tiles")?,
        word(tiles_n, "column tiles")?,
        z,
    ];
    dispatch(e, node, [ia, ib], &kernel, COOPMAT_WG, &p, groups)
}

/// Dispatches native `kernel` (workgroups of `wg`) on weights, activations
/// and dst (`srcs`, then `node`) with parameters `p`.
fn dispatch(
    e: &mut Encoder,
    node: usize,
    [ia, ib]: [usize; 2],
    kernel: &NativeKernel,
    wg: u32,
    p: &Params,
    groups: [u32; 3],
) -> Result<(), String> {
    let bindings = [e.binding(ia)?, e.binding(ib)?, e.binding(node)?];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: u64, n: u64, k: u64) -> Shape {
        Shape {
            k,
            m,
            n,
            ne12: 1,
            ne13: 1,
            r2: 1,
            r3: 1,
        }
    }

    /// lavapipe: 8/16-bit storage, f16, subgroups of 8, no cooperative matrix.
    fn lavapipe() -> NativeFeatures {
        NativeFeatures {
            passthrough: true,
            storage8: true,
            storage16: true,
            float16: true,
            int8: true,
            subgroup_arithmetic: true,
            subgroup_size: (8, 8),
            subgroup_size_control: true,
            integer_dot_product: true,
            ..NativeFeatures::default()
        }
    }

    /// An H200: lavapipe's features plus KHR and NV cooperative matrices.
    fn h200() -> NativeFeatures {
        NativeFeatures {
            subgroup_size: (32, 32),
            coopmat: true,
            coopmat_shapes: vec![
                CoopShape { m: 16, n: 8, k: 16 },
                CoopShape {
                    m: 16,
                    n: 16,
                    k: 16,
                },
            ],
            coopmat2: true,
            ..lavapipe()
        }
    }

    #[test]
    fn the_mat_vec_needs_16_bit_storage_subgroups_and_8_bit_storage_for_q8_0() {
        let f = lavapipe();
        assert_eq!(matvec_device(&f, DType::Q4_0), Ok(()));
        assert_eq!(matvec_device(&f, DType::Q8_0), Ok(()));
        let no8 = NativeFeatures {
            storage8: false,
            ..lavapipe()
        };
        assert_eq!(matvec_device(&no8, DType::Q4_0), Ok(()));
        assert_eq!(
            matvec_device(&no8, DType::Q8_0).unwrap_err(),
            "native q8_0 mat-vec: device lacks storageBuffer8BitAccess (VK_KHR_8bit_storage)"
        );
        let no16 = NativeFeatures {
            storage16: false,
            ..lavapipe()
        };
        assert!(
            matvec_device(&no16, DType::Q4_0)
                .unwrap_err()
                .contains("lacks storageBuffer16BitAccess")
        );
        let nosg = NativeFeatures {
            subgroup_arithmetic: false,
            ..lavapipe()
        };
        assert!(
            matvec_device(&nosg, DType::Q4_0)
                .unwrap_err()
                .contains("lacks subgroup arithmetic")
        );
        let metal = NativeFeatures::unavailable("the adapter runs on Metal, not Vulkan");
        assert_eq!(
            matvec_device(&metal, DType::Q4_0).unwrap_err(),
            "native q4_0 mat-vec: the adapter runs on Metal, not Vulkan"
        );
    }

    #[test]
    fn the_description_names_the_kernels_the_device_can_run() {
        assert_eq!(description(&lavapipe()), "native=on: mat-vec q4_0/q8_0");
        let no8 = NativeFeatures {
            storage8: false,
            ..lavapipe()
        };
        assert_eq!(description(&no8), "native=on: mat-vec q4_0");
        let nothing = NativeFeatures {
            subgroup_arithmetic: false,
            ..lavapipe()
        };
        assert_eq!(
            description(&nothing),
            "no native kernels: native q4_0 mat-vec: device lacks subgroup arithmetic in compute shaders"
        );
        if kernels::built() {
            assert_eq!(
                description(&h200()),
                "native=on: mat-vec q4_0/q8_0, GEMM f16/q4_0/q8_0 16x16x16"
            );
        }
    }

    #[test]
    fn the_choice_follows_mode_types_and_columns() {
        let f = lavapipe();
        let one = shape(4096, 1, 4096);
        let ops = |ta, tb| Operands {
            ta,
            tb,
            split: false,
            x_vec4: false,
        };
        let pick = |f: &NativeFeatures, mode, ta, tb, s: &Shape| choose(f, mode, ops(ta, tb), s);
        if kernels::built() {
            assert_eq!(
                pick(&f, NativeMode::Auto, DType::Q4_0, DType::F32, &one),
                Err(MATVEC_NOT_FASTER.to_string())
            );
            assert_eq!(
                pick(&f, NativeMode::On, DType::Q4_0, DType::F32, &one),
                Ok(NativeKernel::MatVec {
                    weights: DType::Q4_0,
                    cols: 1,
                    x_vec4: false,
                })
            );
            assert_eq!(
                pick(
                    &f,
                    NativeMode::On,
                    DType::Q8_0,
                    DType::F32,
                    &shape(64, 7, 256)
                )
                .map(|k| k.name()),
                Ok("mul_mat_vec_q8_0_n7".to_string())
            );
            let aligned = Operands {
                x_vec4: true,
                ..ops(DType::Q4_0, DType::F32)
            };
            assert_eq!(
                choose(&f, NativeMode::On, aligned, &one).map(|k| k.name()),
                Ok("mul_mat_vec_q4_0_n1_x4".to_string())
            );
        } else {
            assert_eq!(
                pick(&f, NativeMode::Auto, DType::Q4_0, DType::F32, &one),
                Err(kernels::NOT_BUILT.to_string())
            );
        }
        assert_eq!(
            pick(&f, NativeMode::Off, DType::Q4_0, DType::F32, &one),
            Err("native=off".into())
        );
        assert_eq!(
            pick(&f, NativeMode::On, DType::Q4_0, DType::F16, &one),
            Err("src1 is f16 (the native kernels read f32)".into())
        );
        assert_eq!(
            pick(&f, NativeMode::On, DType::Q4_K, DType::F32, &one),
            Err("no native mat-vec for q4_K weights".into())
        );
        assert_eq!(
            pick(
                &f,
                NativeMode::On,
                DType::Q4_0,
                DType::F32,
                &shape(4096, 16, 4096)
            ),
            Err("no native kernel for 16 columns".into())
        );
        assert!(
            choose(
                &f,
                NativeMode::On,
                Operands {
                    split: true,
                    ..ops(DType::Q4_0, DType::F32)
                },
                &one
            )
            .unwrap_err()
            .contains("stored split")
        );
        // lavapipe has no cooperative matrices.
        if kernels::built() {
            assert_eq!(
                pick(
                    &f,
                    NativeMode::Emulated,
                    DType::Q8_0,
                    DType::F32,
                    &shape(4096, 512, 4096)
                )
                .map(|k| k.name()),
                Ok("mul_mat_coopmat_q8_0_emulated".to_string())
            );
        }
        assert_eq!(
            pick(&f, NativeMode::On, DType::F16, DType::F32, &shape(4096, 512, 4096)),
            Err(
                "native f16 cooperative-matrix GEMM: device lacks VK_KHR_cooperative_matrix (or no_coopmat is on)"
                    .into()
            )
        );
    }

    #[test]
    fn the_gemm_takes_a_listed_shape_this_build_has_and_waits_for_native_on() {
        let f = h200();
        let wide = shape(4096, 512, 14336);
        let q4_0 = Operands {
            ta: DType::Q4_0,
            tb: DType::F32,
            split: false,
            x_vec4: true,
        };
        let f16 = Operands {
            ta: DType::F16,
            ..q4_0
        };
        if !kernels::built() {
            assert!(
                coopmat_device(&f, DType::F16)
                    .unwrap_err()
                    .contains(kernels::NOT_BUILT)
            );
            return;
        }
        // The largest listed shape with a kernel in this build.
        assert_eq!(
            coopmat_device(&f, DType::F16),
            Ok(CoopShape {
                m: 16,
                n: 16,
                k: 16
            })
        );
        let small = NativeFeatures {
            coopmat_shapes: vec![CoopShape { m: 16, n: 8, k: 16 }],
            ..h200()
        };
        assert_eq!(
            coopmat_device(&small, DType::F16),
            Ok(CoopShape { m: 16, n: 8, k: 16 })
        );
        assert_eq!(
            choose(&f, NativeMode::On, q4_0, &wide).map(|k| k.name()),
            Ok("mul_mat_coopmat_q4_0_16x16x16".to_string())
        );
        assert_eq!(
            choose(&f, NativeMode::Auto, f16, &wide).unwrap_err(),
            COOPMAT_NOT_MEASURED
        );
        let odd = NativeFeatures {
            coopmat_shapes: vec![CoopShape { m: 8, n: 8, k: 32 }],
            ..h200()
        };
        assert!(
            coopmat_device(&odd, DType::F16)
                .unwrap_err()
                .contains("no native kernel mul_mat_coopmat_f16_8x8x32")
        );
        let wide_subgroups = NativeFeatures {
            subgroup_size: (32, 256),
            ..h200()
        };
        assert!(
            coopmat_device(&wide_subgroups, DType::F16)
                .unwrap_err()
                .contains("needs subgroups of exactly 32 invocations (device: 32..256)")
        );
    }
}
