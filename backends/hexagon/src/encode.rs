//! From graph nodes to DSP requests: which nodes the DSP runs (with the
//! reason when not) and the request each becomes. `supports_op` and
//! `graph_compute` both go through [`plan_node`], so what is claimed is
//! exactly what is sent.

use backplane_abi::support::not_implemented;
use backplane_abi::{DType, GluOp, Op, TensorDesc, rope_mode};

use crate::msg::{HtpOp, HtpReq, HtpTensor, MAX_SRC, kind};

/// The backend's name in refusals ([`refused`]).
const BACKEND: &str = "Hexagon";

/// The refusal of `what` (an op, or what of one) the DSP has no kernel
/// for, in the wording every backend shares.
fn refused(what: impl std::fmt::Display) -> String {
    not_implemented(BACKEND, what)
}

/// Float types the row kernels read and write.
const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn dtype(graph: &[TensorDesc], i: usize) -> Result<DType, String> {
    graph
        .get(i)
        .ok_or_else(|| format!("tensor {i} is not in the graph ({} tensors)", graph.len()))?
        .dtype()
        .map_err(|e| e.to_string())
}

/// Refuses a type the DSP does not implement, in the op contract's wording.
fn one_of(what: &str, t: DType, allowed: &[DType]) -> Result<(), String> {
    if allowed.contains(&t) {
        return Ok(());
    }
    Err(backplane_abi::support::implemented_types(what, t, allowed))
}

/// A tensor as the DSP sees it (buffer id and offset taken from the descriptor).
pub fn htp_tensor(d: &TensorDesc) -> Result<HtpTensor, String> {
    let mut t = HtpTensor {
        buf: d.buffer,
        offset: d.offset,
        ty: d.dtype,
        ..HtpTensor::default()
    };
    for k in 0..4 {
        t.ne[k] = u32::try_from(d.ne[k])
            .map_err(|_| format!("ne[{k}] = {} does not fit the DSP's u32", d.ne[k]))?;
        t.nb[k] = u32::try_from(d.nb[k])
            .map_err(|_| format!("nb[{k}] = {} does not fit the DSP's u32", d.nb[k]))?;
    }
    Ok(t)
}

/// Rows of a weight are read densely.
fn dense_rows(what: &str, d: &TensorDesc) -> Result<(), String> {
    if d.is_contiguous_rows() {
        Ok(())
    } else {
        Err(format!("{what} rows must be contiguous"))
    }
}

/// A node planned for the DSP.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The request, tensors naming their buffer ids and offsets.
    pub req: HtpReq,
    /// Graph indices of the tensors it touches (sources, then the node).
    pub tensors: Vec<usize>,
}

