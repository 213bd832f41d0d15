//! Ops: what a device accepts ([`supports`], always with a reason when
//! not) and how each node is encoded ([`encode`]), one module per op
//! family next to its WGSL in `shaders/wgsl/` (same name).
//!
//! Each family module has `supports(facts, graph, node) -> Result<(), String>`
//! (Err = the refusal reason) and `encode(encoder, node) -> Result<(), String>`.
//! [`supports`] first applies the op contract (the op's own rules) and the
//! checks every op shares here: f16 only with SHADER_F16, every tensor
//! within the binding limit.

mod attention;
pub(crate) use attention::native_attention_runs;
mod binary;
mod conv;
mod epilogue;
pub(crate) mod fusion;
mod layout;
pub(crate) mod matmul;
mod norm;
mod reduce;
mod rope;
#[cfg(test)]
mod shader_check;
mod softmax;
mod ssm;
mod unary;

use backplane_abi::contract;
pub(crate) use backplane_abi::support::{dtype, sources, want_type};
use backplane_abi::{DType, GluOp, Op, TensorDesc};

use crate::encode::Encoder;
use crate::facts::Facts;

/// Whether node `d` computes something (views and leaves run nothing).
pub(crate) fn is_compute(d: &TensorDesc) -> bool {
    d.op().is_ok_and(|op| op != Op::None && !op.is_view())
}

/// The next node after `i` that computes something.
pub(crate) fn next_compute(graph: &[TensorDesc], i: usize) -> Option<usize> {
    (i + 1..graph.len()).find(|&j| is_compute(&graph[j]))
}

/// Whether the op of `graph[i]` is `op`.
pub(crate) fn is_op(graph: &[TensorDesc], i: usize, op: Op) -> bool {
    graph[i].op().is_ok_and(|o| o == op)
}

/// The GLU function of a GLU node.
pub(crate) fn glu_op(d: &TensorDesc) -> Result<GluOp, String> {
    GluOp::from_code(d.param_i32(0) as u32).map_err(|e| e.to_string())
}

/// The kernel variant name of a GLU function (glu.wgsl and the fused
/// mat-vec's `OP_` defines).
pub(crate) fn glu_variant(f: GluOp) -> &'static str {
    match f {
        GluOp::Reglu => "reglu",
        GluOp::Geglu => "geglu",
        GluOp::Swiglu => "swiglu",
        GluOp::SwigluOai => "swiglu_oai",
        GluOp::GegluErf => "geglu_erf",
        GluOp::GegluQuick => "geglu_quick",
    }
}

/// Source `i` of `graph[node]`, or an error naming it.
pub(crate) fn src(graph: &[TensorDesc], node: usize, i: usize) -> Result<&TensorDesc, String> {
    graph[node]
        .src(i)
        .and_then(|s| graph.get(s))
        .ok_or_else(|| format!("source {i} missing"))
}

/// Graph index of source `i` of `graph[node]`.
pub(crate) fn src_index(graph: &[TensorDesc], node: usize, i: usize) -> Result<usize, String> {
    graph[node]
        .src(i)
        .filter(|&s| s < graph.len())
        .ok_or_else(|| format!("source {i} missing"))
}

/// Largest workgroup the row kernels use.
const MAX_ROW_WG: u32 = 256;

/// Smallest workgroup the row kernels use.
const MIN_ROW_WG: u32 = 32;

/// Workgroup size of a kernel that runs one workgroup per row of `ne0`
/// elements: a power of two covering the row, between 32 and 256 and
/// within the device's invocation limit.
pub(crate) fn row_workgroup_size(facts: &Facts, ne0: i64) -> u32 {
    let want = u64::try_from(ne0).unwrap_or(1);
    pow2_workgroup(facts, want, MIN_ROW_WG, MAX_ROW_WG)
}

