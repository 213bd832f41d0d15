//! Element-wise ops of one tensor: UNARY (every [`UnaryOp`]), SQR, SQRT,
//! LOG, SIN, COS, SCALE, CLAMP and FILL (kernel `shaders/wgsl/unary.wgsl`),
//! and GLU (every [`GluOp`], on two tensors or on the halves of one;
//! kernel `shaders/wgsl/glu.wgsl`). f32 and f16, any element strides,
//! in place when the destination is exactly src0.

use backplane_abi::{DType, Op, TensorDesc, UnaryOp};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::fusion;
use crate::ops::{
    dtype, glu_op, glu_variant, nb_elems, ne_u32, overlaps, src, src_index, type_name, want_type,
};
use crate::pipelines::Checks;

/// Types the element-wise kernels read and write.
const FLOATS: &[DType] = &[DType::F32, DType::F16];

/// Workgroup size of both kernels (one invocation per element).
const WG: u32 = 256;

/// Whether UNARY, GLU, SCALE, CLAMP, FILL, LOG, SQR, SQRT, SIN or COS
/// `graph[node]` runs on this backend; Err names what does not.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the shapes and the function codes; what
    // follows is what the kernels implement (f32, f16) and index.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    want_type("src0", a, FLOATS)?;
    let op = d.op().map_err(|e| e.to_string())?;
    if op == Op::Glu {
        glu_op(d)?;
        if d.src(1).is_some() {
            check_indexable("src1", src(graph, node, 1)?)?;
        }
    } else {
        elementwise_variant(d)?;
    }
    check_indexable("src0", a)?;
    check_indexable("dst", d)?;
    u32::try_from(d.nelements())
        .map_err(|_| format!("{} elements do not fit u32", d.nelements()))?;
    Ok(())
}

/// Records the kernel of `graph[node]` (supported).
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let op = e.graph[node].op().map_err(|x| x.to_string())?;
    if op == Op::Glu {
        encode_glu(e, node)
    } else {
        encode_elementwise(e, node)
    }
}

/// Strides in whole elements and dims that fit u32.
fn check_indexable(what: &str, t: &TensorDesc) -> Result<(), String> {
    let elem = dtype(t)?.type_size() as u64;
    nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
    ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    Ok(())
}

/// The `unary.wgsl` variant of a non-GLU node (`OP_<NAME>` in the shader).
fn elementwise_variant(d: &TensorDesc) -> Result<&'static str, String> {
    let op = d.op().map_err(|e| e.to_string())?;
    Ok(match op {
        Op::Sqr => "sqr",
        Op::Sqrt => "sqrt",
        Op::Log => "log",
        Op::Sin => "sin",
        Op::Cos => "cos",
        Op::Scale => "scale",
        Op::Clamp => "clamp",
        Op::Fill => "fill",
        Op::Unary => {
            let f = UnaryOp::from_code(d.param_i32(0) as u32).map_err(|e| e.to_string())?;
            unary_variant(f)
        }
        other => return Err(format!("{other} is not an element-wise op")),
    })
}

/// The variant name of a UNARY function.
fn unary_variant(f: UnaryOp) -> &'static str {
    match f {
        UnaryOp::Abs => "abs",
        UnaryOp::Sgn => "sgn",
        UnaryOp::Neg => "neg",
        UnaryOp::Step => "step",
        UnaryOp::Tanh => "tanh",
        UnaryOp::Elu => "elu",
        UnaryOp::Relu => "relu",
        UnaryOp::Sigmoid => "sigmoid",
        UnaryOp::Gelu => "gelu",
        UnaryOp::GeluQuick => "gelu_quick",
        UnaryOp::Silu => "silu",
        UnaryOp::Hardswish => "hardswish",
        UnaryOp::Hardsigmoid => "hardsigmoid",
        UnaryOp::Exp => "exp",
        UnaryOp::Expm1 => "expm1",
        UnaryOp::Softplus => "softplus",
        UnaryOp::GeluErf => "gelu_erf",
        UnaryOp::Xielu => "xielu",
        UnaryOp::Floor => "floor",
        UnaryOp::Ceil => "ceil",
        UnaryOp::Round => "round",
        UnaryOp::Trunc => "trunc",
    }
}

/// Fails when `dst` shares bytes with a source without being exactly it:
/// one invocation would read what another writes.
fn refuse_partial_alias(what: &str, source: &TensorDesc, dst: &TensorDesc) -> Result<(), String> {
    if overlaps(source, dst) {
        return Err(format!(
            "dst partially overlaps {what}; only an exact in-place alias is supported"
        ));
    }
    Ok(())
}

