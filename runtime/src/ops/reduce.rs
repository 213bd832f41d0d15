//! Reductions (SUM, SUM_ROWS, CUMSUM), ARGMAX and the ranking ops
//! (ARGSORT, TOP_K).

use backplane_abi::{Op, SortOrder};

use super::Out;
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    /// Sum of all elements: a 1-element tensor.
    pub fn sum(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Sum, [0; 16], &[a], Out::Fresh)
    }

    /// Sum along dim 0.
    pub fn sum_rows(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::SumRows, [0; 16], &[a], Out::Fresh)
    }

    /// Inclusive prefix sum along dim 0 (f32).
    pub fn cumsum(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Cumsum, [0; 16], &[a], Out::Fresh)
    }

    /// Index of the largest element of each row: a `[n, rows]` f32 -> i32 `[rows]`.
    pub fn argmax(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Argmax, [0; 16], &[a], Out::Fresh)
    }

    /// Indices that sort each row of f32 `a`.
    pub fn argsort(&mut self, a: TensorId, order: SortOrder) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = order as i32;
        self.node(Op::Argsort, p, &[a], Out::Fresh)
    }

    /// Indices of the `k` largest elements of each row, largest first.
    pub fn top_k(&mut self, a: TensorId, k: i64) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = i32::try_from(k).unwrap_or(-1);
        self.node(Op::TopK, p, &[a], Out::Fresh)
    }
}