/// The power of two that covers `want` invocations, at least `min` and at
/// most `cap` and the device's invocation limit (the limit rounded down to
/// a power of two; `min` yields to it).
pub(crate) fn pow2_workgroup(facts: &Facts, want: u64, min: u32, cap: u32) -> u32 {
    let limit = cap.min(facts.max_invocations.max(1));
    let limit = 1 << (31 - limit.leading_zeros());
    let want = want.clamp(1, u64::from(limit)) as u32;
    want.next_power_of_two().clamp(min.min(limit), limit)
}

/// Whether the byte ranges of `a` and `b` intersect.
pub(crate) fn overlaps(a: &TensorDesc, b: &TensorDesc) -> bool {
    a.buffer == b.buffer
        && a.offset < b.offset.saturating_add(b.nbytes())
        && b.offset < a.offset.saturating_add(a.nbytes())
}

/// Whether `d` and `a` are the same memory with the same layout, so the
/// kernel can bind them once.
pub(crate) fn same_memory(d: &TensorDesc, a: &TensorDesc) -> bool {
    d.buffer == a.buffer && d.offset == a.offset && d.nb == a.nb && d.ne == a.ne
}

/// The same bytes of the same buffer, whatever the layouts (a reshape).
pub(crate) fn same_bytes(a: &TensorDesc, b: &TensorDesc) -> bool {
    a.buffer == b.buffer && a.offset == b.offset && a.nbytes() == b.nbytes()
}

/// Number of rows (dims 1..3) of `d`, as workgroups.
pub(crate) fn row_count(d: &TensorDesc) -> u64 {
    d.ne[1..].iter().map(|&n| n.max(0) as u64).product()
}

/// The shader type name of a dtype (`f32`, `f16`, `q4_0`, ...).
pub(crate) fn type_name(t: DType) -> &'static str {
    t.name()
}

/// `ne` as u32, or an error when a dimension does not fit.
pub(crate) fn ne_u32(d: &TensorDesc) -> Result<[u32; 4], String> {
    let mut out = [0u32; 4];
    for (o, &n) in out.iter_mut().zip(&d.ne) {
        *o = u32::try_from(n).map_err(|_| format!("dimension {n} does not fit u32"))?;
    }
    Ok(out)
}

/// Byte strides in units of `elem` bytes; an error when one is not a
/// multiple (a view the typed kernels cannot index).
pub(crate) fn nb_elems(d: &TensorDesc, elem: u64) -> Result<[u32; 4], String> {
    let mut out = [0u32; 4];
    for (o, &b) in out.iter_mut().zip(&d.nb) {
        if b % elem != 0 {
            return Err(format!(
                "stride {b} bytes is not a multiple of the {elem}-byte element"
            ));
        }
        *o = u32::try_from(b / elem).map_err(|_| format!("stride {b} does not fit u32"))?;
    }
    Ok(out)
}

