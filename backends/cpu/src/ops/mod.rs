//! CPU kernels, one module per op family, and the dispatch from [`Op`] to them.

pub mod attn;
pub mod binary;
pub mod conv;
pub mod layout;
pub mod matmul;
mod node;
pub mod norm;
pub mod reduce;
pub mod rope;
pub mod softmax;
pub mod ssm;
pub mod tensor;
pub mod unary;

use backplane_abi::contract;
use backplane_abi::{MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;

pub use node::{NodeCtx, SharedPtr};

/// Whether the CPU has a kernel for `op` on these operands; `Err(reason)` if
/// not. The op's own rules (types, shapes, parameters) come from the op
/// contract, which every kernel relies on; each family's `supports` adds
/// only what is the CPU's own (types implemented, layouts its kernels index).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    contract::check(op, dst, src).map_err(|r| r.to_string())?;
    match op {
        Op::MulMat | Op::MulMatId => matmul::supports(op, dst, src),
        Op::None | Op::Reshape | Op::View | Op::Permute | Op::Transpose => Ok(()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::supports(dst, src),
        Op::Sqr
        | Op::Sqrt
        | Op::Log
        | Op::Sin
        | Op::Cos
        | Op::Scale
        | Op::Clamp
        | Op::Fill
        | Op::Unary => unary::supports(dst, src),
        Op::Glu => unary::glu::supports(dst, src),
        Op::Sum | Op::SumRows | Op::Cumsum | Op::Argmax | Op::Argsort | Op::TopK => {
            reduce::supports(op, dst, src)
        }
        Op::Repeat | Op::Concat | Op::Pad | Op::GetRows | Op::SetRows => {
            layout::supports(op, dst, src)
        }
        Op::Cpy | Op::Cont => layout::copy::supports(dst, src),
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::supports(dst, src),
        Op::SoftMax => softmax::supports(dst, src),
        Op::Rope => rope::supports(src),
        Op::Conv2d | Op::Im2col => conv::supports(op, dst, src),
        Op::SsmConv | Op::SsmScan => ssm::supports(op, dst, src),
        Op::FlashAttnExt => attn::supports(src),
    }
}

/// Runs one node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors (see [`crate::CpuBackend::compute`]).
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    // SAFETY: forwarded contract (every arm).
    unsafe {
        match ctx.op {
            Op::MulMat => matmul::run_mul_mat(ctx),
            Op::MulMatId => matmul::run_mul_mat_id(ctx),
            Op::None | Op::Reshape | Op::View | Op::Permute | Op::Transpose => Ok(()),
            Op::Add | Op::Sub | Op::Mul | Op::Div => binary::run(ctx),
            Op::Sqr
            | Op::Sqrt
            | Op::Log
            | Op::Sin
            | Op::Cos
            | Op::Scale
            | Op::Clamp
            | Op::Fill
            | Op::Unary => unary::run(ctx),
            Op::Glu => unary::glu::run(ctx),
            Op::Sum | Op::SumRows | Op::Cumsum | Op::Argmax | Op::Argsort | Op::TopK => {
                reduce::run(ctx)
            }
            Op::Repeat | Op::Concat | Op::Pad | Op::GetRows | Op::SetRows => layout::run(ctx),
            Op::Cpy | Op::Cont => layout::copy::run(ctx),
            Op::Norm | Op::RmsNorm | Op::L2Norm => norm::run(ctx),
            Op::SoftMax => softmax::run(ctx),
            Op::Rope => rope::run(ctx),
            Op::Conv2d | Op::Im2col => conv::run(ctx),
            Op::SsmConv | Op::SsmScan => ssm::run(ctx),
            Op::FlashAttnExt => attn::run(ctx),
        }
    }
}
