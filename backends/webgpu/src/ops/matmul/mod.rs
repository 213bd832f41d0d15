//! MUL_MAT and MUL_MAT_ID: weights (src0) f32, f16, bf16, q4_0, q4_1, q5_0,
//! q5_1, q8_0, q2_K..q6_K; activations (src1) f32 or f16 with any strides;
//! dst f32; src1 batches broadcast over src0's (ggml: ne12 % ne02 == 0).
//!
//! Three kernels, chosen by [`plan::choose_path`] from the facts and shape:
//! - `mul_mat_vec` for N <= 8: rows split into units read once for up to
//!   8 columns, subgroup reductions when the device has them; legacy quants,
//!   q4_K and q6_K multiply integers with activations quantized first by
//!   `mul_mat_quantize` (ggml's q8_1);
//! - `mul_mat_tiled`: 64 x 64 register-tiled f32 GEMM, weights dequantized
//!   while staged in workgroup memory;
//! - `mul_mat_coopmat`: 128 x 128 cooperative-matrix GEMM (16x16x16 half
//!   inputs, f32 accumulation) for large shapes on devices with it;
//!   `mul_mat_tiled` fills the edges; K is split over more workgroups
//!   (partial sums added by `mul_mat_split_sum`) when the tiles are too
//!   few to fill the GPU ([`plan::coopmat_split`]).
//!
//! Activations the kernels cannot read as aligned f32 vec4 rows (f16,
//! transposed or permuted views, odd K) are first copied to scratch memory
//! by `mul_mat_convert`. MUL_MAT_ID runs the mat-vec kernel once per
//! (slot, token) pair. Dequantization lives in `common/quant.wgsl`.
//!
//! Environment: `BACKPLANE_WEBGPU_MATMUL=<path>[,f32x]` forces a path
//! (`matvec`, `matvec-wg`, `tiled`, `tiled8`, `coopmat`, `coopmat-emulated`;
//! see [`plan::forced_path`]) and `f32x` makes the cooperative-matrix kernel
//! read f32 activations in place (tuning words `rows=N`, `wg=N`, `xf32`,
//! `nohalf8`, `noquant16`, `splitk=N`: see [`plan`]); `BACKPLANE_WEBGPU_MATMUL_TRACE=1` prints the
//! path and weight layout of every MUL_MAT.

mod kernels;
pub mod native;
pub(crate) use kernels::Q8Copy;
pub(crate) use kernels::glu::{self as glu_pair, GluPair};
pub(crate) use kernels::half_rows;
pub(crate) use kernels::{MATVEC_BINDINGS, MatVecExtra};
pub(crate) mod plan;
#[cfg(test)]
mod tests;

use backplane_abi::{DType, Op, TensorDesc};

use crate::encode::Encoder;
use crate::facts::Facts;
use crate::kept::CopyOrigin;
use crate::ops::{nb_elems, src, want_type};
use plan::{ACTIVATION_TYPES, Path, Shape, WEIGHT_TYPES};

/// The `common/quant` flag of a block type (`QUANT_Q4_0`, ...).
pub(crate) fn quant_flag(t: DType) -> Option<&'static str> {
    Some(match t {
        DType::Q4_0 => "QUANT_Q4_0",
        DType::Q4_1 => "QUANT_Q4_1",
        DType::Q5_0 => "QUANT_Q5_0",
        DType::Q5_1 => "QUANT_Q5_1",
        DType::Q8_0 => "QUANT_Q8_0",
        DType::Q2_K => "QUANT_Q2_K",
        DType::Q3_K => "QUANT_Q3_K",
        DType::Q4_K => "QUANT_Q4_K",
        DType::Q5_K => "QUANT_Q5_K",
        DType::Q6_K => "QUANT_Q6_K",
        _ => return None,
    })
}

