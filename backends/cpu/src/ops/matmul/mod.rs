//! MUL_MAT and MUL_MAT_ID.

use backplane_abi::{MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;
use crate::exec::NodeCtx;

/// Whether MUL_MAT / MUL_MAT_ID can run on these operands.
pub fn supports(op: Op, dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    let _ = (dst, src);
    Err(format!("{op}: not implemented yet"))
}

/// Runs MUL_MAT.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run_mul_mat(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    Err(ctx.unsupported("not implemented yet"))
}

/// Runs MUL_MAT_ID.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run_mul_mat_id(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    Err(ctx.unsupported("not implemented yet"))
}