/// Checks the element strides and sizes of each named tensor.
pub(crate) fn check_layout(tensors: &[(&str, &TensorDesc)]) -> Result<(), String> {
    for (what, t) in tensors {
        let elem = dtype(t)?.type_size() as u64;
        nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// Element offset and strides of graph tensor `i`, with its binding.
pub(crate) fn elem_layout(
    e: &Encoder,
    i: usize,
) -> Result<(crate::encode::Binding, u32, [u32; 4]), String> {
    let t = &e.graph[i];
    let elem = dtype(t)?.type_size() as u64;
    let b = e.binding(i)?;
    let off = b.elem_offset(elem)?;
    Ok((b, off, nb_elems(t, elem)?))
}

/// Checks every op shares, then the family's own.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} out of range"))?;
    let op = d.op().map_err(|e| e.to_string())?;
    let srcs = sources(graph, d)?;
    // The op's own rules (types, shapes, parameters): the family checks
    // below add only what is this device's.
    contract::check(op, d, &srcs).map_err(|r| r.to_string())?;
    let mut n_bindings = 1;
    for (i, t) in std::iter::once(Some(d))
        .chain(srcs.iter().copied())
        .enumerate()
    {
        let Some(t) = t else { continue };
        n_bindings += usize::from(i > 0);
        let ty = dtype(t)?;
        if ty == DType::F16 && !facts.f16 {
            return Err("device lacks SHADER_F16".into());
        }
        // The binding starts at the offset rounded down to the alignment.
        let span = t.nbytes() + facts.offset_alignment;
        if !facts.fits_binding(span) {
            let what = if i == 0 {
                "dst".to_string()
            } else {
                format!("src{}", i - 1)
            };
            return Err(facts.binding_refusal(&what, t.nbytes()));
        }
    }
    // Tensors are storage bindings; the parameters are a uniform. Kernels
    // that also bind the error flag check for the extra slot themselves.
    if n_bindings > facts.max_storage_buffers as usize {
        return Err(format!(
            "{n_bindings} tensors > {} storage buffers per shader stage",
            facts.max_storage_buffers
        ));
    }
    match op {
        Op::None | Op::View | Op::Reshape | Op::Permute | Op::Transpose => Ok(()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::supports(facts, graph, node),
        Op::Unary
        | Op::Glu
        | Op::Scale
        | Op::Clamp
        | Op::Fill
        | Op::Log
        | Op::Sqr
        | Op::Sqrt
        | Op::Sin
        | Op::Cos => unary::supports(facts, graph, node),
        Op::Cpy | Op::Cont | Op::Concat | Op::Repeat | Op::Pad => {
            layout::supports(facts, graph, node)
        }
        Op::GetRows => layout::get_rows::supports(facts, graph, node),
        Op::SetRows => layout::set_rows::supports(facts, graph, node),
        Op::MulMat | Op::MulMatId => matmul::supports(facts, graph, node),
        Op::FlashAttnExt => attention::supports(facts, graph, node),
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::supports(facts, graph, node),
        Op::SoftMax => softmax::supports(facts, graph, node),
        Op::Rope => rope::supports(facts, graph, node),
        Op::Sum | Op::SumRows | Op::Cumsum | Op::Argmax | Op::Argsort | Op::TopK => {
            reduce::supports(facts, graph, node)
        }
        Op::Conv2d | Op::Im2col => conv::supports(facts, graph, node),
        Op::SsmConv | Op::SsmScan => ssm::supports(facts, graph, node),
    }
}

/// Encodes `graph[node]` (supported, not a view).
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let op = e.graph[node].op().map_err(|x| x.to_string())?;
    match op {
        Op::None | Op::View | Op::Reshape | Op::Permute | Op::Transpose => Ok(()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::encode(e, node),
        Op::Unary
        | Op::Glu
        | Op::Scale
        | Op::Clamp
        | Op::Fill
        | Op::Log
        | Op::Sqr
        | Op::Sqrt
        | Op::Sin
        | Op::Cos => unary::encode(e, node),
        Op::Cpy | Op::Cont | Op::Concat | Op::Repeat | Op::Pad => layout::encode(e, node),
        Op::GetRows => layout::get_rows::encode(e, node),
        Op::SetRows => layout::set_rows::encode(e, node),
        Op::MulMat | Op::MulMatId => matmul::encode(e, node),
        Op::FlashAttnExt => attention::encode(e, node),
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::encode(e, node),
        Op::SoftMax => softmax::encode(e, node),
        Op::Rope => rope::encode(e, node),
        Op::Sum | Op::SumRows | Op::Cumsum | Op::Argmax | Op::Argsort | Op::TopK => {
            reduce::encode(e, node)
        }
        Op::Conv2d | Op::Im2col => conv::encode(e, node),
        Op::SsmConv | Op::SsmScan => ssm::encode(e, node),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_kernels_cover_the_row_with_a_power_of_two_up_to_256() {
        let mut f = crate::facts::test_gpu();
        let sizes: Vec<u32> = [0, 10, 100, 256, 5000]
            .iter()
            .map(|&n| row_workgroup_size(&f, n))
            .collect();
        assert_eq!(sizes, vec![32, 32, 128, 256, 256]);
        f.max_invocations = 48;
        assert_eq!(row_workgroup_size(&f, 5000), 32);
        f.max_invocations = 16;
        assert_eq!(row_workgroup_size(&f, 5000), 16);
    }
}
