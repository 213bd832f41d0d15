//! SOFT_MAX.

use backplane_abi::Op;

use super::{Out, f32_param};
use crate::error::GraphError;
use crate::graph::{ABSENT, Graph, TensorId};

impl Graph {
    /// `softmax(a * scale + slope * mask)` over dim 0 as ggml_soft_max_ext,
    /// with optional per-head `sinks` (f32 [a.ne2]) as ggml_soft_max_add_sinks.
    pub fn soft_max(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = f32_param(scale);
        p[1] = f32_param(max_bias);
        let mut srcs = vec![a, mask.unwrap_or(ABSENT)];
        srcs.extend(sinks);
        self.node(Op::SoftMax, p, &srcs, Out::Fresh)
    }
}
