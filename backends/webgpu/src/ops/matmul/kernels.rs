//! Encoding of the MUL_MAT kernels: bindings, pipeline keys and parameter
//! blocks in the order of each shader's `struct Params`.

use backplane_abi::{DType, TensorDesc};
use backplane_shaders::PipelineKey;

use super::plan::{self, Path, Shape, WeightLayout};
use super::quant_flag;
use crate::encode::{Binding, Encoder, Params};
use crate::kept::{ByteRange, CopyOrigin};
use crate::ops::{dtype, nb_elems, ne_u32, src_index, type_name};
use crate::pipelines::Checks;
pub(crate) use extra::{MATVEC_BINDINGS, MatVecExtra};
pub(super) use id::encode_id;

mod extra;
pub(crate) mod glu;
mod id;
mod q8;
mod split;

pub(crate) use q8::{Q8Copy, wgsl_quantizes_src1};
pub(crate) use split::SplitRows;

/// Workgroup size of the activation conversion.
const CONVERT_WG: u32 = 256;
/// Runs of 4 contiguous f32 weights each `mul_mat_dequant` invocation
/// converts (the `matmul_dqruns` option overrides).
const DENSE_RUNS: u32 = 2;

/// A u32 parameter, or the reason it does not fit.
fn u32_of(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} = {v} does not fit u32"))
}

/// Strides of dims 1..3 of `t` in units of `unit` bytes (dim 0 is read
/// densely by the kernels).
fn outer_strides(t: &TensorDesc, unit: u64) -> Result<[u32; 3], String> {
    let mut out = [0u32; 3];
    for (o, &b) in out.iter_mut().zip(&t.nb[1..]) {
        if !b.is_multiple_of(unit) {
            return Err(format!(
                "stride {b} bytes is not a multiple of {unit} bytes"
            ));
        }
        *o = u32_of(b / unit, "stride")?;
    }
    Ok(out)
}

/// The weights as a kernel reads them.
struct Weights {
    binding: Binding,
    ty: DType,
    layout: WeightLayout,
    /// Offset and strides of dims 1..3, in the layout's units.
    off: u32,
    strides: [u32; 3],
    /// [`WeightLayout::Split`]: byte offset of the scales in the binding.
    scales: u32,
}

impl Weights {
    /// The weights as the tiled and cooperative-matrix kernels read them.
    fn new(e: &Encoder, index: usize) -> Result<Weights, String> {
        let a = e.tensor(index);
        let ty = dtype(a)?;
        Weights::with_layout(e, index, plan::weight_layout(e.facts(), a, ty))
    }

    /// The weights as the mat-vec kernel reads them.
    fn for_matvec(e: &Encoder, index: usize) -> Result<Weights, String> {
        let a = e.tensor(index);
        let ty = dtype(a)?;
        Weights::with_layout(e, index, plan::matvec_weight_layout(e.facts(), a, ty))
    }

    fn with_layout(e: &Encoder, index: usize, layout: WeightLayout) -> Result<Weights, String> {
        let a = e.tensor(index);
        let ty = dtype(a)?;
        let binding = e.binding(index)?;
        let unit = match layout {
            WeightLayout::Quant | WeightLayout::Quant16 | WeightLayout::Split => 1,
            WeightLayout::Vec4 => 4 * ty.type_size() as u64,
            WeightLayout::Half8 => 16,
            WeightLayout::Scalar => ty.type_size() as u64,
        };
        Ok(Weights {
            off: u32_of(binding.rem_bytes / unit, "src0 offset")?,
            strides: outer_strides(a, unit)?,
            binding,
            ty,
            layout,
            scales: 0,
        })
    }