/// Checks the weights: a supported type, dense rows, offsets the kernels
/// can address (even bytes for block formats, whole elements otherwise).
fn check_weights(a: &TensorDesc) -> Result<DType, String> {
    let t = want_type("src0", a, WEIGHT_TYPES)?;
    let size = t.type_size() as u64;
    if a.ne[0] != t.block_size() as i64 && a.nb[0] != size {
        return Err(format!("src0 rows are not dense (nb0 = {} bytes)", a.nb[0]));
    }
    let unit = if t.is_quantized() { 2 } else { size };
    if !a.offset.is_multiple_of(unit) || a.nb[1..].iter().any(|&s| !s.is_multiple_of(unit)) {
        return Err(format!(
            "src0 offset or strides are not multiples of {unit} bytes"
        ));
    }
    if a.nb[1..].iter().any(|&s| s > u64::from(u32::MAX)) {
        return Err("src0 stride does not fit u32".into());
    }
    Ok(t)
}

/// Whether [`half_rows`] can convert `t`, a block-quantized tensor: the
/// types and addressing the weight conversion reads, and rows of whole
/// runs of 4. Says why not otherwise.
pub(crate) fn converts_to_half_rows(t: &TensorDesc) -> Result<DType, String> {
    let ty = check_weights(t)?;
    if !ty.is_quantized() || t.ne[0] % 4 != 0 {
        return Err(format!(
            "{} rows of {} are not converted to half rows",
            ty.name(),
            t.ne[0]
        ));
    }
    Ok(ty)
}

/// Checks the activations and dst shared by MUL_MAT and MUL_MAT_ID.
fn check_activations_dst(b: &TensorDesc, d: &TensorDesc) -> Result<DType, String> {
    let tb = want_type("src1", b, ACTIVATION_TYPES)?;
    nb_elems(b, tb.type_size() as u64).map_err(|e| format!("src1: {e}"))?;
    nb_elems(d, 4).map_err(|e| format!("dst: {e}"))?;
    if !d.offset.is_multiple_of(4) {
        return Err("dst offset is not a multiple of 4 bytes".into());
    }
    Ok(tb)
}

/// Refuses converted activations over the binding limit (f32 when the
/// kernel cannot read src1 in place, half for the cooperative-matrix path).
fn check_scratch(
    facts: &Facts,
    b: &TensorDesc,
    tb: DType,
    s: &Shape,
    half: bool,
) -> Result<(), String> {
    let f32_bytes = plan::converted_bytes(s);
    let (bytes, what) = if half {
        (f32_bytes / 2, "src1 converted to half")
    } else if !plan::activations_direct(facts, b, tb) {
        (f32_bytes, "src1 converted to f32")
    } else {
        return Ok(());
    };
    if !facts.fits_binding(bytes) {
        return Err(facts.binding_refusal(what, bytes));
    }
    Ok(())
}

/// Whether dst rows are dense (stride 1 along M).
fn dst_dense(d: &TensorDesc) -> bool {
    d.nb[0] == 4
}

/// Accepts MUL_MAT / MUL_MAT_ID nodes the kernels handle, or says why not.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    match d.op().map_err(|e| e.to_string())? {
        Op::MulMatId => return supports_id(facts, graph, node),
        Op::MulMat => {}
        op => return Err(format!("{op} is not a matmul op")),
    }
    let a = src(graph, node, 0)?;
    let b = src(graph, node, 1)?;
    let ta = check_weights(a)?;
    let tb = check_activations_dst(b, d)?;
    // The op contract has checked the result's shape.
    let s = Shape::of(a, b)?;
    let path = plan::choose_path(facts, ta, &s, dst_dense(d), facts.tuning.matmul_path);
    let half = matches!(path, Path::CoopMat { .. }) && !facts.tuning.matmul_f32x;
    check_scratch(facts, b, tb, &s, half)?;
    let max = u64::from(facts.max_groups_per_dim);
    match path {
        Path::MatVec { .. } => {}
        Path::Tiled | Path::CoopMat { .. } => {
            let groups = [
                s.m.div_ceil(plan::TILED_TILE),
                s.n.div_ceil(plan::TILED_TILE),
                s.batches(),
            ];
            if groups.iter().any(|&g| g > max) {
                return Err(format!(
                    "grid {groups:?} exceeds {max} workgroups per dimension"
                ));
            }
        }
    }
    if s.batches() * s.m.div_ceil(u64::from(plan::matvec_rows(&facts.tuning))) * s.n > max * max {
        return Err("too many workgroups".into());
    }
    Ok(())
}