fn encode_elementwise(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let (ta, td) = (dtype(a)?, dtype(d)?);
    let variant = elementwise_variant(d)?;
    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    let inplace = d.buffer == a.buffer && d.offset == a.offset && d.nb == a.nb;
    if !inplace {
        refuse_partial_alias("src0", a, d)?;
    }
    let mut key = PipelineKey::new("unary", variant)
        .ty("SRC0", type_name(ta))
        .ty("DST", type_name(td))
        .wg(WG);
    key.inplace = inplace;
    let (sa, sd) = (ta.type_size() as u64, td.type_size() as u64);
    // UNARY keeps its function in op_params[0] and its f32 parameters
    // after it; SCALE, CLAMP and FILL start with theirs.
    let first_param = if d.op().ok() == Some(Op::Unary) { 1 } else { 0 };
    let ne = ne_u32(d)?;
    let params = Params::new()
        .u32(d.nelements() as u32)
        .u32(ne[0])
        .u32(ne[1])
        .u32(ne[2])
        .u32(ba.elem_offset(sa)?)
        .u32x4(nb_elems(a, sa)?)
        .u32(bd.elem_offset(sd)?)
        .u32x4(nb_elems(d, sd)?)
        .f32(d.param_f32(first_param))
        .f32(d.param_f32(first_param + 1))
        .f32(d.param_f32(first_param + 2))
        .f32(d.param_f32(first_param + 3));
    let n = d.nelements() as u64;
    let bindings = if inplace { vec![ba] } else { vec![ba, bd] };
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        n.div_ceil(u64::from(WG)),
    )
}

fn encode_glu(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let (ta, td) = (dtype(a)?, dtype(d)?);
    let f = glu_op(d)?;
    let swapped = d.param_i32(1) != 0;
    let (sa, sd) = (ta.type_size() as u64, td.type_size() as u64);
    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    refuse_partial_alias("src0", a, d)?;
    let d_off = bd.elem_offset(sd)?;
    let a_off = ba.elem_offset(sa)?;
    let a_nb = nb_elems(a, sa)?;
    let mut key = PipelineKey::new("glu", glu_variant(f)).ty("SRC0", type_name(ta));
    let (x_off, x_nb, g_off, g_nb, mut bindings) = match d.src(1) {
        Some(_) => {
            let ib = src_index(g, node, 1)?;
            let b = &g[ib];
            let tb = dtype(b)?;
            let sb = tb.type_size() as u64;
            let bb = e.binding(ib)?;
            refuse_partial_alias("src1", b, d)?;
            key = key.ty("SRC1", type_name(tb));
            let (b_off, b_nb) = (bb.elem_offset(sb)?, nb_elems(b, sb)?);
            (a_off, a_nb, b_off, b_nb, vec![ba, bb, bd])
        }
        None => {
            // x and g are the halves of each src0 row; the second half
            // starts ne0 (of dst) elements in.
            let half = ne_u32(d)?[0] * a_nb[0];
            let (x_off, g_off) = if swapped {
                (a_off + half, a_off)
            } else {
                (a_off, a_off + half)
            };
            key = key.define("SPLIT", "");
            (x_off, a_nb, g_off, a_nb, vec![ba, bd])
        }
    };
    let mut key = key.ty("DST", type_name(td)).wg(WG);
    // The quantized copy the next MUL_MAT would make of dst, written here
    // and kept for it (see `ops::fusion`).
    let quantized = match td {
        DType::F32 if bindings.len() < e.facts().max_storage_buffers as usize => {
            fusion::quantized_copy_for_next(e, node)?
        }
        _ => None,
    };
    let kept = match quantized {
        Some((bytes, origin)) => {
            e.forget_kept_copy();
            let scratch = e.scratch(bytes)?;
            key = key.define("QUANTIZE", "");
            bindings.push(scratch.clone());
            Some((origin, scratch))
        }
        None => None,
    };
    let ne = ne_u32(d)?;
    let params = Params::new()
        .u32(d.nelements() as u32)
        .u32(ne[0])
        .u32(ne[1])
        .u32(ne[2])
        .u32(x_off)
        .u32x4(x_nb)
        .u32(g_off)
        .u32x4(g_nb)
        .u32(d_off)
        .u32x4(nb_elems(d, sd)?)
        .f32(d.param_f32(2))
        .f32(d.param_f32(3));
    let n = d.nelements() as u64;
    // With the copy, four elements per invocation.
    let invocations = if kept.is_some() { n / 4 } else { n };
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        invocations.div_ceil(u64::from(WG)),
    )?;
    if let Some((origin, scratch)) = kept {
        e.keep_copy(origin, scratch);
    }
    Ok(())
}