    /// The weights `w` of tensor `index` converted by `mul_mat_dequant`
    /// to dense half rows in scratch memory (K % 4 == 0), read by the
    /// kernels as vec4s.
    fn dequantized(e: &mut Encoder, index: usize, w: Weights) -> Result<Weights, String> {
        let ne = ne_u32(e.tensor(index))?;
        let k4 = ne[0] / 4;
        let rows = ne[1..].iter().map(|&x| u64::from(x)).product::<u64>();
        // Block weights go a unit of 16 per invocation, others a run of 4
        // (see the shader).
        let per_row = if w.ty.is_quantized() { k4 / 4 } else { k4 };
        let total = u64::from(per_row) * rows;
        let dense = [k4, k4 * ne[1], k4 * ne[1] * ne[2]];
        let mut key = w
            .key(PipelineKey::new("mul_mat_dequant", ""))
            .wg(CONVERT_WG);
        // Contiguous weights (W_DENSE) skip the split of each invocation's
        // index into row and column.
        let contiguous = e.tensor(index).is_contiguous();
        let mut invocations = total;
        if w.layout == WeightLayout::Quant && contiguous {
            key = key.define("W_DENSE", "");
        } else if w.layout == WeightLayout::Vec4 && contiguous {
            // Run i of the result is run i of the weights, and each
            // invocation converts DENSE_RUNS runs total / DENSE_RUNS apart
            // (H200, 4096 x 14336 f32, us per call: 91.6 split, 86.8 dense;
            // 83.8, 84.1, 85.2 with 2, 4, 8 runs).
            let runs = e
                .facts()
                .tuning
                .matmul_dqruns
                .filter(|n| [1, 2, 4, 8].contains(n))
                .unwrap_or(DENSE_RUNS);
            invocations = total.div_ceil(u64::from(runs));
            key = key
                .define("W_DENSE", "")
                .define("DENSE_RUNS", format!("{runs}u"));
        }
        let p = Params::new()
            .u32(per_row)
            .u32(ne[1])
            .u32(ne[2])
            .u32(u32_of(total, "dequantized src0 units")?)
            .u32(w.off)
            .u32(w.strides[0])
            .u32(w.strides[1])
            .u32(w.strides[2]);
        let p = w.split_scales(p);
        let scratch = e.scratch(u64::from(k4) * rows * 8)?;
        // Trusted: invocation i < total reads one unit or run of its own
        // row below K through the same reads as the GEMM kernels, and
        // writes vec4s of that row's k4 inside a scratch range of k4 * rows;
        // with W_DENSE it reads and writes runs below total (loads clamped,
        // stores tested), the weights being total contiguous runs; with
        // W_SPLIT unit i < total reads quants and a head of its own block
        // (i / units per block, below the tensor's blocks) in the split
        // tensor's binding.
        e.dispatch_linear(
            &key,
            Checks::Trusted,
            &[w.binding.clone(), scratch.clone()],
            &p,
            invocations.div_ceil(u64::from(CONVERT_WG)),
        )?;
        Ok(Weights {
            binding: scratch,
            ty: DType::F16,
            layout: WeightLayout::Vec4,
            off: 0,
            strides: dense,
            scales: 0,
        })
    }

    /// Adds the weight type and layout to a kernel key.
    fn key(&self, key: PipelineKey) -> PipelineKey {
        let key = key.ty("SRC0", type_name(self.ty));
        match self.layout {
            WeightLayout::Quant | WeightLayout::Quant16 => {
                let key = key
                    .define("W_QUANT", "")
                    .define(quant_flag(self.ty).expect("block type"), "");
                if self.layout == WeightLayout::Quant16 {
                    key.define("QUANT_BUF_VEC4", "")
                } else {
                    key
                }
            }
            WeightLayout::Split => key
                .define("W_QUANT", "")
                .define(quant_flag(self.ty).expect("split block type"), "")
                .define("QUANT_BUF_VEC4", "")
                .define("W_SPLIT", ""),
            WeightLayout::Vec4 => key.define("W_VEC4", ""),
            WeightLayout::Half8 => key.define("W_HALF8", ""),
            WeightLayout::Scalar => key,
        }
    }

    /// `p` with the last uniform of a kernel reading split weights
    /// (`w_scales`, the byte offset of the heads); `p` itself for any
    /// other layout.
    fn split_scales(&self, p: Params) -> Params {
        if self.layout == WeightLayout::Split {
            p.u32(self.scales)
        } else {
            p
        }
    }

    /// Units per row the mat-vec kernel loops over ([`plan::matvec_units`]).
    fn units(&self, k: u64, x: &Activations) -> u64 {
        plan::matvec_units(self.ty, self.layout, x.q8, k)
    }
}

/// Tensor `index` (one [`super::converts_to_half_rows`] accepts)
/// converted to dense f16 rows in scratch memory by the weights'
/// conversion (`mul_mat_dequant`): the binding and the strides of dims
/// 1..3 in halves.
pub(crate) fn half_rows(e: &mut Encoder, index: usize) -> Result<(Binding, [u64; 3]), String> {
    let w = if e.ctx().is_split(e.tensor(index).buffer) {
        Weights::split(e, index)?
    } else {
        Weights::new(e, index)?
    };
    let w = Weights::dequantized(e, index, w)?;
    Ok((w.binding, w.strides.map(|s| u64::from(s) * 4)))
}