/// MUL_MAT_ID: experts src0 [K, M, E], activations src1 [K, ne11, T],
/// ids i32 [n_used, T] with n_used % ne11 == 0, dst [M, n_used, T].
fn supports_id(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    let b = src(graph, node, 1)?;
    let ids = src(graph, node, 2)?;
    check_weights(a)?;
    let tb = check_activations_dst(b, d)?;
    // The op contract has checked the types and shapes.
    nb_elems(ids, 4).map_err(|e| format!("ids: {e}"))?;
    let (an, bn, idn) = (a.ne, b.ne, ids.ne);
    if facts.max_storage_buffers < 5 {
        return Err(format!(
            "needs 5 storage buffers, device has {}",
            facts.max_storage_buffers
        ));
    }
    let s = Shape {
        k: an[0] as u64,
        m: an[1] as u64,
        n: bn[1] as u64,
        ne12: bn[2] as u64,
        ne13: 1,
        r2: 1,
        r3: 1,
    };
    check_scratch(facts, b, tb, &s, false)?;
    let groups = s.m.div_ceil(u64::from(plan::matvec_rows(&facts.tuning)))
        * (idn[0] as u64)
        * (idn[1] as u64);
    let max = u64::from(facts.max_groups_per_dim);
    if groups > max * max {
        return Err("too many workgroups".into());
    }
    Ok(())
}

/// Encodes a gate/up/GLU fusion (`kernels::glu`) as one kernel, or node
/// by node when a native kernel takes a product or the kernel cannot bind
/// them. `quantized`: the GLU result's quantized copy for the next
/// MUL_MAT, if it reads one.
pub(crate) fn encode_glu_pair(
    e: &mut Encoder,
    f: &GluPair,
    quantized: Option<(u64, CopyOrigin)>,
) -> Result<(), String> {
    let elsewhere = [f.first, f.second]
        .iter()
        .any(|&n| native::choice(e, n).is_ok());
    if !elsewhere && glu_pair::encode(e, f, quantized)? {
        return Ok(());
    }
    f.nodes().into_iter().try_for_each(|n| {
        e.begin_node(n);
        crate::ops::encode(e, n)
    })
}

/// Encodes MUL_MAT `node` as the mat-vec of one column with `extra`
/// (`ops::epilogue`); `Ok(false)`, and nothing encoded, when a native
/// kernel takes the product or the mat-vec would not.
pub(crate) fn encode_with_extra(
    e: &mut Encoder,
    node: usize,
    extra: &MatVecExtra,
) -> Result<bool, String> {
    if native::choice(e, node).is_ok() {
        return Ok(false);
    }
    kernels::encode_with(e, node, Some(extra))
}

/// Encodes a supported MUL_MAT / MUL_MAT_ID node.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::MulMatId => kernels::encode_id(e, node),
        _ => {
            // An empty product needs no kernel, native or not.
            if e.graph[node].nelements() != 0 && native::try_encode(e, node)? {
                return Ok(());
            }
            kernels::encode(e, node)
        }
    }
}

/// Whether MUL_MAT `node` reads its src1 through a quantized copy (the
/// integer mat-vec, WGSL or native), decided as [`encode`] decides it.
pub(crate) fn quantizes_src1(e: &Encoder, node: usize) -> bool {
    match native::choice(e, node) {
        // The native mat-vec reads the same copy.
        Ok(kernel) => kernel.reads_quantized_src1(),
        Err(_) => kernels::wgsl_quantizes_src1(e, node),
    }
}
