//! CPU kernels, one module per op family, and the dispatch from [`Op`] to them.

pub mod matmul;

use backplane_abi::{MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;
use crate::exec::NodeCtx;

/// Whether the CPU has a kernel for `op` on these operands; `Err(reason)` if not.
pub fn supports(op: Op, dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    match op {
        Op::MulMat | Op::MulMatId => matmul::supports(op, dst, src),
        _ => Err(format!("{op} has no CPU kernel yet")),
    }
}

/// Runs one node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors (see [`crate::CpuBackend::compute`]).
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    match ctx.op {
        // SAFETY: forwarded contract.
        Op::MulMat => unsafe { matmul::run_mul_mat(ctx) },
        // SAFETY: forwarded contract.
        Op::MulMatId => unsafe { matmul::run_mul_mat_id(ctx) },
        _ => Err(ctx.unsupported("no kernel yet")),
    }
}