/// Activations as vec4 rows: the f32 tensor itself, or a copy converted
/// to f32 or half.
struct Activations {
    binding: Binding,
    /// Halves (`X_F16` in the kernels).
    half: bool,
    /// Runs of 32 signed bytes with scales (`X_Q8`, mat-vec only).
    q8: bool,
    /// Offset and strides of dims 1..3 in vec4s.
    off: u32,
    strides: [u32; 3],
    /// The copy an earlier node of the graph made (see [`crate::kept`]).
    reused: bool,
}

impl Activations {
    /// Binds src1 (graph index `index`), converting it first to halves
    /// (`half`) or when the kernels cannot read it in place.
    fn new(e: &mut Encoder, index: usize, half: bool) -> Result<Activations, String> {
        let b = e.tensor(index);
        let tb = dtype(b)?;
        let binding = e.binding(index)?;
        if !half && plan::activations_direct(e.facts(), b, tb) {
            return Ok(Activations {
                half,
                q8: false,
                reused: false,
                off: u32_of(binding.rem_bytes / 16, "src1 offset")?,
                strides: outer_strides(b, 16)?,
                binding,
            });
        }
        let ne = ne_u32(b)?;
        let k4 = ne[0].next_multiple_of(4);
        let total = u64::from(k4) * b.ne[1..].iter().map(|&x| x as u64).product::<u64>();
        let mut key = PipelineKey::new("mul_mat_convert", "")
            .ty("SRC1", type_name(tb))
            .ty("DST", if half { "f16" } else { "f32" })
            .wg(CONVERT_WG);
        // Rows of whole aligned vec4s are copied a vec4 per invocation.
        let vec4 = plan::activations_vec4(e.facts(), b, tb);
        let per = if vec4 { 4 } else { 1 };
        if vec4 {
            key = key.define("VEC4", "");
        }
        let head = Params::new()
            .u32(ne[0] / per)
            .u32(k4 / per)
            .u32(ne[1])
            .u32(ne[2])
            .u32(u32_of(total / u64::from(per), "converted src1 elements")?);
        let mut x = Activations::rewritten(
            e,
            index,
            &key,
            head,
            (total * if half { 2 } else { 4 }, total / u64::from(per)),
            u64::from(per),
            k4 / 4,
        )?;
        x.half = half;
        Ok(x)
    }

    /// Quantizes src1 (graph index `index`, K a multiple of 32) into
    /// scratch as runs of 32 signed bytes with scales for the integer
    /// mat-vec (`mul_mat_quantize`, eight invocations per run).
    fn quantized(e: &mut Encoder, index: usize) -> Result<Activations, String> {
        let q = Q8Copy::of(e, index)?;
        let mut x = Activations::rewritten(
            e,
            index,
            &q.key,
            q.head,
            (q.bytes, 8 * q.runs_total),
            1,
            3 * q.runs_per_row,
        )?;
        x.q8 = true;
        Ok(x)
    }

    /// Runs the kernel `key` from src1 (graph index `index`) into scratch
    /// (`(bytes, invocations)`); its parameters are `head`, then src1's
    /// offset and four strides in units of `per` elements. The result has
    /// rows of `row` vec4s.
    fn rewritten(
        e: &mut Encoder,
        index: usize,
        key: &PipelineKey,
        head: Params,
        (bytes, invocations): (u64, u64),
        per: u64,
        row: u32,
    ) -> Result<Activations, String> {
        let b = e.tensor(index);
        let size = dtype(b)?.type_size() as u64;
        let ne = ne_u32(b)?;
        // In elements, then in units of `per` (dim 0 is dense when per > 1).
        let mut nb = nb_elems(b, size)?;
        for s in &mut nb[1..] {
            *s /= per as u32;
        }
        let binding = e.binding(index)?;
        let params = head.u32(binding.elem_offset(per * size)?).u32x4(nb);
        // A node before this one in the graph may have converted the same
        // src1 the same way (Q, K and V projections share it).
        let origin = copy_origin(e, index, key, &params);
        let reused = e.kept_copy(&origin);
        let scratch = match reused.clone() {
            Some(copy) => copy,
            None => {
                e.forget_kept_copy();
                let scratch = e.scratch(bytes)?;
                e.dispatch_linear(
                    key,
                    Checks::On,
                    &[binding, scratch.clone()],
                    &params,
                    invocations.div_ceil(u64::from(CONVERT_WG)),
                )?;
                e.keep_copy(origin, scratch.clone());
                scratch
            }
        };
        Ok(Activations {
            binding: scratch,
            half: false,
            q8: false,
            reused: reused.is_some(),
            off: 0,
            strides: [row, row * ne[1], row * ne[1] * ne[2]],
        })
    }

