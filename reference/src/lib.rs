//! Reference kernels: one plain, obviously-correct implementation of every
//! op for every type it accepts. The oracle for all conformance testing.
//!
//! Precision policy:
//! - every source element is read through its byte strides and widened to
//!   f64 (quantized sources dequantize their blocks with `backplane_quant`);
//! - arithmetic and accumulation run in f64; each result is rounded once
//!   when stored (f16/bf16 results are correctly rounded from f64);
//! - where ggml's CPU kernel quantizes activations (MUL_MAT, MUL_MAT_ID and
//!   FLASH_ATTN_EXT convert src1/Q to the weight's `vec_dot_type`, f16
//!   weights round src1 to f16) the reference does *not*: it computes the
//!   exact product of the dequantized weights with the f32 activations.
//!   Backends are therefore compared against it with a tolerance;
//! - ROPE computes its angles in f32 exactly as ggml does (the iterated
//!   `theta *= theta_scale`), because at large positions that rounding is
//!   part of the result; sin and cos of those angles are taken in f64.
//!
//! Every node is checked against the op contract
//! ([`backplane_abi::contract`]) before its kernel runs, so the kernels
//! index by the shapes it guarantees; a node that breaks it is a
//! [`ComputeError`] naming the node, op and the contract's reason.

mod access;
mod attention;
mod binary;
mod conv;
mod layout;
mod matmul;
mod norm;
mod reduce;
mod rope;
mod softmax;
mod ssm;
mod unary;

use backplane_abi::contract;
use backplane_abi::{MAX_SRC, Op, TensorDesc};

use backplane_runtime::Graph;
use backplane_runtime::HostTensors;
use backplane_runtime::error::{ComputeError, describe};

pub(crate) use access::{Tensor, for_each_index, unravel};

/// Runs every node of `graph` on the host memory of `host`.
pub fn compute(graph: &Graph, host: &mut HostTensors) -> Result<(), ComputeError> {
    let data = host.pointers();
    if data.len() != graph.len() {
        return Err(ComputeError::Data {
            tensor: data.len().min(graph.len()),
            reason: format!(
                "host storage holds {} tensors but the graph has {}",
                data.len(),
                graph.len()
            ),
        });
    }
    // SAFETY: `HostTensors` gives every tensor of the graph it was built from
    // `nbytes()` bytes (views point into their root's region), and the counts
    // match.
    unsafe { compute_raw(graph.tensors(), &data) }
}

/// Runs every node of a graph given as descriptors in topological order.
///
/// # Safety
/// `data[i]` must point to the first byte of tensor `i` and be valid for
/// reads and writes of `graph[i].nbytes()` bytes; views point into their
/// roots' memory. The memory must not be accessed by anything else during
/// the call.
pub unsafe fn compute_raw(graph: &[TensorDesc], data: &[*mut u8]) -> Result<(), ComputeError> {
    if data.len() != graph.len() {
        return Err(ComputeError::Data {
            tensor: data.len().min(graph.len()),
            reason: format!("{} data pointers for {} tensors", data.len(), graph.len()),
        });
    }
    for index in 0..graph.len() {
        let d = &graph[index];
        let op = d.op().map_err(|e| ComputeError::Data {
            tensor: index,
            reason: e.to_string(),
        })?;
        if op == Op::None || op.is_view() {
            continue;
        }
        // SAFETY: forwarded from this function's contract.
        let node = unsafe { Node::new(index, op, graph, data)? };
        // The kernels index by the shapes the op contract guarantees.
        contract::check(op, d, &node.descs()).map_err(|r| node.unsupported(r.detail()))?;
        run(&node)?;
    }
    Ok(())
}

