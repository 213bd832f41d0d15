//! NORM, RMS_NORM and L2_NORM.

use backplane_abi::Op;

use super::{Out, f32_param};
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    fn norm_like(&mut self, op: Op, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = f32_param(eps);
        self.node(op, p, &[a], Out::Fresh)
    }

    /// Each row to zero mean and unit variance.
    pub fn norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::Norm, a, eps)
    }
    /// Each row divided by `sqrt(mean(x^2) + eps)`.
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::RmsNorm, a, eps)
    }
    /// Each row divided by `max(||x||, eps)`.
    pub fn l2_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::L2Norm, a, eps)
    }
}
