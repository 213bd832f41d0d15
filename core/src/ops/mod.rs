//! Op constructors: each validates shapes and types as ggml does and
//! appends a node, or returns a [`GraphError`] naming the op and the shapes.
//!
//! Split by family: element-wise and unary ops, shape and view ops, mat-mul,
//! normalisation and attention, and the rest.

mod elementwise;
mod layout;
mod matmul;
mod misc;
mod norm_attn;

pub use misc::{Conv2dParams, conv_output_size};
pub use norm_attn::RopeParams;

use backplane_abi::{DType, Op, TensorDesc};

use crate::error::{GraphError, describe, invalid};
use crate::graph::{Graph, TensorId};

/// The float types element-wise ops accept.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// `b` can be tiled to `a`'s shape (every dim of b divides a's).
pub(crate) fn can_repeat(b: &TensorDesc, a: &TensorDesc) -> bool {
    (0..4).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0)
}

impl Graph {
    pub(crate) fn d(&self, t: TensorId) -> Result<TensorDesc, GraphError> {
        self.try_desc(t).copied()
    }

    /// A new contiguous result tensor (not yet in the graph).
    pub(crate) fn fresh(dtype: DType, ne: [i64; 4]) -> TensorDesc {
        TensorDesc::new(dtype, ne)
    }

    /// A result that aliases `of` (in-place op): same shape and strides.
    pub(crate) fn alias(&self, of: TensorId) -> Result<TensorDesc, GraphError> {
        let mut d = self.d(of)?;
        d.flags = 0;
        d.view_src = of.0 as i32;
        d.view_offset = 0;
        d.op_params = [0; 16];
        d.src = [backplane_abi::NO_TENSOR; backplane_abi::MAX_SRC];
        Ok(d)
    }
}

pub(crate) fn need(cond: bool, op: Op, message: impl FnOnce() -> String) -> Result<(), GraphError> {
    if cond {
        Ok(())
    } else {
        Err(invalid(op, message()))
    }
}

pub(crate) fn need_contiguous(op: Op, what: &str, t: &TensorDesc) -> Result<(), GraphError> {
    need(t.is_contiguous(), op, || {
        format!(
            "{what} {} must be contiguous (strides {:?})",
            describe(t),
            t.nb
        )
    })
}

pub(crate) fn need_rows(op: Op, what: &str, t: &TensorDesc) -> Result<(), GraphError> {
    need(t.is_contiguous_rows(), op, || {
        format!(
            "{what} {} must have contiguous rows (strides {:?})",
            describe(t),
            t.nb
        )
    })
}