fn run(n: &Node) -> Result<(), ComputeError> {
    match n.op {
        Op::None | Op::View | Op::Reshape | Op::Permute | Op::Transpose => Ok(()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::binary(n),
        Op::Sqr | Op::Sqrt | Op::Log | Op::Sin | Op::Cos | Op::Scale | Op::Clamp | Op::Fill => {
            unary::simple(n)
        }
        Op::Unary => unary::unary(n),
        Op::Glu => unary::glu(n),
        Op::Sum => reduce::sum(n),
        Op::SumRows => reduce::sum_rows(n),
        Op::Cumsum => reduce::cumsum(n),
        Op::Argmax => reduce::argmax(n),
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::norm(n),
        Op::MulMat => matmul::mul_mat(n),
        Op::MulMatId => matmul::mul_mat_id(n),
        Op::Rope => rope::rope(n),
        Op::SoftMax => softmax::soft_max(n),
        Op::FlashAttnExt => attention::flash_attn_ext(n),
        Op::Cpy | Op::Cont => layout::cpy(n),
        Op::GetRows => layout::get_rows(n),
        Op::SetRows => layout::set_rows(n),
        Op::Concat => layout::concat(n),
        Op::Repeat => layout::repeat(n),
        Op::Pad => layout::pad(n),
        Op::Conv2d => conv::conv_2d(n),
        Op::Im2col => conv::im2col(n),
        Op::SsmConv => ssm::ssm_conv(n),
        Op::SsmScan => ssm::ssm_scan(n),
        Op::Argsort => reduce::argsort(n),
        Op::TopK => reduce::top_k(n),
    }
}

/// One node being computed: its result tensor and sources.
pub(crate) struct Node<'a> {
    /// Index of the node in the graph.
    pub(crate) index: usize,
    /// Its op.
    pub(crate) op: Op,
    /// The result tensor (for in-place ops, a view of the destination).
    pub(crate) dst: Tensor<'a>,
    srcs: [Option<Tensor<'a>>; MAX_SRC],
}

impl<'a> Node<'a> {
    /// # Safety
    /// As [`compute_raw`].
    unsafe fn new(
        index: usize,
        op: Op,
        graph: &'a [TensorDesc],
        data: &[*mut u8],
    ) -> Result<Node<'a>, ComputeError> {
        let wrap = |t: usize| -> Result<Tensor<'a>, ComputeError> {
            let d = &graph[t];
            let dt = d.dtype().map_err(|e| ComputeError::Data {
                tensor: t,
                reason: e.to_string(),
            })?;
            if d.ne.iter().any(|&n| n < 1) {
                return Err(ComputeError::Data {
                    tensor: t,
                    reason: format!("shape {:?} has an empty dim", d.ne),
                });
            }
            // SAFETY: the caller guarantees data[t] spans graph[t].nbytes().
            Ok(unsafe { Tensor::new(d, dt, data[t]) })
        };
        let dst = wrap(index)?;
        let mut srcs = [None; MAX_SRC];
        for (i, slot) in srcs.iter_mut().enumerate() {
            if let Some(s) = graph[index].src(i) {
                if s >= index {
                    return Err(ComputeError::Unsupported {
                        node: index,
                        op,
                        reason: format!("source {i} is tensor {s}, not an earlier one"),
                    });
                }
                *slot = Some(wrap(s)?);
            }
        }
        Ok(Node {
            index,
            op,
            dst,
            srcs,
        })
    }

    /// Source `i`, or an error naming the missing operand.
    pub(crate) fn src(&self, i: usize) -> Result<Tensor<'a>, ComputeError> {
        self.srcs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| self.unsupported(format!("source {i} is missing")))
    }

    /// Source `i` if present.
    pub(crate) fn opt(&self, i: usize) -> Option<Tensor<'a>> {
        self.srcs.get(i).copied().flatten()
    }

    /// The sources' descriptors (`None` for empty slots).
    fn descs(&self) -> [Option<&'a TensorDesc>; MAX_SRC] {
        self.srcs.map(|s| s.map(|t| t.d))
    }

    /// An error for a node whose types or layout the reference cannot run.
    pub(crate) fn unsupported(&self, reason: impl Into<String>) -> ComputeError {
        ComputeError::Unsupported {
            node: self.index,
            op: self.op,
            reason: reason.into(),
        }
    }

    /// An error for invalid data (e.g. an index out of range).
    pub(crate) fn bad_input(&self, reason: impl Into<String>) -> ComputeError {
        ComputeError::BadInput {
            node: self.index,
            op: self.op,
            reason: reason.into(),
        }
    }

    /// Op parameter `i` as an i32.
    pub(crate) fn p_i32(&self, i: usize) -> i32 {
        self.dst.d.param_i32(i)
    }

    /// Op parameter `i` as an f32.
    pub(crate) fn p_f32(&self, i: usize) -> f32 {
        self.dst.d.param_f32(i)
    }

    /// Writes `values` (logical order) to the whole result.
    pub(crate) fn store(&self, values: &[f64]) -> Result<(), ComputeError> {
        self.store_to(&self.dst, values)
    }

    /// Writes `values` (logical order) to the whole of `t`.
    pub(crate) fn store_to(&self, t: &Tensor, values: &[f64]) -> Result<(), ComputeError> {
        t.store(values)
            .map_err(|e| self.unsupported(format!("writing {}: {e}", describe(t.d))))
    }
}