    /// src1 as the mat-vec kernel for weights of type `t` reads it.
    fn for_matvec(e: &mut Encoder, index: usize, t: DType) -> Result<Activations, String> {
        if plan::matvec_int8(&e.facts().tuning, t) {
            Activations::quantized(e, index)
        } else {
            Activations::new(e, index, false)
        }
    }
}

/// src1 (graph index `index`, K a multiple of 32) quantized as the
/// integer mat-vec reads it (or the copy an earlier node left), for the
/// native integer mat-vec: its binding, offset and strides of dims 1..3
/// in vec4s.
pub(super) fn quantized_src1(
    e: &mut Encoder,
    index: usize,
) -> Result<(Binding, u32, [u32; 3]), String> {
    let x = Activations::quantized(e, index)?;
    Ok((x.binding, x.off, x.strides))
}

/// src1 (graph index `index`) converted to f16 rows (K rounded up to 4,
/// zeros past K; or the copy an earlier node left), for the native GEMM:
/// its binding, offset and strides of dims 1..3 in units of 4 halves.
pub(super) fn half_src1(e: &mut Encoder, index: usize) -> Result<(Binding, u32, [u32; 3]), String> {
    let x = Activations::new(e, index, true)?;
    Ok((x.binding, x.off, x.strides))
}

/// What made a converted copy of src1 (graph index `index`) with `key`
/// and `params`: later nodes reuse the copy when theirs is the same.
fn copy_origin(e: &Encoder, index: usize, key: &PipelineKey, params: &Params) -> CopyOrigin {
    CopyOrigin {
        source: index,
        range: ByteRange::of(e.tensor(index)),
        key: key.clone(),
        params: params.words().to_vec(),
    }
}

/// dst: binding, offset and the four strides in f32s.
struct Dst {
    binding: Binding,
    off: u32,
    strides: [u32; 4],
}

impl Dst {
    fn new(e: &Encoder, node: usize) -> Result<Dst, String> {
        let binding = e.binding(node)?;
        Ok(Dst {
            off: binding.elem_offset(4)?,
            strides: nb_elems(e.tensor(node), 4)?,
            binding,
        })
    }
}

/// Appends weight, activation and dst offsets/strides as the kernels'
/// Params declare them (w_off, w_s1..3, x_off, x_s1..3, d_off, then
/// d_s0..3 or, with `skip_d_s0`, d_s1..3).
fn layout_params(mut p: Params, w: &Weights, x: &Activations, d: &Dst, skip_d_s0: bool) -> Params {
    p = p
        .u32(w.off)
        .u32(w.strides[0])
        .u32(w.strides[1])
        .u32(w.strides[2]);
    p = p
        .u32(x.off)
        .u32(x.strides[0])
        .u32(x.strides[1])
        .u32(x.strides[2]);
    p = p.u32(d.off);
    let from = usize::from(skip_d_s0);
    for &s in &d.strides[from..] {
        p = p.u32(s);
    }
    p
}

/// Encodes MUL_MAT.
pub(super) fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    encode_with(e, node, None).map(|_| ())
}

