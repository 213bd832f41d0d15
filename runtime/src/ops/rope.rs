//! ROPE.

use backplane_abi::Op;

use super::{Out, f32_param};
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

/// Parameters of [`Graph::rope`], as ggml_rope_ext takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Leading dims of each row that rotate (the rest pass through).
    pub n_dims: i32,
    /// [`rope_mode`](crate::rope_mode) value.
    pub mode: i32,
    /// Training context length (YaRN).
    pub n_ctx_orig: i32,
    /// Base of the frequencies (10000 in Llama).
    pub freq_base: f32,
    /// Position scale (1 / linear rope scaling factor).
    pub freq_scale: f32,
    /// YaRN extrapolation mix (0 = off).
    pub ext_factor: f32,
    /// Magnitude scale.
    pub attn_factor: f32,
    /// YaRN low correction dim.
    pub beta_fast: f32,
    /// YaRN high correction dim.
    pub beta_slow: f32,
    /// Dims per section for the multi-section modes.
    pub sections: [i32; 4],
}

impl RopeParams {
    /// Plain rope over `n_dims` with base 10000 and no scaling.
    pub fn new(n_dims: i32, mode: i32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            sections: [0; 4],
        }
    }
}

impl Graph {
    /// Rotary embedding as ggml_rope_ext: a [d, heads, tokens, b] f32/f16,
    /// pos i32 `[tokens]` (4x for multi-section modes), optional f32 freq factors.
    pub fn rope(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId, GraphError> {
        let mut params = [0; 16];
        params[1] = p.n_dims;
        params[2] = p.mode;
        params[4] = p.n_ctx_orig;
        for (i, v) in [
            p.freq_base,
            p.freq_scale,
            p.ext_factor,
            p.attn_factor,
            p.beta_fast,
            p.beta_slow,
        ]
        .into_iter()
        .enumerate()
        {
            params[5 + i] = f32_param(v);
        }
        params[11..15].copy_from_slice(&p.sections);
        let mut srcs = vec![a, pos];
        if let Some(f) = freq_factors {
            srcs.push(f);
        }
        self.node(Op::Rope, params, &srcs, Out::Fresh)
    }
}
