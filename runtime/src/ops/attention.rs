//! FLASH_ATTN_EXT.

use backplane_abi::Op;

use super::{Out, f32_param};
use crate::error::GraphError;
use crate::graph::{ABSENT, Graph, TensorId};

impl Graph {
    /// Fused attention as ggml_flash_attn_ext: q [D, n_q, H, B] f32,
    /// k [D, n_kv, H_kv, B_kv], v [Dv, n_kv, H_kv, B_kv] (f32/f16/q4_0/q8_0),
    /// optional f16 mask [n_kv, >= n_q, *, *] and f32 sinks `[H]`
    /// -> f32 [Dv, H, n_q, B].
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = f32_param(scale);
        p[1] = f32_param(max_bias);
        p[2] = f32_param(logit_softcap);
        let mut srcs = vec![q, k, v, mask.unwrap_or(ABSENT)];
        srcs.extend(sinks);
        self.node(Op::FlashAttnExt, p, &srcs, Out::Fresh)
    }
}
