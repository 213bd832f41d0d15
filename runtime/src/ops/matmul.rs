//! MUL_MAT and MUL_MAT_ID.

use backplane_abi::Op;

use super::Out;
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    /// `a^T b` as ggml_mul_mat: a [K, M, a2, a3] (any type, rows not
    /// transposed), b [K, N, b2, b3] with a2 | b2 and a3 | b3 -> f32 [M, N, b2, b3].
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::MulMat, [0; 16], &[a, b], Out::Fresh)
    }

    /// Mixture-of-experts mat-mul as ggml_mul_mat_id: experts `as_` [K, M, E],
    /// b [K, e_b, T] with e_b = 1 or n_used, ids i32 [n_used, T] -> f32 [M, n_used, T].
    pub fn mul_mat_id(
        &mut self,
        as_: TensorId,
        b: TensorId,
        ids: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.node(Op::MulMatId, [0; 16], &[as_, b, ids], Out::Fresh)
    }
}
