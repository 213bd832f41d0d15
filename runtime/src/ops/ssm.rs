//! SSM_CONV and SSM_SCAN (Mamba).

use backplane_abi::Op;

use super::Out;
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    /// Mamba causal depthwise convolution: sx [d_conv-1+n_t, d_inner, n_s],
    /// c [d_conv, d_inner] -> [d_inner, n_t, n_s].
    pub fn ssm_conv(&mut self, sx: TensorId, c: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::SsmConv, [0; 16], &[sx, c], Out::Fresh)
    }

    /// Mamba selective scan as ggml_ssm_scan: states s [d_state, head_dim,
    /// n_head, n_seqs_total], x [head_dim, n_head, n_tok, n_seqs], dt [n_head,
    /// n_tok, n_seqs], A [1 or d_state, n_head], B and C [d_state, n_group,
    /// n_tok, n_seqs], ids i32 `[n_seqs]` -> f32 vector: y then final states.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_scan(
        &mut self,
        s: TensorId,
        x: TensorId,
        dt: TensorId,
        a: TensorId,
        b: TensorId,
        c: TensorId,
        ids: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.node(Op::SsmScan, [0; 16], &[s, x, dt, a, b, c, ids], Out::Fresh)
    }
}