/// The DSP op for `graph[node]`, `Ok(None)` for nodes that compute nothing
/// (leaves, views), or why the DSP cannot run it. Checks types, modes and
/// layouts the kernels accept; sizes against VTCM are the caller's check.
pub fn plan_node(graph: &[TensorDesc], node: usize) -> Result<Option<Planned>, String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the graph ({} tensors)", graph.len()))?;
    let op = d.op().map_err(|e| e.to_string())?;
    if op == Op::None || op.is_view() {
        return Ok(None);
    }
    // The op's own rules (types, shapes, parameters); what follows is only
    // what the DSP implements.
    backplane_abi::contract::check_node(graph, node)?;
    let dt = d.dtype().map_err(|e| e.to_string())?;
    let src = |i: usize| -> Result<usize, String> {
        d.src(i)
            .ok_or_else(|| format!("{op}: source {i} is missing"))
    };
    let mut srcs: Vec<usize> = Vec::with_capacity(MAX_SRC);
    let htp_op = match op {
        Op::MulMat => {
            let (a, b) = (src(0)?, src(1)?);
            one_of(
                "weight",
                dtype(graph, a)?,
                &[DType::F32, DType::F16, DType::Q4_0, DType::Q8_0],
            )?;
            one_of("activation", dtype(graph, b)?, &[DType::F32, DType::F16])?;
            one_of("result", dt, &[DType::F32])?;
            dense_rows("weight", &graph[a])?;
            srcs.extend([a, b]);
            HtpOp::MulMat
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let (a, b) = (src(0)?, src(1)?);
            one_of("a", dtype(graph, a)?, &FLOATS)?;
            one_of("b", dtype(graph, b)?, &FLOATS)?;
            one_of("result", dt, &FLOATS)?;
            srcs.extend([a, b]);
            match op {
                Op::Add => HtpOp::Add,
                Op::Sub => HtpOp::Sub,
                Op::Mul => HtpOp::Mul,
                _ => HtpOp::Div,
            }
        }
        Op::Scale => {
            let a = src(0)?;
            one_of("a", dtype(graph, a)?, &FLOATS)?;
            one_of("result", dt, &FLOATS)?;
            srcs.push(a);
            HtpOp::Scale
        }
        Op::RmsNorm => {
            let a = src(0)?;
            one_of("a", dtype(graph, a)?, &[DType::F32])?;
            one_of("result", dt, &[DType::F32])?;
            srcs.push(a);
            HtpOp::RmsNorm
        }
        Op::SoftMax => {
            let a = src(0)?;
            one_of("a", dtype(graph, a)?, &[DType::F32])?;
            one_of("result", dt, &[DType::F32])?;
            srcs.push(a);
            match d.src(1) {
                Some(m) => {
                    one_of("mask", dtype(graph, m)?, &[DType::F32, DType::F16])?;
                    srcs.push(m);
                }
                None if d.src(2).is_some() => srcs.push(usize::MAX),
                None => {}
            }
            if let Some(s) = d.src(2) {
                one_of("sinks", dtype(graph, s)?, &[DType::F32])?;
                srcs.push(s);
            }
            HtpOp::SoftMax
        }
        Op::Rope => {
            let (a, pos) = (src(0)?, src(1)?);
            let mode = d.param_i32(2);
            if mode != rope_mode::NORMAL && mode != rope_mode::NEOX {
                return Err(format!(
                    "{} (has normal, neox)",
                    refused(format_args!("ROPE mode {mode}"))
                ));
            }
            one_of("a", dtype(graph, a)?, &[DType::F32, DType::F16])?;
            one_of("pos", dtype(graph, pos)?, &[DType::I32])?;
            srcs.extend([a, pos]);
            if let Some(f) = d.src(2) {
                one_of("freq_factors", dtype(graph, f)?, &[DType::F32])?;
                srcs.push(f);
            }
            HtpOp::Rope
        }
        Op::Glu => {
            // The contract has checked the code.
            let f = GluOp::from_code(d.param_i32(0) as u32).map_err(|e| e.to_string())?;
            if f != GluOp::Swiglu {
                return Err(format!("{} (has SWIGLU)", refused(format_args!("GLU {f}"))));
            }
            let a = src(0)?;
            one_of("a", dtype(graph, a)?, &FLOATS)?;
            one_of("result", dt, &FLOATS)?;
            srcs.push(a);
            if let Some(b) = d.src(1) {
                one_of("b", dtype(graph, b)?, &FLOATS)?;
                srcs.push(b);
            }
            HtpOp::GluSwiglu
        }
        Op::GetRows => {
            let (a, idx) = (src(0)?, src(1)?);
            let at = dtype(graph, a)?;
            one_of(
                "a",
                at,
                &[
                    DType::F32,
                    DType::F16,
                    DType::BF16,
                    DType::Q4_0,
                    DType::Q8_0,
                ],
            )?;
            one_of("index", dtype(graph, idx)?, &[DType::I32])?;
            one_of("result", dt, &[DType::F32])?;
            if at.is_quantized() {
                dense_rows("a", &graph[a])?;
            }
            srcs.extend([a, idx]);
            HtpOp::GetRows
        }
        Op::Cpy | Op::Cont => {
            let a = src(0)?;
            one_of("source", dtype(graph, a)?, &FLOATS)?;
            one_of("destination", dt, &FLOATS)?;
            if graph[a].ne != d.ne {
                return Err(refused("CPY between different shapes"));
            }
            srcs.push(a);
            HtpOp::Cpy
        }
        _ => return Err(refused(op)),
    };
    let mut req = HtpReq {
        kind: kind::OP,
        op: htp_op as u32,
        n_src: srcs.len() as u32,
        ..HtpReq::default()
    };
    req.params = d.op_params;
    for (slot, &s) in req.src.iter_mut().zip(&srcs) {
        if s != usize::MAX {
            *slot = htp_tensor(&graph[s])?;
        }
    }
    req.dst = htp_tensor(d)?;
    let mut tensors: Vec<usize> = srcs.into_iter().filter(|&s| s != usize::MAX).collect();
    tensors.push(node);
    Ok(Some(Planned { req, tensors }))
}

/// `"9.0 MiB"`.
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    if m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}