/// Encodes MUL_MAT `node`, with `extra` when it takes the mat-vec of one
/// column; `Ok(false)`, and nothing encoded, when it would take another
/// path.
pub(super) fn encode_with(
    e: &mut Encoder,
    node: usize,
    extra: Option<&MatVecExtra>,
) -> Result<bool, String> {
    let g = e.graph;
    let d = &g[node];
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let s = Shape::of(&g[ia], &g[ib])?;
    if d.nelements() == 0 {
        return Ok(extra.is_none());
    }
    let w = Weights::new(e, ia)?;
    let out = Dst::new(e, node)?;
    let dense = out.strides[0] == 1;
    let facts = e.facts();
    let path = plan::choose_path(facts, w.ty, &s, dense, facts.tuning.matmul_path);
    if extra.is_some() && path != (Path::MatVec { cols: 1 }) {
        return Ok(false);
    }
    // The cooperative-matrix kernel reads half activations, converted
    // first unless `f32x` asks it to convert f32 ones while staging. They
    // take scratch memory before the weights do, so a copy kept for the
    // next nodes (see `crate::kept`) sits at its start.
    let half = matches!(path, Path::CoopMat { .. }) && !facts.tuning.matmul_f32x;
    let x = match path {
        Path::MatVec { .. } => Activations::for_matvec(e, ib, w.ty)?,
        _ => Activations::new(e, ib, half)?,
    };
    // Weights stored split are read as they are by every path (`W_SPLIT`).
    let split = e.ctx().is_split(g[ia].buffer);
    let w = match path {
        _ if split => Weights::split(e, ia)?,
        Path::MatVec { .. } => Weights::for_matvec(e, ia)?,
        _ => w,
    };
    let w = match path {
        Path::CoopMat { .. } if plan::dequantize_first(e.facts(), w.ty, &s) => {
            Weights::dequantized(e, ia, w)?
        }
        _ => w,
    };
    if facts.tuning.matmul_trace {
        eprintln!(
            "backplane-webgpu: MUL_MAT {} m={} n={} k={} batches={} -> {} (weights {:?}){}{}{}",
            dtype(&g[ia])?.name(),
            s.m,
            s.n,
            s.k,
            s.batches(),
            path.name(),
            w.layout,
            if w.ty == dtype(&g[ia])? {
                ""
            } else {
                " (weights to half first)"
            },
            if x.reused {
                " (src1 as converted by an earlier node)"
            } else {
                ""
            },
            if split {
                " (read from the split layout in place)"
            } else {
                ""
            }
        );
    }
    match path {
        Path::MatVec { cols } => matvec(e, &s, &w, &x, &out, cols, extra),
        Path::Tiled => tiled(e, &s, &w, &x, &out, [0, s.m], [0, s.n]),
        Path::CoopMat { emulated } => {
            let m_full = s.m & !15;
            let n_full = s.n & !15;
            coopmat(e, &s, &w, &x, &out, [m_full, n_full], emulated)?;
            if m_full < s.m {
                tiled(e, &s, &w, &x, &out, [m_full, s.m], [0, s.n])?;
            }
            if n_full < s.n {
                tiled(e, &s, &w, &x, &out, [0, m_full], [n_full, s.n])?;
            }
            Ok(())
        }
    }
    .map(|()| true)
}

/// The mat-vec pipeline key for rows of `k` weights.
fn matvec_key(
    e: &Encoder,
    w: &Weights,
    x: &Activations,
    k: u64,
    cols: u32,
    id: bool,
) -> PipelineKey {
    let facts = e.facts();
    let subgroups = plan::matvec_subgroups(facts);
    let wg = plan::matvec_wg(facts, subgroups, w.ty, w.units(k, x));
    let mut key = w
        .key(PipelineKey::new("mul_mat_vec", ""))
        .wg(wg)
        .define("NROWS", plan::matvec_rows(&e.facts().tuning).to_string())
        .define("NCOLS", cols.to_string());
    if x.q8 {
        key = key.define("X_Q8", "");
    }
    if subgroups {
        key.path = "subgroup";
        let max_subgroups = wg / facts.subgroup_size.0.clamp(1, wg);
        key = key.define("MAX_SUBGROUPS", max_subgroups.to_string());
    }
    if id {
        key = key.define("MUL_MAT_ID", "");
    }
    key
}

/// Mat-vec: workgroups over (row groups, column groups, batches).
fn matvec(
    e: &mut Encoder,
    s: &Shape,
    w: &Weights,
    x: &Activations,
    d: &Dst,
    cols: u32,
    extra: Option<&MatVecExtra>,
) -> Result<(), String> {
    let mut key = matvec_key(e, w, x, s.k, cols, false);
    let row_groups =
        s.m.div_ceil(u64::from(plan::matvec_rows(&e.facts().tuning)));
    let col_groups = s.n.div_ceil(u64::from(cols));
    let total = row_groups * col_groups * s.batches();
    let p = Params::new()
        .u32(u32_of(s.k, "K")?)
        .u32(u32_of(s.m, "M")?)
        .u32(u32_of(s.n, "N")?)
        .u32(u32_of(s.ne12, "ne12")?)
        .u32(s.r2 as u32)
        .u32(s.r3 as u32)
        .u32(u32_of(w.units(s.k, x), "units")?)
        .u32(u32_of(total, "workgroups")?)
        .u32(u32_of(row_groups, "row groups")?)
        .u32(u32_of(col_groups, "column groups")?);
    let node1 = extra.map_or(0, |f| f.node1);
    let mut p = w.split_scales(
        layout_params(p, w, x, d, false)
            .u32x4([0; 4])
            .u32(0)
            .u32(node1),
    );
    let mut bindings = vec![w.binding.clone(), x.binding.clone(), d.binding.clone()];
    if let Some(f) = extra {
        key = f.specialise(key);
        p = f.params(p);
        bindings.extend_from_slice(&f.bindings);
    }
    // Trusted: rows and columns past the end are clamped to the last one
    // and never stored, runs past K read the row's first vec4 and are
    // masked; conformance (guard regions around every output) passes with
    // and without runtime checks, which cost 2-4x on an H200.
    e.dispatch_linear(&key, Checks::Trusted, &bindings, &p, total)
}

/// Tiled GEMM over rows `m` and columns `n` (begin, end).
fn tiled(
    e: &mut Encoder,
    s: &Shape,
    w: &Weights,
    x: &Activations,
    d: &Dst,
    m: [u64; 2],
    n: [u64; 2],
) -> Result<(), String> {
    let (side, tile_k) = plan::tiled_config(
        e.facts(),
        m[1] - m[0],
        n[1] - n[0],
        s.batches(),
        e.facts().tuning.matmul_path == Some("tiled8"),
    );
    let mut key = w
        .key(PipelineKey::new("mul_mat_tiled", ""))
        .wg(plan::TILED_WG)
        .define("THREAD_TILE", format!("{side}u"))
        .define("TILE_K", format!("{tile_k}u"));
    if x.half {
        key = key.define("X_F16", "");
    }
    if !s.k.is_multiple_of(u64::from(tile_k)) {
        key = key.define("K_TAIL", "");
    }
    let p = Params::new()
        .u32(u32_of(s.k, "K")?)
        .u32(u32_of(m[1], "M")?)
        .u32(u32_of(n[1], "N")?)
        .u32(u32_of(s.ne12, "ne12")?)
        .u32(s.r2 as u32)
        .u32(s.r3 as u32)
        .u32(m[0] as u32)
        .u32(n[0] as u32);
    let p = w.split_scales(layout_params(p, w, x, d, false));
    let tile = 16 * u64::from(side);
    let groups = [
        u32_of((m[1] - m[0]).div_ceil(tile), "row tiles")?,
        u32_of((n[1] - n[0]).div_ceil(tile), "column tiles")?,
        u32_of(s.batches(), "batches")?,
    ];
    let bindings = [w.binding.clone(), x.binding.clone(), d.binding.clone()];
    // Trusted: tile loads clamp rows and columns to the last one and test
    // K where a step runs past it (K_TAIL); stores are guarded by M and N;
    // conformance with guard regions passes with and without runtime
    // checks, which cost 3x on an H200.
    e.dispatch(&key, Checks::Trusted, &bindings, &p, groups)
}

/// Cooperative-matrix GEMM over the whole 16 x 16 blocks of rows
/// 0..m_full and columns 0..n_full (`full`), or its emulation.
fn coopmat(
    e: &mut Encoder,
    s: &Shape,
    w: &Weights,
    x: &Activations,
    d: &Dst,
    full: [u64; 2],
    emulated: bool,
) -> Result<(), String> {
    let [m_full, n_full] = full;
    if m_full == 0 || n_full == 0 {
        return Ok(());
    }
    let mut key = w.key(PipelineKey::new("mul_mat_coopmat", ""));
    if x.half {
        key = key.define("X_F16", "");
    }
    let (mut key, checks) = if emulated {
        (
            key.wg(plan::TILED_WG).define("EMULATE_COOPMAT", ""),
            Checks::On,
        )
    } else {
        // Trusted: every storage access of the kernel is guarded by the
        // tensor bounds or covers whole 16 x 16 blocks inside m_full x
        // n_full, and its workgroup indices are bounded by the tile shapes
        // (see the comment at the top of mul_mat_coopmat.wgsl).
        let sg = e.facts().subgroup_size.0;
        (key.wg(plan::COOPMAT_SUBGROUPS * sg), Checks::Trusted)
    };
    if !emulated {
        key.path = "coopmat";
    }
    let p = Params::new()
        .u32(u32_of(s.k, "K")?)
        .u32(u32_of(s.m, "M")?)
        .u32(u32_of(s.n, "N")?)
        .u32(u32_of(s.ne12, "ne12")?)
        .u32(s.r2 as u32)
        .u32(s.r3 as u32)
        .u32(m_full as u32)
        .u32(n_full as u32);
    let batches = s.batches();
    let tiles = [
        m_full.div_ceil(plan::COOPMAT_TILE),
        n_full.div_ceil(plan::COOPMAT_TILE),
    ];
    let plane = m_full * n_full * batches;
    let target = plan::coopmat_groups_target(e.facts());
    let (splits, k_chunk) = match plan::coopmat_split(
        e.facts().tuning.matmul_splitk,
        tiles[0] * tiles[1] * batches,
        s.k,
        target,
    ) {
        (n, chunk) if n > 1 && e.facts().fits_binding(4 * plane * n) => (n, chunk),
        _ => (1, s.k),
    };
    // A split stores a dense m_full x n_full x batches plane of partial
    // sums in scratch memory; mul_mat_split_sum then adds them into dst.
    let part = if splits > 1 {
        key = key.define("SPLIT_K", "");
        Some(Dst {
            binding: e.scratch(4 * plane * splits)?,
            off: 0,
            strides: [
                1,
                m_full as u32,
                (m_full * n_full) as u32,
                (m_full * n_full * s.ne12) as u32,
            ],
        })
    } else {
        None
    };
    // Loads at or past K are tested (and zero) only when some K step
    // reaches past K: K not a multiple of the step, or the last split's
    // chunk running over.
    if !s.k.is_multiple_of(plan::COOPMAT_BK) || splits * k_chunk != s.k {
        key = key.define("K_TAIL", "");
    }
    if e.facts().tuning.matmul_colfirst {
        key = key.define("COLUMNS_FIRST", "");
    }
    let out = part.as_ref().unwrap_or(d);
    let groups = [
        u32_of(tiles[0], "row tiles")?,
        u32_of(tiles[1], "column tiles")?,
        u32_of(batches * splits, "batches x K splits")?,
    ];
    let p = w.split_scales(
        layout_params(p, w, x, out, true)
            .u32(u32_of(batches, "batches")?)
            .u32(u32_of(k_chunk, "K split")?)
            .u32(u32_of(plane, "split plane")?),
    );
    let bindings = [w.binding.clone(), x.binding.clone(), out.binding.clone()];
    e.dispatch(&key, checks, &bindings, &p, groups)?;
    let Some(part) = part else {
        return Ok(());
    };
    let dst_layout = (d.off, [d.strides[1], d.strides[2], d.strides[3]]);
    sum_split_planes(
        e,
        [part.binding, d.binding.clone()],
        [m_full, n_full, s.ne12, batches],
        splits,
        dst_layout,
    )
}

/// Adds the `splits` planes of partial sums of a GEMM split along K
/// (`bindings[0]`: dense planes of f32 over dims `[m, n, ne12, batches]`,
/// m fastest) into dst (`bindings[1]`, dst rows dense, offset and strides
/// of dims 1..3 in f32s) with `mul_mat_split_sum`.
pub(super) fn sum_split_planes(
    e: &mut Encoder,
    bindings: [Binding; 2],
    [m, n, ne12, batches]: [u64; 4],
    splits: u64,
    (d_off, d_strides): (u32, [u32; 3]),
) -> Result<(), String> {
    let plane = m * n * batches;
    let sum_key = PipelineKey::new("mul_mat_split_sum", "").wg(CONVERT_WG);
    let p = Params::new()
        .u32(u32_of(m, "M")?)
        .u32(u32_of(n, "N")?)
        .u32(u32_of(ne12, "ne12")?)
        .u32(u32_of(plane, "split plane")?)
        .u32(u32_of(splits, "splits")?)
        .u32(d_off)
        .u32(d_strides[0])
        .u32(d_strides[1])
        .u32(d_strides[2]);
    e.dispatch_linear(
        &sum_key,
        Checks::On,
        &bindings,
        &p,
        plane.div_ceil(u64::from(CONVERT_WG)),
    )
}
